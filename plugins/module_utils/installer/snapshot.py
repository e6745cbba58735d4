# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The snapshot: every object a run will change or delete, as it was before the run (or that it was
absent), persisted in a Secret or a 0600 file so that a failed run can be rolled back."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import json

from ansible_collections.maesh.ichor.plugins.module_utils.installer.errors import InstallerError
from ansible_collections.maesh.ichor.plugins.module_utils.installer.objects import MARK_KEY, MARK_VALUE, restorable

SNAPSHOT_NAME = "ichor-installer-snapshot"


def entry(ref, live):
    """One snapshot entry: the object as it is (or that it is absent, to be deleted on restore)."""
    return {"ref": ref.to_dict(), "object": restorable(live) if live is not None else None,
            "uid": ((live or {}).get("metadata") or {}).get("uid")}


def encode(entries):
    return json.dumps({"schema": 1, "entries": entries}, sort_keys=True)


def decode(text):
    """The entries; InstallerError when the text is not a snapshot."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise InstallerError(str(exc))
    if not isinstance(data, dict) or data.get("schema") != 1 or not isinstance(data.get("entries"), list):
        raise InstallerError("not an installer snapshot")
    return data["entries"]


def secret(text, namespace):
    """The Secret that holds the snapshot in the installer's namespace."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": SNAPSHOT_NAME, "namespace": namespace, "labels": {MARK_KEY: MARK_VALUE}},
            "stringData": {"snapshot": text}}


def from_secret(obj):
    """The entries the snapshot Secret holds."""
    try:
        text = base64.b64decode((obj.get("data") or {})["snapshot"]).decode("utf-8")
    except (KeyError, TypeError, ValueError) as exc:
        raise InstallerError(str(exc))
    return decode(text)
