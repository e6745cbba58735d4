# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The secrets bundle kept in the cluster: Secret ``ichor-secrets-bundle`` in ichor-system, written by adopt and init
(so a job that keeps no files can run the next playbook) and read by adopt's release. Its data never reaches a
result, a plan or a diff."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64

from ansible_collections.maesh.ichor.plugins.module_utils.common import untrusted
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.config import secrets
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record

BUNDLE_SECRET = "ichor-secrets-bundle"
BUNDLE_KEY = "bundle.yaml"


def stored_bundle(secret):
    """The bundle Secret ichor-secrets-bundle holds, or None when it holds none that can be read: its data must be a
    mapping whose key bundle.yaml is base64 text of a bundle file (at most secrets.MAX_FILE bytes of UTF-8, read through
    the bundle file's guard)."""
    data = secret.get("data") if isinstance(secret, dict) else None
    value = data.get(BUNDLE_KEY) if isinstance(data, dict) else None
    if not isinstance(value, str) or not value:
        return None
    try:
        raw = base64.b64decode(untrusted.text(value, 2 * secrets.MAX_FILE))
        return secrets.parse(untrusted.text(raw, secrets.MAX_FILE))
    except (ConfigError, untrusted.Unreadable, ValueError):
        return None


def bundle_secret(kube, bundle, result, check_mode):
    """Secret ichor-system/ichor-secrets-bundle: created when missing, left when it holds this bundle, refused when it
    holds another. Its data never reaches a result."""
    live = kube.get("v1", "Secret", BUNDLE_SECRET, cluster_record.NAMESPACE)
    where = "%s/%s" % (cluster_record.NAMESPACE, BUNDLE_SECRET)
    if live is not None:
        stored = stored_bundle(live)
        if stored is None or stored.fingerprint() != bundle.fingerprint():
            raise IchorError("Secret %s holds %s, not this cluster's (Talos CA %s): nothing written; remove it only if "
                             "you know it is stale" % (where, "no readable bundle" if stored is None else
                                                       "the bundle of another cluster (Talos CA %s)" % stored.fingerprint(),
                                                       bundle.fingerprint()))
        result["plan"].append("secrets bundle Secret %s: holds this cluster's bundle already" % where)
        return False
    body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": BUNDLE_SECRET, "namespace": cluster_record.NAMESPACE,
                         "labels": {"app.kubernetes.io/managed-by": "maesh.ichor"}},
            "data": {BUNDLE_KEY: base64.b64encode(bundle.to_yaml().encode("utf-8")).decode("ascii")}}
    if kube.get("v1", "Namespace", cluster_record.NAMESPACE) is None:
        if check_mode:  # a dry run cannot place the Secret in a namespace that does not exist yet
            result["plan"].append("secrets bundle Secret %s: would be created (Talos CA %s)" % (where, bundle.fingerprint()))
            return True
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster_record.NAMESPACE}})
    kube.create(body, dry_run=check_mode)
    result["plan"].append("secrets bundle Secret %s: %s (Talos CA %s)" % (
        where, "would be created" if check_mode else "created", bundle.fingerprint()))
    return True
