# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bundle: directories or files of manifests read into objects, each stamped with the mark, in
the order they are applied."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os

try:
    import yaml
except ImportError:  # pragma: no cover
    yaml = None

from ansible_collections.maesh.ichor.plugins.module_utils.installer.errors import BundleError
from ansible_collections.maesh.ichor.plugins.module_utils.installer.objects import Ref, stamp


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


def load(paths, namespace, is_namespaced):
    """Read the manifests of a bundle: a list of objects, each stamped with the installer's mark.

    ``is_namespaced(api_version, kind)`` tells the scope (from API discovery); a namespaced
    object without a namespace goes into the installer's namespace.
    """
    objects = []
    seen = {}
    for path in _files(paths):
        try:
            with open(path) as handle:
                docs = list(yaml.safe_load_all(handle))
        except (IOError, OSError, yaml.YAMLError) as exc:
            raise BundleError("bundle file %s cannot be read as YAML (%s)" % (path, type(exc).__name__))
        for doc in docs:
            if doc is None:
                continue
            items = doc.get("items", []) if isinstance(doc, dict) and doc.get("kind", "").endswith("List") else [doc]
            for obj in items:
                if not isinstance(obj, dict) or not obj.get("apiVersion") or not obj.get("kind") or \
                        not (obj.get("metadata") or {}).get("name"):
                    raise BundleError("bundle file %s holds an object without apiVersion, kind or metadata.name" % path)
                obj = stamp(copy.deepcopy(obj))
                meta = obj["metadata"]
                if is_namespaced(obj["apiVersion"], obj["kind"]):
                    meta.setdefault("namespace", namespace)
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
