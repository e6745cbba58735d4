# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``cilium_takeover``: the variant ``Takeover`` of the Cilium pipeline (pipeline.py): a running Cilium made the
collection's Helm release. Its own stages:

* what runs: a running Cilium and the records of the foreign release that installed it; already our release: nothing
  to do, its inline entry left to record, or the hand-over left to finish; the version rule of live.py;
* the network: IPAM ``kubernetes`` only, a known tunnel (kept), the kube-proxy mode as detected and agreeing with
  Cilium's kubeProxyReplacement;
* the user's values: the owned keys as they run against ours (a change needs ``accept_cilium_changes``, the Talos
  guide's keys are matched), then the newest foreign record's values, or ``cilium_values`` for a Cilium without one;
* the checks: health, consent, the inline entry; the gate's verdict: the orphans listed (what the foreign release
  owned and the chart does not render, orphans.py), a difference needs ``accept_cilium_diff``;
* the hand-over (the act): ``helm upgrade --install --take-ownership`` stores the release in ichor-system with every
  object kept in kube-system (no helm wait); once Cilium is ready, the orphans are deleted when ``delete_orphans``
  consents (each backed up, read back, deleted by UID; re-created from the backups when a delete fails), else kept;
  the user's values, the tunnel and the kept orphans go into the cluster record; then each foreign record is backed up
  into its own Secret in ichor-system, read back and compared byte for byte, and deleted only while it is the same
  Secret (UID precondition).

With ``machines`` (the Talos connection) the control planes' configs are read for a Cilium inline manifest entry
(found by content, machines.py) and every machine for KubePrism (health). The entry's name goes into the cluster
record once the hand-over is complete; the config rollout then renders the configs without it (rollout/model.py).
Nothing here writes to a machine.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.maesh.ichor.plugins.module_utils.cilium import live as live_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import machines as machines_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import orphans as orphans_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import pipeline
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import record as record_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import values as values_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium.errors import CiliumError
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record

RELEASE = pipeline.RELEASE
RELEASE_NAMESPACE = pipeline.RELEASE_NAMESPACE
BACKUP_PREFIX = "ichor-cilium-prior."
BACKUP_OF = "ichor.maesh.dev/backup-of"
INLINE_KEY = "inlineManifests"
ORPHANS_KEY = "orphans"
# owned keys the user's values may set otherwise without a word: what runs decides them
_AS_RUNNING = ("tunnel", "tunnelProtocol", "routingMode", "kubeProxyReplacement", "ipam.mode")


def options():
    return pipeline.options(accept_cilium_changes=dict(type="bool", default=False),
                            accept_cilium_diff=dict(type="bool", default=False),
                            delete_orphans=dict(type="bool", default=False))


# -- the pure rules ------------------------------------------------------------------------------
def ipam_refusal(ipam):
    if ipam != "kubernetes":
        return ("Cilium runs IPAM mode %s; only kubernetes is taken over: changing IPAM renumbers every pod (never "
                "accepted)" % ipam)


def kube_proxy_refusal(expected, detected, replaced):
    """Refusal when the mode given is not the one detected, or Service routing has no owner or two (kube-proxy and
    Cilium's kubeProxyReplacement ``replaced``)."""
    if expected is not None and expected != detected:
        return "kube_proxy is %s, but %s (%s); give the mode that runs (the cluster spec's cni.kubeProxy)" % (
            expected, pipeline.kube_proxy_where(detected), detected)
    if detected == "replaced" and not replaced:
        return ("kube-proxy is disabled and Cilium's kubeProxyReplacement is false: nothing routes Services; "
                "switch one of them deliberately first")
    if detected == "enabled" and replaced:
        return ("kube-proxy runs and Cilium's kubeProxyReplacement is true: two owners of Service routing; "
                "disable one of them deliberately first")


def owned_rows(say, running, ours, accept_changes):
    """(rows, changes): the owned keys as they run against the collection's; a change needs accept_cilium_changes."""
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
            say("owned %s: %s -> %s (made to match the Talos guide)" % (key, _shown(have), _shown(want)))
        else:
            action = "change"
            changes.append(key)
            say("owned %s: %s -> %s (a change on the running data plane%s)" % (
                key, _shown(have), _shown(want), "; accepted" if accept_changes else ": needs accept_cilium_changes"))
        rows.append({"key": key, "running": have, "chart": want, "action": action})
    for key in ("ipam.mode", "tunnel", "kubeProxyReplacement"):
        rows.append({"key": key, "running": running[key], "chart": running[key], "action": "keep"})
    return rows, changes


def overridden(say, taken, ours):
    """A line per owned key the user's values set otherwise (those that what runs decides aside)."""
    for key in sorted(taken):
        if key not in _AS_RUNNING and values_mod.get(ours, key) != taken[key]:
            say("owned %s: the user's values say %s, the collection sets %s" % (
                key, _shown(taken[key]), _shown(values_mod.get(ours, key))))


def unaccepted_changes(changes, accept):
    if changes and not accept:
        return "the takeover would change %s on the running data plane; set accept_cilium_changes to accept" % (
            ", ".join(changes))


def unaccepted_diff(found, accept):
    if not found.empty and not accept:
        return "%s; review them (--diff shows each object) and set accept_cilium_diff to accept" % found.summary()


def _shown(value):
    return "unset" if value is None else ",".join(value) if isinstance(value, list) else str(value)


def _user_values(plan, foreign, given):
    """(source, values): the newest foreign record's config, or cilium_values for a Cilium without one."""
    newest = record_mod.newest(foreign)
    if newest is not None:
        if given is not None:
            raise plan.refuse("cilium_values is for a Cilium without a Helm record; this one has %s, whose values are "
                              "lifted" % newest.ref)
        if newest.status != "deployed":
            plan.say("warning: the newest foreign record %s is %s, not deployed" % (newest.ref, newest.status))
        plan.say("values: lifted from %s (revision %d, %s, chart %s)" % (
            newest.ref, newest.revision, newest.status, newest.chart_version))
        return "record", newest.config
    if given is not None:
        plan.say("values: cilium_values (this Cilium has no Helm record)")
        return "cilium_values", given
    plan.say("values: none (no Helm record and no cilium_values): the chart's defaults and the owned keys; "
             "the gate shows what that changes")
    return "defaults", {}


class Takeover(pipeline.Flow):
    NOT_DEPLOYED = "the foreign records are kept"
    NOT_READY = "Cilium is not ready after the takeover (%s); the foreign records are kept: rerun to finish"

    def __init__(self, params, kube, helm, clock=None):
        super(Takeover, self).__init__(params, kube, helm, pipeline.Plan(
            step="none", cilium={}, records=[], values_source=None, values={}, user_values={}, owned=[], health=[],
            gate=[], diff=[], inline_manifests=[], orphans=[]), clock)
        self.helm_done = False  # our release is deployed already: the hand-over is left to finish
        self.foreign = []  # the foreign release's records
        self.changes = []  # owned keys the takeover changes on the running data plane
        self.talos = None  # a TalosClient when machines are given
        self.views = None  # machines_mod.MachineView per machine
        self.inline = []  # names of the Cilium inline manifest entries in the control planes' configs
        self.inline_only = False  # the release is ours already: only the inline entry is left to record
        self.orphans = []  # orphans_mod.Orphan: what the foreign release owned and the chart does not render

    # -- the stages ---------------------------------------------------------------------------
    def read_running(self):
        plan, kube = self.plan, self.kube
        running = live_mod.read(kube)
        if running is None:
            raise plan.refuse("no Cilium runs here (no DaemonSet %s/%s): there is nothing to take over" % (
                live_mod.NAMESPACE, live_mod.DAEMONSET))
        self.running, self.foreign = running, live_mod.foreign_records(kube, running)
        own = live_mod.records(kube, RELEASE_NAMESPACE, RELEASE)
        plan.result["records"] = [r.summary() for r in self.foreign]
        plan.result["cilium"] = {"version": running.version, "image": running.image, "chart": self.chart_version}
        if self._handed_over(record_mod.newest(own)):
            return False
        self.pending(own, ", then take over")
        self.step = plan.result["step"] = self.version_step(live_mod.version_step, running.version)
        plan.say("Cilium %s runs (DaemonSet %s/%s): %s" % (
            running.version, live_mod.NAMESPACE, live_mod.DAEMONSET,
            "takeover at the same minor" if self.step == "takeover" else
            "an older minor: the takeover is an upgrade to %s" % self.chart_version))
        return True

    def _handed_over(self, newest_own):
        """Whether the run ends here: what runs is our deployed release, the cluster record names it and no foreign
        record is left (an inline entry may be left to record). Ours but unfinished: helm is done already."""
        plan, running = self.plan, self.running
        if running.helm_release != (RELEASE, RELEASE_NAMESPACE) or (newest_own and newest_own.status) != "deployed":
            return False
        if not self.foreign and self.recorded().get("release") == pipeline.RELEASE_REF:
            self._inline(warn=False)
            if self.inline and not set(self.inline) <= _inline_names(self.recorded()):
                plan.say("Cilium %s is already the Helm release %s; the inline manifest %s is not in the cluster "
                         "record yet: record it" % (running.version, pipeline.RELEASE_REF, ", ".join(self.inline)))
                say_inline_steps(plan.say, self.inline)
                self.inline_only = True
                plan.result["changed"] = True
            else:
                plan.say("Cilium %s is already the Helm release %s: nothing to take over" % (
                    running.version, pipeline.RELEASE_REF))
            return True
        plan.say("Cilium %s is already the Helm release %s, but %s: finish the hand-over" % (
            running.version, pipeline.RELEASE_REF,
            "the foreign records are still there (a run stopped before retiring them)" if self.foreign else
            "the cluster record does not name it yet (a run stopped before recording it)"))
        self.helm_done = True
        return False

    def network(self):
        plan, running = self.plan, self.running
        self.refuse_if(ipam_refusal(running.ipam))
        self.refuse_if(pipeline.unknown_tunnel(running.tunnel))
        plan.say("tunnel: %s (kept; immutable after the takeover)" % running.tunnel)
        detected, replaced = live_mod.kube_proxy_mode(self.kube), running.kube_proxy_replacement
        self.refuse_if(kube_proxy_refusal(self.params.get("kube_proxy"), detected, replaced))
        plan.say("kube-proxy: %s (%s; Cilium kubeProxyReplacement %s)" % (
            detected, pipeline.kube_proxy_where(detected), str(replaced).lower()))
        return detected, running.tunnel

    def user_values(self, owned):
        plan = self.plan
        rows, self.changes = owned_rows(plan.say, self.running.owned_as_running(), owned,
                                        self.params["accept_cilium_changes"])
        plan.result["owned"] = rows
        plan.result["cilium"].update({"kube_proxy": self.mode, "tunnel": self.tunnel, "ipam": self.running.ipam})
        return _user_values(plan, self.foreign, self.params.get("cilium_values"))

    def decide(self, nodes, owned, taken):
        """Health (KubePrism too, with machines), consent to the owned changes, the machines' inline entry."""
        plan = self.plan
        overridden(plan.say, taken, owned)
        plan.result["cilium"]["nodes"] = nodes
        healthy, lines = live_mod.health(self.running, nodes)
        prism_ok, prism_lines = self._kubeprism(self.kubeprism_port)
        healthy, lines = healthy and prism_ok, lines + prism_lines
        plan.result["health"] = lines
        if self._machines() is None:
            plan.say("health: KubePrism not checked (no machines given, so their Talos API is not read)")
        for line in lines:
            plan.say("health: " + line)
        if not healthy:
            raise plan.refuse("Cilium is not healthy (%s); fix it before the takeover" % "; ".join(lines))
        self.refuse_if(unaccepted_changes(self.changes, self.params["accept_cilium_changes"]))
        self._inline()

    def judge(self, found, rendered):
        self._orphans(rendered, "chart %s" % self.chart_version)
        self.refuse_if(pipeline.refused_objects(found))
        self.refuse_if(unaccepted_diff(found, self.params["accept_cilium_diff"]))
        self._steps()
        self.plan.result["changed"] = True

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

    def _steps(self):
        say = self.plan.say
        if not self.helm_done:
            say("takeover: helm upgrade --install %s <chart %s> --namespace %s --take-ownership (never atomic, never an "
                "uninstall); every object stays in %s (namespaceOverride)" % (
                    RELEASE, self.chart_version, RELEASE_NAMESPACE, live_mod.NAMESPACE))
            if self.step == "upgrade":
                say("upgrade: Cilium %s -> %s" % (self.running.version, self.chart_version))
        say(pipeline.WAIT)
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
        for rec in self.foreign:
            say("back up foreign record %s into %s/%s, read it back, compare byte for byte" % (
                rec.ref, RELEASE_NAMESPACE, backup_name(rec)))
            say("delete foreign record %s (uid %s, only if still the same Secret)" % (rec.ref, rec.uid))

    # -- the hand-over ------------------------------------------------------------------------
    def apply(self, wait=True, wait_timeout=600.0):
        """Write what the plan says; returns the result. Only after preconditions() said changed."""
        plan, kube = self.plan, self.kube
        if self.inline_only:
            self._record_inline()
            return plan.result
        if not self.helm_done:
            self.install(lambda: self.helm.upgrade_install(self.chart, RELEASE, RELEASE_NAMESPACE, self.effective))
        if not self.ready(wait, wait_timeout):
            return plan.result
        if any(o.delete for o in self.orphans):
            plan.result["orphan_backups"] = orphans_mod.Retirement(kube, RELEASE_NAMESPACE, plan.say,
                                                                   plan.result).run(self.orphans)
        self._record()
        plan.result["backups"] = [self._retire(rec) for rec in self.foreign]
        return plan.result

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
        pipeline.delete_record(kube, rec)
        self.plan.say("deleted: foreign record %s" % rec.ref)
        return {"record": rec.ref, "backup": "%s/%s" % (RELEASE_NAMESPACE, name), "uid": rec.uid}

    def _record(self):
        wanted = self.record_keys()
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


def _inline_names(cilium):
    names = (cilium or {}).get(INLINE_KEY) if isinstance(cilium, dict) else None
    return set(n for n in names if isinstance(n, str)) if isinstance(names, list) else set()


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
    """The module's backend: the pipeline with this variant, which reads the machines' Talos API when given them."""
    def takeover(kube, helm):
        flow = Takeover(params, kube, helm, clock=clock)
        if params.get("machines"):
            flow.talos = conn.talos()
        return flow
    return pipeline.run(params, conn, check_mode, takeover)
