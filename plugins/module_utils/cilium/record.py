# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helm release records (the Secret driver): ``sh.helm.release.v1.<release>.v<revision>`` of type
``helm.sh/release.v1`` with labels ``name``, ``owner=helm``, ``status``, ``version``.

The data key ``release`` is base64(gzip(JSON)) written by Helm, and the Secret API base64-encodes
``.data`` again: from a Kubernetes client it is base64-decoded twice, gunzipped (when it starts with
the gzip magic) and parsed. The user's values are the release's field ``config``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import json
import zlib

from ansible_collections.maesh.ichor.plugins.module_utils.cilium.errors import CiliumError
from ansible_collections.maesh.ichor.plugins.module_utils.common import untrusted

TYPE = "helm.sh/release.v1"
GZIP_MAGIC = b"\x1f\x8b\x08"
STATUSES = ("unknown", "deployed", "uninstalled", "superseded", "failed", "uninstalling", "pending-install",
            "pending-upgrade", "pending-rollback")


def secret_name(release_name, revision):
    return "sh.helm.release.v1.%s.v%d" % (release_name, revision)


# The guard of a record read: a Secret holds at most 1 MiB, which the API returns in base64 (a third more); what
# gzip expands it to is bounded (a chart as large as Cilium's, templates and all, is a few megabytes of JSON; a
# crafted 0.5 MB record expanded to 300 MB), and so are the depth and the count of values of the JSON.
MAX_SIZE = 2 * 1024 * 1024
MAX_JSON = 32 * 1024 * 1024
MAX_DEPTH = 64
MAX_VALUES = 1000000


def _gunzip(raw, limit):
    """The one gzip member ``raw`` holds, expanded to at most ``limit`` bytes (None beyond); ValueError when it is
    not gzip or is cut short."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(raw, limit + 1)
    except zlib.error:
        raise ValueError("not gzip")
    if len(out) > limit:
        return None
    if not inflater.eof or inflater.unused_data.strip(b"\x00"):
        raise ValueError("not one whole gzip member")
    return out


def decode(data_release, what="the release record"):
    """The release (dict) from a record Secret's ``data.release`` as the API returns it, read through the guard: at
    most MAX_SIZE bytes given, MAX_JSON once expanded, JSON nesting at most MAX_DEPTH levels and holding at most
    MAX_VALUES values. Errors are one line naming ``what``, never the record's content."""
    try:
        data_release = untrusted.text(data_release, MAX_SIZE)
    except untrusted.Unreadable as exc:
        raise CiliumError("%s %s" % (what, exc.problem))
    try:
        helm_text = base64.b64decode(data_release)
        raw = base64.b64decode(helm_text)
        if raw[:3] == GZIP_MAGIC:
            raw = _gunzip(raw, MAX_JSON)
            if raw is None:
                raise CiliumError("%s expands to more than %d bytes; it is not a Helm release" % (what, MAX_JSON))
        release = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise CiliumError("%s is not a Helm release (its JSON nests too deep)" % what)
    except (TypeError, ValueError, binascii.Error):
        raise CiliumError("%s is not a Helm release (base64, base64, gzip, JSON)" % what)
    if not isinstance(release, dict):
        raise CiliumError("%s is not a Helm release (not a JSON object)" % what)
    problem = untrusted.shape_problem(release, MAX_DEPTH, MAX_VALUES)
    if problem:
        raise CiliumError("%s is not a Helm release (its JSON %s)" % (what, problem))
    return release


class Record:
    """One record Secret: where it is, its identity (uid), revision, status, and the release it holds."""

    def __init__(self, secret):
        self.secret = secret
        meta = secret.get("metadata") if isinstance(secret.get("metadata"), dict) else {}
        labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
        self.name = meta.get("name")
        self.namespace = meta.get("namespace")
        self.uid = meta.get("uid")
        self.resource_version = meta.get("resourceVersion")
        self.release_name = labels.get("name")
        self.label_status = labels.get("status")
        self._status = None
        try:
            self.revision = int(labels.get("version") or 0)
        except (TypeError, ValueError):
            self.revision = 0
        self._release = None

    @property
    def status(self):
        """The release's status as Helm reports it (``helm list``, ``helm status``): the record's own
        ``info.status``, or its label when the record cannot be read. The two can differ: a helm stopped while it
        wrote (AWX's cancel) was seen to leave the label ``deployed`` on a release it recorded ``failed``."""
        if self._status is None:
            try:
                info = self.release.get("info")
                said = info.get("status") if isinstance(info, dict) else None
            except CiliumError:
                said = None
            self._status = said if said in STATUSES else self.label_status
        return self._status

    @property
    def ref(self):
        return "%s/%s" % (self.namespace, self.name)

    @property
    def release(self):
        if self._release is None:
            data = self.secret.get("data")
            data = data.get("release") if isinstance(data, dict) else None
            if not data:
                raise CiliumError("the Helm record %s has no data.release" % self.ref)
            self._release = decode(data, "the Helm record %s" % self.ref)
        return self._release

    @property
    def config(self):
        """The user values the release was made with ({} when none)."""
        config = self.release.get("config") or {}
        if not isinstance(config, dict):
            raise CiliumError("the Helm record %s is not a Helm release (its config is not a mapping)" % self.ref)
        return config

    @property
    def chart_version(self):
        """The chart's version (None when the release does not say it as text)."""
        chart = self.release.get("chart")
        metadata = chart.get("metadata") if isinstance(chart, dict) else None
        version = metadata.get("version") if isinstance(metadata, dict) else None
        return version if isinstance(version, str) else None

    def summary(self):
        return {"namespace": self.namespace, "name": self.name, "release": self.release_name,
                "revision": self.revision, "status": self.status, "chart": self.chart_version}


def newest(records):
    """The record of the highest revision (None for none)."""
    return max(records, key=lambda r: r.revision) if records else None
