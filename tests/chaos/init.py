"""maesh.ichor.init with a join: a running cluster joined by new machines. Five simulated machines at the release set
boot in maintenance mode; an unfaulted init (in ``start``) makes cp-1 and worker-1 into a cluster (etcd bootstrapped
once, on cp-1; Cilium, the installer bundle and the record), as an operator's first run does. The faulted run is the
join the operator runs next with all five in the inventory: under the cluster lock, cp-2 then cp-3 one at a time
(etcd healthy on cp-1 before and on the new member after each), then worker-2; never a second bootstrap.

The join is chosen over a first init because it is where a fault can hurt: etcd runs already (a joining control plane
can cost its quorum), the cluster lock is taken, and a rerun must recognise machines it configured and never
bootstrap again. The first init's own path runs (unfaulted) in every schedule's setup."""

import os

import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.installer.inventory import INVENTORY_NAME
from tests.chaos.scenario import (API_FAULTS, OTHER_FAULTS, RUN_FAULTS, TALOS_FAULTS, TALOS_WRITES, Lab, Scenario,
                                  Violation, helm_release, helm_status, record)
from tests.integration.ansible_env import ansible_playbook
from tests.lab.cilium import charts
from tests.versions import CILIUM_MINOR

CONTROLPLANES, WORKERS = 3, 2
RUNNING = ("cp-1", "worker-1")  # the cluster the first init made
JOINING = ("cp-2", "cp-3", "worker-2")
# what init never sends: it never resets, reboots, upgrades, or removes an etcd member
NEVER = frozenset(("Reset", "Reboot", "Upgrade", "Shutdown", "EtcdLeaveCluster", "EtcdRemoveMemberByID",
                   "EtcdForfeitLeadership"))
# a joining machine installs and reboots for a moment (a real one takes minutes): the window a fault meets
JOIN_TIMING = dict(install_seconds=1.5, reboot_seconds=2.0)
WAIT_TIMEOUT = 120  # each wait of a run: a machine that never comes back fails the run, not the campaign's timeout
# Talos deploys kube-proxy from its bootstrap manifests (kube-proxy enabled); nothing runs them in the lab
KUBE_PROXY = {"apiVersion": "apps/v1", "kind": "DaemonSet",
              "metadata": {"name": "kube-proxy", "namespace": "kube-system"},
              "spec": {"selector": {"matchLabels": {"k8s-app": "kube-proxy"}}, "template": {
                  "metadata": {"labels": {"k8s-app": "kube-proxy"}},
                  "spec": {"containers": [{"name": "kube-proxy",
                                           "image": "registry.k8s.io/kube-proxy:%s" % release.KUBERNETES}]}}}}


class Init(Scenario):
    playbook = "init"
    faults = RUN_FAULTS + OTHER_FAULTS + TALOS_FAULTS + API_FAULTS
    write_span = 20.0  # measured: 20 s from the first write to the end (the join of three machines)
    # the join never bootstraps: its write whose lost reply matters is a joining machine's config
    lose_reply_method = "ApplyConfiguration"

    def __init__(self, work):
        super().__init__(work)
        self.keep = os.path.join(work, "keep")
        self.members_before = set()
        self.extra = {}

    def start(self):
        self.lab = Lab(self.work, controlplanes=CONTROLPLANES, workers=WORKERS, version=release.TALOS,
                       mode="maintenance", bootstrapped=False)
        os.makedirs(self.keep, mode=0o700, exist_ok=True)
        self.lab.client.apply(KUBE_PROXY, "lab")
        chart = charts.ensure(self.lab.kube.bins["helm"])[CILIUM_MINOR]["chart"]
        self.extra = dict(ichor_init_cilium_chart=chart, ichor_init_helm=self.lab.kube.bins["helm"],
                          ichor_init_wait_timeout=WAIT_TIMEOUT)
        first = ansible_playbook("-i", self.inventory("first", RUNNING), "maesh.ichor.init", timeout=600)
        with open(os.path.join(self.work, "first-init.log"), "w") as handle:
            handle.write(first.stdout + first.stderr)
        if first.returncode != 0:
            raise RuntimeError("the first init (cp-1, worker-1) failed: %s" % first.stdout[-2000:])
        for name in JOINING:
            self.lab.talos.control.set_timing(name, **JOIN_TIMING)
        self.lab.inventory = self.inventory("join", RUNNING + JOINING)
        machines = self.lab.talos.machines
        self.members_before = set(m["name"] for m in machines if m["role"] == "controlplane" and m["etcd_member_id"])
        if self.members_before != {"cp-1"} or bootstraps(self.lab) != 1:
            raise RuntimeError("the first init left etcd members %s after %d bootstraps" % (
                sorted(self.members_before), bootstraps(self.lab)))
        return self.lab

    def inventory(self, name, names):
        """The operator's inventory for init (as tests/integration/test_init.py writes it): each machine's address
        and expected UUID, the files init keeps, the chart and helm."""
        groups = {"controlplane": {"hosts": {}}, "worker": {"hosts": {}}}
        for m in self.lab.talos.machines:
            if m["name"] in names:
                groups[m["role"]]["hosts"][m["name"]] = {"ansible_host": m["address"], "ichor_uuid": m["uuid"]}
        variables = dict(self.extra, ichor_init_cluster_name="lab",
                         ichor_init_secrets_file=os.path.join(self.keep, "secrets.yaml"),
                         ichor_init_talosconfig_file=os.path.join(self.keep, "talosconfig"),
                         ichor_init_kubeconfig_file=os.path.join(self.keep, "kubeconfig"))
        path = os.path.join(self.work, "inventory-%s.yml" % name)
        with open(path, "w") as handle:
            yaml.safe_dump({"all": {"vars": variables, "children": groups}}, handle)
        return path

    def args(self, run):
        return ["-i", self.lab.inventory, "maesh.ichor.init"]

    def identity_vars(self, kubeconfig):
        # init connects to the API server with the kubeconfig it keeps (talos_kubeconfig keeps a file of the same API
        # server and CA as it is): each run keeps its own
        return dict(super().identity_vars(kubeconfig), ichor_init_kubeconfig_file=kubeconfig)

    def fault_machines(self):
        # cp-1 is the etcd member every join checks; the others are joined. worker-1 is only read
        return ["cp-1"] + list(JOINING) if self.lab else []

    def check(self, complete):
        figures = dict(machine_downs=self.check_machines(complete))
        check_etcd(self.lab)
        check_record(self.lab)
        return figures

    def check_machines(self, complete):
        """From the timeline: no machine reset, rebooted or upgraded by a run (init never does); a machine taken down
        by a run only as the install and reboot of a config a run applied to it, once; never a control plane taken
        down by a run while another is down by a run's doing; never a config applied to a joining control plane while
        an etcd member is down (what the run could see when it wrote: its etcd check comes before); never a member
        added while the others lack a quorum. A "down:unasked" is the fault's. Returns how many times the runs took
        machines down."""
        machines = self.lab.talos.machines
        control_planes = set(m["name"] for m in machines if m["role"] == "controlplane")
        members = set(self.members_before)
        down, unasked, downs, applied = set(), set(), {}, set()
        asked_while = {}  # machine: the etcd members down when a run last wrote to it
        for machine, what in self.lab.timeline():
            if what in NEVER:
                raise Violation("%s got %s, and init never sends it" % (machine, what))
            if what in TALOS_WRITES:
                asked_while[machine] = down & members
                if what == "ApplyConfiguration":
                    applied.add(machine)
            if what.startswith("down:"):
                if what == "down:unasked":
                    unasked.add(machine)
                else:
                    if machine not in applied:
                        raise Violation("%s went down (%s), and no run applied a config to it" % (machine, what[5:]))
                    downs[machine] = downs.get(machine, 0) + 1
                    # a joining machine is no member yet when its install reboots it: etcd's quorum is the
                    # members' (checked when it joins, below)
                    if machine in control_planes and machine in members:
                        others = sorted((asked_while.get(machine, set()) | (down - unasked)) & control_planes
                                        - {machine})
                        if others:
                            raise Violation("%s went down (%s) while control plane %s was down: etcd's quorum at "
                                            "stake" % (machine, what[5:], others[0]))
                down.add(machine)
            elif what == "boot":
                down.discard(machine)
                unasked.discard(machine)
                if machine in control_planes and machine in applied and machine not in members:
                    # its first boot with its config: it joins etcd; the members must keep a quorum
                    members.add(machine)
                    up = len(members - down)
                    if up < len(members) // 2 + 1:
                        raise Violation("%s joined etcd while %s were down: %d of %d members up, no quorum" % (
                            machine, sorted(members & down), up, len(members)))
        twice = sorted(m for m, count in downs.items() if count > 1)
        if twice:
            raise Violation("taken down more than once by the runs (one install each): %s" % twice)
        never = sorted(m for m in JOINING if m not in downs)
        if complete and never:
            raise Violation("never installed and rebooted, though the join configures it: %s" % never)
        return sum(downs.values())

    def converged(self):
        machines = self.lab.talos.machines
        unconfigured = sorted(m["name"] for m in machines if m["mode"] != "configured")
        if unconfigured:
            raise Violation("machines left unconfigured: %s" % unconfigured)
        members = sorted(m["name"] for m in machines if m["role"] == "controlplane" and m["etcd_member_id"])
        if members != ["cp-1", "cp-2", "cp-3"]:
            raise Violation("etcd's members are %s, not the three control planes" % members)
        stored = record(self.lab)
        recorded = dict((name, (entry or {}).get("uuid")) for name, entry in (stored.get("nodes") or {}).items())
        if recorded != dict((m["name"], m["uuid"]) for m in machines):
            raise Violation("the record's nodes are %s" % sorted(recorded))
        if (stored.get("talos"), stored.get("contract"), stored.get("kubernetes")) != (
                release.TALOS, release.CONTRACT, release.KUBERNETES):
            raise Violation("the record states %s, not the release set" % dict(
                (k, stored.get(k)) for k in ("talos", "contract", "kubernetes")))
        deployed = sorted(_chart(s) for s in self.lab.client.list("v1", "Secret", "ichor-system", label_selector=(
            "owner=helm,name=cilium")) if helm_status(s) == "deployed")
        if deployed != [release.CILIUM]:
            raise Violation("Helm's deployed ichor-system/cilium is %s, not Cilium %s" % (deployed, release.CILIUM))
        if self.lab.client.get("v1", "ConfigMap", INVENTORY_NAME, "ichor-system") is None:
            raise Violation("the installer's inventory ichor-system/%s is missing: the bundle is not installed" % (
                INVENTORY_NAME))


def _chart(secret):
    return ((helm_release(secret).get("chart") or {}).get("metadata") or {}).get("version")


def bootstraps(lab):
    """Bootstrap calls that reached a machine over the lab's life (the first init's included)."""
    return sum(lab.talos.control.calls(name).get("Bootstrap", 0) for name in lab.machine_names())


def check_etcd(lab):
    """Bootstrapped once over all runs (the first init's), and one etcd cluster: every configured machine in cp-1's
    cluster, every member a control plane of it."""
    count = bootstraps(lab)
    if count != 1:
        raise Violation("%d Bootstrap calls reached the machines over all runs: etcd was bootstrapped again" % count)
    machines = lab.talos.machines
    clusters = set(m["cluster_id"] for m in machines if m["mode"] == "configured")
    if len(clusters) != 1:
        raise Violation("the configured machines belong to %d clusters: %s" % (len(clusters), sorted(
            (m["name"], m["cluster_id"][:8]) for m in machines if m["mode"] == "configured")))


def check_record(lab):
    """The record never states what the machines do not have: a node recorded is configured in the cluster with the
    UUID recorded (a control plane with its etcd member), and no machine is pending (none was reset)."""
    stored = record(lab)
    machines = dict((m["uuid"], m) for m in lab.talos.machines)
    cluster = set(m["cluster_id"] for m in machines.values() if m["name"] == "cp-1")
    for name, entry in sorted((stored.get("nodes") or {}).items()):
        machine = machines.get((entry or {}).get("uuid"))
        if machine is None or machine["mode"] != "configured" or machine["cluster_id"] not in cluster:
            raise Violation("the record states %s joined (UUID %s), and no machine of the cluster has it" % (
                name, (entry or {}).get("uuid")))
        if entry.get("role") == "controlplane" and not machine["etcd_member_id"]:
            raise Violation("the record states control plane %s joined, and it is no etcd member" % name)
    pending = [p for p in stored.get("machines") or [] if p.get("state") == "pending"]
    if pending:
        raise Violation("the record holds pending machines %s, and nothing was reset" % pending)
