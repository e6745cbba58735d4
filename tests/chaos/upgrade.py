"""maesh.ichor.upgrade with follow, from a cluster behind the release set in every step (Talos, config, Kubernetes,
Cilium): 3 control planes and 2 workers from real Talos v1.13.9 configs, the collection's own Cilium release at chart
1.19 (real helm, real chart), the record adopt would have left."""

import os

from ansible_collections.maesh.ichor.plugins.module_utils.cilium import record as helm_record
from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from tests.lab.cilium import charts as cilium_charts
from tests.lab.cilium.fixtures import CiliumLab
from tests.chaos.scenario import (API_FAULTS, OTHER_FAULTS, RUN_FAULTS, TALOS_FAULTS, TALOS_WRITES, Lab, Scenario, Violation,
                                  helm_status, record)
from tests.integration.ansible_env import REPO
from tests.versions import CILIUM_MINOR

CASE = os.path.join(REPO, "tests", "fixtures", "configs", "v1.13", "v1.13.9", "k8s-older")
CASE_VERSIONS = dict(talos="v1.13.9", contract="v1.13", kubernetes="v1.35.4")
CONTROLPLANES, WORKERS = 3, 2
# what a playbook may do to a machine: a reset is never the upgrade's
RESETS = frozenset(("Reset",))
# the first call of the rollout's etcd check of a control plane (etcd.health through the machine)
ETCD_LOOK = "EtcdMemberList"


CILIUM_VALUES = {"cluster": {"name": "chaos"}}


class Upgrade(Scenario):
    playbook = "upgrade"
    faults = RUN_FAULTS + OTHER_FAULTS + TALOS_FAULTS + API_FAULTS + ("helm_kill",)
    write_span = 18.0  # measured: 17 s from the first write to the end of the four steps

    def start(self):
        self.lab = Lab(self.work, controlplanes=CONTROLPLANES, workers=WORKERS, version=CASE_VERSIONS["talos"],
                       case=CASE)
        # the record adopt would have left: the versions the cluster runs, and its Cilium as the collection's release
        cluster_record.update(self.lab.client, lambda data: data.update(CASE_VERSIONS))
        helm = self.lab.kube.bins["helm"]
        charts = cilium_charts.ensure(helm)
        os.makedirs(os.path.join(self.work, "cilium"), exist_ok=True)
        CiliumLab(self.lab.kube, charts, os.path.join(self.work, "cilium")).older_collection_release(
            "1.19", CILIUM_VALUES, nodes=CONTROLPLANES + WORKERS)
        # the workers roll as one batch of two behind a one-second canary soak
        self.lab.inventory = self.lab.write_inventory(ichor_upgrade_cilium_chart=charts[CILIUM_MINOR]["chart"],
                                                      ichor_upgrade_helm=helm, ichor_upgrade_worker_batch=WORKERS,
                                                      ichor_upgrade_canary_soak=1)
        return self.lab

    def args(self, run):
        return self.upgrade_args()

    def check(self, complete):
        figures = dict(machine_downs=check_machines(self.lab, complete))
        check_record(self.lab)
        figures.update(helm_revisions=len(check_cilium(self.lab)))
        return figures

    def converged(self):
        cordoned = sorted(n["metadata"]["name"] for n in self.lab.client.list("v1", "Node")
                          if (n.get("spec") or {}).get("unschedulable"))
        if cordoned:  # a run killed between its cordon and its uncordon: the next run's rollout lifts it
            raise Violation("Nodes left cordoned after the rollout: %s" % ", ".join(cordoned))
        versions = set(m["version"] for m in self.lab.talos.machines)
        stored = record(self.lab)
        deployed = [chart for _revision, status, chart in check_cilium(self.lab) if status == "deployed"]
        if versions != {release.TALOS} or (stored["talos"], stored["contract"], stored["kubernetes"]) != (
                release.TALOS, release.CONTRACT, release.KUBERNETES) or deployed != [release.CILIUM] or (
                    stored.get("cilium") or {}).get("chart") != release.CILIUM:
            raise Violation("the release set is not reached: machines %s, record %s, Cilium deployed %s" % (
                sorted((m["name"], m["version"]) for m in self.lab.talos.machines),
                dict((k, stored.get(k)) for k in ("talos", "contract", "kubernetes", "cilium")), deployed))


def check_machines(lab, complete=False):
    """Never a control plane taken down by a run while another is down (etcd keeps its quorum of 3), nor while its
    member leads etcd (the leadership is moved first); no machine
    reset; none taken down twice by the runs; with ``complete`` (the calm rerun ended), each machine down exactly once:
    the Talos upgrade's one reboot. A reboot the fault caused ("down:unasked") is not the runs', but a run that takes
    a control plane down while it is down breaks quorum all the same. Returns how many times the runs took machines
    down (the invariant's material)."""
    control_planes = set(m["name"] for m in lab.talos.machines if m["role"] == "controlplane")
    down, unasked, downs = set(), set(), {}
    # machine: the control planes down when a run last wrote to it (what the run could see), or, when the run looked
    # at etcd through the machine just before that write (no other write between), when it looked: a member gone
    # down between the look and the write is the fault's. A look followed by a pull and an install is no look at the
    # reboot's moment
    asked_while, looked, leader = {}, {}, None
    for machine, what in lab.timeline():
        if what == "etcd-leader":
            leader = machine
        elif what == ETCD_LOOK:
            looked[machine] = set(down)
        elif what in TALOS_WRITES:
            asked_while[machine] = looked.pop(machine, set(down))
        if what.startswith("down:"):
            if what == "down:unasked":
                unasked.add(machine)
            elif machine in control_planes:
                if machine == leader:  # the rollout moves etcd's leadership away before a control plane reboots
                    raise Violation("%s went down (%s) while its etcd member led: its leadership was not moved first" % (
                        machine, what[5:]))
                # a control plane the run takes down while another is down: etcd keeps 1 of 3. One that went down on
                # its own after the run's request (the request and its reboot are a moment apart) is the fault's
                others = (asked_while.get(machine, set()) | (down - unasked)) & control_planes - {machine}
                if others:
                    raise Violation("%s went down (%s) while control plane %s was down: etcd lost its quorum" % (
                        machine, what[5:], sorted(others)[0]))
            down.add(machine)
            if what != "down:unasked":
                downs[machine] = downs.get(machine, 0) + 1
        elif what == "boot":
            down.discard(machine)
            unasked.discard(machine)
        elif what in RESETS:
            raise Violation("%s was reset, and no run plans a reset" % machine)
    twice = sorted(m for m, count in downs.items() if count > 1)
    if twice:
        raise Violation("rebooted more than once by the runs (one Talos upgrade each): %s" % twice)
    never = sorted(m["name"] for m in lab.talos.machines if m["name"] not in downs)
    if complete and never:
        raise Violation("never went down, though the Talos upgrade reboots each machine once: %s" % never)
    members = [m for m in lab.talos.machines if m["role"] == "controlplane" and m.get("etcd_member_id")]
    if len(members) != CONTROLPLANES:
        raise Violation("etcd has %d members of %d control planes" % (len(members), CONTROLPLANES))
    return sum(downs.values())


def check_record(lab):
    """The cluster record never states a version the machines do not all have."""
    stored = record(lab)
    lowest = min((m["version"] for m in lab.talos.machines), key=release.parse)
    if release.parse(stored["talos"]) > release.parse(lowest):
        raise Violation("the record states Talos %s while a machine runs %s" % (stored["talos"], lowest))
    kubelets = [((n.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion")
                for n in lab.client.list("v1", "Node")]
    if stored.get("kubernetes") and kubelets and all(kubelets):
        low = min(kubelets, key=release.parse)
        if release.parse(stored["kubernetes"]) > release.parse(low):
            raise Violation("the record states Kubernetes %s while a kubelet runs %s" % (stored["kubernetes"], low))


def check_cilium(lab):
    """Helm's own records of the collection's Cilium release: never two deployed at once, and the cluster record
    never states a chart that is not the deployed one (a record ahead of a killed helm). Returns (revision, status,
    chart) of each record, oldest first."""
    secrets = lab.client.list("v1", "Secret", "ichor-system", label_selector="owner=helm,name=cilium")
    revisions = sorted((int(s["metadata"]["labels"]["version"]), helm_status(s),
                        helm_record.decode(s["data"]["release"])["chart"]["metadata"]["version"]) for s in secrets)
    deployed = [chart for _revision, status, chart in revisions if status == "deployed"]
    if len(deployed) > 1:
        raise Violation("Helm has %d deployed records of ichor-system/cilium: %s" % (len(deployed), revisions))
    stated = (record(lab).get("cilium") or {}).get("chart")
    if stated and deployed and release.parse(stated) > release.parse(deployed[0]):
        raise Violation("the record states Cilium %s while Helm's deployed release is %s" % (stated, deployed[0]))
    return revisions
