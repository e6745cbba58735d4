# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The snapshot: every object a run will change or delete, as it was before the run (or that it was
absent), persisted in a Secret or a 0600 file so that a failed run can be rolled back. It carries the id
of the run that wrote it: only that run restores it by itself."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import json
import os
import stat
import time
import uuid

from ansible_collections.maesh.ichor.plugins.module_utils.common import files
from ansible_collections.maesh.ichor.plugins.module_utils.installer.errors import InstallerError
from ansible_collections.maesh.ichor.plugins.module_utils.installer.objects import MARK_KEY, MARK_VALUE, restorable

SNAPSHOT_NAME = "ichor-installer-snapshot"
SCHEMA = 2


class Unreadable(InstallerError):
    """A snapshot whose content is not an installer snapshot (of this schema)."""


class Snapshot:
    """A persisted snapshot: the id of the run that wrote it, its entries, and the UID and resourceVersion of its
    Secret (a Secret is deleted only while it is still the one read)."""

    def __init__(self, run_id, entries, uid=None, version=None):
        self.run_id = run_id
        self.entries = entries
        self.uid = uid
        self.version = version

    def describe(self):
        return "run %s (%d objects)" % (self.run_id, len(self.entries))


def new_run_id():
    """An installer run's id: when it started (UTC) and a random part, so that two runs never share one."""
    return "%s-%s" % (time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()), uuid.uuid4().hex[:12])


def entry(ref, live):
    """One snapshot entry: the object as it is (or that it is absent, to be deleted on restore)."""
    return {"ref": ref.to_dict(), "object": restorable(live) if live is not None else None,
            "uid": ((live or {}).get("metadata") or {}).get("uid")}


def encode(entries, run_id):
    return json.dumps({"schema": SCHEMA, "run": run_id, "entries": entries}, sort_keys=True)


def decode(text):
    """The Snapshot; Unreadable when the text is not a snapshot."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise Unreadable(str(exc))
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("entries"), list) or \
            not isinstance(data.get("run"), str) or not data["run"]:
        raise Unreadable("not an installer snapshot")
    return Snapshot(data["run"], data["entries"])


def secret(text, namespace):
    """The Secret that holds the snapshot in the installer's namespace."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": SNAPSHOT_NAME, "namespace": namespace, "labels": {MARK_KEY: MARK_VALUE}},
            "data": {"snapshot": base64.b64encode(text.encode("utf-8")).decode("ascii")}}


def from_secret(obj):
    """The Snapshot the Secret holds."""
    try:
        text = base64.b64decode((obj.get("data") or {})["snapshot"]).decode("utf-8")
    except (KeyError, TypeError, ValueError) as exc:
        raise Unreadable(str(exc))
    found = decode(text)
    meta = obj.get("metadata") or {}
    found.uid, found.version = meta.get("uid"), meta.get("resourceVersion")
    return found


# -- the snapshot file ------------------------------------------------------------------------

def _directory(path, missing_ok=False):
    """The file's directory, refused when someone else than its owner (or root) could replace the file; None
    when it does not exist and ``missing_ok`` (then there is no file either)."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        st = os.stat(directory)
    except OSError as exc:
        if missing_ok and not os.path.lexists(directory):
            return None
        raise InstallerError("the snapshot file's directory %s cannot be used (%s)" % (directory, exc.strerror))
    if not stat.S_ISDIR(st.st_mode):
        raise InstallerError("the snapshot file's directory %s is not a directory" % directory)
    problem = files.others_can_replace("the snapshot file %s" % path, directory, st)
    if problem:
        raise InstallerError(problem)
    return directory


def write_file(path, text):
    """Write a new 0600 file next to ``path`` and rename it over ``path`` (common.files): whatever was there (its mode,
    its owner, a link) is replaced, never written through."""
    _directory(path)  # the installer's own refusal, naming the snapshot file
    files.write_private(path, text.encode("utf-8"))


def read_file(path):
    """The file's text, or None when there is no file."""
    if _directory(path, missing_ok=True) is None:
        return None
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError) as exc:
        if not os.path.lexists(path):
            return None
        raise InstallerError("the snapshot file %s cannot be read (%s)" % (path, exc.strerror or type(exc).__name__))


def remove_file(path):
    if _directory(path, missing_ok=True) is not None and os.path.lexists(path):
        os.unlink(path)
