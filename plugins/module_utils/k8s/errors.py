# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the Kubernetes side raises, and the one way each failure is worded (for KubeClient).

Errors are one line that says what is wrong and what to check: the server's URL, the user the kubeconfig names
(401), what to grant (403), the API server's own message redacted and cut to ``MESSAGE_LIMIT`` characters; never
the kubeconfig's content or its tokens. Importing this costs nothing of the ``kubernetes`` package.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.common.redact import excerpt

# How much of the API server's message is quoted (after redaction).
MESSAGE_LIMIT = 300


class KubeError(IchorError):
    """One line: what the API server said (status, reason), never the kubeconfig."""

    def __init__(self, message, status=None):
        self.status = status
        super(KubeError, self).__init__(message)


class Conflict(KubeError):
    """409: the object changed since it was read (or already exists)."""


class NotFound(KubeError):
    """404."""


def quote(name):
    return '"%s"' % name


def server_message(body):
    """The ``message`` of a Kubernetes Status body, redacted and cut; "" when there is none."""
    if not body:
        return ""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        status = json.loads(body)
    except ValueError:
        return ""
    message = status.get("message", "") if isinstance(status, dict) else ""
    return excerpt(message, MESSAGE_LIMIT) if message else ""


def status_error(status, reason, said, what, source=None):
    """An error status of the API server as one line; 401 names the user, 403 says what to grant."""
    text = "%s: %s %s" % (what, status, reason or "")
    text = text.rstrip()
    if status == 401 and source is not None:
        text += (": the API server at %s did not accept the credentials of user %s (%s); the token or client certificate "
                 "is expired, revoked or another cluster's" % (source.server, quote(source.user), source))
    elif said:
        text += ": " + said
    if status == 403 and source is not None:
        text += "; grant user %s this permission (RBAC) or use another kubeconfig" % quote(source.user)
    cls = Conflict if status == 409 else NotFound if status == 404 else KubeError
    return cls(text, status=status)


def api_error(exc, what, source=None):
    """A KubeError for an ApiException of a call described by ``what`` (for example "get ConfigMap ns/name")."""
    return status_error(getattr(exc, "status", None), getattr(exc, "reason", ""),
                        server_message(getattr(exc, "body", None)), what, source)


def unreachable(source, reason):
    """The API server did not answer: ``reason`` is one of the phrases of the clients' connection failures."""
    return KubeError("cannot reach the Kubernetes API at %s: %s; check that the API server is up and that the %s "
                     "names the right address" % (source.server, reason, source))


def ref_text(api_version, kind, name, namespace=None):
    return "%s %s/%s" % (kind, namespace, name) if namespace else "%s %s" % (kind, name)
