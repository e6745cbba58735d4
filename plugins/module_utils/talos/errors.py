# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Errors of the Talos client (redaction lives in ``common.redact``).

Every error a caller sees is one line that says what was wrong and what to check. A gRPC status
keeps the machine's own message (``said``), redacted (every registered secret, anything that looks
like key material: the machine may quote the config we sent), folded to one line and cut to
``MESSAGE_LIMIT`` characters. Transport failures are reduced to the address and our own hint: a
library's text is not passed through, because it may quote what it was given.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.common.redact import excerpt, redact_text

__all__ = ["TalosError", "TalosConfigError", "TalosUnavailable", "TalosCallError", "call_error", "tls_error",
           "unreachable", "closed", "redact_text", "MESSAGE_LIMIT"]

# How much of a machine's status message is quoted (after redaction).
MESSAGE_LIMIT = 300


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
    """The machine answered with a gRPC error status; ``said`` is its message (redacted, one line)."""

    said = ""


# gRPC status names (wire.STATUS_NAMES) -> what the user should check.
_HINTS = {
    "UNAUTHENTICATED": "the client certificate was not accepted; check the talosconfig context",
    "PERMISSION_DENIED": "the talosconfig's certificate lacks the role this call needs (os:admin for writes)",
    "UNIMPLEMENTED": "the machine does not offer this call in its current mode or version",
    "UNAVAILABLE": "the machine is not reachable or not serving; check the address and that it is up",
    "DEADLINE_EXCEEDED": "the call timed out; check the address and network, or raise the timeout",
    "NOT_FOUND": "the machine has no such object (resource, etcd member, ...)",
    "FAILED_PRECONDITION": "the machine is not in a state that allows this call",
    "ALREADY_EXISTS": "the operation was already done on this machine",
    "INVALID_ARGUMENT": "the machine refused the request as invalid",
}
_NO_REASON = "the machine gave no reason; see its logs"
_FAILED = "the call failed on the machine"

# In maintenance mode the client sends no certificate: a refusal is about the mode, not a role.
_MAINTENANCE_HINTS = {
    "UNAUTHENTICATED": ("the machine asks for a client certificate, so it is not in maintenance mode (it has a config); "
                        "connect with its cluster's talosconfig"),
    "PERMISSION_DENIED": ("a machine in maintenance mode (no config yet) allows only some reads and applying a config, "
                          "without a client certificate; apply a config first, then use the talosconfig"),
}

_MAINTENANCE = re.compile(r"(?i)maintenance mode")
_NODE_ROUTING = re.compile(r"(?i)node routing is not supported")
# Talos: "<api> is only available on control plane nodes" (etcd, kubeconfig), "bootstrap can only be
# performed on a control plane node"
_CONTROL_PLANE_ONLY = re.compile(r"(?i)only (?:be performed|available) on (?:a )?control plane node")
# apid's per-node errors: "rpc error: code = Unimplemented desc = <message>"
_GO_STATUS = re.compile(r"(?s)^rpc error: code = \w+ desc = ")


def _hint(address, status_name, said, call, maintenance):
    if _CONTROL_PLANE_ONLY.search(said):
        return "%s needs a control plane node and %s is not one; address a control plane" % (call or "this call", address)
    if status_name == "UNIMPLEMENTED" and _MAINTENANCE.search(said):
        return "the machine is in maintenance mode (not configured yet); use maintenance mode or apply a config first"
    if maintenance and _NODE_ROUTING.search(said):
        return "a machine in maintenance mode answers only for itself; dial its own address"
    if maintenance and status_name in _MAINTENANCE_HINTS:
        return _MAINTENANCE_HINTS[status_name]
    return _HINTS.get(status_name, _FAILED if said else _NO_REASON)


def call_error(address, status_name, server_message="", call=None, maintenance=False):
    """A gRPC error status as one line: the address, the status (and call), our hint, and what the machine said.

    ``maintenance``: the client was in maintenance mode (it sent no client certificate).
    """
    said = excerpt(_GO_STATUS.sub("", server_message or ""), MESSAGE_LIMIT)
    head = "%s: %s" % (address, status_name)
    if call:
        head += " (%s)" % call
    text = "%s: %s" % (head, _hint(address, status_name, said, call, maintenance))
    if said:
        text += "; the machine said: " + said
    error = TalosCallError(text, address=address, code=status_name)
    error.said = said
    return error


def tls_error(address, reason, maintenance=False):
    """Reduce a TLS handshake failure to a safe one-line error (``maintenance``: no client certificate was sent)."""
    reason = (reason or "").upper()
    if maintenance and ("CERTIFICATE" in reason or "ALERT" in reason):
        hint = _MAINTENANCE_HINTS["UNAUTHENTICATED"]
    elif "CERTIFICATE_VERIFY_FAILED" in reason or "VERIFY" in reason:
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


def closed(address, maintenance=False):
    """The connection was closed during the call; in maintenance mode, most likely for want of a client certificate."""
    if maintenance:
        return TalosUnavailable(
            "%s: the machine closed the connection; a machine that has a config does so when no client certificate is "
            "sent (maintenance mode sends none): if it is configured, connect with its cluster's talosconfig" % address,
            address=address, code="CLOSED")
    return unreachable(address, "the connection was closed during the call")
