# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The multi-document machine config: parse, emit, key documents by kind and name, paths for drift.

A config is a list of documents. The legacy one (``version: v1alpha1``, ``machine:`` and ``cluster:``)
has the kind ``v1alpha1`` here; typed documents have ``apiVersion``, ``kind`` and, for named kinds,
``name``. A duplicate kind and name is an error, as it is for machinery's loader.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.maesh.ichor.plugins.module_utils.config import yamlio
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError

LEGACY = "v1alpha1"


class Document:
    """One document of a machine config: kind, name (or None) and the body as parsed."""

    __slots__ = ("kind", "name", "body")

    def __init__(self, kind, name, body):
        self.kind = kind
        self.name = name
        self.body = body

    @property
    def key(self):
        return (self.kind, self.name)

    @property
    def label(self):
        """The document as paths name it: ``v1alpha1``, ``KubeletConfig``, ``RegistryMirrorConfig/docker.io``."""
        return self.kind if self.name is None else "%s/%s" % (self.kind, self.name)

    def __repr__(self):
        return "Document(%s)" % self.label


def typed(kind, body=None, name=None):
    """A typed document with apiVersion, kind and name first, as machinery writes them."""
    out = {"apiVersion": "v1alpha1", "kind": kind}
    if name is not None:
        out["name"] = name
    for key, value in (body or {}).items():
        out[key] = value
    return Document(kind, name, out)


def legacy(body):
    return Document(LEGACY, None, body)


_NAME = re.compile(r"^[A-Za-z0-9._/-]{1,63}$")


def _shown(value):
    """A kind or apiVersion as an error may quote it: a short name, else nothing of it (it may be anything)."""
    return repr(value) if isinstance(value, str) and _NAME.match(value) else "(not a name)"


def from_object(obj, index=0):
    if not isinstance(obj, dict):
        raise ConfigError("document %d of the machine config is not a mapping" % (index + 1))
    if "kind" in obj:
        if obj.get("apiVersion") != "v1alpha1":
            raise ConfigError("document %d (kind %s) has apiVersion %s, expected v1alpha1" % (
                index + 1, _shown(obj.get("kind")), _shown(obj.get("apiVersion"))))
        name = obj.get("name")
        return Document(str(obj["kind"]), None if name is None else str(name), obj)
    if obj.get("version") == "v1alpha1":
        return Document(LEGACY, None, obj)
    raise ConfigError("document %d of the machine config is neither the v1alpha1 config nor a typed document" % (index + 1))


def parse(text):
    """Parse a machine config (YAML stream) into documents; one line on any error."""
    if text is None or (isinstance(text, (str, bytes)) and not text.strip()):
        raise ConfigError("the machine config is empty")
    return from_objects(yamlio.load_all(text))


def from_objects(objs):
    """The documents of a machine config already read as YAML (``yamlio.load_all``): a caller that has the
    parsed objects does not parse the text again."""
    docs = [from_object(obj, index) for index, obj in enumerate(objs)]
    seen = set()
    for doc in docs:
        if doc.key in seen:
            raise ConfigError("the machine config has two %s documents" % doc.label)
        seen.add(doc.key)
    if not docs:
        raise ConfigError("the machine config has no documents")
    return docs


def emit(docs):
    """The config text for documents, in the given order."""
    return yamlio.dump_all([doc.body for doc in docs])


def find(docs, kind, name=None):
    for doc in docs:
        if doc.kind == kind and (name is None or doc.name == name):
            return doc
    return None


def find_all(docs, kind):
    return [doc for doc in docs if doc.kind == kind]


def get_path(obj, dotted, default=None):
    """Value at a dotted path of nested mappings, or default."""
    cur = obj
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return default
        cur = cur[part]
    return cur


def _is_empty(value):
    return value is None or value == "" or value == [] or value == {}


def _list_key(items):
    """Lists of mappings that all carry a distinct name are keyed by name, others by index."""
    if items and all(isinstance(item, dict) and isinstance(item.get("name"), str) for item in items):
        names = [item["name"] for item in items]
        if len(set(names)) == len(names):
            return names
    return None


def flatten(value, prefix, out, keep_empty=False):
    """Flatten into {path: leaf}. Empty values ("", [], {}) are leaves when keep_empty, else dropped."""
    if isinstance(value, dict):
        if not value:
            if keep_empty:
                out[prefix] = {}
            return out
        for key in value:
            flatten(value[key], "%s.%s" % (prefix, key) if prefix else str(key), out, keep_empty)
        return out
    if isinstance(value, list):
        if not value:
            if keep_empty:
                out[prefix] = []
            return out
        names = _list_key(value)
        for index, item in enumerate(value):
            if names is not None:
                flatten(item, "%s[%s]" % (prefix, names[index]), out, keep_empty)
            elif isinstance(item, (dict, list)):
                flatten(item, "%s[%d]" % (prefix, index), out, keep_empty)
            else:
                # Scalar lists compare as a whole: order and membership are one value.
                out[prefix] = list(value)
                return out
        return out
    if _is_empty(value) and not keep_empty:
        return out
    out[prefix] = value
    return out


def paths(doc, keep_empty=False):
    """{"<label>:<path>": leaf} for one document, without apiVersion/kind/name; "<label>:" marks presence."""
    body = dict((key, value) for key, value in doc.body.items() if key not in ("apiVersion", "kind", "name"))
    flat = flatten(body, "", {}, keep_empty) if body else {}
    out = {"%s:" % doc.label: "present"}  # a document with nothing but its name still counts
    out.update(("%s:%s" % (doc.label, path), value) for path, value in flat.items())
    return out
