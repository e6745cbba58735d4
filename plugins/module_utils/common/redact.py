# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Redaction: credentials never reach a message, a result, a diff or a log line.

``Secret`` carries credential material (redacted in str, repr and JSON); ``redact_text`` removes PEM
blocks and long base64 runs from any text we print and folds it to one line.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

REDACTED = "<redacted>"

# PEM blocks and long base64 runs (certificates, keys, tokens) in any text we print.
_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]+-----.*?(-----END [A-Z0-9 ]+-----|$)", re.S)
_B64 = re.compile(r"[A-Za-z0-9+/=_-]{48,}")


def _b64_run(match):
    # Base64 of key material mixes cases and digits; paths and names rarely do.
    run = match.group(0)
    if re.search(r"[A-Z]", run) and re.search(r"[a-z]", run) and re.search(r"[0-9]", run):
        return REDACTED
    return run


def redact_text(text):
    """Return text with PEM blocks and long base64 runs replaced, folded to one line."""
    text = _PEM.sub(REDACTED, str(text))
    text = _B64.sub(_b64_run, text)
    return " ".join(text.split())


class Secret:
    """Credential material: usable through ``reveal()``, redacted in str, repr and JSON."""

    __slots__ = ("_value",)

    def __init__(self, value):
        self._value = value

    def reveal(self):
        return self._value

    def __repr__(self):
        return "Secret(%s)" % REDACTED

    __str__ = __repr__

    def __eq__(self, other):
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self):
        return hash(self._value)

    def __reduce__(self):
        raise TypeError("credential material cannot be pickled")


class RedactingEncoder(json.JSONEncoder):
    """JSON encoder that writes every Secret as the redaction marker."""

    def default(self, o):  # pylint: disable=method-hidden
        if isinstance(o, Secret):
            return REDACTED
        return json.JSONEncoder.default(self, o)


def redact_lines(text):
    """Like redact_text, but keeps the line breaks (a traceback stays readable)."""
    return "\n".join(redact_text(line) for line in _PEM.sub(REDACTED, str(text)).splitlines())
