# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The flow of ``cilium_takeover``: every precondition, read-only, then the plan, then the takeover.

Order: helm and the chart (the set's version only), the running Cilium (none: nothing to take over;
already the collection's release: nothing to do, or only the foreign records left to retire), the
version rule, the owned keys (IPAM, tunnel, kube-proxy mode, KubePrism, the Talos guide's keys), the
values (the newest foreign record's, or ``cilium_values`` for a Cilium without one), health, and the
diff gate, which also lists every object of the foreign release that the chart does not render (orphans.py:
Helm's take-ownership leaves them owned by no release). A refusal carries the plan so far and ends with its
"refused:" line. Nothing up to here writes: the gate's dry runs are ``dryRun=All``, and check mode stops here.

The takeover: a ``pending-*`` record of ours left by a killed run is deleted (UID precondition), then
``helm upgrade --install --take-ownership`` stores the release in ichor-system with every object kept in
kube-system (never atomic, never an uninstall, no helm wait); once our record is deployed and the
DaemonSet and operator are ready on every node, the orphans are deleted when ``delete_orphans`` consents
(each backed up into its own Secret, read back, deleted by UID; re-created from the backups when a delete
fails), or else kept; the user's values, the tunnel and the kept orphans go into the cluster record; then
each foreign record is copied into its own backup Secret in ichor-system, read back and compared byte for
byte, and deleted only if it is still the same Secret (UID precondition).

With ``machines`` (the Talos connection), the machines are read too: the control planes' configs for a Cilium inline
manifest entry (found by content, machines.py), and every machine's KubePrism (health). The entry's name goes into the
cluster record with the rest, that is only once the hand-over is complete; the config rollout then renders the
machine configs without it (rollout/model.py). Nothing here writes to a machine.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.maesh.ichor.plugins.module_utils.cilium import chart as chart_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import gate as gate_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import helm as helm_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import live as live_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import machines as machines_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import orphans as orphans_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import record as record_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import release as release_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import values as values_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium.errors import CiliumError, Refused
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record

RELEASE = live_mod.RELEASE
RELEASE_NAMESPACE = live_mod.RELEASE_NAMESPACE
BACKUP_PREFIX = "ichor-cilium-prior."
BACKUP_OF = "ichor.maesh.dev/backup-of"


def options():
    """The module's own options (the Kubernetes connection options are added by ansible_module.specs)."""
    return dict(
        chart_mod.options(),
        kube_proxy=dict(type="str", choices=["enabled", "replaced"]),
        cilium_values=dict(type="dict"),
        accept_cilium_changes=dict(type="bool", default=False),
        accept_cilium_diff=dict(type="bool", default=False),
        delete_orphans=dict(type="bool", default=False),
    )


def _kube_proxy(plan, kube, expected, running):
    """The kube-proxy mode, detected and checked against the expected one and against Cilium's kubeProxyReplacement."""
    detected = live_mod.kube_proxy_mode(kube)
    where = "kube-system runs the kube-proxy DaemonSet" if detected == "enabled" else "no kube-proxy DaemonSet runs"
    if expected is not None and expected != detected:
        raise plan.refuse("kube_proxy is %s, but %s (%s); give the mode that runs (the cluster spec's cni.kubeProxy)" % (
            expected, where, detected))
    replaced = running.kube_proxy_replacement
    if detected == "replaced" and not replaced:
        raise plan.refuse("kube-proxy is disabled and Cilium's kubeProxyReplacement is false: nothing routes Services; "
                          "switch one of them deliberately first")
    if detected == "enabled" and replaced:
        raise plan.refuse("kube-proxy runs and Cilium's kubeProxyReplacement is true: two owners of Service routing; "
                          "disable one of them deliberately first")
    plan.say("kube-proxy: %s (%s; Cilium kubeProxyReplacement %s)" % (detected, where, str(replaced).lower()))
    return detected


def _owned(plan, running, ours, accept_changes):
    """Compare the owned keys as they run with the collection's; a change needs accept_cilium_changes."""
    rows, changes = [], []
    for key in ("k8sServiceHost", "k8sServicePort") + values_mod.GUIDE_KEYS:
        have, want = running.get(key), values_mod.get(ours, key)
        if isinstance(have, list) and isinstance(want, list):
            same = sorted(have) == sorted(want)
        else:
            same = have == want
        if same:
            action = "keep"
        elif key in values_mod.GUIDE_KEYS:
            action = "match"
            plan.say("owned %s: %s -> %s (made to match the Talos guide)" % (key, _text(have), _text(want)))
        else:
            action = "change"
            changes.append(key)
            plan.say("owned %s: %s -> %s (a change on the running data plane%s)" % (
                key, _text(have), _text(want), "; accepted" if accept_changes else ": needs accept_cilium_changes"))
        rows.append({"key": key, "running": have, "chart": want, "action": action})
    for key, have in (("ipam.mode", running["ipam.mode"]), ("tunnel", running["tunnel"]),
                      ("kubeProxyReplacement", running["kubeProxyReplacement"])):
        rows.append({"key": key, "running": have, "chart": have, "action": "keep"})
    return rows, changes


def _text(value):
    return "unset" if value is None else ",".join(value) if isinstance(value, list) else str(value)


def _user_values(plan, foreign, given):
    """(values, source): the newest foreign record's config, or cilium_values for a Cilium without one."""
    newest = record_mod.newest(foreign)
    if newest is not None:
        if given is not None:
            raise plan.refuse("cilium_values is for a Cilium without a Helm record; this one has %s, whose values are "
                              "lifted" % newest.ref)
        if newest.status != "deployed":
            plan.say("warning: the newest foreign record %s is %s, not deployed" % (newest.ref, newest.status))
        plan.say("values: lifted from %s (revision %d, %s, chart %s)" % (
            newest.ref, newest.revision, newest.status, newest.chart_version))
        return newest.config, "record"
    if given is not None:
        plan.say("values: cilium_values (this Cilium has no Helm record)")
        return given, "cilium_values"
    plan.say("values: none (no Helm record and no cilium_values): the chart's defaults and the owned keys; "
             "the gate shows what that changes")
    return {}, "defaults"


class Takeover:
    def __init__(self, params, kube, helm):
        self.params = params
        self.kube = kube
        self.helm = helm
        self.plan = chart_mod.Plan(step="none", cilium={}, records=[], values_source=None, values={}, user_values={},
                                   owned=[], health=[], gate=[], diff=[], inline_manifests=[], orphans=[])
        self.helm_done = False
        self.repair = None
        self.foreign = []
        self.running = self.chart = self.chart_version = self.effective = self.lifted = self.mode = None
        self.talos = None  # a TalosClient when machines are given
        self.views = None  # machines_mod.MachineView per machine
        self.inline = []  # names of the Cilium inline manifest entries in the control planes' configs
        self.inline_only = False  # the release is ours already: only the inline entry is left to record
        self.orphans = []  # orphans_mod.Orphan: what the foreign release owned and the chart does not render

    def preconditions(self):
        """Every read-only check; returns the Plan (its result says what a run would do)."""
        plan, kube, params = self.plan, self.kube, self.params
        stored = cluster_record.read(kube).data
        if release_mod.unmanaged(stored):  # adopted with its CNI left alone
            raise plan.refuse(release_mod.UNMANAGED)
        self.chart, chart_version = chart_mod.resolve(self.helm, params, plan.say)
        running = live_mod.read(kube)
        if running is None:
            raise plan.refuse("no Cilium runs here (no DaemonSet %s/%s): there is nothing to take over" % (
                live_mod.NAMESPACE, live_mod.DAEMONSET))
        foreign = live_mod.foreign_records(kube, running)
        own = live_mod.records(kube, RELEASE_NAMESPACE, RELEASE)
        plan.result["records"] = [r.summary() for r in foreign]
        plan.result["cilium"] = {"version": running.version, "image": running.image, "chart": chart_version}
        self.foreign, self.running = foreign, running
        newest_own = record_mod.newest(own)
        recorded = (stored.get("cilium") or {}).get("release") == "%s/%s" % (RELEASE_NAMESPACE, RELEASE)
        if running.helm_release == (RELEASE, RELEASE_NAMESPACE) and newest_own is not None and \
                newest_own.status == "deployed":
            if not foreign and recorded:
                self._inline(warn=False)
                if self.inline and not set(self.inline) <= set(_recorded_inline(kube)):
                    plan.say("Cilium %s is already the Helm release %s/%s; the inline manifest %s is not in the "
                             "cluster record yet: record it" % (running.version, RELEASE_NAMESPACE, RELEASE,
                                                                ", ".join(self.inline)))
                    say_inline_steps(plan.say, self.inline)
                    self.inline_only = True
                    plan.result["changed"] = True
                    return plan
                plan.say("Cilium %s is already the Helm release %s/%s: nothing to take over" % (
                    running.version, RELEASE_NAMESPACE, RELEASE))
                return plan
            plan.say("Cilium %s is already the Helm release %s/%s, but %s: finish the hand-over" % (
                running.version, RELEASE_NAMESPACE, RELEASE,
                "the foreign records are still there (a run stopped before retiring them)" if foreign else
                "the cluster record does not name it yet (a run stopped before recording it)"))
            self.helm_done = True
        if newest_own is not None and newest_own.status in chart_mod.PENDING:
            self.repair = newest_own
            plan.say("repair: delete %s (%s, left by a run that was stopped; uid %s), then take over" % (
                newest_own.ref, newest_own.status, newest_own.uid))
        try:
            step = live_mod.version_step(running.version, chart_version, result=plan.result)
        except Refused as exc:
            plan.say("refused: " + exc.message)
            raise
        plan.result["step"] = step
        plan.say("Cilium %s runs (DaemonSet %s/%s): %s" % (
            running.version, live_mod.NAMESPACE, live_mod.DAEMONSET,
            "takeover at the same minor" if step == "takeover" else
            "an older minor: the takeover is an upgrade to %s" % chart_version))
        owned_running = running.owned_as_running()
        if running.ipam != "kubernetes":
            raise plan.refuse("Cilium runs IPAM mode %s; only kubernetes is taken over: changing IPAM renumbers every "
                              "pod (never accepted)" % running.ipam)
        if running.tunnel not in values_mod.TUNNELS:
            raise plan.refuse("Cilium runs tunnel %r, which the collection does not know (vxlan, geneve, native)" %
                              running.tunnel)
        plan.say("tunnel: %s (kept; immutable after the takeover)" % running.tunnel)
        mode = _kube_proxy(plan, kube, params.get("kube_proxy"), running)
        ours = values_mod.owned(mode, running.tunnel, params.get("kubeprism_port") or values_mod.KUBEPRISM_PORT)
        rows, changes = _owned(plan, owned_running, ours, self.params["accept_cilium_changes"])
        plan.result["owned"] = rows
        plan.result["cilium"].update({"kube_proxy": mode, "tunnel": running.tunnel, "ipam": running.ipam})
        user, source = _user_values(plan, foreign, params.get("cilium_values"))
        lifted, taken = values_mod.lift(user)
        if taken:
            plan.say("owned keys in the user's values, set by the collection instead: %s" % ", ".join(sorted(taken)))
        for key in sorted(taken):
            if key in ("tunnel", "tunnelProtocol", "routingMode", "kubeProxyReplacement", "ipam.mode") or \
                    values_mod.get(ours, key) == taken[key]:
                continue
            plan.say("owned %s: the user's values say %s, the collection sets %s" % (
                key, _text(taken[key]), _text(values_mod.get(ours, key))))
        nodes = live_mod.node_count(kube)
        effective = values_mod.effective(nodes, lifted, ours)
        plan.result.update({"values_source": source, "user_values": lifted, "values": effective})
        self.effective, self.lifted, self.mode, self.chart_version = effective, lifted, mode, chart_version
        plan.result["cilium"]["nodes"] = nodes
        healthy, lines = live_mod.health(running, nodes)
        prism_ok, prism_lines = self._kubeprism(params.get("kubeprism_port") or values_mod.KUBEPRISM_PORT)
        healthy, lines = healthy and prism_ok, lines + prism_lines
        plan.result["health"] = lines
        if self._machines() is None:
            plan.say("health: KubePrism not checked (no machines given, so their Talos API is not read)")
        for line in lines:
            plan.say("health: " + line)
        if not healthy:
            raise plan.refuse("Cilium is not healthy (%s); fix it before the takeover" % "; ".join(lines))
        if changes and not params["accept_cilium_changes"]:
            raise plan.refuse("the takeover would change %s on the running data plane; set accept_cilium_changes to "
                              "accept" % ", ".join(changes))
        self._inline()
        self._gate(effective, chart_version)
        self._steps(running, foreign, step, chart_version)
        plan.result["changed"] = True
        return plan

    def _gate(self, effective, chart_version):
        plan, kube = self.plan, self.kube
        manifest = self.helm.template(self.chart, RELEASE, RELEASE_NAMESPACE, effective, live_mod.server_version(kube),
                                      live_mod.api_versions(kube))
        rendered = helm_mod.documents(manifest)
        found = gate_mod.run(kube, rendered, RELEASE_NAMESPACE, "chart %s" % chart_version)
        plan.result["gate"] = found.entries
        plan.result["diff"] = found.diff
        plan.say(found.summary())
        for line in found.lines() + ["gate: skipped " + s for s in found.skipped]:
            plan.say(line)
        self._orphans(rendered, "chart %s" % chart_version)
        if found.invalid:
            raise plan.refuse("the API server refuses %d of the chart's objects over the live ones: %s" % (
                len(found.invalid), "; ".join("%s: %s" % (e["object"], e["live"]) for e in found.invalid)))
        if not found.empty and not self.params["accept_cilium_diff"]:
            raise plan.refuse("%s; review them (--diff shows each object) and set accept_cilium_diff to accept" %
                              found.summary())

    def _orphans(self, rendered, chart_label):
        """What the foreign release owned and the chart does not render: listed by the gate, kept or deleted."""
        plan = self.plan
        if not self.foreign:
            return
        consent = bool(self.params.get("delete_orphans"))
        self.orphans, notes = orphans_mod.find(self.kube, self.foreign, rendered, RELEASE_NAMESPACE)
        for orphan in self.orphans:
            orphan.delete = consent and not orphan.policy_keep
        plan.result["orphans"] = [o.summary() for o in self.orphans]
        if self.orphans:
            plan.say("diff gate: %d object%s of the foreign release that %s does not render (Helm's take-ownership "
                     "leaves %s owned by no release)" % (len(self.orphans), "" if len(self.orphans) == 1 else "s",
                                                         chart_label, "it" if len(self.orphans) == 1 else "them"))
        for line in orphans_mod.lines(self.orphans, chart_label, consent) + ["gate: " + n for n in notes]:
            plan.say(line)
        plan.result["diff"] += [orphans_mod.diff(o) for o in self.orphans if o.delete]

    def _steps(self, running, foreign, step, chart_version):
        say = self.plan.say
        if not self.helm_done:
            say("takeover: helm upgrade --install %s <chart %s> --namespace %s --take-ownership (never atomic, never an "
                "uninstall); every object stays in %s (namespaceOverride)" % (
                    RELEASE, chart_version, RELEASE_NAMESPACE, live_mod.NAMESPACE))
            if step == "upgrade":
                say("upgrade: Cilium %s -> %s" % (running.version, chart_version))
        say("wait: DaemonSet %s/%s and Deployment %s/%s ready on every node" % (
            live_mod.NAMESPACE, live_mod.DAEMONSET, live_mod.NAMESPACE, live_mod.OPERATOR))
        say("cluster record: the user's values and the tunnel go into %s/%s" % (cluster_record.NAMESPACE,
                                                                                cluster_record.NAME))
        if self.inline:
            say_inline_steps(say, self.inline)
        for orphan in self.orphans:
            if orphan.delete:
                say("back up %s into %s/%s, read it back, then delete it (uid %s, only if still the same object "
                    "and the foreign release's), before the foreign records are retired" % (
                        orphan.ref, RELEASE_NAMESPACE, orphans_mod.backup_name(orphan), orphan.uid))
            else:
                say("keep: %s (uid %s), owned by no release; it is listed in the cluster record %s/%s" % (
                    orphan.ref, orphan.uid, cluster_record.NAMESPACE, cluster_record.NAME))
        for rec in foreign:
            say("back up foreign record %s into %s/%s, read it back, compare byte for byte" % (
                rec.ref, RELEASE_NAMESPACE, backup_name(rec)))
            say("delete foreign record %s (uid %s, only if still the same Secret)" % (rec.ref, rec.uid))

    # -- the takeover -----------------------------------------------------------------------
    def apply(self, wait=True, wait_timeout=600.0, clock=None):
        """Write what the plan says; returns the result. Only after preconditions() said changed."""
        plan, kube = self.plan, self.kube
        if self.inline_only:
            self._record_inline()
            return plan.result
        if not self.helm_done:
            if self.repair is not None:
                chart_mod.delete_record(kube, self.repair)
                plan.say("repaired: deleted %s" % self.repair.ref)
            self.helm.upgrade_install(self.chart, RELEASE, RELEASE_NAMESPACE, self.effective)
            newest = record_mod.newest(live_mod.records(kube, RELEASE_NAMESPACE, RELEASE))
            if newest is None or newest.status != "deployed":
                raise CiliumError("helm finished but the release %s/%s is %s, not deployed; the foreign records are kept"
                                  % (RELEASE_NAMESPACE, RELEASE, newest.status if newest else "missing"),
                                  result=plan.result)
            plan.say("done: the Helm release %s/%s is deployed (revision %d, chart %s)" % (
                RELEASE_NAMESPACE, RELEASE, newest.revision, newest.chart_version))
        if not self._ready(wait, wait_timeout, clock):
            return plan.result
        if any(o.delete for o in self.orphans):
            plan.result["orphan_backups"] = orphans_mod.Retirement(kube, RELEASE_NAMESPACE, plan.say,
                                                                   plan.result).run(self.orphans)
        self._record()
        plan.result["backups"] = [self._retire(rec) for rec in self.foreign]
        return plan.result

    def _ready(self, wait, wait_timeout, clock):
        return chart_mod.ready(self.kube, self.plan, wait, wait_timeout, clock,
                               "Cilium is not ready after the takeover (%s); the foreign records are kept: rerun to "
                               "finish")

    def _retire(self, rec):
        """Back the record up into its own Secret, check the copy byte for byte, delete the record (same UID)."""
        kube, name = self.kube, backup_name(rec)
        data = rec.secret.get("data") or {}
        existing = kube.get("v1", "Secret", name, RELEASE_NAMESPACE)
        if existing is None:
            kube.create(backup_secret(rec))
            existing = kube.get("v1", "Secret", name, RELEASE_NAMESPACE)
        if (existing or {}).get("data") != data:
            raise CiliumError("the backup %s/%s of %s is not byte-identical to it; the record is kept" % (
                RELEASE_NAMESPACE, name, rec.ref), result=self.plan.result)
        self.plan.say("backed up: %s into %s/%s (%d bytes, read back identical)" % (
            rec.ref, RELEASE_NAMESPACE, name, len(data.get("release", ""))))
        chart_mod.delete_record(kube, rec)
        self.plan.say("deleted: foreign record %s" % rec.ref)
        return {"record": rec.ref, "backup": "%s/%s" % (RELEASE_NAMESPACE, name), "uid": rec.uid}

    def _record(self):
        wanted = {"release": "%s/%s" % (RELEASE_NAMESPACE, RELEASE), "chart": self.chart_version,
                  "values": self.lifted, "tunnel": self.running.tunnel, "kubeProxy": self.mode}
        kept = [dict((k, v) for k, v in o.summary().items() if k != "action") for o in self.orphans if not o.delete]
        if kept:
            wanted[ORPHANS_KEY] = kept  # owned by no release once the foreign records are retired

        def mutate(data):
            # the inline entries recorded before stay: a rerun without machines does not forget them
            names = _inline_names(data.get("cilium")) | set(self.inline)
            data["cilium"] = dict(wanted, **({INLINE_KEY: sorted(names)} if names else {}))
        changed = cluster_record.update(self.kube, mutate)[2]
        if changed:
            self.plan.say("cluster record: cilium = release %s, tunnel %s, the user's values%s%s" % (
                wanted["release"], wanted["tunnel"],
                ", inline manifest %s (handed over)" % ", ".join(self.inline) if self.inline else "",
                ", %d object%s owned by no release (%s)" % (len(kept), "" if len(kept) == 1 else "s",
                                                            ", ".join(o["object"] for o in kept)) if kept else ""))

    def _record_inline(self):
        def mutate(data):
            cilium = data.get("cilium") if isinstance(data.get("cilium"), dict) else {}
            data["cilium"] = dict(cilium, **{INLINE_KEY: sorted(_inline_names(cilium) | set(self.inline))})
        if cluster_record.update(self.kube, mutate)[2]:
            self.plan.say("cluster record: cilium inline manifest %s (handed over)" % ", ".join(self.inline))

    # -- the machines -----------------------------------------------------------------------
    def _machines(self):
        """The MachineViews (read once), or None without machines."""
        if self.views is None and self.params.get("machines") and self.talos is not None:
            self.views = machines_mod.read(self.talos, self.params["machines"])
        return self.views

    def _kubeprism(self, port):
        """(answering on every machine, lines); without machines it cannot be read, and the plan says so."""
        views = self._machines()
        if views is None:
            return True, []
        results = [view.kubeprism(port) for view in views]
        return all(ok for ok, _line in results), [line for _ok, line in results]

    def _inline(self, warn=True):
        """Find the Cilium inline manifest entry in the control planes' configs (by content) and plan it."""
        views = self._machines()
        if views is None:
            if warn and not self.foreign:
                self.plan.say("warning: no machines given: the control planes' configs were not read for a Cilium "
                              "inline manifest (a Cilium without a Helm record may have come from one)")
            return
        cps = [v for v in views if v.role == "controlplane"]
        names = sorted(set(name for v in cps for name, _where in v.inline))
        self.inline = names
        self.plan.result["inline_manifests"] = [{"machine": v.name, "name": name, "in": where}
                                                for v in cps for name, where in v.inline]
        if not names:
            self.plan.say("inline manifest: none of the control planes' configs (%s) holds the cilium DaemonSet" %
                          ", ".join(v.name for v in cps))
            return
        for name in names:
            holders = [v.name for v in cps if name in [n for n, _w in v.inline]]
            self.plan.say("inline manifest: %s in the config of %s holds the DaemonSet %s/%s" % (
                name, ", ".join(holders), live_mod.NAMESPACE, live_mod.DAEMONSET))


INLINE_KEY = "inlineManifests"
ORPHANS_KEY = "orphans"


def _inline_names(cilium):
    names = (cilium or {}).get(INLINE_KEY) if isinstance(cilium, dict) else None
    return set(n for n in names if isinstance(n, str)) if isinstance(names, list) else set()


def _recorded_inline(kube):
    return _inline_names(cluster_record.read(kube).get("cilium"))


def say_inline_steps(say, names):
    say("cluster record: the inline manifest %s goes into %s/%s once the hand-over is complete; the next config "
        "step (maesh.ichor.config_upgrade) then renders the machine configs without it (Talos never deletes what it "
        "applied, so the objects stay)" % (", ".join(names), cluster_record.NAMESPACE, cluster_record.NAME))


def backup_name(rec):
    return BACKUP_PREFIX + "%s.%s" % (rec.namespace, rec.name)


def backup_secret(rec):
    """The record's data, byte for byte, in a Secret Helm does not read as a record (no owner=helm label)."""
    meta = rec.secret.get("metadata") or {}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": backup_name(rec), "namespace": RELEASE_NAMESPACE,
                         "labels": {"app.kubernetes.io/managed-by": "maesh.ichor", BACKUP_OF: "helm-release"},
                         "annotations": {BACKUP_OF: rec.ref, "ichor.maesh.dev/backup-uid": rec.uid or "",
                                         "ichor.maesh.dev/backup-type": rec.secret.get("type") or "",
                                         "ichor.maesh.dev/backup-labels": json.dumps(meta.get("labels") or {},
                                                                                     sort_keys=True)}},
            "data": dict(rec.secret.get("data") or {})}


def run(params, conn, check_mode, clock=None):
    """The module's backend: the preconditions and the gate; outside check mode, the takeover."""
    kube = conn.kube()
    with chart_mod.helm(params) as helm:
        takeover = Takeover(params, kube, helm)
        if params.get("machines"):
            takeover.talos = conn.talos()
        try:
            plan = takeover.preconditions()
        except IchorError as exc:
            if exc.result is None:  # helm, the chart or the API server failed: the plan so far goes with it
                exc.result = takeover.plan.result
            raise
        if not plan.result["changed"] or check_mode:
            return plan.result
        return takeover.apply(params.get("wait", True), float(params.get("wait_timeout") or 600), clock)
