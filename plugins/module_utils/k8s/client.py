# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Kubernetes client from a kubeconfig (path or content), over the ``kubernetes`` package.

Objects are plain dicts. Writes take ``dry_run`` (the API server's ``dryRun=All``) so check
mode can ask the server what it would do without writing. Errors are reduced to one line
with the status code and reason: a kubeconfig is a credential and never appears in them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

try:
    import urllib3
    import yaml
    from kubernetes import config as k8s_config
    from kubernetes.client.rest import ApiException
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.exceptions import ApiException as DynamicApiException, ResourceNotFoundError
    HAS_KUBERNETES = True
    IMPORT_ERROR = None
except ImportError as _exc:
    HAS_KUBERNETES = False
    IMPORT_ERROR = _exc

from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError


class KubeError(IchorError):
    """One line: what the API server said (status, reason), never the kubeconfig."""

    def __init__(self, message, status=None):
        self.status = status
        super(KubeError, self).__init__(message)


class Conflict(KubeError):
    """409: the object changed since it was read (or already exists)."""


class NotFound(KubeError):
    """404."""


def _reason(exc):
    status = getattr(exc, "status", None)
    reason = getattr(exc, "reason", "") or ""
    message = ""
    body = getattr(exc, "body", None)
    if body:
        try:
            message = (yaml.safe_load(body) or {}).get("message", "")
        except Exception:  # pylint: disable=broad-except
            message = ""
    return status, "%s %s%s" % (status, reason, (": " + message) if message else "")


def api_error(exc, what):
    status, text = _reason(exc)
    cls = Conflict if status == 409 else NotFound if status == 404 else KubeError
    return cls("%s: %s" % (what, text), status=status)


def _obj_text(obj):
    meta = obj.get("metadata") or {}
    return ref_text(obj.get("apiVersion"), obj.get("kind"), meta.get("name"), meta.get("namespace"))


def ref_text(api_version, kind, name, namespace=None):
    return "%s %s/%s" % (kind, namespace, name) if namespace else "%s %s" % (kind, name)


class KubeClient:
    """The cluster's API through a kubeconfig."""

    def __init__(self, kubeconfig=None, kubeconfig_content=None, context=None, timeout=None):
        if not HAS_KUBERNETES:
            raise KubeError("the kubernetes Python package is required (%s)" % IMPORT_ERROR)
        try:
            if kubeconfig_content is not None:
                data = yaml.safe_load(kubeconfig_content) if isinstance(kubeconfig_content, str) else kubeconfig_content
                self.api = k8s_config.new_client_from_config_dict(data, context=context)
            else:
                self.api = k8s_config.new_client_from_config(config_file=kubeconfig, context=context)
        except Exception as exc:  # pylint: disable=broad-except
            raise KubeError("cannot load the kubeconfig%s: %s" % (
                " " + kubeconfig if kubeconfig else "", type(exc).__name__))
        if timeout:
            # the default of every request of this client, discovery included
            self.api.rest_client.pool_manager.connection_pool_kw["timeout"] = urllib3.Timeout(total=timeout)
        self._dynamic = None

    @property
    def dynamic(self):
        if self._dynamic is None:
            try:
                self._dynamic = DynamicClient(self.api)
            except Exception as exc:  # pylint: disable=broad-except
                raise KubeError("cannot reach the Kubernetes API: %s" % type(exc).__name__)
        return self._dynamic

    def close(self):
        self.api.close()

    def resource(self, api_version, kind):
        try:
            return self.dynamic.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError:
            raise KubeError("the API server does not serve %s %s" % (api_version, kind))

    def get(self, api_version, kind, name, namespace=None):
        """The object as a dict, or None when it does not exist."""
        res = self.resource(api_version, kind)
        try:
            return res.get(name=name, namespace=namespace).to_dict()
        except DynamicApiException as exc:
            if exc.status == 404:
                return None
            raise api_error(exc, "get " + ref_text(api_version, kind, name, namespace))

    def create(self, obj, dry_run=False):
        res = self.resource(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        try:
            return res.create(body=obj, namespace=meta.get("namespace"),
                              **({"dry_run": "All"} if dry_run else {})).to_dict()
        except DynamicApiException as exc:
            raise api_error(exc, "create " + _obj_text(obj))

    def replace(self, obj, dry_run=False):
        """PUT: conditional on obj.metadata.resourceVersion when it is set (409 if it changed)."""
        res = self.resource(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        try:
            return res.replace(body=obj, name=meta["name"], namespace=meta.get("namespace"),
                               **({"dry_run": "All"} if dry_run else {})).to_dict()
        except DynamicApiException as exc:
            raise api_error(exc, "update " + _obj_text(obj))

    def apply(self, obj, field_manager, dry_run=False, force=True):
        """Server-side apply under ``field_manager``; returns the object as the server has (or would have) it."""
        res = self.resource(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        kwargs = {"field_manager": field_manager, "force_conflicts": force}
        if dry_run:
            kwargs["dry_run"] = "All"
        try:
            return res.server_side_apply(body=obj, name=meta["name"], namespace=meta.get("namespace"),
                                         **kwargs).to_dict()
        except DynamicApiException as exc:
            raise api_error(exc, "apply " + _obj_text(obj))

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
        try:
            return res.delete(name=name, namespace=namespace, body=body)
        except DynamicApiException as exc:
            raise api_error(exc, "delete " + ref_text(api_version, kind, name, namespace))

    def raw_get(self, path):
        """GET a raw path (for example /metrics or /version) and return the text."""
        try:
            if hasattr(self.api, "param_serialize"):  # kubernetes >= 31 (openapi-generator 7)
                params = self.api.param_serialize(method="GET", resource_path=path, auth_settings=["BearerToken"])
                resp = self.api.call_api(*params)
                resp.read()
                if resp.status >= 400:  # call_api does not raise; the typed APIs do it when deserializing
                    raise KubeError("GET %s: %s %s" % (path, resp.status, resp.reason), status=resp.status)
                return resp.data.decode("utf-8")
            resp = self.api.call_api(path, "GET", auth_settings=["BearerToken"], _preload_content=False,
                                     response_type="str")
            return resp[0].data.decode("utf-8")
        except ApiException as exc:
            raise api_error(exc, "GET " + path)
