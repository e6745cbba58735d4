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
import gzip
import io
import json

from ansible_collections.maesh.ichor.plugins.module_utils.cilium.errors import CiliumError

TYPE = "helm.sh/release.v1"
GZIP_MAGIC = b"\x1f\x8b\x08"
STATUSES = ("unknown", "deployed", "uninstalled", "superseded", "failed", "uninstalling", "pending-install",
            "pending-upgrade", "pending-rollback")


def secret_name(release_name, revision):
    return "sh.helm.release.v1.%s.v%d" % (release_name, revision)


def decode(data_release, what="the release record"):
    """The release (dict) from a record Secret's ``data.release`` as the API returns it."""
    try:
        helm_text = base64.b64decode(data_release)
        raw = base64.b64decode(helm_text)
        if raw[:3] == GZIP_MAGIC:
            raw = gzip.GzipFile(fileobj=io.BytesIO(raw)).read()
        release = json.loads(raw.decode("utf-8"))
    except (TypeError, ValueError, binascii.Error, IOError, OSError, EOFError):
        raise CiliumError("%s is not a Helm release (base64, base64, gzip, JSON)" % what)
    if not isinstance(release, dict):
        raise CiliumError("%s is not a Helm release (not a JSON object)" % what)
    return release


def encode(release):
    """``data.release`` for a release, as the API takes it (the inverse of ``decode``)."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as handle:
        handle.write(json.dumps(release, sort_keys=True).encode("utf-8"))
    return base64.b64encode(base64.b64encode(buf.getvalue())).decode("ascii")


class Record:
    """One record Secret: where it is, its identity (uid), revision, status, and the release it holds."""

    def __init__(self, secret):
        self.secret = secret
        meta = secret.get("metadata") or {}
        labels = meta.get("labels") or {}
        self.name = meta.get("name")
        self.namespace = meta.get("namespace")
        self.uid = meta.get("uid")
        self.resource_version = meta.get("resourceVersion")
        self.release_name = labels.get("name")
        self.status = labels.get("status")
        try:
            self.revision = int(labels.get("version") or 0)
        except ValueError:
            self.revision = 0
        self._release = None

    @property
    def ref(self):
        return "%s/%s" % (self.namespace, self.name)

    @property
    def release(self):
        if self._release is None:
            data = (self.secret.get("data") or {}).get("release")
            if not data:
                raise CiliumError("the Helm record %s has no data.release" % self.ref)
            self._release = decode(data, "the Helm record %s" % self.ref)
        return self._release

    @property
    def config(self):
        """The user values the release was made with ({} when none)."""
        return self.release.get("config") or {}

    @property
    def chart_version(self):
        return ((self.release.get("chart") or {}).get("metadata") or {}).get("version")

    def summary(self):
        return {"namespace": self.namespace, "name": self.name, "release": self.release_name,
                "revision": self.revision, "status": self.status, "chart": self.chart_version}


def newest(records):
    """The record of the highest revision (None for none)."""
    return max(records, key=lambda r: r.revision) if records else None
