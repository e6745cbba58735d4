# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Init's plan: what ``maesh.ichor.init`` would do to make a
new cluster from machines in maintenance mode, or to join machines to it; read-only everywhere.

The versions are the release set's, with no choice (another Talos, contract or Kubernetes is refused, naming the
set); the CNI is the collection's Cilium (init never writes ``preset: unmanaged``: that mode is adoption's), with
KubePrism on 7445. Then each machine is read: in maintenance mode it answers the maintenance API with its UUID
(checked against the inventory's); one that refuses it is configured, and it is this cluster's (its config carries
the bundle's CAs: it is added with the same render, applied over the authenticated API) or another's
(refused with the reclaim hint: init never resets a machine). An inventory with no control plane is refused; an even
number of control planes is a warning. etcd is bootstrapped only when no control plane of this cluster lists a
member. The pending machines of the cluster record (from reclaim) are named, and joined when the inventory lists
them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

try:
    from urllib.parse import urlsplit
except ImportError:  # pragma: no cover - Python 2
    from urlparse import urlsplit

from ansible_collections.maesh.ichor.plugins.module_utils.common import fanout, release
from ansible_collections.maesh.ichor.plugins.module_utils.common.given import given as given_only
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.config import network, registry_auth, render, secrets
from ansible_collections.maesh.ichor.plugins.module_utils.config import spec as specs
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from ansible_collections.maesh.ichor.plugins.module_utils.machine import machine_config
from ansible_collections.maesh.ichor.plugins.module_utils.talos import KUBEPRISM_PORT, errors, etcd
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as talos_client
from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine as talos_machine
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res
from ansible_collections.maesh.ichor.plugins.module_utils.talos import talosconfig

UNMANAGED = ("init never writes cni.preset unmanaged: that mode exists for adopting a running cluster alone "
             "(maesh.ichor.adopt with ichor_cni_unmanaged); init installs the collection's Cilium")
EVEN = ("%d control planes: etcd tolerates no more failures than with %d (a quorum of %d needs %d); an odd number is "
        "the usual choice")


def options():
    """The module's own options (machines are init's: with uuid, hostname and install)."""
    return dict(
        machines=dict(type="list", elements="dict", required=True, options=dict(
            name=dict(type="str", required=True), node=dict(type="str", required=True),
            role=dict(type="str", required=True, choices=["controlplane", "worker"]),
            uuid=dict(type="str"), **specs.machine_options())),
        secrets=dict(type="path"),
    )


def cluster_spec(given, machines):
    """The cluster spec at the release set: versions defaulted to the set, any other refused; preset cilium."""
    given = given_only(given or {})
    for field, key, pinned in (("talos", "talosVersion", release.TALOS), ("kubernetes", "kubernetesVersion",
                                                                          release.KUBERNETES),
                               ("contract", "versionContract", release.CONTRACT)):
        value = given.get(key) or pinned
        refusal = release.validate_change(field, None, value)
        if refusal:
            raise ConfigError("%s (release set: Talos %s, contract %s, Kubernetes %s, Cilium %s)" % (
                refusal, release.TALOS, release.CONTRACT, release.KUBERNETES, release.CILIUM))
        given[key] = pinned
    given["kubernetesVersion"] = release.KUBERNETES.lstrip("v")
    cni = dict(given.get("cni") or {})
    if cni.get("preset") not in (None, "cilium") or cni.get("unmanaged"):
        raise ConfigError(UNMANAGED)
    cni["preset"] = "cilium"
    given["cni"] = cni
    prism = dict(given.get("kubePrism") or {})
    if prism.get("enabled") is False or prism.get("port") not in (None, KUBEPRISM_PORT):
        raise ConfigError("init renders KubePrism on port %d on every machine (the collection's Cilium reaches the API "
                          "server through it); kubePrism cannot be changed" % KUBEPRISM_PORT)
    if not given.get("endpoint"):
        first = [m["node"] for m in machines if m["role"] == "controlplane"][:1]
        if first:
            given["endpoint"] = "https://%s:6443" % first[0]
    return specs.cluster(given)


def _machine_spec(m):
    """The machine spec fields an inventory entry states (Ansible fills the others with None)."""
    return given_only(dict((k, m[k]) for k in specs.MACHINE_FIELDS if m.get(k)))


def _vip_check(spec, machines, plan, warnings):
    """An HA endpoint on a Layer 2 VIP: one VIP, stated by every control plane, and the endpoint on it."""
    held = {}
    for name, machine in machines:
        for vip in network.vips(machine["network"]):
            held.setdefault(vip, []).append(name)
    if not held:
        return
    if len(held) > 1:
        raise ConfigError("the control planes state more than one Layer 2 VIP (%s): the API endpoint is one VIP that every "
                          "control plane states" % "; ".join("%s on %s" % (vip, ", ".join(names)) for vip, names in sorted(held.items())))
    vip, names = next(iter(held.items()))
    plan.append("API endpoint: Layer 2 VIP %s, held by one control plane at a time, moved to another when it fails: %s" % (
        vip, ", ".join(names)))
    lacking = [name for name, machine in machines if machine["role"] == "controlplane" and name not in names]
    if lacking:
        line = "control plane(s) %s do not state the VIP %s: they can never hold the API endpoint" % (", ".join(lacking), vip)
        warnings.append(line)
        plan.append("WARNING: " + line)
    if urlsplit(spec["endpoint"]).hostname != vip.split("/")[0]:
        line = "the endpoint %s is not on the VIP %s: the VIP does not make the API endpoint highly available" % (spec["endpoint"], vip)
        warnings.append(line)
        plan.append("WARNING: " + line)


def _machines_check(machines, plan, warnings):
    controlplanes = [m for m in machines if m["role"] == "controlplane"]
    if not controlplanes:
        raise ConfigError("the inventory has no control plane (group controlplane): a cluster needs at least one")
    count = len(controlplanes)
    if count % 2 == 0:
        line = EVEN % (count, count - 1, count, count // 2 + 1)
        warnings.append(line)
        plan.append("WARNING: " + line)
    seen = {}
    for m in machines:
        if m["node"] in seen:
            raise ConfigError("%s and %s have the same address %s" % (seen[m["node"]], m["name"], m["node"]))
        seen[m["node"]] = m["name"]


def _authenticated(params):
    """The cluster's talosconfig when the operator gave one that exists (init writes it): else None."""
    path = params.get("talosconfig")
    if params.get("talosconfig_content") or (path and os.path.exists(os.path.expanduser(path))):
        return talosconfig.load(path=path, content=params.get("talosconfig_content"), context=params.get("context"))
    return None


def read_machine(params, context, bundle, m):
    """{state, uuid, ...} of one machine: configured by this cluster, in maintenance mode, or refused.

    With the cluster's talosconfig the machine is asked first over the authenticated API (a rerun finds its machines
    configured); a TLS refusal there means maintenance mode or another cluster, which the maintenance API tells."""
    node = m["node"]
    if context is not None and bundle is not None:
        with talos_client.TalosClient(context=context, dial_only=node, timeout=params.get("timeout")) as client:
            try:
                version, live = machine_config.read_live(client, None)  # dialled directly: no node metadata
            except errors.TalosError as exc:
                if exc.code not in ("TLS", "CLOSED"):
                    raise IchorError("%s (%s) does not answer: %s; nothing was sent to any machine" % (m["name"], node, exc))
            else:
                other = secrets.same_cluster(bundle, live)
                if other:
                    raise ConfigError(machine_config.FOREIGN % (node, other))
                uuid = res.spec_text(client.run(talos_machine.get_resource(client, res.SYSTEM_INFORMATION)), "uuid")
                machine_config.check_uuid(node, uuid, m.get("uuid"))
                names = etcd.members(client, None) if m["role"] == "controlplane" else None
                return dict(state="configured", uuid=uuid, talos=version, etcd_members=names)
    with talos_client.TalosClient(dial_only=node, maintenance=True, timeout=params.get("timeout")) as client:
        try:
            uuid, stage = machine_config.maintenance_identity_checked(client, node, m.get("uuid"))
        except errors.TalosError as exc:  # unreachable
            raise IchorError("%s (%s) does not answer: %s; nothing was sent to any machine" % (m["name"], node, exc))
    return dict(state="maintenance", uuid=uuid, stage=stage)


def run(params, conn, check_mode):
    result = dict(changed=False, plan=[], warnings=[])
    try:
        return _run(params, conn, result)
    except IchorError as exc:
        result["plan"].append("refused: %s" % exc)
        exc.result = result
        raise


def _run(params, conn, result):
    plan, warnings = result["plan"], result["warnings"]
    machines = sorted(params["machines"], key=lambda m: 0 if m["role"] == "controlplane" else 1)
    _machines_check(machines, plan, warnings)
    spec = cluster_spec(params["cluster"], machines)
    result["cluster_spec"] = spec
    refs = registry_auth.refs(spec)
    if refs:
        raise ConfigError("registries %s name credentials by authSecretRef, a Secret of the cluster init is about to "
                          "make: init cannot read it; make the cluster, create the Secret in %s, then give the registries "
                          "with authSecretRef to maesh.ichor.upgrade (its config step) or maesh.ichor.talos_machine_config"
                          % (", ".join(sorted(refs)), registry_auth.NAMESPACE))
    normalised = []
    for m in machines:  # every machine's own settings judged before anything is read or written
        try:
            machine = specs.machine(dict(_machine_spec(m), role=m["role"]), spec)
            render.refuse_unrenderable(spec, machine, spec["versionContract"])
        except ConfigError as exc:
            raise ConfigError("%s: %s" % (m["name"], exc))
        normalised.append((m["name"], machine))
    plan.append("release set: Talos %s, contract %s, Kubernetes %s, Cilium %s (no other versions)" % (
        release.TALOS, release.CONTRACT, release.KUBERNETES, release.CILIUM))
    plan.append("cluster %s, endpoint %s; CNI: the collection's Cilium (kube-proxy %s), KubePrism on %d" % (
        spec["name"], spec["endpoint"], spec["cni"]["kubeProxy"], spec["kubePrism"]["port"]))
    _vip_check(spec, normalised, plan, warnings)
    path = params.get("secrets")
    bundle = None
    if path and os.path.exists(path):
        bundle = secrets.validate(secrets.load(path), release.CONTRACT)
        plan.append("secrets bundle: %s (given; Talos CA %s)" % (path, bundle.fingerprint()))
    else:
        plan.append("secrets bundle: a new one, written to %s (0600)" % path if path else
                    "secrets bundle: a new one (name a file to keep it)")
    context = _authenticated(params)
    entries = []
    # every machine read at once (bounded), each on its own client; reads only, so a refusal still has sent nothing
    # anywhere: the first in inventory order is raised once every read has ended
    reads = fanout.each(lambda m: read_machine(params, context, bundle, m), machines)
    for m, read in zip(machines, reads):
        found = read.result()
        entry = dict(name=m["name"], node=m["node"], role=m["role"], uuid=found["uuid"], state=found["state"],
                     spec=_machine_spec(m))
        entries.append(entry)
        if found["state"] == "maintenance":
            plan.append("%s (%s): maintenance mode, UUID %s: gets the %s config at contract %s over the maintenance "
                        "API (installs and reboots)" % (m["name"], m["node"], found["uuid"] or "unknown", m["role"],
                                                        release.CONTRACT))
        else:
            plan.append("%s (%s): configured by this cluster (Talos %s, UUID %s): the same render, applied over the "
                        "authenticated API when it drifts" % (m["name"], m["node"], found["talos"], found["uuid"]))
        entry["etcd_members"] = found.get("etcd_members")
    result["machines"] = entries
    members = [e for e in entries if e.get("etcd_members")]
    first = [e for e in entries if e["role"] == "controlplane"][0]
    if members:
        result["bootstrap"] = dict(node=None, needed=False)
        plan.append("etcd: bootstrapped (%s lists %s): never bootstrapped again; new control planes join one at a "
                    "time, etcd healthy before and after each" % (members[0]["name"], ", ".join(members[0]["etcd_members"])))
    else:
        result["bootstrap"] = dict(node=first["node"], needed=True)
        plan.append("etcd: bootstrapped once, on %s (%s), after its config is applied" % (first["name"], first["node"]))
    result["joining"] = bool(members)
    kube = conn.kube() if conn.has_kube() else None
    result["pending"] = _pending(kube, entries, plan) if kube is not None else []
    plan.append("then: the kubeconfig (0600), the collection's Cilium %s (Helm release), the installer bundle, the "
                "cluster record and the secrets bundle Secret in ichor-system" % release.CILIUM)
    return result


def _pending(kube, entries, plan):
    """The cluster record's pending machines (reclaim's): joined when the inventory lists them (address or UUID)."""
    record = cluster_record.read(kube)
    pending = [p for p in record.get("machines") or [] if isinstance(p, dict) and p.get("state") == "pending"]
    listed = set(e["node"] for e in entries) | set(e["uuid"] for e in entries if e["uuid"])
    for p in pending:
        if p.get("address") in listed or p.get("uuid") in listed:
            plan.append("pending in the cluster record: %s (UUID %s): in the inventory, joins now" % (
                p.get("address"), p.get("uuid")))
        else:
            plan.append("pending in the cluster record: %s (UUID %s): not in the inventory; add it to the group "
                        "controlplane or worker to join it" % (p.get("address"), p.get("uuid")))
    return pending
