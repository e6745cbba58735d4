# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which kubeconfig a module uses, and its context, cluster and user, checked before any client is made.

The kubeconfig comes from the option ``kubeconfig`` (a path) or ``kubeconfig_content``, else the files
KUBECONFIG names (several are merged as kubectl merges them), else ``~/.kube/config``. Its contexts are
checked here, so a message can list them; the user's credentials are registered for redaction before
anything can quote them. Importing this costs nothing of the ``kubernetes`` package.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

try:
    from urllib.parse import urlsplit, urlunsplit
except ImportError:  # pragma: no cover - Python 2
    from urlparse import urlsplit, urlunsplit

try:
    import yaml
    HAS_YAML = True
except ImportError:  # pragma: no cover - PyYAML comes with ansible-core
    HAS_YAML = False

from ansible_collections.maesh.ichor.plugins.module_utils.common.redact import register_leaves
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.errors import KubeError, quote

DEFAULT_KUBECONFIG = "~/.kube/config"
# A kubeconfig user's credential fields (token, client-key-data, password, auth-provider secrets).
_CREDENTIAL = re.compile(r"(?i)(token|key-data|password|secret)")


class Source:
    """Where the kubeconfig came from and what it names: for messages only (never its content)."""

    def __init__(self, where, context=None, user=None, contexts=()):
        self.where = where
        self.context = context
        self.user = user
        self.contexts = list(contexts)
        self.server = None

    def __str__(self):
        return "%s, context %s" % (self.where, quote(self.context)) if self.context else self.where


class Kubeconfig:
    """A checked kubeconfig: ``data`` as parsed (``merged`` from several files), ``path`` when it is one file (None
    for content or several files), the chosen context's ``cluster`` and ``user`` bodies, and ``source``."""

    def __init__(self, data, path, source, merged=False):
        self.data = data
        self.path = path
        self.merged = merged
        self.source = source
        context = named(data.get("contexts"), source.context, "context") or {}
        self.cluster = named(data.get("clusters"), context.get("cluster"), "cluster") or {}
        self.user = (named(data.get("users"), source.user, "user") if source.user is not None else None) or {}
        self.source.server = without_userinfo(self.cluster.get("server"))


def without_userinfo(url):
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


def named(items, name, field):
    """The ``field`` body of the entry called ``name`` in a kubeconfig list, or None."""
    for item in items or []:
        if isinstance(item, dict) and item.get("name") == name:
            return item.get(field) or {}
    return None


def check(data, where, context):
    """The Source of the kubeconfig ``data``: its contexts checked before any library sees them, so the message
    can list them; the user's credentials registered for redaction."""
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
            where, quote(name), ", ".join(contexts)))
    body = named(data.get("contexts"), name, "context") or {}
    user = body.get("user")
    if body.get("cluster") is None or named(data.get("clusters"), body.get("cluster"), "cluster") is None:
        raise KubeError("the %s: context %s names cluster %s, which it does not define" % (
            where, quote(name), quote(body.get("cluster"))))
    credentials = named(data.get("users"), user, "user") if user is not None else {}
    if credentials is None:
        raise KubeError("the %s: context %s names user %s, which it does not define" % (where, quote(name), quote(user)))
    # so that no message (the library's included) can show them
    register_leaves(credentials, _CREDENTIAL)
    return Source(where, context=name, user=user, contexts=contexts)


def load(kubeconfig=None, kubeconfig_content=None, context=None, environ=None):
    """The Kubeconfig the options (or KUBECONFIG, or ~/.kube/config) name; KubeError in one line when there is none,
    it cannot be read or parsed, or the context, its cluster or its user is missing."""
    if not HAS_YAML:
        raise KubeError("the PyYAML Python package is required to read a kubeconfig")
    environ = os.environ if environ is None else environ
    if kubeconfig_content is not None:
        data = kubeconfig_content
        if isinstance(kubeconfig_content, (str, bytes)):
            try:
                data = yaml.safe_load(kubeconfig_content)
            except yaml.YAMLError:
                raise KubeError("the option kubeconfig_content is not valid YAML")
        return Kubeconfig(data, None, check(data, "kubeconfig given as kubeconfig_content", context))
    path = kubeconfig
    if path:
        where = "the option kubeconfig"
    elif environ.get("KUBECONFIG"):
        paths = [p for p in environ["KUBECONFIG"].split(os.pathsep) if p]
        present = [p for p in paths if os.path.exists(os.path.expanduser(p))]
        if not present:
            raise KubeError("no kubeconfig: the options kubeconfig and kubeconfig_content are not set and the file "
                            "KUBECONFIG names (%s) does not exist" % os.pathsep.join(paths))
        where = "KUBECONFIG"
        if len(present) > 1:  # several files: merged as kubectl does
            data = _merged([_read_yaml(os.path.expanduser(p), where) for p in present])
            return Kubeconfig(data, None, check(data, "kubeconfig files of KUBECONFIG (%s)" % os.pathsep.join(present),
                                                context), merged=True)
        path = present[0]
    else:
        path = DEFAULT_KUBECONFIG
        where = "the option kubeconfig"
        if not os.path.exists(os.path.expanduser(path)):
            raise KubeError("no kubeconfig given: set the option kubeconfig (a path) or kubeconfig_content, or the "
                            "environment variable KUBECONFIG (%s does not exist either)" % DEFAULT_KUBECONFIG)
    path = os.path.expanduser(path)
    data = _read_yaml(path, where)
    return Kubeconfig(data, path, check(data, "kubeconfig " + path, context))
