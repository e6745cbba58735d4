# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The talosconfig file: contexts, endpoints, nodes and the client credential.

Format (talosctl): ``context`` names the default context; ``contexts.<name>`` holds
``endpoints``, ``nodes``, and ``ca`` / ``crt`` / ``key`` as base64 of PEM. The Talos API CA
is Ed25519 by default and its key PEM is labelled ``ED25519 PRIVATE KEY`` (PKCS#8 inside).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import os
import re

try:
    import yaml
    HAS_YAML = True
except ImportError:  # pragma: no cover - reported by the module through missing_required_lib
    HAS_YAML = False

from ansible_collections.maesh.ichor.plugins.module_utils.common import untrusted, yamlload
from ansible_collections.maesh.ichor.plugins.module_utils.common.redact import Secret
from ansible_collections.maesh.ichor.plugins.module_utils.talos.errors import TalosConfigError

DEFAULT_PORT = 50000
# A talosconfig with dozens of contexts is a few hundred kilobytes; anything far bigger is not one.
MAX_SIZE = 4 * 1024 * 1024
# contexts.<name>.endpoints[] is four levels; a few hundred contexts of a dozen values each
MAX_DEPTH = 16
MAX_VALUES = 100000
# Context names are quoted in messages only when they look like names (a name is the user's own label,
# but a mangled file can put anything in its place, a key included).
_NAME_LIMIT = 64
_PORT = re.compile(r"^[0-9]{1,5}$")
_SHOWN_NAMES = 20

if HAS_YAML:
    _LOADER = yamlload.LOADER  # libyaml bounds nesting; the pure loader recurses


# The option talosconfig given empty: no talosconfig, and none from the environment.
EMPTY = ("the option talosconfig is empty: this task has no talosconfig (an empty talosconfig never falls back to "
         "TALOSCONFIG or ~/.talos/config); set it to the cluster's talosconfig, or leave it out to use TALOSCONFIG, "
         "else ~/.talos/config")


def default_path(environ=None):
    """Where talosctl looks: $TALOSCONFIG, else $TALOS_HOME/config, else ~/.talos/config."""
    environ = os.environ if environ is None else environ
    if environ.get("TALOSCONFIG"):
        return environ["TALOSCONFIG"]
    if environ.get("TALOS_HOME"):
        return os.path.join(environ["TALOS_HOME"], "config")
    return os.path.join(os.path.expanduser("~"), ".talos", "config")


class Credentials:
    """The context's CA, client certificate and key (PEM bytes), never shown."""

    __slots__ = ("ca", "crt", "key")

    def __init__(self, ca, crt, key):
        self.ca = Secret(ca) if ca is not None else None
        self.crt = Secret(crt) if crt is not None else None
        self.key = Secret(key) if key is not None else None

    def __repr__(self):
        return "Credentials(<redacted>)"

    __str__ = __repr__

    @property
    def has_client_certificate(self):
        return self.crt is not None and self.key is not None


class Context:
    """One talosconfig context."""

    def __init__(self, name, endpoints, nodes, credentials, cluster=None):
        self.name = name
        self.endpoints = list(endpoints)
        self.nodes = list(nodes)
        self.credentials = credentials
        self.cluster = cluster

    def __repr__(self):
        return "Context(name=%r, endpoints=%r, nodes=%r, credentials=<redacted>)" % (
            self.name, self.endpoints, self.nodes)


def split_endpoint(endpoint):
    """'10.0.0.1' -> ('10.0.0.1', 50000); '10.0.0.1:50001' and '[fd00::1]:50000' keep their port."""
    endpoint = str(endpoint).strip()
    if endpoint.startswith("["):
        host, rest = endpoint[1:].split("]", 1) if "]" in endpoint else (endpoint[1:], "")
        port = rest[1:] if rest.startswith(":") else ""
    elif endpoint.count(":") == 1:
        host, port = endpoint.split(":", 1)
    else:
        host, port = endpoint, ""
    shown = repr(endpoint) if len(endpoint) <= 2 * _NAME_LIMIT else "(of %d characters)" % len(endpoint)
    if not host:
        raise TalosConfigError("endpoint %s has no host" % shown)
    if port:
        if not _PORT.match(port) or not 0 < int(port) < 65536:
            raise TalosConfigError("endpoint %s has an invalid port" % shown)
        return host, int(port)
    return host, DEFAULT_PORT


def _label(value):
    """A context name as a message shows it: itself when it looks like a name."""
    if not isinstance(value, str):
        return "(a %s)" % type(value).__name__
    if len(value) <= _NAME_LIMIT and value.isprintable():
        return value
    return "(a name of %d characters)" % len(value)


def _name(value):
    """A context name as a message quotes it."""
    label = _label(value)
    return label if label.startswith("(") else repr(label)


def _pem(context_name, field, value):
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise TalosConfigError("talosconfig context %s: field %r must be base64 PEM text" % (_name(context_name), field))
    try:
        data = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise TalosConfigError("talosconfig context %s: field %r is not valid base64 PEM" % (_name(context_name), field))
    if b"-----BEGIN " not in data:
        raise TalosConfigError("talosconfig context %s: field %r does not hold a PEM block" % (_name(context_name), field))
    return data


def _strings(context_name, field, value):
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TalosConfigError("talosconfig context %s: %r must be a list of addresses" % (_name(context_name), field))
    return value


def _text(text, source):
    """The file's text: UTF-8, at most MAX_SIZE bytes (checked before decoding)."""
    try:
        return untrusted.text(text, MAX_SIZE)
    except untrusted.Unreadable as exc:
        raise TalosConfigError("%s %s; check that it is a talosconfig" % (source, exc.problem))


def _load_yaml(text, source):
    try:
        return yaml.load(text, Loader=_LOADER)  # nosec - a safe loader
    except (yaml.YAMLError, ValueError, LookupError, AttributeError, RecursionError) as exc:
        # PyYAML's constructors raise these for a scalar its tag cannot hold: an integer of thousands of digits,
        # a date out of range (ValueError), !!int '' or !!bool '' (IndexError, KeyError), !!timestamp x (AttributeError)
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = " (line %d)" % (mark.line + 1)
        raise TalosConfigError("%s is not valid YAML%s; check that it is a talosconfig" % (source, where))


def read(text, source="talosconfig"):
    """The talosconfig's data, read through the guard: at most MAX_SIZE bytes of UTF-8 (str or bytes), YAML that a
    safe loader builds, nesting at most MAX_DEPTH levels and holding at most MAX_VALUES values. Errors name
    ``source`` and never the file's content."""
    if not HAS_YAML:
        raise TalosConfigError("PyYAML is required to read a talosconfig")
    data = _load_yaml(_text(text, source), source)
    problem = untrusted.shape_problem(data, MAX_DEPTH, MAX_VALUES)
    if problem:
        raise TalosConfigError("%s %s; check that it is a talosconfig" % (source, problem))
    return data


def context_names(contexts):
    """The names of a talosconfig's contexts as a message lists them (sorted, the first few, each quoted only
    when it looks like a name)."""
    names = sorted(_label(str(k)) for k in contexts)
    known = ", ".join(names[:_SHOWN_NAMES])
    if len(names) > _SHOWN_NAMES:
        known += " and %d more" % (len(names) - _SHOWN_NAMES)
    return known


def parse(text, context=None, source="talosconfig"):
    """Parse talosconfig text (str or UTF-8 bytes) and return the selected Context.

    ``context`` overrides the file's ``context`` field. Errors name the contexts that exist
    and never the file's content.
    """
    return select(read(text, source), context, source)


def select(data, context=None, source="talosconfig"):
    """The Context of talosconfig data (``read``'s) that ``context`` names, else the file's current one."""
    if not isinstance(data, dict) or not isinstance(data.get("contexts"), dict) or not data["contexts"]:
        raise TalosConfigError("%s has no contexts; check that it is a talosconfig (talosctl config info)" % source)
    contexts = data["contexts"]
    name = context or data.get("context")
    if not isinstance(name, (str, type(None))):
        raise TalosConfigError("%s: talosconfig field 'context' must be a context name, not a %s" % (source, type(name).__name__))
    known = context_names(contexts)
    if not name:
        if len(contexts) > 1:
            raise TalosConfigError("%s names no current context and holds several (%s); choose one with 'context'"
                                   % (source, known))
        name = next(iter(contexts))
    if name not in contexts:
        raise TalosConfigError("%s has no context %s; it has: %s" % (source, _name(str(name)), known))
    raw = contexts[name]
    if not isinstance(raw, dict):
        raise TalosConfigError("%s: context %s is not a mapping" % (source, _name(name)))
    creds = Credentials(_pem(name, "ca", raw.get("ca")), _pem(name, "crt", raw.get("crt")),
                        _pem(name, "key", raw.get("key")))
    cluster = raw.get("cluster")
    return Context(name, _strings(name, "endpoints", raw.get("endpoints")),
                   _strings(name, "nodes", raw.get("nodes")), creds, cluster=cluster if isinstance(cluster, str) else None)


def load(path=None, content=None, context=None):
    """Load a talosconfig from content (vault, AWX credential) or a path (None: talosctl's default_path; empty: no
    talosconfig, refused with EMPTY, never a fallback)."""
    if content is not None:
        return parse(content, context=context, source="the talosconfig content")
    if path is None:
        path = default_path()
    elif not path:
        raise TalosConfigError(EMPTY)
    try:
        text = untrusted.read_file(path, MAX_SIZE)
    except (IOError, OSError) as exc:
        raise TalosConfigError("cannot read talosconfig %s: %s; check the path or set TALOSCONFIG"
                               % (path, exc.strerror or type(exc).__name__))
    return parse(text, context=context, source="talosconfig %s" % path)
