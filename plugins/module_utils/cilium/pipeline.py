# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one pipeline of the two Cilium flows (``Flow``, run by ``run``): read, preconditions, gate, act; and what the
flows share: the options, helm with the module's kubeconfig, the plan, a record of ours deleted by UID.

Read: the cluster record (a CNI ``unmanaged`` is refused), helm and the chart at the release set's version.
Preconditions: what runs (the variant's ``read_running``), the kube-proxy mode and the tunnel (``network``), the
user's values (``user_values``), lifted off the owned keys and made effective over the Nodes here, then the variant's
``decide``. Gate: ``helm template`` with the effective values, each object dry-run against the live one (gate.py);
the variant's ``judge`` says what the findings mean. Nothing up to here writes (the dry runs are ``dryRun=All``); a
refusal carries the plan so far and ends with its "refused:" line. Act, outside check mode when the plan says changed:
the variant's ``apply``, with the steps both take here (the pending record repaired, helm, the newest record deployed,
Cilium ready on every Node). The variants: takeover.py (``cilium_takeover``), release.py (``cilium_release``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.cilium import gate as gate_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import helm as helm_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import live as live_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import record as record_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import values as values_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium.errors import CiliumError, Refused
from ansible_collections.maesh.ichor.plugins.module_utils.common import poll
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.errors import Conflict, NotFound

RELEASE = live_mod.RELEASE
RELEASE_NAMESPACE = live_mod.RELEASE_NAMESPACE
RELEASE_REF = "%s/%s" % (RELEASE_NAMESPACE, RELEASE)
UNMANAGED = "the CNI is not managed by Ichor (spec.cni.preset: unmanaged)"
# a release record left by a run that stopped mid-apply: the next run deletes it first
PENDING = ("pending-install", "pending-upgrade", "pending-rollback")
WAIT = "wait: DaemonSet %s/%s and Deployment %s/%s ready on every node" % (
    live_mod.NAMESPACE, live_mod.DAEMONSET, live_mod.NAMESPACE, live_mod.OPERATOR)


def options(**own):
    """The options both modules take and a module's ``own`` (the chart's and helm's are documented once: doc fragment
    maesh.ichor.cilium_chart; the Kubernetes connection options are added by ansible_module.specs)."""
    return dict(chart=dict(type="str"), chart_digest=dict(type="str"), chart_repository=dict(type="str"),
                helm=dict(type="path", default="helm"), kube_proxy=dict(type="str", choices=["enabled", "replaced"]),
                kubeprism_port=dict(type="int", default=values_mod.KUBEPRISM_PORT), cilium_values=dict(type="dict"),
                **own)


class Plan:
    """What the run found and decided, returned with success and with every refusal."""

    def __init__(self, **result):
        self.lines = []
        self.result = dict(result, changed=False, plan=self.lines)

    def say(self, line):
        self.lines.append(line)

    def refuse(self, message):
        self.say("refused: " + message)
        return Refused(message, result=self.result)


def delete_record(kube, rec):
    """Delete a record Secret only if it is still the one read (UID precondition); gone already is fine."""
    try:
        kube.delete("v1", "Secret", rec.name, rec.namespace, uid=rec.uid)
    except NotFound:
        pass
    except Conflict:
        raise CiliumError("the record %s changed since this run read it (another uid); it is kept: rerun" % rec.ref)


# -- the rules both flows hold -----------------------------------------------------------------
def unmanaged(record_data):
    """Whether the cluster record's spec says the CNI is not managed (spec.cni.preset: unmanaged)."""
    cluster = (record_data or {}).get("cluster")
    cni = cluster.get("cni") if isinstance(cluster, dict) else None
    return isinstance(cni, dict) and cni.get("preset") == "unmanaged"


def kube_proxy_where(detected):
    return "kube-system runs the kube-proxy DaemonSet" if detected == "enabled" else "no kube-proxy DaemonSet runs"


def unknown_tunnel(tunnel):
    if tunnel not in values_mod.TUNNELS:
        return "Cilium runs tunnel %r, which the collection does not know (vxlan, geneve, native)" % tunnel


def refused_objects(found):
    """Refusal when the API server refuses some of the chart's objects over the live ones (their dry run failed)."""
    if found.invalid:
        return "the API server refuses %d of the chart's objects over the live ones: %s" % (
            len(found.invalid), "; ".join("%s: %s" % (e["object"], e["live"]) for e in found.invalid))


class Flow:
    """One run of a variant: the stages above, in their order, and the steps both variants' stages take."""

    NOT_DEPLOYED = ""  # what the act leaves when helm finished but the release is not deployed
    NOT_READY = ""  # the message (one %s: the reasons) when Cilium is not ready after the act

    def __init__(self, params, kube, helm, plan, clock=None):
        self.params, self.kube, self.helm, self.plan, self.clock = params, kube, helm, plan, clock
        self.stored = {}  # the cluster record's data
        self.chart = self.chart_version = self.step = None
        self.running = None  # live_mod.LiveCilium, or None when no Cilium runs
        self.repair = None  # a pending-* record of ours, deleted before helm runs
        self.mode = self.tunnel = self.lifted = self.effective = None

    def preconditions(self):
        """Every read-only stage; returns the Plan (its result says what a run would do)."""
        plan, params = self.plan, self.params
        self.stored = cluster_record.read(self.kube).data
        if unmanaged(self.stored):  # adopted with its CNI left alone
            raise plan.refuse(UNMANAGED)
        helm_version = self.helm.version()
        self.chart, meta = self.helm.resolve_chart(params.get("chart"), params.get("chart_digest"),
                                                   params.get("chart_repository"))
        self.chart_version = str(meta["version"])
        plan.say("chart: cilium %s (%s), helm %s" % (
            self.chart_version, params.get("chart") or params.get("chart_repository") or helm_mod.REPOSITORY,
            ".".join(str(p) for p in helm_version)))
        if not self.read_running():
            return plan
        self.mode, self.tunnel = self.network()
        owned = values_mod.owned(self.mode, self.tunnel, self.kubeprism_port)
        source, user = self.user_values(owned)
        self.lifted, taken = values_mod.lift(user)
        if taken:
            plan.say("owned keys in the user's values, set by the collection instead: %s" % ", ".join(sorted(taken)))
        nodes = live_mod.node_count(self.kube)
        self.effective = values_mod.effective(nodes, self.lifted, owned, params.get("control_planes"))
        plan.result.update({"values_source": source, "user_values": self.lifted, "values": self.effective})
        self.decide(nodes, owned, taken)
        self.gate()
        return plan

    def gate(self):
        plan, kube = self.plan, self.kube
        manifest = self.helm.template(self.chart, RELEASE, RELEASE_NAMESPACE, self.effective,
                                      live_mod.server_version(kube), live_mod.api_versions(kube))
        rendered = helm_mod.documents(manifest)
        found = gate_mod.run(kube, rendered, RELEASE_NAMESPACE, "chart %s" % self.chart_version)
        plan.result["gate"] = found.entries
        plan.result["diff"].extend(found.diff)
        plan.say(found.summary())
        for line in found.lines() + ["gate: skipped " + s for s in found.skipped]:
            plan.say(line)
        self.judge(found, rendered)

    # -- what the stages share -------------------------------------------------------------
    @property
    def kubeprism_port(self):
        return self.params.get("kubeprism_port") or values_mod.KUBEPRISM_PORT

    def refuse_if(self, refusal):
        if refusal:
            raise self.plan.refuse(refusal)

    def recorded(self):
        """The cluster record's key ``cilium`` as this run read it."""
        cilium = self.stored.get("cilium")
        return cilium if isinstance(cilium, dict) else {}

    def record_keys(self):
        """What both flows keep in the cluster record's key ``cilium``."""
        return {"release": RELEASE_REF, "chart": self.chart_version, "values": self.lifted, "tunnel": self.tunnel,
                "kubeProxy": self.mode}

    def pending(self, own, then=""):
        """The newest record of ours when a stopped run left it pending (``self.repair``: the act deletes it first)."""
        newest = record_mod.newest(own)
        if newest is not None and newest.status in PENDING:
            self.repair = newest
            self.plan.say("repair: delete %s (%s, left by a run that was stopped; uid %s)%s" % (
                newest.ref, newest.status, newest.uid, then))
        return self.repair

    def version_step(self, rule, have):
        """The version rule's step from ``have`` to the chart; its refusal ends the plan with its "refused:" line."""
        try:
            return rule(have, self.chart_version, result=self.plan.result)
        except Refused as exc:
            self.plan.say("refused: " + exc.message)
            raise

    def install(self, run_helm):
        """The pending record repaired, ``run_helm()``, then the release's newest record, which must be deployed."""
        plan, kube = self.plan, self.kube
        if self.repair is not None:
            delete_record(kube, self.repair)
            plan.say("repaired: deleted %s" % self.repair.ref)
        run_helm()
        newest = record_mod.newest(live_mod.records(kube, RELEASE_NAMESPACE, RELEASE))
        if newest is None or newest.status != "deployed":
            raise CiliumError("helm finished but the release %s is %s, not deployed; %s" % (
                RELEASE_REF, newest.status if newest else "missing", self.NOT_DEPLOYED), result=plan.result)
        plan.say("done: the Helm release %s is deployed (revision %d, chart %s)" % (
            RELEASE_REF, newest.revision, newest.chart_version))
        return newest

    def ready(self, wait, wait_timeout):
        """Wait (``wait_timeout`` seconds, or one look without ``wait``) until the DaemonSet and the operator are ready
        on every Node. Not ready: NOT_READY fails the run when it waited, else it is a warning; False."""
        def check():
            running = live_mod.read(self.kube)
            return live_mod.health(running, live_mod.node_count(self.kube)) if running else (False, ["gone"])

        done, lines = poll.until(check, wait_timeout if wait else 0, clock=self.clock)
        if done:
            self.plan.say("ready: " + "; ".join(lines))
            return True
        message = self.NOT_READY % "; ".join(lines)
        if wait:
            raise CiliumError(message, result=self.plan.result)
        self.plan.result.setdefault("warnings", []).append(message)
        return False


def run(params, conn, check_mode, flow):
    """A module's backend: ``flow(kube, helm)`` is the variant; its preconditions and gate, and outside check mode,
    when they say changed, its act."""
    kube = conn.kube()
    # each helm call may take ten API timeouts, 2 min at least
    with helm_mod.Helm(binary=params.get("helm"), kubeconfig=params.get("kubeconfig"),
                       kubeconfig_content=params.get("kubeconfig_content"), kube_context=params.get("kube_context"),
                       timeout=max(float(params.get("timeout") or 30) * 10, 120)) as helm:
        variant = flow(kube, helm)
        try:
            plan = variant.preconditions()
        except IchorError as exc:
            if exc.result is None:  # helm, the chart or the API server failed: the plan so far goes with it
                exc.result = variant.plan.result
            raise
        if not plan.result["changed"] or check_mode:
            return plan.result
        return variant.apply(params.get("wait", True), float(params.get("wait_timeout") or 600))
