# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bundle: directories or files of manifests read into objects, each stamped with the mark, in
the order they are applied."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import math
import os
import re

try:
    import yaml
except ImportError:  # pragma: no cover
    yaml = None

from ansible_collections.maesh.ichor.plugins.module_utils.common import yamlload
from ansible_collections.maesh.ichor.plugins.module_utils.installer.errors import BundleError
from ansible_collections.maesh.ichor.plugins.module_utils.installer.objects import Ref, stamp

# Bounds on what a manifest file can make us build: a big CRD is a few megabytes and tens of thousands of values;
# aliases can make a small file expand to billions ("billion laughs"), or refer to themselves.
MAX_FILE = 32 * 1024 * 1024
MAX_VALUES = 500000
MAX_DEPTH = 128
# The shapes the API server accepts (apimachinery's validation); checked before discovery is asked about them.
_API_VERSION = re.compile(r"^(?:[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?v[0-9][a-z0-9]{0,30}\Z")
_KIND = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,62}\Z")
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
_NAME_LIMIT = 253

_Loader = yamlload.TEXT_DATES  # as kubectl (Go YAML to JSON) reads: a date stays text


def _files(paths):
    files = []
    for path in paths:
        if os.path.isdir(path):
            for root, dirs, names in os.walk(path):
                dirs.sort()
                files.extend(os.path.join(root, n) for n in sorted(names) if n.endswith((".yaml", ".yml")))
        elif os.path.isfile(path):
            files.append(path)
        else:
            raise BundleError("bundle path %s does not exist" % path)
    return files


def _read(path):
    """The YAML documents of a file; one line on anything that is not YAML the API server could take."""
    try:
        if os.path.getsize(path) > MAX_FILE:
            raise BundleError("bundle file %s is larger than %d bytes" % (path, MAX_FILE))
        with open(path, "rb") as handle:
            return list(yaml.load_all(handle, Loader=_Loader))  # nosec - a safe loader
    except (IOError, OSError) as exc:
        raise BundleError("bundle file %s cannot be read (%s)" % (path, exc.strerror or type(exc).__name__))
    except (yaml.YAMLError, ValueError, LookupError, AttributeError, RecursionError) as exc:
        # PyYAML's constructors raise these for a scalar its tag cannot hold: an integer of thousands of digits,
        # !!int x (ValueError), !!int '' or !!bool '' (IndexError, KeyError), !!timestamp x (AttributeError)
        raise BundleError("bundle file %s cannot be read as YAML (%s)" % (path, type(exc).__name__))


_JSON_SCALARS = (str, bool, int, type(None))


def _json_data(value):
    """None when the value is data the API client can send as JSON, else what is wrong (walked without recursion:
    a file's aliases can make it huge or make it refer to itself)."""
    count, todo = 0, [(value, 1)]
    while todo:
        value, depth = todo.pop()
        count += 1
        if count > MAX_VALUES:
            return "more than %d values once its aliases are expanded" % MAX_VALUES
        if depth > MAX_DEPTH:
            return "values nested deeper than %d levels" % MAX_DEPTH
        if isinstance(value, dict):
            if not all(isinstance(key, str) for key in value):
                return "a mapping key that is not text"
            todo.extend((item, depth + 1) for item in value.values())
        elif isinstance(value, list):
            todo.extend((item, depth + 1) for item in value)
        elif isinstance(value, float):
            if math.isnan(value) or math.isinf(value):
                return "a number JSON cannot carry (.nan or .inf)"
        elif not isinstance(value, _JSON_SCALARS):
            return "a %s value (only text, numbers, booleans, null, lists and mappings)" % type(value).__name__
    return None


def _text(value):
    return isinstance(value, str) and value != ""


def _object_problem(obj):
    if not isinstance(obj, dict):
        return "an object that is not a mapping"
    meta = obj.get("metadata")
    if not _text(obj.get("apiVersion")) or not _text(obj.get("kind")) or not isinstance(meta, dict) or \
            not _text(meta.get("name")):
        return "an object without apiVersion, kind or metadata.name"
    if not _API_VERSION.match(obj["apiVersion"]):
        return "an object whose apiVersion is not a Kubernetes API version"
    if not _KIND.match(obj["kind"]):
        return "an object whose kind is not a Kubernetes kind"
    if len(meta["name"]) > _NAME_LIMIT or not meta["name"].isprintable():
        return "an object whose metadata.name is not a Kubernetes name"
    if meta.get("namespace") and not (isinstance(meta["namespace"], str) and _NAMESPACE.match(meta["namespace"])):
        return "an object whose metadata.namespace is not a Kubernetes namespace name"
    if meta.get("labels") is not None and not isinstance(meta["labels"], dict):
        return "an object whose metadata.labels is not a mapping"
    return None


def _items(doc, path, number):
    """The objects of one document: a List's items, or the document."""
    problem = _json_data(doc)
    if problem:
        raise BundleError("bundle file %s: document %d holds %s" % (path, number, problem))
    if isinstance(doc, dict) and isinstance(doc.get("kind"), str) and doc["kind"].endswith("List"):
        items = doc.get("items", [])
        if not isinstance(items, list):
            raise BundleError("bundle file %s: document %d is a %s whose items are not a list" % (path, number, doc["kind"]))
        return items
    return [doc]


def load(paths, namespace, is_namespaced):
    """Read the manifests of a bundle: a list of objects, each stamped with the installer's mark.

    ``is_namespaced(api_version, kind)`` tells the scope (from API discovery); a namespaced
    object without a namespace goes into the installer's namespace.
    """
    objects = []
    seen = {}
    for path in _files(paths):
        for number, doc in enumerate(_read(path), 1):
            if doc is None:
                continue
            for obj in _items(doc, path, number):
                problem = _object_problem(obj)
                if problem == "an object without apiVersion, kind or metadata.name":
                    raise BundleError("bundle file %s holds an object without apiVersion, kind or metadata.name" % path)
                if problem:
                    raise BundleError("bundle file %s: document %d holds %s" % (path, number, problem))
                obj = stamp(copy.deepcopy(obj))
                meta = obj["metadata"]
                if is_namespaced(obj["apiVersion"], obj["kind"]):
                    meta["namespace"] = meta.get("namespace") or namespace
                else:
                    meta.pop("namespace", None)
                ref = Ref.of(obj)
                if ref in seen:
                    raise BundleError("%s is in the bundle twice (%s and %s)" % (ref, seen[ref], path))
                seen[ref] = path
                objects.append(obj)
    return objects


# Apply order: what others depend on first.
_ORDER = {"Namespace": 0, "CustomResourceDefinition": 1, "PriorityClass": 2, "ServiceAccount": 3,
          "ClusterRole": 4, "Role": 4, "ClusterRoleBinding": 5, "RoleBinding": 5, "ConfigMap": 6,
          "Secret": 6, "Service": 7}


def apply_order(objects):
    return sorted(objects, key=lambda o: (_ORDER.get(o["kind"], 8), Ref.of(o).key()))
