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


def parse(configmap):
    """The refs of the previous run's inventory: (refs, warning). Unparseable -> (None, warning)."""
    if configmap is None:
        return None, None
    text = (configmap.get("data") or {}).get("objects")
    try:
        refs = [Ref.from_dict(i) for i in json.loads(text)]
    except (TypeError, ValueError, KeyError, AttributeError):
        return None, ("the installer inventory %s/%s cannot be parsed; it is ignored and nothing it lists is pruned"
                      % (configmap["metadata"].get("namespace"), INVENTORY_NAME))
    return refs, None


def data(refs):
    """The inventory ConfigMap's data: every applied object, sorted, one JSON list."""
    items = sorted((r.to_dict() for r in refs), key=lambda d: (d["kind"], d["namespace"] or "", d["name"]))
    return {"objects": json.dumps(items, sort_keys=True, indent=1)}


def configmap(refs, namespace):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": INVENTORY_NAME, "namespace": namespace, "labels": {MARK_KEY: MARK_VALUE}},
            "data": data(refs)}
