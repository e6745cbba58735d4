# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The inventory: the ConfigMap in which a successful run records every object it applied, read by the
next run to find what that run's bundle drops."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.maesh.ichor.plugins.module_utils.installer.objects import MARK_KEY, MARK_VALUE, Ref

INVENTORY_NAME = "ichor-installer-inventory"


def _malformed(item):
    """Why an inventory entry cannot name an object (None when it can)."""
    if not isinstance(item, dict):
        return "not an object"
    for key in ("apiVersion", "kind", "name"):
        if not isinstance(item.get(key), str) or not item[key]:
            return "%s is %s" % (key, "missing" if item.get(key) is None else "not a non-empty string")
    if item.get("namespace") is not None and not isinstance(item["namespace"], str):
        return "namespace is not a string"
    return None


def parse(configmap):
    """The refs of the previous run's inventory and the warnings about it: (refs, warnings).

    An inventory that is not a JSON list is ignored whole (refs None); a malformed entry is skipped, with a
    warning, and the others are kept: nothing it names is pruned, and the next successful run rewrites it.
    """
    if configmap is None:
        return None, []
    where = "%s/%s" % (configmap["metadata"].get("namespace"), INVENTORY_NAME)
    try:
        items = json.loads((configmap.get("data") or {}).get("objects"))
    except (TypeError, ValueError):
        items = None
    if not isinstance(items, list):
        return None, ["the installer inventory %s cannot be parsed; it is ignored and nothing it lists is pruned" % where]
    refs, warnings, seen = [], [], set()
    for index, item in enumerate(items, 1):
        why = _malformed(item)
        if why:
            warnings.append("the installer inventory %s: entry %d of %d is malformed (%s); it is skipped and nothing "
                            "is pruned for it" % (where, index, len(items), why))
            continue
        ref = Ref.from_dict(item)
        if ref not in seen:
            seen.add(ref)
            refs.append(ref)
    return refs, warnings


def data(refs):
    """The inventory ConfigMap's data: every applied object, sorted, one JSON list."""
    items = sorted((r.to_dict() for r in refs), key=lambda d: (d["kind"], d["namespace"] or "", d["name"]))
    return {"objects": json.dumps(items, sort_keys=True, indent=1)}


def configmap(refs, namespace):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": INVENTORY_NAME, "namespace": namespace, "labels": {MARK_KEY: MARK_VALUE}},
            "data": data(refs)}
