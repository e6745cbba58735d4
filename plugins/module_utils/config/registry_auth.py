# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Registry credentials by reference: ``registries[].authSecretRef: {name}`` names a Secret in ``ichor-system`` whose
keys ``username`` and ``password`` (or ``auth``, or ``identityToken``: the fields of Talos's ``RegistryAuthConfig``)
the render writes into the config. The credentials are never in the spec, the record, a plan line or a diff: they
are read when a render needs them, held as redacted Secrets beside the secrets bundle (``Bundle.registry_auth``), and
every path that holds one is masked (config/secret_paths.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii

from ansible_collections.maesh.ichor.plugins.module_utils.common.redact import Secret
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError

NAMESPACE = "ichor-system"
FIELDS = ("username", "password", "auth", "identityToken")


def refs(cluster_spec):
    """{registry host: Secret name} of a normalised cluster spec."""
    return dict((entry["host"], entry["authSecretRef"]["name"]) for entry in cluster_spec["registries"] if entry.get("authSecretRef"))


def _decoded(secret, key, where):
    try:
        return base64.b64decode(secret.get("data", {}).get(key) or "", validate=True).decode("utf-8")
    except (binascii.Error, ValueError, TypeError):
        raise ConfigError("%s: its key %s is not base64 text" % (where, key))


def read(kube, cluster_spec):
    """{host: {field: Secret}} for every authSecretRef of the spec; one line naming the Secret (never a value) when one
    cannot be used."""
    wanted = refs(cluster_spec)
    if not wanted:
        return {}
    if kube is None:
        raise ConfigError("registries %s name credentials by authSecretRef: the cluster's kubeconfig is needed to read "
                          "them from %s" % (", ".join(sorted(wanted)), NAMESPACE))
    out = {}
    for host, name in sorted(wanted.items()):
        where = "registries[%s].authSecretRef: Secret %s/%s" % (host, NAMESPACE, name)
        secret = kube.get("v1", "Secret", name, NAMESPACE)
        if secret is None:
            raise ConfigError("%s does not exist: create it with the keys username and password (or auth, or "
                              "identityToken)" % where)
        creds = dict((key, _decoded(secret, key, where)) for key in FIELDS if (secret.get("data") or {}).get(key))
        if not (creds.get("username") and creds.get("password")) and not creds.get("auth") and not creds.get("identityToken"):
            raise ConfigError("%s holds no credentials: it needs the keys username and password, or auth, or identityToken" % where)
        out[host] = dict((key, Secret(value)) for key, value in creds.items())
    return out


def record_refs(record):
    """{host: Secret name} the cluster record's spec names (the rollout and status render with them)."""
    stored = (record.get("cluster") if record is not None else None) or {}
    out = {}
    for entry in stored.get("registries") or []:
        ref = entry.get("authSecretRef") if isinstance(entry, dict) else None
        if isinstance(ref, dict) and isinstance(ref.get("name"), str) and isinstance(entry.get("host"), str):
            out[entry["host"]] = ref["name"]
    return out


def with_refs(registries, refs):
    """Raw registries entries with each host of refs naming its Secret (an entry of its own when it has no mirror)."""
    out, seen = [], set()
    for entry in registries or []:
        entry = dict(entry)
        if entry.get("host") in refs:
            entry["authSecretRef"] = {"name": refs[entry["host"]]}
            seen.add(entry["host"])
        out.append(entry)
    out.extend({"host": host, "endpoints": [], "authSecretRef": {"name": name}} for host, name in sorted(refs.items())
               if host not in seen)
    return out


def attach(bundle, kube, cluster_spec):
    """The bundle, carrying the credentials the spec's authSecretRefs name (read from the cluster)."""
    bundle.registry_auth = read(kube, cluster_spec)
    return bundle


def credentials(bundle, host, name):
    """{field: value} the render writes for host; a ConfigError when they were not read."""
    held = (getattr(bundle, "registry_auth", None) or {}).get(host)
    if not held:
        raise ConfigError("registries[%s].authSecretRef names Secret %s/%s, whose credentials were not read for this "
                          "render" % (host, NAMESPACE, name))
    return dict((key, held[key].reveal()) for key in FIELDS if key in held)
