# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Errors of the Talos client (redaction lives in ``common.redact``).

Every error a caller sees is one line that says what was wrong and what to check. Transport
failures are reduced to the address, the gRPC status code and our own hint: the text a
library produced is not passed through, because it may quote what it was given.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError


class TalosError(IchorError):
    """A one-line error for the user: what was wrong and what to check."""

    def __init__(self, message, address=None, code=None):
        self.address = address
        self.code = code
        super(TalosError, self).__init__(message)


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
