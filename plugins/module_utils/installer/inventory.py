# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The inventory: the ConfigMap in which a successful run records every object it applied, read by the
next run to find what that run's bundle drops."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.maesh.ichor.plugins.module_utils.common import untrusted
from ansible_collections.maesh.ichor.plugins.module_utils.installer.objects import MARK_KEY, MARK_VALUE, Ref

INVENTORY_NAME = "ichor-installer-inventory"

# The guard of the inventory read back: a ConfigMap holds at most 1 MiB; the inventory is a list of flat objects
# (two levels); a malformed entry is named in a warning of its own up to MAX_WARNINGS times, the rest are counted.
MAX_SIZE = 1024 * 1024
MAX_DEPTH = 4
MAX_WARNINGS = 20
# A name, kind, apiVersion or namespace as the API server has them: printable ASCII without spaces, 253 at most.
_NAME = re.compile(r"^[!-~]{1,253}\Z")
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")


def _malformed(item):
    """Why an inventory entry cannot name an object (None when it can)."""
    if not isinstance(item, dict):
        return "not an object"
    for key in ("apiVersion", "kind", "name"):
        if not isinstance(item.get(key), str) or not item[key]:
            return "%s is %s" % (key, "missing" if item.get(key) is None else "not a non-empty string")
        if not _NAME.match(item[key]):
            return "%s is not a name of at most 253 printable characters" % key
    if item.get("namespace") is not None and not isinstance(item["namespace"], str):
        return "namespace is not a string"
    if item.get("namespace") and not _NAME.match(item["namespace"]):
        return "namespace is not a name of at most 253 printable characters"
    return None


def _where(configmap):
    """namespace/name of the inventory read, for its warnings (the name alone when it has no namespace)."""
    metadata = configmap.get("metadata")
    namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
    if isinstance(namespace, str) and _NAMESPACE.match(namespace):
        return "%s/%s" % (namespace, INVENTORY_NAME)
    return INVENTORY_NAME


def _items(configmap):
    """The inventory's JSON list, or why it is not one (a phrase to follow its name)."""
    data = configmap.get("data")
    text = data.get("objects") if isinstance(data, dict) else None
    if not isinstance(text, str):
        return None, ""
    try:
        items = json.loads(untrusted.text(text, MAX_SIZE))
    except untrusted.Unreadable as exc:
        return None, " " + exc.problem
    except (ValueError, RecursionError):
        return None, ""
    problem = untrusted.shape_problem(items, MAX_DEPTH)
    if problem:
        return None, " " + problem
    return items, ""


def parse(configmap):
    """The refs of the previous run's inventory and the warnings about it: (refs, warnings).

    An inventory that is not a JSON list is ignored whole (refs None); a malformed entry is skipped, with a
    warning, and the others are kept: nothing it names is pruned, and the next successful run rewrites it.
    """
    if configmap is None:
        return None, []
    if not isinstance(configmap, dict):
        return None, ["the installer inventory %s is not a ConfigMap; it is ignored and nothing it lists is pruned"
                      % INVENTORY_NAME]
    where = _where(configmap)
    items, problem = _items(configmap)
    if not isinstance(items, list):
        return None, ["the installer inventory %s cannot be parsed%s; it is ignored and nothing it lists is pruned"
                      % (where, problem and " (it%s)" % problem)]
    refs, warnings, seen, malformed = [], [], set(), 0
    for index, item in enumerate(items, 1):
        why = _malformed(item)
        if why:
            malformed += 1
            if malformed <= MAX_WARNINGS:
                warnings.append("the installer inventory %s: entry %d of %d is malformed (%s); it is skipped and "
                                "nothing is pruned for it" % (where, index, len(items), why))
            continue
        ref = Ref.from_dict(item)
        if ref not in seen:
            seen.add(ref)
            refs.append(ref)
    if malformed > MAX_WARNINGS:
        warnings.append("the installer inventory %s: %d more entries are malformed; they are skipped and nothing is "
                        "pruned for them" % (where, malformed - MAX_WARNINGS))
    return refs, warnings


def data(refs):
    """The inventory ConfigMap's data: every applied object, sorted, one JSON list."""
    items = sorted((r.to_dict() for r in refs), key=lambda d: (d["kind"], d["namespace"] or "", d["name"]))
    return {"objects": json.dumps(items, sort_keys=True, indent=1)}


def configmap(refs, namespace):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": INVENTORY_NAME, "namespace": namespace, "labels": {MARK_KEY: MARK_VALUE}},
            "data": data(refs)}
