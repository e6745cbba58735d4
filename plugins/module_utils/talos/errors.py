# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Errors of the Talos client, and the redaction that keeps credentials out of them.

Every error a caller sees is one line that says what was wrong and what to check. Transport
failures are reduced to the address, the gRPC status code and our own hint: the text a
library produced is not passed through, because it may quote what it was given.
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


class TalosError(Exception):
    """A one-line error for the user: what was wrong and what to check."""

    def __init__(self, message, address=None, code=None):
        self.address = address
        self.code = code
        super(TalosError, self).__init__(redact_text(message))

    @property
    def message(self):
        return self.args[0]


class TalosConfigError(TalosError):
    """The talosconfig cannot be read, parsed, or has no such context."""


class TalosUnavailable(TalosError):
    """The address did not answer (refused, timed out, unreachable)."""


class TalosCallError(TalosError):
    """The machine answered with a gRPC error status."""


# gRPC status names (grpclib.Status) -> what the user should check.
_HINTS = {
    "UNAUTHENTICATED": "the client certificate was not accepted; check the talosconfig context",
    "PERMISSION_DENIED": "the talosconfig's certificate lacks the role this call needs (os:admin for writes)",
    "UNIMPLEMENTED": "the machine does not offer this call in its current mode or version",
    "UNAVAILABLE": "the machine is not reachable or not serving; check the address and that it is up",
    "DEADLINE_EXCEEDED": "the call timed out; check the address and network, or raise the timeout",
    "NOT_FOUND": "the machine has no such object (resource, etcd member, ...)",
    "FAILED_PRECONDITION": "the machine is not in a state that allows this call",
    "ALREADY_EXISTS": "the operation was already done on this machine",
}

_MAINTENANCE = re.compile(r"maintenance mode", re.I)


def call_error(address, status_name, server_message=""):
    """Reduce a gRPC error status to a safe one-line TalosCallError."""
    hint = _HINTS.get(status_name, "see the machine's logs")
    if status_name == "UNIMPLEMENTED" and _MAINTENANCE.search(server_message or ""):
        hint = "the machine is in maintenance mode (not configured yet); use maintenance mode or apply a config first"
    return TalosCallError("%s: %s: %s" % (address, status_name, hint), address=address, code=status_name)


def tls_error(address, reason):
    """Reduce a TLS handshake failure to a safe one-line error."""
    reason = (reason or "").upper()
    if "CERTIFICATE_VERIFY_FAILED" in reason or "VERIFY" in reason:
        hint = ("the server certificate is not signed by the talosconfig context's CA "
                "(another cluster's machine, or a machine in maintenance mode)")
    elif "CERTIFICATE" in reason or "ALERT" in reason:
        hint = "the machine refused the client certificate (another cluster's CA, wrong role, or none)"
    else:
        hint = "TLS handshake failed; check the address and the talosconfig context"
    return TalosUnavailable("%s: TLS: %s" % (address, hint), address=address, code="TLS")


def unreachable(address, what="connection failed", timeout=None):
    """One line for an address that did not answer."""
    if timeout is not None:
        what = "no answer within %ss" % timeout
    return TalosUnavailable(
        "%s: %s; check that the address is right and the machine is up (port 50000)" % (address, what),
        address=address, code="UNAVAILABLE")
