# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The flow of ``cilium_release``: the collection's Helm release ``cilium`` after the takeover, and at init.

The release is stored in ichor-system with every object in kube-system (``namespaceOverride``, as the
takeover made it). Its values are the user's (the cluster record's key ``cilium``, written by the takeover,
or ``cilium_values``) merged with the owned keys and the operator-replica rule. A values change and a chart
upgrade are one ``helm upgrade`` (never atomic, never an uninstall), one minor at a time: the release's chart
(its newest deployed record) equals the set's minor or is exactly one lower; a skipped minor and a downgrade
are refused. Without a release of ours it is refused ("run cilium_takeover first"), unless ``install`` is
set and no Cilium runs (init). A ``pending-*`` record of ours, left by a run that was stopped, is deleted
first (UID precondition), as the takeover repairs it.

Read-only up to the plan: the cluster record (a CNI ``unmanaged`` is refused), helm and the chart, the
records, the running Cilium, the kube-proxy mode, the Nodes, and the takeover's diff gate (``helm template``
with the effective values, server-side dry runs). Whether anything is applied is decided by the release
record: its chart and its values against the effective ones, so a second run changes nothing.

A failed ``helm upgrade`` is retried: ATTEMPTS runs in all, waiting BACKOFF_BASE seconds after the first
failure, doubled after each further one, at most BACKOFF_CAP (5, 10, 20, 30, 30 s).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import time

try:
    import yaml
except ImportError:  # helm.Helm says what is missing
    yaml = None

from ansible_collections.maesh.ichor.plugins.module_utils.common import release as release_set
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import chart as chart_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import gate as gate_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import helm as helm_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import live as live_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import record as record_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import values as values_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium.errors import CiliumError, HelmError, Refused
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record

RELEASE = live_mod.RELEASE
RELEASE_NAMESPACE = live_mod.RELEASE_NAMESPACE
UNMANAGED = "the CNI is not managed by Ichor (spec.cni.preset: unmanaged)"
DESCRIPTION = "maesh.ichor cilium_release"
# the retries of a failed helm apply: runs in all, first wait, cap (seconds)
ATTEMPTS = 6
BACKOFF_BASE = 5.0
BACKOFF_CAP = 30.0


def options():
    """The module's own options (the Kubernetes connection options are added by ansible_module.specs)."""
    return dict(
        chart_mod.options(),
        install=dict(type="bool", default=False),
        cilium_values=dict(type="dict"),
        kube_proxy=dict(type="str", choices=["enabled", "replaced"]),
        tunnel=dict(type="str", choices=list(values_mod.TUNNELS)),
        control_planes=dict(type="int"),
    )


# -- the pure rules ------------------------------------------------------------------------------
def backoff(failures):
    """Seconds to wait after the ``failures``-th failed attempt: BACKOFF_BASE doubled per failure, capped."""
    return min(BACKOFF_BASE * (2 ** (max(failures, 1) - 1)), BACKOFF_CAP)


def operator_replicas(nodes, control_planes=None):
    """1 when the spec has one control plane (workers included) or the cluster one Node; None (the chart's
    default) with two or more Nodes. Every Node counts, Ready or not; 0 Nodes (unknown) falls back to the
    control-plane count."""
    if control_planes == 1 or nodes == 1:
        return 1
    return None


def preset(nodes, control_planes=None):
    replicas = operator_replicas(nodes, control_planes)
    return {"operator": {"replicas": replicas}} if replicas is not None else {}


def effective(nodes, control_planes, user_values, owned_values):
    """chart defaults < the operator-replica preset < the user's values (owned keys removed) < the owned keys."""
    lifted = values_mod.lift(user_values)[0]
    return values_mod.merge(values_mod.merge(preset(nodes, control_planes), lifted), owned_values)


def version_step(current, chart_version, result=None):
    """The step from the release's chart to the set's: "same" (that very version), "upgrade" (a newer patch of
    the same minor, or exactly the next minor); a downgrade and a skipped minor are refused."""
    have, want = release_set.parse(current), release_set.parse(chart_version)
    if have == want:
        return "same"
    if have > want:
        raise Refused("the Cilium release runs chart %s, newer than this collection's %s: refusing a downgrade; use "
                      "a maesh.ichor whose release set has Cilium %s or later" % (current, chart_version, current),
                      result=result)
    if have[:2] == want[:2] or (have[0] == want[0] and have[1] == want[1] - 1):
        return "upgrade"
    raise Refused("the Cilium release runs chart %s, more than one minor below %s: Cilium moves one minor at a time; "
                  "upgrade it to %d.%d first with a maesh.ichor whose release set has that minor" % (
                      current, chart_version, want[0], want[1] - 1), result=result)


def unmanaged(record_data):
    """Whether the cluster record's spec says the CNI is not managed (spec.cni.preset: unmanaged)."""
    cluster = (record_data or {}).get("cluster")
    cni = cluster.get("cni") if isinstance(cluster, dict) else None
    return isinstance(cni, dict) and cni.get("preset") == "unmanaged"


def _yaml(value):
    return yaml.safe_dump(value, default_flow_style=False, sort_keys=True) if value is not None else ""


def _text(value):
    return json.dumps(value, sort_keys=True)


class CiliumRelease:
    def __init__(self, params, kube, helm, sleep=None, clock=None):
        self.params = params
        self.kube = kube
        self.helm = helm
        self.sleep = sleep or time.sleep
        self.clock = clock
        self.plan = chart_mod.Plan(step="none", cilium={}, release={}, values_source=None, user_values={}, values={},
                                   gate=[], diff=[])
        self.chart = self.chart_version = self.effective = self.lifted = None
        self.current = self.repair = None
        self.record_data = {}
        self.mode = self.tunnel = None
        self.apply_helm = False

    # -- read-only ----------------------------------------------------------------------------
    def preconditions(self):
        plan, kube, params = self.plan, self.kube, self.params
        self.record_data = cluster_record.read(kube).data
        if unmanaged(self.record_data):
            raise plan.refuse(UNMANAGED)
        self.chart, chart_version = chart_mod.resolve(self.helm, params, plan.say)
        self.chart_version = chart_version
        own = live_mod.records(kube, RELEASE_NAMESPACE, RELEASE)
        newest = record_mod.newest(own)
        if newest is not None and newest.status in chart_mod.PENDING:
            self.repair = newest
            plan.say("repair: delete %s (%s, left by a run that was stopped; uid %s)" % (
                newest.ref, newest.status, newest.uid))
            own = [r for r in own if r is not newest]
        self.current = record_mod.newest([r for r in own if r.status == "deployed"]) or record_mod.newest(own)
        running = live_mod.read(kube)
        plan.result["cilium"] = {"chart": chart_version, "version": running.version if running else None,
                                 "image": running.image if running else None}
        if self.current is None:
            self._refuse_without_release(running)
            step = "install"
            plan.say("install: no Cilium runs and no release of ours exists: install the Helm release %s/%s, "
                     "chart %s" % (RELEASE_NAMESPACE, RELEASE, chart_version))
        else:
            if running is not None and running.helm_release != (RELEASE, RELEASE_NAMESPACE):
                name, namespace = running.helm_release
                raise plan.refuse("the Cilium DaemonSet %s/%s belongs to %s, not to the release %s/%s: run "
                                  "cilium_takeover first" % (
                                      live_mod.NAMESPACE, live_mod.DAEMONSET,
                                      "the Helm release %s/%s" % (namespace, name) if name else "no Helm release",
                                      RELEASE_NAMESPACE, RELEASE))
            plan.result["release"] = {"revision": self.current.revision, "status": self.current.status,
                                      "chart": self.current.chart_version}
            plan.say("release: %s/%s revision %d (%s), chart %s%s" % (
                RELEASE_NAMESPACE, RELEASE, self.current.revision, self.current.status, self.current.chart_version,
                "; Cilium %s runs" % running.version if running and running.version else ""))
            try:
                step = version_step(self.current.chart_version, chart_version, result=plan.result)
            except Refused as exc:
                plan.say("refused: " + exc.message)
                raise
        self.mode, self.tunnel = self._network(running)
        source, user = self._user_values()
        self.lifted, taken = values_mod.lift(user)
        if taken:
            plan.say("owned keys in the user's values, set by the collection instead: %s" % ", ".join(sorted(taken)))
        nodes = live_mod.node_count(kube)
        control_planes = params.get("control_planes")
        owned = values_mod.owned(self.mode, self.tunnel, params.get("kubeprism_port") or values_mod.KUBEPRISM_PORT)
        self.effective = effective(nodes, control_planes, self.lifted, owned)
        replicas = operator_replicas(nodes, control_planes)
        plan.say("operator replicas: %s (%d Nodes%s)" % (
            "1" if replicas == 1 else "the chart's default", nodes,
            ", %d control planes in the spec" % control_planes if control_planes is not None else ""))
        plan.result.update({"values_source": source, "user_values": self.lifted, "values": self.effective})
        plan.result["cilium"].update({"nodes": nodes, "kube_proxy": self.mode, "tunnel": self.tunnel,
                                      "operator_replicas": replicas})
        self._decide(step)
        self._gate()
        return plan

    def _refuse_without_release(self, running):
        plan = self.plan
        if not self.params.get("install"):
            raise plan.refuse("no Helm release %s/%s of the collection exists%s: run cilium_takeover first (or set "
                              "install for a cluster without Cilium)" % (
                                  RELEASE_NAMESPACE, RELEASE, "" if running is None else
                                  " and Cilium %s runs (DaemonSet %s/%s)" % (running.version, live_mod.NAMESPACE,
                                                                             live_mod.DAEMONSET)))
        if running is not None:
            raise plan.refuse("Cilium %s runs here (DaemonSet %s/%s) and is not the collection's release: run "
                              "cilium_takeover first; install is for a cluster without Cilium" % (
                                  running.version, live_mod.NAMESPACE, live_mod.DAEMONSET))

    def _network(self, running):
        """(kube-proxy mode, tunnel): from the options, the cluster record, the running Cilium; each checked."""
        plan, params = self.plan, self.params
        stored = self.record_data.get("cilium") if isinstance(self.record_data.get("cilium"), dict) else {}
        detected = live_mod.kube_proxy_mode(self.kube)
        mode = params.get("kube_proxy") or stored.get("kubeProxy") or detected
        if mode != detected:
            raise plan.refuse("kube_proxy is %s, but %s (%s); a kube-proxy switch is not a values change" % (
                mode, "kube-system runs the kube-proxy DaemonSet" if detected == "enabled" else
                "no kube-proxy DaemonSet runs", detected))
        if running is not None and running.kube_proxy_replacement != (mode == "replaced"):
            raise plan.refuse("kube-proxy is %s and Cilium's kubeProxyReplacement is %s: a kube-proxy switch is not a "
                              "values change; make it deliberately first" % (
                                  mode, str(running.kube_proxy_replacement).lower()))
        if running is not None:
            tunnel = running.tunnel
            where = "as it runs"
        else:
            tunnel = stored.get("tunnel") or params.get("tunnel") or "vxlan"
            where = "the cluster record's" if stored.get("tunnel") else "given" if params.get("tunnel") else "default"
        if tunnel not in values_mod.TUNNELS:
            raise plan.refuse("Cilium runs tunnel %r, which the collection does not know (vxlan, geneve, native)" % tunnel)
        if params.get("tunnel") and params["tunnel"] != tunnel:
            raise plan.refuse("tunnel is %s, but the cluster's tunnel is %s (%s); the tunnel is immutable" % (
                params["tunnel"], tunnel, where))
        plan.say("kube-proxy: %s; tunnel: %s (%s)" % (mode, tunnel, where))
        return mode, tunnel

    def _user_values(self):
        """(source, values): cilium_values, the cluster record's (the takeover's), or the release record's."""
        given = self.params.get("cilium_values")
        stored = self.record_data.get("cilium") if isinstance(self.record_data.get("cilium"), dict) else {}
        if given is not None:
            self.plan.say("values: cilium_values (they become the cluster record's)")
            return "cilium_values", given
        if isinstance(stored.get("values"), dict):
            self.plan.say("values: the cluster record's (%s/%s, key cilium)" % (
                cluster_record.NAMESPACE, cluster_record.NAME))
            return "cluster_record", stored["values"]
        if self.current is not None:
            self.plan.say("values: the release record's (the cluster record has none)")
            lifted = values_mod.lift(self.current.config)[0]
            return "release", lifted
        self.plan.say("values: none (the chart's defaults and the owned keys)")
        return "defaults", {}

    def _decide(self, step):
        plan = self.plan
        chart_version = self.chart_version
        if step == "install":
            self.apply_helm = True
        elif self.repair is not None or self.current.status != "deployed":
            self.apply_helm = True
            step = step if step == "upgrade" else "values"
        elif step == "upgrade":
            self.apply_helm = True
        elif self.current.config != self.effective:
            self.apply_helm = True
            step = "values"
        else:
            step = "none"
        old = self.current.config if self.current is not None else None
        if self.apply_helm:
            if step == "upgrade":
                plan.say("upgrade: chart %s -> %s" % (self.current.chart_version, chart_version))
            for line in _values_lines(old or {}, self.effective):
                plan.say(line)
            plan.say("apply: helm %s %s <chart %s> --namespace %s (every object in %s; never atomic, no uninstall; "
                     "%d attempts at most)" % (
                         "install" if step == "install" else "upgrade", RELEASE, chart_version, RELEASE_NAMESPACE,
                         live_mod.NAMESPACE, ATTEMPTS))
            plan.say("wait: DaemonSet %s/%s and Deployment %s/%s ready on every node" % (
                live_mod.NAMESPACE, live_mod.DAEMONSET, live_mod.NAMESPACE, live_mod.OPERATOR))
        else:
            plan.say("the release %s/%s runs chart %s with these values: nothing to apply" % (
                RELEASE_NAMESPACE, RELEASE, chart_version))
        if self._record_wanted() != (self.record_data.get("cilium") or {}):
            plan.say("cluster record: the user's values and the chart go into %s/%s (key cilium)" % (
                cluster_record.NAMESPACE, cluster_record.NAME))
            if not self.apply_helm:
                step = "record"
        plan.result["step"] = step
        plan.result["changed"] = step != "none"
        plan.result["diff"].append({"before_header": "values of %s/%s (chart %s)" % (
            RELEASE_NAMESPACE, RELEASE, self.current.chart_version if self.current else "none"),
            "after_header": "values of %s/%s (chart %s)" % (RELEASE_NAMESPACE, RELEASE, chart_version),
            "before": _yaml(old), "after": _yaml(self.effective)})

    def _gate(self):
        plan, kube = self.plan, self.kube
        manifest = self.helm.template(self.chart, RELEASE, RELEASE_NAMESPACE, self.effective,
                                      live_mod.server_version(kube), live_mod.api_versions(kube))
        found = gate_mod.run(kube, helm_mod.documents(manifest), RELEASE_NAMESPACE, "chart %s" % self.chart_version)
        plan.result["gate"] = found.entries
        plan.result["diff"].extend(found.diff)
        plan.say(found.summary())
        for line in found.lines() + ["gate: skipped " + s for s in found.skipped]:
            plan.say(line)
        if found.invalid:
            raise plan.refuse("the API server refuses %d of the chart's objects over the live ones: %s" % (
                len(found.invalid), "; ".join("%s: %s" % (e["object"], e["live"]) for e in found.invalid)))
        if not found.empty and not self.apply_helm:
            plan.say("warning: the live objects differ from the release; its chart and values are unchanged, so "
                     "nothing is applied")

    def _record_wanted(self):
        wanted = dict(self.record_data.get("cilium") or {})
        wanted.update({"release": "%s/%s" % (RELEASE_NAMESPACE, RELEASE), "chart": self.chart_version,
                       "values": self.lifted, "tunnel": self.tunnel, "kubeProxy": self.mode})
        return wanted

    # -- writes -------------------------------------------------------------------------------
    def apply(self, wait=True, wait_timeout=600.0):
        plan = self.plan
        if self.apply_helm:
            if self.repair is not None:
                chart_mod.delete_record(self.kube, self.repair)
                plan.say("repaired: deleted %s" % self.repair.ref)
            plan.result["attempts"] = self._apply_with_retries()
            newest = record_mod.newest(live_mod.records(self.kube, RELEASE_NAMESPACE, RELEASE))
            if newest is None or newest.status != "deployed":
                raise CiliumError("helm finished but the release %s/%s is %s, not deployed; rerun" % (
                    RELEASE_NAMESPACE, RELEASE, newest.status if newest else "missing"), result=plan.result)
            plan.result["release"] = {"revision": newest.revision, "status": newest.status,
                                      "chart": newest.chart_version}
            plan.say("done: the Helm release %s/%s is deployed (revision %d, chart %s)" % (
                RELEASE_NAMESPACE, RELEASE, newest.revision, newest.chart_version))
            if not self._ready(wait, wait_timeout):
                return plan.result
        wanted = self._record_wanted()

        def mutate(data):
            data["cilium"] = wanted
        if cluster_record.update(self.kube, mutate)[2]:
            plan.say("cluster record: cilium = release %s, chart %s, the user's values" % (
                wanted["release"], wanted["chart"]))
        return plan.result

    def _helm_apply(self):
        values = self.helm.file("values.json", self.effective)
        if self.current is None:
            # no Cilium runs (checked): what exists is what the installer bundle made for the chart's RBAC (the
            # cilium-secrets Namespace), which a plain install refuses as owned by no release
            return self.helm.run("install", RELEASE, self.chart, "--namespace", RELEASE_NAMESPACE, "--create-namespace",
                                 "--take-ownership", "--description", DESCRIPTION, "-f", values, cluster=True)
        return self.helm.run("upgrade", RELEASE, self.chart, "--namespace", RELEASE_NAMESPACE, "--reset-values",
                             "--description", DESCRIPTION, "-f", values, cluster=True)

    def _apply_with_retries(self):
        """Runs of helm until one succeeds, ATTEMPTS at most; a pending record a failed run left is repaired."""
        for attempt in range(1, ATTEMPTS + 1):
            try:
                self._helm_apply()
                return attempt
            except HelmError as exc:
                if attempt == ATTEMPTS:
                    self.plan.say("attempt %d of %d failed: %s" % (attempt, ATTEMPTS, exc.message))
                    raise CiliumError("helm failed %d times in a row; the last: %s" % (ATTEMPTS, exc.message),
                                      result=self.plan.result)
                delay = backoff(attempt)
                self.plan.say("attempt %d of %d failed, next in %gs: %s" % (attempt, ATTEMPTS, delay, exc.message))
                self.sleep(delay)
                self._repair_after_failure()
        return ATTEMPTS  # not reached

    def _repair_after_failure(self):
        own = live_mod.records(self.kube, RELEASE_NAMESPACE, RELEASE)
        newest = record_mod.newest(own)
        if newest is not None and newest.status in chart_mod.PENDING:
            chart_mod.delete_record(self.kube, newest)
            self.plan.say("repaired: deleted %s (%s, left by the failed attempt)" % (newest.ref, newest.status))
        if self.current is None and newest is not None and newest.status not in chart_mod.PENDING:
            self.current = newest  # an install that got as far as a record: the next attempt upgrades it

    def _ready(self, wait, wait_timeout):
        return chart_mod.ready(self.kube, self.plan, wait, wait_timeout, self.clock,
                               "Cilium is not ready after the release was applied (%s); the cluster record is not "
                               "updated: rerun")


def _values_lines(old, new):
    """One line per changed values path (the effective values, before and after)."""
    # no values at all have no paths (flatten gives an empty mapping the root path "")
    before, after = gate_mod.flatten(old) if old else {}, gate_mod.flatten(new) if new else {}
    out = []
    for path in sorted(set(before) | set(after)):
        if before.get(path, _MISSING) != after.get(path, _MISSING):
            out.append("values: %s: %s -> %s" % (
                path, _text(before[path]) if path in before else "unset",
                _text(after[path]) if path in after else "unset"))
    return out


_MISSING = object()


def run(params, conn, check_mode, sleep=None, clock=None):
    """The module's backend: the plan and the gate; outside check mode, the apply."""
    kube = conn.kube()
    with chart_mod.helm(params) as helm:
        flow = CiliumRelease(params, kube, helm, sleep=sleep, clock=clock)
        try:
            plan = flow.preconditions()
        except IchorError as exc:
            if exc.result is None:
                exc.result = flow.plan.result
            raise
        result = plan.result
        if not result["changed"] or check_mode:
            return result
        return flow.apply(params.get("wait", True), float(params.get("wait_timeout") or 600))
