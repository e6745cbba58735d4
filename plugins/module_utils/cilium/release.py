# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``cilium_release``: the variant ``CiliumRelease`` of the Cilium pipeline (pipeline.py): the collection's Helm
release ``cilium`` kept at the release set after the takeover, and installed at init. Its own stages:

* what runs: the release's chart (its newest deployed record) is the set's, a lower patch, or exactly one minor lower;
  a skipped minor and a downgrade are refused. Without a release of ours: refused ("run cilium_takeover first"),
  unless ``install`` is set and no Cilium runs; a Cilium of another release is refused;
* the network: the kube-proxy mode and the tunnel from the options, the cluster record or what runs; no switch;
* the user's values: ``cilium_values``, the cluster record's (the takeover's), or the release record's;
* the values/version step: the release record's chart and values against the effective ones decide whether helm
  runs, so a second run changes nothing; a gate that differs while nothing is applied is a warning;
* the act: ``helm upgrade`` (``install`` at init; never atomic, never an uninstall) in the collection's retry loop
  (common/retry.py): ATTEMPTS runs in all, waiting BACKOFF_BASE seconds after the first failure, doubled after each
  further one, at most BACKOFF_CAP (5, 10, 20, 30, 30 s); after the wait, a pending record the failed run left is
  repaired first. Once Cilium is ready, the cluster record's key ``cilium``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import time

from ansible_collections.maesh.ichor.plugins.module_utils.common import release as release_set
from ansible_collections.maesh.ichor.plugins.module_utils.common import retry
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import gate as gate_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import live as live_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import pipeline
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import record as record_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import values as values_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium.errors import CiliumError, HelmError, Refused
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record

RELEASE = pipeline.RELEASE
RELEASE_NAMESPACE = pipeline.RELEASE_NAMESPACE
DESCRIPTION = "maesh.ichor cilium_release"
# the retries of a failed helm apply: runs in all, first wait, cap (seconds)
ATTEMPTS = 6
BACKOFF_BASE = 5.0
BACKOFF_CAP = 30.0
BACKOFF = retry.doubling(BACKOFF_BASE, BACKOFF_CAP)


def options():
    return pipeline.options(install=dict(type="bool", default=False), control_planes=dict(type="int"),
                            tunnel=dict(type="str", choices=list(values_mod.TUNNELS)))


# -- the pure rules ------------------------------------------------------------------------------
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


def without_release(running, install):
    """Refusal when no release of ours exists, unless ``install`` is set and no Cilium runs (init)."""
    if not install:
        return ("no Helm release %s of the collection exists%s: run cilium_takeover first (or set install for a "
                "cluster without Cilium)" % (pipeline.RELEASE_REF, "" if running is None else
                                             " and Cilium %s runs (DaemonSet %s/%s)" % (
                                                 running.version, live_mod.NAMESPACE, live_mod.DAEMONSET)))
    if running is not None:
        return ("Cilium %s runs here (DaemonSet %s/%s) and is not the collection's release: run cilium_takeover "
                "first; install is for a cluster without Cilium" % (running.version, live_mod.NAMESPACE,
                                                                    live_mod.DAEMONSET))


def not_ours(running):
    """Refusal when the running Cilium belongs to another release than ours (the takeover has not run)."""
    if running is not None and running.helm_release != (RELEASE, RELEASE_NAMESPACE):
        name, namespace = running.helm_release
        return "the Cilium DaemonSet %s/%s belongs to %s, not to the release %s: run cilium_takeover first" % (
            live_mod.NAMESPACE, live_mod.DAEMONSET,
            "the Helm release %s/%s" % (namespace, name) if name else "no Helm release", pipeline.RELEASE_REF)


def _values_lines(old, new):
    """One line per changed values path (the effective values, before and after)."""
    # no values at all have no paths (flatten gives an empty mapping the root path "")
    before, after = gate_mod.flatten(old) if old else {}, gate_mod.flatten(new) if new else {}

    def shown(values, path):
        return json.dumps(values[path], sort_keys=True) if path in values else "unset"
    return ["values: %s: %s -> %s" % (path, shown(before, path), shown(after, path))
            for path in sorted(set(before) | set(after)) if before.get(path, _MISSING) != after.get(path, _MISSING)]


_MISSING = object()


class CiliumRelease(pipeline.Flow):
    NOT_DEPLOYED = "rerun"
    NOT_READY = "Cilium is not ready after the release was applied (%s); the cluster record is not updated: rerun"

    def __init__(self, params, kube, helm, sleep=None, clock=None):
        super(CiliumRelease, self).__init__(params, kube, helm, pipeline.Plan(
            step="none", cilium={}, release={}, values_source=None, user_values={}, values={}, gate=[], diff=[]), clock)
        self.sleep = sleep or time.sleep
        self.current = None  # the release's newest deployed record (else its newest)
        self.apply_helm = False

    # -- the stages ---------------------------------------------------------------------------
    def read_running(self):
        plan, kube = self.plan, self.kube
        own = live_mod.records(kube, RELEASE_NAMESPACE, RELEASE)
        if self.pending(own):
            own = [r for r in own if r is not self.repair]
        self.current = record_mod.newest([r for r in own if r.status == "deployed"]) or record_mod.newest(own)
        self.running = running = live_mod.read(kube)
        plan.result["cilium"] = {"chart": self.chart_version, "version": running.version if running else None,
                                 "image": running.image if running else None}
        if self.current is None:
            self.refuse_if(without_release(running, self.params.get("install")))
            self.step = "install"
            plan.say("install: no Cilium runs and no release of ours exists: install the Helm release %s, chart %s" % (
                pipeline.RELEASE_REF, self.chart_version))
            return True
        self.refuse_if(not_ours(running))
        plan.result["release"] = {"revision": self.current.revision, "status": self.current.status,
                                  "chart": self.current.chart_version}
        plan.say("release: %s revision %d (%s), chart %s%s" % (
            pipeline.RELEASE_REF, self.current.revision, self.current.status, self.current.chart_version,
            "; Cilium %s runs" % running.version if running and running.version else ""))
        self.step = self.version_step(version_step, self.current.chart_version)
        return True

    def network(self):
        """(kube-proxy mode, tunnel): from the options, the cluster record, the running Cilium; each checked."""
        plan, params, running, stored = self.plan, self.params, self.running, self.recorded()
        detected = live_mod.kube_proxy_mode(self.kube)
        mode = params.get("kube_proxy") or stored.get("kubeProxy") or detected
        if mode != detected:
            raise plan.refuse("kube_proxy is %s, but %s (%s); a kube-proxy switch is not a values change" % (
                mode, pipeline.kube_proxy_where(detected), detected))
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
        self.refuse_if(pipeline.unknown_tunnel(tunnel))
        if params.get("tunnel") and params["tunnel"] != tunnel:
            raise plan.refuse("tunnel is %s, but the cluster's tunnel is %s (%s); the tunnel is immutable" % (
                params["tunnel"], tunnel, where))
        plan.say("kube-proxy: %s; tunnel: %s (%s)" % (mode, tunnel, where))
        return mode, tunnel

    def user_values(self, _owned):
        """(source, values): cilium_values, the cluster record's (the takeover's), or the release record's."""
        given, stored = self.params.get("cilium_values"), self.recorded()
        if given is not None:
            self.plan.say("values: cilium_values (they become the cluster record's)")
            return "cilium_values", given
        if isinstance(stored.get("values"), dict):
            self.plan.say("values: the cluster record's (%s/%s, key cilium)" % (
                cluster_record.NAMESPACE, cluster_record.NAME))
            return "cluster_record", stored["values"]
        if self.current is not None:
            self.plan.say("values: the release record's (the cluster record has none)")
            return "release", values_mod.lift(self.current.config)[0]
        self.plan.say("values: none (the chart's defaults and the owned keys)")
        return "defaults", {}

    def decide(self, nodes, _owned, _taken):
        """The values/version step: helm runs for an install, an upgrade, a repair, or values that changed."""
        plan, control_planes = self.plan, self.params.get("control_planes")
        replicas = values_mod.operator_replicas(nodes, control_planes)
        plan.say("operator replicas: %s (%d Nodes%s)" % (
            "1" if replicas == 1 else "the chart's default", nodes,
            ", %d control planes in the spec" % control_planes if control_planes is not None else ""))
        plan.result["cilium"].update({"nodes": nodes, "kube_proxy": self.mode, "tunnel": self.tunnel,
                                      "operator_replicas": replicas})
        current = self.current
        self.apply_helm = self.step != "same" or self.repair is not None or current.status != "deployed" or \
            current.config != self.effective
        step = ("values" if self.step == "same" else self.step) if self.apply_helm else "none"
        old = current.config if current is not None else None
        if self.apply_helm:
            if step == "upgrade":
                plan.say("upgrade: chart %s -> %s" % (current.chart_version, self.chart_version))
            for line in _values_lines(old or {}, self.effective):
                plan.say(line)
            plan.say("apply: helm %s %s <chart %s> --namespace %s (every object in %s; never atomic, no uninstall; "
                     "%d attempts at most)" % (
                         "install" if step == "install" else "upgrade", RELEASE, self.chart_version, RELEASE_NAMESPACE,
                         live_mod.NAMESPACE, ATTEMPTS))
            plan.say(pipeline.WAIT)
        else:
            plan.say("the release %s runs chart %s with these values: nothing to apply" % (
                pipeline.RELEASE_REF, self.chart_version))
        if self._record_wanted() != self.recorded():
            plan.say("cluster record: the user's values and the chart go into %s/%s (key cilium)" % (
                cluster_record.NAMESPACE, cluster_record.NAME))
            if not self.apply_helm:
                step = "record"
        plan.result["step"] = step
        plan.result["changed"] = step != "none"
        plan.result["diff"].append({"before_header": "values of %s (chart %s)" % (
            pipeline.RELEASE_REF, current.chart_version if current else "none"),
            "after_header": "values of %s (chart %s)" % (pipeline.RELEASE_REF, self.chart_version),
            "before": gate_mod.dump(old), "after": gate_mod.dump(self.effective)})

    def judge(self, found, _rendered):
        self.refuse_if(pipeline.refused_objects(found))
        if not found.empty and not self.apply_helm:
            self.plan.say("warning: the live objects differ from the release; its chart and values are unchanged, so "
                          "nothing is applied")

    def _record_wanted(self):
        return dict(self.recorded(), **self.record_keys())

    # -- the act ------------------------------------------------------------------------------
    def apply(self, wait=True, wait_timeout=600.0):
        plan = self.plan
        if self.apply_helm:
            newest = self.install(self._apply_with_retries)
            plan.result["release"] = {"revision": newest.revision, "status": newest.status,
                                      "chart": newest.chart_version}
            if not self.ready(wait, wait_timeout):
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
        """Runs of helm until one succeeds, ATTEMPTS at most (the result's ``attempts``: how many it took)."""
        failures = []

        def run_helm():
            if failures:  # after the wait, as the API server that failed helm may be back: what that run left
                self._repair_after_failure()
            return self._helm_apply()

        def failed(exc, tries, seconds):
            failures.append(exc)
            self.plan.say("attempt %d of %d failed, next in %gs: %s" % (tries, ATTEMPTS, seconds, exc.message))
        try:
            tries = retry.attempt(run_helm, ATTEMPTS, HelmError, delay=BACKOFF, sleep=self.sleep,
                                  before_retry=failed)[1]
        except retry.Exhausted as exc:
            self.plan.say("attempt %d of %d failed: %s" % (exc.attempts, ATTEMPTS, exc.last.message))
            raise CiliumError("helm failed %d times in a row; the last: %s" % (ATTEMPTS, exc.last.message),
                              result=self.plan.result)
        self.plan.result["attempts"] = tries
        return tries

    def _repair_after_failure(self):
        own = live_mod.records(self.kube, RELEASE_NAMESPACE, RELEASE)
        newest = record_mod.newest(own)
        if newest is not None and newest.status in pipeline.PENDING:
            pipeline.delete_record(self.kube, newest)
            self.plan.say("repaired: deleted %s (%s, left by the failed attempt)" % (newest.ref, newest.status))
        if self.current is None and newest is not None and newest.status not in pipeline.PENDING:
            self.current = newest  # an install that got as far as a record: the next attempt upgrades it


def run(params, conn, check_mode, sleep=None, clock=None):
    """The module's backend: the pipeline with this variant."""
    return pipeline.run(params, conn, check_mode,
                        lambda kube, helm: CiliumRelease(params, kube, helm, sleep=sleep, clock=clock))
