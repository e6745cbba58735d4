# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reads of a core object (a Node, the cluster record's ConfigMap) over Python's own HTTP client.

The modules that run once per machine (``talos_upgrade`` in the rolling Talos step, ``talos_machine_config``)
read only a Node and the cluster record, and importing the ``kubernetes`` package costs each of their processes
about 0.2 s: paid again on every machine of a rolling upgrade. When the kubeconfig's cluster and user ask for
nothing beyond what this reader speaks (the server's URL, its CA or insecure-skip-tls-verify, a client certificate,
a bearer token), the reads go through it; any other kubeconfig (exec plugins, auth providers, basic auth, proxies,
impersonation, a TLS server name) goes to KubeClient, where the kubernetes package implements it all. What the API
server answers, and every failure, is worded as KubeClient words it (k8s/errors.py).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import json
import os
import socket
import ssl

try:
    import http.client as http_client
    from urllib.parse import quote, urlsplit
except ImportError:  # pragma: no cover - Python 2
    import httplib as http_client
    from urllib import quote
    from urlparse import urlsplit

from ansible_collections.maesh.ichor.plugins.module_utils.common.files import load_cert_chain
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.errors import (
    KubeError, ref_text, server_message, status_error, unreachable)

# the kubeconfig fields this reader speaks; any other field of the context's cluster or user sends it to KubeClient
CLUSTER_FIELDS = frozenset(("server", "certificate-authority", "certificate-authority-data", "insecure-skip-tls-verify",
                            "extensions"))
USER_FIELDS = frozenset(("client-certificate", "client-certificate-data", "client-key", "client-key-data", "token",
                         "tokenFile", "extensions"))
_FILES = ("certificate-authority", "client-certificate", "client-key", "tokenFile")
# the core kinds it reads: their resource (the path's plural) and whether they are namespaced
CORE_KINDS = {"Node": ("nodes", False), "ConfigMap": ("configmaps", True)}


def covers(config):
    """Whether the reader speaks all the Kubeconfig ``config``'s cluster and user ask for."""
    cluster, user = config.cluster, config.user
    if set(cluster) - CLUSTER_FIELDS or set(user) - USER_FIELDS:
        return False
    if urlsplit(cluster.get("server") or "").scheme not in ("https", "http"):
        return False
    if not isinstance(cluster.get("insecure-skip-tls-verify", False), bool):  # the library reads it as it is truthy
        return False
    # a relative file name is relative to the file that names it: with several files merged, only KubeClient knows it
    return not (config.merged and any(not os.path.isabs(str(body.get(f)))
                                      for body in (cluster, user) for f in _FILES if body.get(f)))


def _data(config, body, field, what):
    """The bytes of ``field``-data (base64) or of the file ``field`` names; None when neither is set."""
    if body.get(field + "-data"):
        try:
            return base64.b64decode(body[field + "-data"], validate=True)
        except (binascii.Error, TypeError, ValueError):
            raise KubeError("the %s cannot be used: its %s-data is not base64" % (config.source, field))
    if body.get(field):
        return _file(config, body[field], what)
    return None


def _file(config, name, what):
    path = os.path.expanduser(str(name))
    if not os.path.isabs(path) and config.path:
        path = os.path.join(os.path.dirname(config.path), path)
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except (IOError, OSError) as exc:
        raise KubeError("the %s cannot be used: its %s %s cannot be read (%s)" % (
            config.source, what, path, exc.strerror or type(exc).__name__))


def _tls(config):
    cluster, user = config.cluster, config.user
    ctx = ssl.create_default_context()
    if cluster.get("insecure-skip-tls-verify") is True:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ca = _data(config, cluster, "certificate-authority", "certificate-authority")
        if ca is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # the kubeconfig's CA only, as KubeClient trusts it
            try:
                ctx.load_verify_locations(cadata=ca.decode("ascii", "replace"))
            except (ssl.SSLError, TypeError, ValueError):  # TypeError: not ASCII
                raise KubeError("the %s cannot be used: its certificate-authority is not a valid certificate" % (
                    config.source,))
    crt = _data(config, user, "client-certificate", "client-certificate")
    key = _data(config, user, "client-key", "client-key")
    if crt is not None or key is not None:
        try:
            load_cert_chain(ctx, crt or b"", key or b"")
        except ssl.SSLError:
            raise KubeError("the %s cannot be used: its client certificate and key do not match or cannot be loaded" % (
                config.source,))
    return ctx


def _reason(exc):
    """What a failed connection was, in the words KubeClient uses for it."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return "its TLS certificate is not signed by the kubeconfig's certificate-authority"
    if isinstance(exc, ssl.SSLError):
        return "the TLS handshake failed"
    if isinstance(exc, socket.gaierror):
        return "its host name does not resolve"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.timeout):
        return "no answer in time"
    if isinstance(exc, http_client.HTTPException):
        return "the connection failed"
    return "no connection"


class KubeReader:
    """GET a core object of the cluster of a Kubeconfig ``config`` that ``covers`` accepts; one connection, kept."""

    def __init__(self, config, timeout=None):
        self.source = config.source
        parts = urlsplit(config.cluster["server"])
        self._https = parts.scheme == "https"
        self._host, self._port = parts.hostname, parts.port
        self._prefix = parts.path.rstrip("/")
        self._timeout = timeout
        self._headers = {"Accept": "application/json", "User-Agent": "maesh.ichor"}
        token = config.user.get("token")
        if not token and config.user.get("tokenFile"):
            token = _file(config, config.user["tokenFile"], "tokenFile").decode("utf-8", "replace").strip()
        if token:
            self._headers["Authorization"] = "Bearer " + token
        self._tls = _tls(config) if self._https else None
        self._conn = None

    def _connection(self):
        if self._conn is None:
            if self._https:
                self._conn = http_client.HTTPSConnection(self._host, self._port, timeout=self._timeout, context=self._tls)
            else:
                self._conn = http_client.HTTPConnection(self._host, self._port, timeout=self._timeout)
        return self._conn

    def _request(self, path):
        """(status, reason, body) of GET ``path``; a kept connection the server closed is opened once more."""
        for attempt in (1, 2):
            kept = self._conn is not None
            conn = self._connection()
            try:
                conn.request("GET", self._prefix + path, headers=self._headers)
                resp = conn.getresponse()
                return resp.status, resp.reason, resp.read()
            except (OSError, http_client.HTTPException) as exc:
                self.close()
                stale = isinstance(exc, (http_client.RemoteDisconnected, ConnectionResetError, BrokenPipeError))
                if not (kept and stale and attempt == 1):
                    raise unreachable(self.source, _reason(exc))
        raise AssertionError("not reached")  # pragma: no cover

    def get(self, api_version, kind, name, namespace=None):
        """The object as a dict, or None when it does not exist (as KubeClient.get)."""
        if api_version != "v1" or kind not in CORE_KINDS:
            raise KubeError("KubeReader reads the core kinds %s, not %s %s" % (
                ", ".join(sorted(CORE_KINDS)), api_version, kind))
        resource, namespaced = CORE_KINDS[kind]
        path = "/api/v1/%s%s/%s" % ("namespaces/%s/" % quote(namespace, safe="") if namespaced else "", resource,
                                    quote(name, safe=""))
        what = "get " + ref_text(api_version, kind, name, namespace if namespaced else None)
        status, reason, body = self._request(path)
        if status == 404:
            return None
        if status >= 400:
            raise status_error(status, reason, server_message(body), what, self.source)
        try:
            return json.loads(body.decode("utf-8"))
        except ValueError:
            raise KubeError("%s: the API server at %s answered %d with a body that is not JSON" % (
                what, self.source.server, status))

    def close(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None
