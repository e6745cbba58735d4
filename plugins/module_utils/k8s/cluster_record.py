# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster record: ConfigMap ``ichor-cluster`` in ``ichor-system``.

It holds what Ichor keeps in its TalosCluster status: stored versions, adoption, CNI mode,
pending machines. One JSON document under the key ``record`` with a ``schema`` number.
Every write is conditional on the resourceVersion that was read, so two runs never
overwrite each other: the second one fails with a conflict and is rerun.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

from ansible_collections.maesh.ichor.plugins.module_utils.common import untrusted, versions
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.errors import Conflict

NAMESPACE = "ichor-system"
NAME = "ichor-cluster"
KEY = "record"
SCHEMA = 1


class RecordError(IchorError):
    """The record cannot be used (newer schema, not JSON)."""


class ClusterRecord:
    """The record's data and the resourceVersion it was read at (None: it does not exist yet)."""

    def __init__(self, data=None, resource_version=None):
        self.data = data if data is not None else {"schema": SCHEMA}
        self.resource_version = resource_version

    @property
    def exists(self):
        return self.resource_version is not None

    def get(self, key, default=None):
        return self.data.get(key, default)


# What the record's readers take for granted, checked once here: field -> (type, what it is).
FIELDS = {"talos": (str, "a version"), "kubernetes": (str, "a version"), "contract": (str, "a version"),
          "cluster": (dict, "a mapping"), "machines": (list, "a list of mappings"), "adoption": (dict, "a mapping"),
          "nodes": (dict, "a mapping"), "held": (dict, "a mapping"), "init": (dict, "a mapping"),
          "cilium": (dict, "a mapping"), "status": (dict, "a mapping"),
          # when each hold began (machine name -> time), beside ``held``; a record an earlier adopt wrote has none
          "heldSince": (dict, "a mapping of text")}
_TEXT = ((str,), "text")
_MAPPING = ((dict,), "a mapping")
_NAMES = ("names", "a list of text")
# The fields inside them that the readers use (compare, hash, put in a set, format): field -> key -> (types, what).
NESTED = {
    "cluster": {"id": _TEXT, "name": _TEXT, "cni": _MAPPING,
                "inlineManifests": ("named", "a list of mappings with a text name")},
    "adoption": {"mode": _TEXT, "inlineManifest": _NAMES},
    "cilium": {"release": _TEXT, "chart": _TEXT, "tunnel": _TEXT, "kubeProxy": _TEXT, "values": _MAPPING,
               "inlineManifests": _NAMES},
    "status": {"acknowledged": _NAMES, "token": _TEXT, "at": _TEXT, "by": _TEXT},
}
# Each entry of these: machines[] (reclaim's pending machines), nodes.<name> (init's and adopt's machines).
ENTRY_FIELDS = {"machines": {"uuid": _TEXT, "address": _TEXT, "state": _TEXT, "source": _TEXT, "at": _TEXT},
                "nodes": {"uuid": _TEXT, "node": _TEXT, "role": _TEXT, "spec": _MAPPING}}
# The record is small; a ConfigMap holds at most 1 MiB and nothing Ichor writes nests deeper than a few levels.
MAX_SIZE = 1024 * 1024
MAX_DEPTH = 32
# The stored versions are release-set versions (v1.14.5, v1.36.6, v1.14): bounded, so a record cannot carry a
# version that is a megabyte long or a number of thousands of digits.
VERSION_MAX = 80


def _refuse(what):
    return RecordError("ConfigMap %s/%s: %s; fix or delete the record" % (NAMESPACE, NAME, what))


def _wrong(value, kind):
    """Whether a nested value (not None) is not of ``kind``: a tuple of types, "names" or "named"."""
    if kind == "names":
        return not isinstance(value, list) or not all(isinstance(item, str) for item in value)
    if kind == "named":
        return not isinstance(value, list) or not all(
            isinstance(item, dict) and isinstance(item.get("name"), str) for item in value)
    return not isinstance(value, kind)


def _check_entries(field, entries, each):
    """Each entry of ``field`` (named ``field`` + ``each`` in messages: machines[], nodes.*) and its fields."""
    for entry in entries:
        if not isinstance(entry, dict):
            raise _refuse("field %r of key %r is not a mapping" % (field + each, KEY))
        for key, (kind, what) in sorted(ENTRY_FIELDS[field].items()):
            if entry.get(key) is not None and _wrong(entry[key], kind):
                raise _refuse("field %r of key %r is not %s" % ("%s%s.%s" % (field, each, key), KEY, what))


def _check_fields(data):
    for field, (kind, what) in sorted(FIELDS.items()):
        value = data.get(field)
        if value is None:
            continue
        wrong = not isinstance(value, kind)
        if not wrong and what == "a version":
            wrong = len(value) > VERSION_MAX or versions.numbers(value) is None
        if not wrong and field == "machines":
            wrong = not all(isinstance(item, dict) for item in value)
        if not wrong and field == "heldSince":
            wrong = not all(isinstance(item, str) for item in value.values())
        if wrong:
            raise _refuse("field %r of key %r is not %s" % (field, KEY, what))
        for key, (nested_kind, nested_what) in sorted(NESTED.get(field, {}).items()):
            if value.get(key) is not None and _wrong(value[key], nested_kind):
                raise _refuse("field %r of key %r is not %s" % ("%s.%s" % (field, key), KEY, nested_what))
    _check_entries("machines", data.get("machines") or [], "[]")
    _check_entries("nodes", (data.get("nodes") or {}).values(), ".*")
    preset = ((data.get("cluster") or {}).get("cni") or {}).get("preset")
    if preset == "unmanaged" and not (data.get("adoption") or {}).get("adopted"):
        # the hands-off mode exists for adoption alone, never for a cluster made here
        raise _refuse("the cluster spec's cni.preset is unmanaged, but the record has no adoption marker (adoption."
                      "adopted): only adopt writes that mode")


def decode(configmap):
    """A ConfigMap (dict) -> ClusterRecord. Refuses a record of a newer schema than this collection knows, and one
    whose known fields have the wrong shape."""
    if not isinstance(configmap, dict):
        raise _refuse("the object read is not a ConfigMap")
    metadata = configmap.get("metadata")
    version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
    if not isinstance(version, str) or not version:
        raise _refuse("the object read has no resourceVersion")
    data = configmap.get("data")
    if data is not None and not isinstance(data, dict):
        raise _refuse("its data is not a mapping")
    text = (data or {}).get(KEY)
    if text is None:
        return ClusterRecord(resource_version=version)
    if not isinstance(text, str):
        raise _refuse("key %r is not text" % KEY)
    if len(text) > MAX_SIZE:
        raise _refuse("key %r holds more than %d characters" % (KEY, MAX_SIZE))
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise _refuse("key %r is not JSON" % KEY)
    if not isinstance(data, dict):
        raise _refuse("key %r is not a JSON object" % KEY)
    problem = untrusted.shape_problem(data, MAX_DEPTH)
    if problem:
        raise _refuse("key %r %s" % (KEY, problem))
    schema = data.get("schema", 0)
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise _refuse("field 'schema' of key %r is not a number" % KEY)
    if schema > SCHEMA:
        raise RecordError("the cluster record has schema %d, newer than this collection's %d; "
                          "use a newer maesh.ichor" % (schema, SCHEMA))
    _check_fields(data)
    data["schema"] = SCHEMA
    return ClusterRecord(data, version)


def encode(record):
    """The ConfigMap for a record, conditional on the resourceVersion it was read at."""
    meta = {"name": NAME, "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/managed-by": "maesh.ichor"}}
    if record.resource_version is not None:
        meta["resourceVersion"] = record.resource_version
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
            "data": {KEY: json.dumps(record.data, sort_keys=True, indent=2)}}


HELD = ("%s held by adopt: adopt's release phase lifts the hold first (maesh.ichor.adopt with ichor_adopt_confirm=true); "
        "nothing was written")


def held(record, names):
    """The machines of ``names`` (names or addresses) the record holds (adopt's hold), sorted."""
    holds = record.get("held") or {}
    nodes = record.get("nodes") or {}
    found = set()
    for name in holds:
        entry = nodes.get(name) or {}
        if name in names or entry.get("node") in names:
            found.add(name)
    return sorted(found)


def refuse_held(record, names):
    """RecordError naming the held machines among ``names``; nothing when none is held."""
    found = held(record, names)
    if found:
        raise RecordError(HELD % ", ".join(found))


def read(client):
    """Read the record (an empty one when the ConfigMap does not exist)."""
    configmap = client.get("v1", "ConfigMap", NAME, NAMESPACE)
    return decode(configmap) if configmap is not None else ClusterRecord()


def update(client, mutate, dry_run=False):
    """Read, apply ``mutate(data)`` to a copy, write conditionally. Returns (before, after, changed).

    A write that finds the record changed since it was read raises Conflict; nothing is retried
    here, since the caller's decision was made on what it read.
    """
    record = read(client)
    before = copy.deepcopy(record.data)
    after = copy.deepcopy(record.data)
    mutate(after)
    after["schema"] = SCHEMA
    _check_fields(after)  # what is written must read back: the same rules as decode()
    if after == before and record.exists:
        return before, after, False
    new = ClusterRecord(after, record.resource_version)
    body = encode(new)
    try:
        if record.exists:
            client.replace(body, dry_run=dry_run)
        else:
            if client.get("v1", "Namespace", NAMESPACE) is None:
                client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
                              dry_run=dry_run)
                if dry_run:  # a dry run cannot place the record in a namespace that does not exist yet
                    return before, after, True
            client.create(body, dry_run=dry_run)
    except Conflict:
        raise Conflict("the cluster record %s/%s changed since this run read it (another run is writing it); "
                       "rerun" % (NAMESPACE, NAME), status=409)
    return before, after, True


def stored_spec(spec):
    """The cluster spec as the record keeps it: inline manifests by name (the contents stay in the configs)."""
    stored = copy.deepcopy(spec)
    stored["inlineManifests"] = [{"name": item["name"]} for item in spec.get("inlineManifests") or []]
    return stored
