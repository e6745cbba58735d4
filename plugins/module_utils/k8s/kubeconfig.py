# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which kubeconfig a module uses, and its context, cluster and user, checked before any client is made.

The kubeconfig comes from the option ``kubeconfig`` (a path, ``~`` expanded) or ``kubeconfig_content``, else, only when
neither is given (None), the files KUBECONFIG names (several are merged as kubectl merges them), else
``~/.kube/config``. The option given empty names no kubeconfig: refused, never a fallback. Its contexts are
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

from ansible_collections.maesh.ichor.plugins.module_utils.common import untrusted, yamlload
from ansible_collections.maesh.ichor.plugins.module_utils.common.redact import register_leaves
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.errors import KubeError, quote

DEFAULT_KUBECONFIG = "~/.kube/config"
# The option kubeconfig given empty: the task has no Kubernetes connection, and gets none from the environment.
EMPTY = ("the option kubeconfig is empty: this task has no Kubernetes connection (an empty kubeconfig never falls back "
         "to KUBECONFIG or ~/.kube/config); set it to the cluster's kubeconfig, or leave it out to use KUBECONFIG, "
         "else ~/.kube/config")
# A kubeconfig user's credential fields (token, client-key-data, password, auth-provider secrets).
_CREDENTIAL = re.compile(r"(?i)(token|key-data|password|secret)")
# The guard of a kubeconfig read (a file or kubeconfig_content): one is a few kilobytes, tens with many clusters
# and their CAs inline; it nests less than ten levels (an exec plugin's arguments); the count of values bounds what
# aliases can expand to.
MAX_SIZE = 4 * 1024 * 1024
MAX_DEPTH = 32
MAX_VALUES = 100000
# A name a message shows as it is (longer ones, or not printable, by their length); the names a message lists.
_NAME_LIMIT = 64
_SHOWN_NAMES = 20

if HAS_YAML:
    _LOADER = yamlload.LOADER  # libyaml bounds nesting; the pure loader recurses

# What PyYAML's constructors raise on a scalar they cannot build under an explicit tag (!!int '', !!timestamp x).
_CONSTRUCTOR_ERRORS = (ValueError, TypeError, OverflowError, AttributeError, LookupError, RecursionError)


def _shown(name):
    """A context, cluster or user name as a message quotes it."""
    if isinstance(name, str) and len(name) <= _NAME_LIMIT and name.isprintable():
        return quote(name)
    if isinstance(name, str):
        return "(a name of %d characters)" % len(name)
    return "(a %s)" % type(name).__name__


def _listed(names):
    """The context names a message lists: the first few, each as _shown would show it but unquoted."""
    shown = ", ".join(n if n.isprintable() and len(n) <= _NAME_LIMIT else _shown(n) for n in names[:_SHOWN_NAMES])
    if len(names) > _SHOWN_NAMES:
        shown += " and %d more" % (len(names) - _SHOWN_NAMES)
    return shown


def _parse(text):
    """The kubeconfig ``text`` (str or bytes) parsed through the guard: at most MAX_SIZE bytes of UTF-8, YAML a safe
    loader builds, nesting at most MAX_DEPTH levels and holding at most MAX_VALUES values; untrusted.Unreadable with
    what is wrong (a phrase), never the text."""
    text = untrusted.text(text, MAX_SIZE)
    try:
        data = yaml.load(text, Loader=_LOADER)  # nosec - a safe loader
    except (yaml.YAMLError,) + _CONSTRUCTOR_ERRORS:
        raise untrusted.Unreadable("is not valid YAML")
    return untrusted.check_shape(data, MAX_DEPTH, MAX_VALUES)


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


def _url(server):
    """Whether a cluster's server (None when it names none) can be read as a URL."""
    if server is None:
        return True
    if not isinstance(server, str):
        return False
    try:
        return isinstance(urlsplit(server).port, (int, type(None)))  # the port raises when it is not one
    except ValueError:  # an IPv6 address not closed, a port that is not one
        return False


def without_userinfo(url):
    parts = urlsplit(url or "")
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host += ":%d" % parts.port
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def _read_yaml(path, where):
    """The parsed kubeconfig file (read through the guard); one line when it is missing, unreadable or not YAML."""
    try:
        text = untrusted.read_file(path, MAX_SIZE)
    except (IOError, OSError) as exc:
        if not os.path.exists(path):
            raise KubeError("the kubeconfig %s does not exist; check %s" % (path, where))
        raise KubeError("the kubeconfig %s cannot be read (%s); check its permissions and %s" % (
            path, exc.strerror or type(exc).__name__, where))
    try:
        return _parse(text)
    except untrusted.Unreadable as exc:
        raise KubeError("the kubeconfig %s %s; check %s" % (path, exc.problem, where))


def _merged(docs):
    """KUBECONFIG with several files: the first of each name wins, as kubectl merges them."""
    merged = {"contexts": [], "clusters": [], "users": []}
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        if doc.get("current-context") and not merged.get("current-context"):
            merged["current-context"] = doc["current-context"]
        for field in ("contexts", "clusters", "users"):
            seen = set(item["name"] for item in merged[field] if isinstance(item.get("name"), str))
            merged[field] += [item for item in _entries(doc, field) if not (isinstance(item.get("name"), str)
                                                                            and item["name"] in seen)]
    return merged


def _entries(data, field):
    """The mappings of the kubeconfig list ``field`` (none when it is not a list)."""
    items = data.get(field)
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def named(items, name, field):
    """The ``field`` body of the entry called ``name`` in a kubeconfig list, or None."""
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("name") == name:
            return item.get(field) or {}
    return None


def _body(data, where, kind, name):
    """The body of the ``kind`` (context, cluster, user) called ``name``: None when there is none; KubeError in one
    line when it is not a mapping."""
    body = named(data.get(kind + "s"), name, kind)
    if body is not None and not isinstance(body, dict):
        raise KubeError("the %s: %s %s is not a mapping" % (where, kind, _shown(name)))
    return body


def check(data, where, context):
    """The Source of the kubeconfig ``data``: its contexts checked before any library sees them, so the message
    can list them; the user's credentials registered for redaction."""
    if not isinstance(data, dict):
        raise KubeError("the %s is not a kubeconfig (not a YAML mapping)" % where)
    contexts = [c["name"] for c in _entries(data, "contexts") if isinstance(c.get("name"), str) and c["name"]]
    if not contexts:
        raise KubeError("the %s holds no contexts" % where)
    name = context or data.get("current-context")
    if not name:
        raise KubeError("the %s sets no current-context; choose one with the option kube_context: %s" % (
            where, _listed(contexts)))
    if not isinstance(name, str) or name not in contexts:
        raise KubeError("the %s has no context %s; it has: %s (option kube_context)" % (
            where, _shown(name), _listed(contexts)))
    body = _body(data, where, "context", name) or {}
    user = body.get("user")
    cluster = _body(data, where, "cluster", body.get("cluster")) if body.get("cluster") is not None else None
    if cluster is None:
        raise KubeError("the %s: context %s names cluster %s, which it does not define" % (
            where, _shown(name), _shown(body.get("cluster"))))
    if not _url(cluster.get("server")):
        raise KubeError("the %s: cluster %s has a server that is not a URL" % (where, _shown(body.get("cluster"))))
    credentials = _body(data, where, "user", user) if user is not None else {}
    if credentials is None:
        raise KubeError("the %s: context %s names user %s, which it does not define" % (
            where, _shown(name), _shown(user)))
    # so that no message (the library's included) can show them
    register_leaves(credentials, _CREDENTIAL)
    return Source(where, context=name, user=user, contexts=contexts)


def load(kubeconfig=None, kubeconfig_content=None, context=None, environ=None):
    """The Kubeconfig the options (or, when neither is given, KUBECONFIG, else ~/.kube/config) name; KubeError in one
    line when there is none (``kubeconfig`` given empty names none: EMPTY), it cannot be read or parsed, or the
    context, its cluster or its user is missing."""
    if not HAS_YAML:
        raise KubeError("the PyYAML Python package is required to read a kubeconfig")
    environ = os.environ if environ is None else environ
    if kubeconfig_content is not None:
        data = kubeconfig_content
        if isinstance(kubeconfig_content, (str, bytes)):
            try:
                data = _parse(kubeconfig_content)
            except untrusted.Unreadable as exc:
                raise KubeError("the option kubeconfig_content %s" % exc.problem)
        else:
            try:
                untrusted.check_shape(data, MAX_DEPTH, MAX_VALUES)
            except untrusted.Unreadable as exc:
                raise KubeError("the option kubeconfig_content %s" % exc.problem)
        return Kubeconfig(data, None, check(data, "kubeconfig given as kubeconfig_content", context))
    path = kubeconfig
    if path:
        where = "the option kubeconfig"
    elif path is not None:  # given, and empty: no kubeconfig, and none from the environment either
        raise KubeError(EMPTY)
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
