# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the installer knows of an object: its identity (``Ref``), the installer's mark, and the form in
which two objects are compared and an object is restored."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible_collections.maesh.ichor.plugins.module_utils.k8s import metadata

FIELD_MANAGER = "ichor-installer"
MARK_KEY = "ichor.maesh.dev/installed-by"
MARK_VALUE = "ichor-installer"
DEFAULT_NAMESPACE = "ichor-system"


class Ref:
    """apiVersion, kind, namespace (None when cluster-scoped) and name of an object."""

    __slots__ = ("api_version", "kind", "namespace", "name")

    def __init__(self, api_version, kind, namespace, name):
        self.api_version = api_version
        self.kind = kind
        self.namespace = namespace or None
        self.name = name

    @classmethod
    def of(cls, obj):
        meta = obj.get("metadata") or {}
        return cls(obj.get("apiVersion"), obj.get("kind"), meta.get("namespace"), meta.get("name"))

    @classmethod
    def from_dict(cls, d):
        """The inverse of ``to_dict``."""
        return cls(d["apiVersion"], d["kind"], d.get("namespace"), d["name"])

    @property
    def group(self):
        return self.api_version.split("/", 1)[0] if "/" in self.api_version else ""

    def key(self):
        # the version is not part of the identity: an object served at v1 and v1beta1 is one object
        return (self.group, self.kind, self.namespace or "", self.name)

    def to_dict(self):
        return {"apiVersion": self.api_version, "kind": self.kind, "namespace": self.namespace, "name": self.name}

    def __eq__(self, other):
        return isinstance(other, Ref) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())

    def __repr__(self):
        return "Ref(%s)" % self

    def __str__(self):
        return "%s %s/%s" % (self.kind, self.namespace, self.name) if self.namespace else "%s %s" % (self.kind, self.name)


def labels(obj):
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


def carries_mark(obj):
    """Whether the object carries the installer's mark: the proof that the installer put it there."""
    return labels(obj).get(MARK_KEY) == MARK_VALUE


def stamp(obj):
    """Put the mark on an object about to be applied (the bundle files need not carry it)."""
    obj.setdefault("metadata", {}).setdefault("labels", {})[MARK_KEY] = MARK_VALUE
    return obj


# a restored object's owners are other incarnations: their references would have it collected
_NOT_RESTORED = metadata.SERVER_SET + ("ownerReferences",)


def restorable(live):
    """The part of a live object a restore puts back: labels, annotations, spec/data (no status)."""
    obj = copy.deepcopy(live)
    obj.pop("status", None)
    metadata.without(obj.get("metadata") or {}, _NOT_RESTORED)
    return obj


def comparable(obj):
    """Two objects are 'as they were' when these are equal (UIDs and resourceVersions aside)."""
    obj = restorable(obj)
    meta = obj.get("metadata") or {}
    return {k: v for k, v in obj.items() if k != "metadata"}, {
        "name": meta.get("name"), "namespace": meta.get("namespace"),
        "labels": meta.get("labels") or {}, "annotations": meta.get("annotations") or {}}
