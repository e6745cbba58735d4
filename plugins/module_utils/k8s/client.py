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
    from kubernetes import config as k8s_config
    from kubernetes.config import kube_config as _kube_config
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

from ansible_collections.maesh.ichor.plugins.module_utils.common import keyfiles
from ansible_collections.maesh.ichor.plugins.module_utils.common.redact import excerpt
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.kubeconfig import load as load_kubeconfig, without_userinfo
# Conflict and NotFound: what its callers catch, given beside the client that raises them
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.errors import (  # noqa: F401 pylint: disable=unused-import
    MESSAGE_LIMIT, Conflict, KubeError, NotFound, api_error, ref_text, server_message, status_error, unreachable)


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


def _ref_text(obj):
    meta = obj.get("metadata") or {}
    return ref_text(obj.get("apiVersion"), obj.get("kind"), meta.get("name"), meta.get("namespace"))


def _bound_requests(rest_client, timeout):
    """Every request of this client, discovery included, gives up after ``timeout`` seconds.

    The library passes its own ``_request_timeout`` (None unless a caller sets one) down to urllib3, where None
    means no limit, overriding any pool default: so the default is set where the request is made. As a (connect,
    read) pair: kubernetes 30 takes a single number only when it is an int, and ignored a float."""
    request = rest_client.request

    def bounded(*args, **kwargs):
        if len(args) < 6 and kwargs.get("_request_timeout") is None:
            kwargs["_request_timeout"] = (timeout, timeout)
        return request(*args, **kwargs)

    rest_client.request = bounded


def _key_file(content, *_args, **_kwargs):
    """The kubernetes client's one way to turn a kubeconfig's ``*-data`` (or an exec plugin's key) into the path it
    hands to urllib3: an in-memory file here, where the library would write a temporary file it removes only at
    interpreter exit (which Ansible's forked workers never reach)."""
    return keyfiles.path(content, "kubeconfig")


def _keep_key_material_in_memory():
    if getattr(_kube_config, "_create_temp_file_with_content", None) is not _key_file:
        if not hasattr(_kube_config, "_create_temp_file_with_content"):
            # a library that writes its files some other way could leave a key on disk: refuse rather than guess
            raise KubeError("this version of the kubernetes Python package keeps kubeconfig keys in files in ways "
                            "this collection does not know; install a version in requirements.txt's range")
        _kube_config._create_temp_file_with_content = _key_file


class KubeClient:
    """The cluster's API through a kubeconfig."""

    def __init__(self, kubeconfig=None, kubeconfig_content=None, context=None, timeout=None, environ=None,
                 loaded=None):
        if not HAS_KUBERNETES:
            raise KubeError("the kubernetes Python package is required (%s)" % IMPORT_ERROR)
        loaded = loaded or load_kubeconfig(kubeconfig, kubeconfig_content, context, environ)
        _keep_key_material_in_memory()
        self.source = loaded.source
        if loaded.path is None and not loaded.merged:
            loader, args = k8s_config.new_client_from_config_dict, {"config_dict": loaded.data}
        else:  # one file, or the library merges the files of KUBECONFIG as it reads them
            loader, args = k8s_config.new_client_from_config, {"config_file": loaded.path}
        try:
            self.api = loader(context=self.source.context, **args)
        except (ConfigException, ValueError) as exc:
            # the library's own checks (a missing server, bad certificate data, an exec plugin): its words, redacted
            raise KubeError("the %s cannot be used: %s" % (self.source, excerpt(exc, MESSAGE_LIMIT)))
        self.source.server = without_userinfo(self.api.configuration.host)
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
            raise unreachable(self.source, _connection_reason(exc))

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

    def list(self, api_version, kind, namespace=None, label_selector=None, field_selector=None, cached=False):
        """The objects of a kind as dicts: in one namespace or all of them, optionally matching a label selector and a
        field selector (``spec.nodeName=<node>``: the Pods of one Node).

        ``cached``: as the API server's watch cache holds them now (resourceVersion "0"), for a reading polled over
        and over. A consistent list (the default) waits until that cache has caught up with etcd's latest revision,
        which, while other kinds are written (every kubelet's heartbeat), takes tens of milliseconds each time.
        """
        res = self.resource(api_version, kind)
        kwargs = {"field_selector": field_selector} if field_selector else {}
        if cached:
            kwargs["resource_version"] = "0"
        with self._calling("list %s%s" % (kind, " in " + namespace if namespace else "")):
            return res.get(namespace=namespace, label_selector=label_selector, **kwargs).to_dict().get("items") or []

    def evict(self, name, namespace, uid=None):
        """Ask the Eviction API (policy/v1) to evict a Pod, so that its PodDisruptionBudgets are honoured: True when it
        was evicted or is gone (404; 409 from ``uid``: the Pod of that name is another one now), False when a budget
        does not allow it now (429: ask again later)."""
        res = self.resource("v1", "Pod")
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        if uid:
            body["deleteOptions"] = {"preconditions": {"uid": uid}}
        with self._calling("evict " + ref_text("v1", "Pod", name, namespace)):
            try:
                res.subresources["eviction"].create(body=body, name=name, namespace=namespace)
            except DynamicApiException as exc:
                if exc.status == 429:
                    return False
                if exc.status in (404, 409):
                    return True
                raise
        return True

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
                    raise status_error(resp.status, resp.reason, server_message(resp.data), "GET " + path, self.source)
                return resp.data.decode("utf-8")
            resp = self.api.call_api(path, "GET", auth_settings=["BearerToken"], _preload_content=False,
                                     response_type="str")
            return resp[0].data.decode("utf-8")
