# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Kubernetes client from a kubeconfig (path or content), over the ``kubernetes`` package.

Objects are plain dicts. Writes take ``dry_run`` (the API server's ``dryRun=All``) so check
mode can ask the server what it would do without writing. Errors are one line that says what
is wrong and what to check: which kubeconfig (its path, never its content or tokens), which
context (and the ones it has), the server's URL, the user it names (401), and the API server's
own message (403: verb, resource, namespace), redacted and cut to ``MESSAGE_LIMIT`` characters.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

try:
    import urllib3
    import yaml
    from kubernetes import config as k8s_config
    from kubernetes.client.rest import ApiException
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.exceptions import ApiException as DynamicApiException, ResourceNotFoundError
    HAS_KUBERNETES = True
    IMPORT_ERROR = None
except ImportError as _exc:
    HAS_KUBERNETES = False
    IMPORT_ERROR = _exc

import contextlib
import json
import os
import re

try:
    from urllib.parse import urlsplit, urlunsplit
except ImportError:  # pragma: no cover - Python 2
    from urlparse import urlsplit, urlunsplit

from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.common.redact import excerpt, register

# How much of the API server's message is quoted (after redaction).
MESSAGE_LIMIT = 300
DEFAULT_KUBECONFIG = "~/.kube/config"


class KubeError(IchorError):
    """One line: what the API server said (status, reason), never the kubeconfig."""

    def __init__(self, message, status=None):
        self.status = status
        super(KubeError, self).__init__(message)


class Conflict(KubeError):
    """409: the object changed since it was read (or already exists)."""


class NotFound(KubeError):
    """404."""


def _server_message(body):
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


class Source:
    """Where the kubeconfig came from and what it names: for messages only (never its content)."""

    def __init__(self, where, context=None, user=None, contexts=()):
        self.where = where
        self.context = context
        self.user = user
        self.contexts = list(contexts)
        self.server = None

    def __str__(self):
        return "%s, context %s" % (self.where, _quote(self.context)) if self.context else self.where


def _quote(name):
    return '"%s"' % name


def _status_error(status, reason, said, what, source=None):
    """An error status of the API server as one line; 401 names the user, 403 says what to grant."""
    text = "%s: %s %s" % (what, status, reason or "")
    text = text.rstrip()
    if status == 401 and source is not None:
        text += (": the API server at %s did not accept the credentials of user %s (%s); the token or client certificate "
                 "is expired, revoked or another cluster's" % (source.server, _quote(source.user), source))
    elif said:
        text += ": " + said
    if status == 403 and source is not None:
        text += "; grant user %s this permission (RBAC) or use another kubeconfig" % _quote(source.user)
    cls = Conflict if status == 409 else NotFound if status == 404 else KubeError
    return cls(text, status=status)


def api_error(exc, what, source=None):
    """A KubeError for an ApiException of a call described by ``what`` (for example "get ConfigMap ns/name")."""
    return _status_error(getattr(exc, "status", None), getattr(exc, "reason", ""),
                         _server_message(getattr(exc, "body", None)), what, source)


def _connection_reason(exc):
    reason = getattr(exc, "reason", None) or exc  # MaxRetryError wraps the last failure
    text = str(reason)
    name_error = getattr(urllib3.exceptions, "NameResolutionError", ())
    if name_error and isinstance(reason, name_error):
        return "its host name does not resolve"
    if isinstance(reason, urllib3.exceptions.SSLError):
        if "CERTIFICATE_VERIFY_FAILED" in text:
            return "its TLS certificate is not signed by the kubeconfig's certificate-authority"
        return "the TLS handshake failed"
    if "refused" in text.lower():
        return "connection refused"
    if isinstance(reason, urllib3.exceptions.NewConnectionError):
        return "no connection"
    if isinstance(reason, urllib3.exceptions.TimeoutError):
        return "no answer in time"
    return "the connection failed"


def _without_userinfo(url):
    parts = urlsplit(url or "")
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host += ":%d" % parts.port
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def _read_yaml(path, where):
    """The parsed kubeconfig file; one line when it is missing, unreadable or not YAML."""
    try:
        with open(path, "rb") as handle:
            text = handle.read()
    except (IOError, OSError) as exc:
        if not os.path.exists(path):
            raise KubeError("the kubeconfig %s does not exist; check %s" % (path, where))
        raise KubeError("the kubeconfig %s cannot be read (%s); check its permissions and %s" % (
            path, exc.strerror or type(exc).__name__, where))
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        raise KubeError("the kubeconfig %s is not valid YAML; check %s" % (path, where))


def _merged(docs):
    """KUBECONFIG with several files: the first of each name wins, as kubectl merges them."""
    merged = {"contexts": [], "clusters": [], "users": []}
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        if doc.get("current-context") and not merged.get("current-context"):
            merged["current-context"] = doc["current-context"]
        for field in ("contexts", "clusters", "users"):
            seen = set(item.get("name") for item in merged[field])
            merged[field] += [item for item in doc.get(field) or [] if isinstance(item, dict) and item.get("name") not in seen]
    return merged


def _named(items, name, field):
    """The ``field`` body of the entry called ``name`` in a kubeconfig list, or None."""
    for item in items or []:
        if isinstance(item, dict) and item.get("name") == name:
            return item.get(field) or {}
    return None


def _source(data, where, context):
    """Check the kubeconfig's contexts before the library does, so the message can list them."""
    if not isinstance(data, dict):
        raise KubeError("the %s is not a kubeconfig (not a YAML mapping)" % where)
    contexts = [c.get("name") for c in data.get("contexts") or [] if isinstance(c, dict) and c.get("name")]
    if not contexts:
        raise KubeError("the %s holds no contexts" % where)
    name = context or data.get("current-context")
    if not name:
        raise KubeError("the %s sets no current-context; choose one with the option kube_context: %s" % (
            where, ", ".join(contexts)))
    if name not in contexts:
        raise KubeError("the %s has no context %s; it has: %s (option kube_context)" % (
            where, _quote(name), ", ".join(contexts)))
    body = _named(data.get("contexts"), name, "context") or {}
    user = body.get("user")
    if body.get("cluster") is None or _named(data.get("clusters"), body.get("cluster"), "cluster") is None:
        raise KubeError("the %s: context %s names cluster %s, which it does not define" % (
            where, _quote(name), _quote(body.get("cluster"))))
    credentials = _named(data.get("users"), user, "user") if user is not None else {}
    if credentials is None:
        raise KubeError("the %s: context %s names user %s, which it does not define" % (where, _quote(name), _quote(user)))
    _register_credentials(credentials)
    return Source(where, context=name, user=user, contexts=contexts)


# A kubeconfig user's credential fields (token, client-key-data, password, auth-provider secrets).
_CREDENTIAL = re.compile(r"(?i)(token|key-data|password|secret)")


def _register_credentials(value, name=""):
    """Register the user's credentials, so that no message (the library's included) can show them."""
    if isinstance(value, dict):
        for key, item in value.items():
            _register_credentials(item, str(key))
    elif isinstance(value, list):
        for item in value:
            _register_credentials(item, name)
    elif isinstance(value, str) and _CREDENTIAL.search(name):
        register(value)


def _ref_text(obj):
    meta = obj.get("metadata") or {}
    return ref_text(obj.get("apiVersion"), obj.get("kind"), meta.get("name"), meta.get("namespace"))


def ref_text(api_version, kind, name, namespace=None):
    return "%s %s/%s" % (kind, namespace, name) if namespace else "%s %s" % (kind, name)


def _bound_requests(rest_client, timeout):
    """Every request of this client, discovery included, gives up after ``timeout`` seconds.

    The library passes its own ``_request_timeout`` (None unless a caller sets one) down to urllib3, where None
    means no limit, overriding any pool default: so the default is set where the request is made."""
    request = rest_client.request

    def bounded(*args, **kwargs):
        if len(args) < 6 and kwargs.get("_request_timeout") is None:
            kwargs["_request_timeout"] = timeout
        return request(*args, **kwargs)

    rest_client.request = bounded


class KubeClient:
    """The cluster's API through a kubeconfig."""

    def __init__(self, kubeconfig=None, kubeconfig_content=None, context=None, timeout=None, environ=None):
        if not HAS_KUBERNETES:
            raise KubeError("the kubernetes Python package is required (%s)" % IMPORT_ERROR)
        environ = os.environ if environ is None else environ
        if kubeconfig_content is not None:
            data = kubeconfig_content
            if isinstance(kubeconfig_content, (str, bytes)):
                try:
                    data = yaml.safe_load(kubeconfig_content)
                except yaml.YAMLError:
                    raise KubeError("the option kubeconfig_content is not valid YAML")
            self.source = _source(data, "kubeconfig given as kubeconfig_content", context)
            loader, args = k8s_config.new_client_from_config_dict, {"config_dict": data}
        else:
            path = kubeconfig
            if path:
                where = "the option kubeconfig"
            elif environ.get("KUBECONFIG"):
                paths = [p for p in environ["KUBECONFIG"].split(os.pathsep) if p]
                present = [p for p in paths if os.path.exists(os.path.expanduser(p))]
                if not present:
                    raise KubeError("no kubeconfig: the options kubeconfig and kubeconfig_content are not set and the file "
                                    "KUBECONFIG names (%s) does not exist" % os.pathsep.join(paths))
                path = present[0] if len(present) == 1 else None
                where = "KUBECONFIG"
                if path is None:  # several files: merged as kubectl does
                    data = _merged([_read_yaml(os.path.expanduser(p), where) for p in present])
                    self.source = _source(data, "kubeconfig files of KUBECONFIG (%s)" % os.pathsep.join(present), context)
            else:
                path = DEFAULT_KUBECONFIG
                where = "the option kubeconfig"
                if not os.path.exists(os.path.expanduser(path)):
                    raise KubeError("no kubeconfig given: set the option kubeconfig (a path) or kubeconfig_content, or the "
                                    "environment variable KUBECONFIG (%s does not exist either)" % DEFAULT_KUBECONFIG)
            if path is not None:
                path = os.path.expanduser(path)
                self.source = _source(_read_yaml(path, where), "kubeconfig " + path, context)
            loader, args = k8s_config.new_client_from_config, {"config_file": path}
        try:
            self.api = loader(context=self.source.context, **args)
        except (ConfigException, ValueError) as exc:
            # the library's own checks (a missing server, bad certificate data, an exec plugin): its words, redacted
            raise KubeError("the %s cannot be used: %s" % (self.source, excerpt(exc, MESSAGE_LIMIT)))
        self.source.server = _without_userinfo(self.api.configuration.host)
        if timeout:
            _bound_requests(self.api.rest_client, timeout)
        self._dynamic = None

    @contextlib.contextmanager
    def _calling(self, what):
        """Turn what the API server or the connection says into one line about ``what``."""
        try:
            yield
        except ApiException as exc:
            raise api_error(exc, what, self.source)
        except urllib3.exceptions.HTTPError as exc:
            raise KubeError("cannot reach the Kubernetes API at %s: %s; check that the API server is up and that the %s "
                            "names the right address" % (self.source.server, _connection_reason(exc), self.source))

    @property
    def dynamic(self):
        if self._dynamic is None:
            with self._calling("API discovery"):
                self._dynamic = DynamicClient(self.api)
        return self._dynamic

    def close(self):
        self.api.close()

    def resource(self, api_version, kind):
        try:
            with self._calling("API discovery of %s %s" % (api_version, kind)):
                # the core group lives under /api, the others under /apis: naming the prefix keeps discovery from
                # reading every API group's resources when it looks for a core kind (a v1 Node took 21 requests)
                prefix = "apis" if "/" in api_version else "api"
                return self.dynamic.resources.get(api_version=api_version, kind=kind, prefix=prefix)
        except ResourceNotFoundError:
            raise KubeError("the API server does not serve %s %s" % (api_version, kind))

    def get(self, api_version, kind, name, namespace=None):
        """The object as a dict, or None when it does not exist."""
        res = self.resource(api_version, kind)
        with self._calling("get " + ref_text(api_version, kind, name, namespace)):
            try:
                return res.get(name=name, namespace=namespace).to_dict()
            except DynamicApiException as exc:
                if exc.status == 404:
                    return None
                raise

    def create(self, obj, dry_run=False):
        res = self.resource(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        with self._calling("create " + _ref_text(obj)):
            return res.create(body=obj, namespace=meta.get("namespace"),
                              **({"dry_run": "All"} if dry_run else {})).to_dict()

    def replace(self, obj, dry_run=False):
        """PUT: conditional on obj.metadata.resourceVersion when it is set (409 if it changed)."""
        res = self.resource(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        with self._calling("update " + _ref_text(obj)):
            return res.replace(body=obj, name=meta["name"], namespace=meta.get("namespace"),
                               **({"dry_run": "All"} if dry_run else {})).to_dict()

    def apply(self, obj, field_manager, dry_run=False, force=True):
        """Server-side apply under ``field_manager``; returns the object as the server has (or would have) it."""
        res = self.resource(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        kwargs = {"field_manager": field_manager, "force_conflicts": force}
        if dry_run:
            kwargs["dry_run"] = "All"
        with self._calling("apply " + _ref_text(obj)):
            return res.server_side_apply(body=obj, name=meta["name"], namespace=meta.get("namespace"),
                                         **kwargs).to_dict()

    def delete(self, api_version, kind, name, namespace=None, uid=None, resource_version=None, dry_run=False):
        """Delete, only if the object is still the one read (UID / resourceVersion preconditions)."""
        res = self.resource(api_version, kind)
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
        pre = {}
        if uid:
            pre["uid"] = uid
        if resource_version:
            pre["resourceVersion"] = resource_version
        if pre:
            body["preconditions"] = pre
        if dry_run:
            body["dryRun"] = ["All"]
        with self._calling("delete " + ref_text(api_version, kind, name, namespace)):
            return res.delete(name=name, namespace=namespace, body=body)

    def raw_get(self, path):
        """GET a raw path (for example /metrics or /version) and return the text."""
        with self._calling("GET " + path):
            if hasattr(self.api, "param_serialize"):  # kubernetes >= 31 (openapi-generator 7)
                params = self.api.param_serialize(method="GET", resource_path=path, auth_settings=["BearerToken"])
                resp = self.api.call_api(*params)
                resp.read()
                if resp.status >= 400:  # call_api does not raise; the typed APIs do it when deserializing
                    raise _status_error(resp.status, resp.reason, _server_message(resp.data), "GET " + path, self.source)
                return resp.data.decode("utf-8")
            resp = self.api.call_api(path, "GET", auth_settings=["BearerToken"], _preload_content=False,
                                     response_type="str")
            return resp[0].data.decode("utf-8")
