# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Redaction: credentials never reach a message, a result, a diff or a log line.

``Secret`` carries credential material (redacted in str, repr and JSON) and registers its value for the
life of the process: ``redact_text`` replaces every registered value (and the base64 and per-line forms
of a PEM value) wherever it appears, then PEM blocks, long base64 runs and bootstrap-token-shaped words
that no Secret announced, and folds the text to one line. A server's message can quote the config we
sent it; this is what makes quoting it safe.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import re

REDACTED = "<redacted>"

# What looks like key material although no Secret announced it. Patterns, not compiled here: re compiles (and
# caches) each on its first use, so a module that redacts nothing does not pay for compiling them.
_PEM = r"(?s)-----BEGIN [A-Z0-9 ]+-----.*?(-----END [A-Z0-9 ]+-----|$)"
# '=' is base64's padding, only at the end: ``name=value`` is two words (the lock's ``ichor_lock_break=<holder id>``
# that a refusal asks the operator to type back stays readable)
_B64 = r"[A-Za-z0-9+/_-]{40,}={0,2}"
_TOKEN = r"\b[a-z0-9]{6}\.[a-z0-9]{16}\b"  # Kubernetes bootstrap and trustd tokens

# Shorter registered pieces would hide ordinary words.
_MIN_REGISTERED = 8
_registered = {}  # length -> the registered pieces of that length (replaced longest first)


def _b64_run(match):
    # Base64 of key material mixes cases and digits; paths and names rarely do. Below 48 characters
    # only a padded run counts (32 random bytes are 44 characters ending in '=').
    run = match.group(0)
    if len(run) < 48 and not run.endswith("="):
        return run
    # mixed case and a digit, '+', '/' or padding: 32 random bytes lack a digit about once in 1500 draws
    if re.search(r"[A-Z]", run) and re.search(r"[a-z]", run) and (re.search(r"[0-9+/]", run) or run.endswith("=")):
        return REDACTED
    return run


def _pieces(value):
    """The forms a secret value can take in a message: as is, its lines, base64 of it."""
    if isinstance(value, bytes):
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError:
            return [base64.b64encode(value).decode("ascii")]
    elif isinstance(value, str):
        text = value
    else:
        return []
    stripped = text.strip()
    if not stripped:
        return []
    pieces = [stripped]
    lines = [line.strip() for line in stripped.splitlines()]
    if len(lines) > 1:
        body = [line for line in lines if line and not line.startswith("-----")]
        pieces += body + ["".join(body)]
    if "-----BEGIN " in stripped:
        # the machine config and the talosconfig hold a PEM value as base64 of the whole block
        pieces += [base64.b64encode(form.encode("utf-8")).decode("ascii") for form in (text, stripped + "\n", stripped)]
    return pieces


def register(value):
    """Remember a secret value so that ``redact_text`` replaces it from now on (str or bytes)."""
    for piece in _pieces(value):
        if len(piece) >= _MIN_REGISTERED:
            _registered.setdefault(len(piece), set()).add(piece)


def register_leaves(value, secret_name, name=""):
    """Register every string leaf of ``value`` (parsed YAML: dicts, lists) whose key matches the compiled pattern
    ``secret_name``; a list's items go by the key of the list."""
    if isinstance(value, dict):
        for key, item in value.items():
            register_leaves(item, secret_name, str(key))
    elif isinstance(value, list):
        for item in value:
            register_leaves(item, secret_name, name)
    elif isinstance(value, str) and secret_name.search(name):
        register(value)


def _without_registered(text):
    # plain substring tests, longest first (a whole value before any of its lines): nothing to rebuild when a
    # value is registered, and a run may load many bundles
    for length in sorted(_registered, reverse=True):
        if length > len(text):
            continue
        for piece in _registered[length]:
            if piece in text:
                text = text.replace(piece, REDACTED)
    return text


def redact_text(text):
    """Return text with registered secrets and key material replaced, folded to one line."""
    text = _without_registered(str(text))
    text = re.sub(_PEM, REDACTED, text)
    text = re.sub(_B64, _b64_run, text)
    text = re.sub(_TOKEN, REDACTED, text)
    return " ".join(text.split())


def excerpt(text, limit):
    """A quoted text (a server's message) redacted, on one line and cut to ``limit`` characters."""
    text = redact_text(text)
    if len(text) > limit:
        text = text[:limit].rstrip() + " [cut]"
    return text


class Secret:
    """Credential material: usable through ``reveal()``, redacted in str, repr and JSON."""

    __slots__ = ("_value",)

    def __init__(self, value):
        self._value = value
        register(value)

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


def redact_lines(text):
    """Like redact_text, but keeps the line breaks (a traceback stays readable)."""
    text = _without_registered(str(text))
    return "\n".join(redact_text(line) for line in re.sub(_PEM, REDACTED, text).splitlines())
