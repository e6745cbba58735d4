"""maesh.ichor.reclaim of a worker another cluster configured (tests/integration/test_reclaim.py's world and C1): the
managed cluster (one control plane, its Talos API and the lab's API server with the record init would have left) and
the foreign cluster "foreign" (a control plane and worker-1). Every run asks to reclaim worker-1 with its UUID typed as
consent and the foreign talosconfig: a graceful reset of STATE and EPHEMERAL, the wait for maintenance mode with the
same UUID, and its registration as pending in the managed cluster's record.

``self.lab.talos`` is the foreign cluster: the one reclaim writes to, so the campaign's machine faults, its timeline
and its third-run check see it; the managed cluster's simulator is watched here (reclaim only reads it).

A reset is sent at most once over all runs: a rerun finds the machine in maintenance mode and only registers it (a
reset whose reply was lost, or a run killed in its wait, included). The one reason a rerun could have for a second
reset, a first one that reached the machine and did not take, does not arise in this lab (no fault interrupts a
reset), so a second Reset is a violation."""

import os

import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from tests.chaos.scenario import (REFUSE_WRITES, API_FAULTS, RUN_FAULTS, TALOS_FAULTS, TALOS_WRITES, Lab, Scenario, Violation,
                                  record, run_writes)
from tests.integration.ansible_env import write_inventory
from tests.lab.process import LabProcess

FAST = dict(reboot_seconds=0.3, install_seconds=0.1, upgrade_seconds=0.2)
RECLAIMED = "worker-1"
# the reclaimed machine's reset and reboot last a while (a real one takes minutes): the window a fault meets after
# the reset, while the run waits for maintenance mode and registers
RESET_TIMING = dict(reboot_seconds=10.0)
WAIT_TIMEOUT = 60


class Reclaim(Scenario):
    playbook = "reclaim"
    # not second_other: reclaim takes no cluster lock and writes only its pending entry, nothing an install writes
    faults = RUN_FAULTS + TALOS_FAULTS + API_FAULTS
    write_span = 12.0  # the reset, the wait for maintenance mode (a 10 s reboot), the registration
    # reclaim takes no cluster lock: two reclaims at once may both write (a conditional update of the record's pending
    # entry, judged by check_record), so the writes-apart invariant is not theirs
    locked = False
    lose_reply_method = "Reset"  # carried out, its reply lost: a rerun must register the machine, not reset it again

    def __init__(self, work):
        super().__init__(work)
        self.managed = None
        self.target = None
        self.seeded = None
        self.mark = None

    def start(self):
        self.lab = Lab(self.work)  # the API server; the clusters' simulators are started here
        self.managed = LabProcess(os.path.join(self.work, "managed"), name="managed", controlplanes=1, workers=0,
                                  **FAST).start(timeout=60)
        self.lab.talos = LabProcess(os.path.join(self.work, "foreign"), name="foreign", controlplanes=1, workers=1,
                                    **FAST).start(timeout=60)
        self.lab.talos.control.set_timing(RECLAIMED, **RESET_TIMING)
        self.target = self.lab.talos.machine(RECLAIMED)
        path = write_inventory(self.managed.state(), os.path.join(self.work, "managed-inventory.yml"))
        with open(path) as handle:
            data = yaml.safe_load(handle)
        data["all"]["vars"].update(ichor_kubeconfig=self.lab.kube.kubeconfig, ichor_cluster={"name": "managed"})
        with open(path, "w") as handle:
            yaml.safe_dump(data, handle)
        self.lab.inventory = path
        # the record init would have left for the managed cluster: its spec and its machine
        cp = self.managed.machine("cp-1")
        cluster = self.managed.state()["cluster"]
        cluster_record.update(self.lab.client, lambda data: data.update(
            cluster={"name": cluster["name"], "id": cluster["id"]},
            nodes={"cp-1": {"uuid": cp["uuid"], "node": cp["address"], "role": "controlplane"}}))
        self.seeded = record(self.lab)
        self.managed.control.reset_timeline()
        self.mark = self.lab.kube.audit_mark()  # the runs' writes from here
        return self.lab

    def args(self, run):
        return ["-i", self.lab.inventory, "maesh.ichor.reclaim",
                "-e", "ichor_reclaim_node=%s" % self.target["address"],
                "-e", "ichor_reclaim_confirm_uuid=%s" % self.target["uuid"],
                "-e", "ichor_reclaim_foreign_talosconfig=%s" % self.lab.talos.talosconfig,
                "-e", "ichor_reclaim_foreign_context=foreign", "-e", "ichor_reclaim_wait_timeout=%d" % WAIT_TIMEOUT]

    def fault_machines(self):
        # the machine reclaimed: the foreign control plane only counts in the inspection, before the reset
        return [RECLAIMED] if self.lab else []

    def check(self, complete):
        figures = dict(resets=self.check_foreign())
        self.check_managed()
        self.check_record()
        return figures

    def check_foreign(self):
        """In the foreign cluster: the one write is the Reset of worker-1, at most once over all runs; no machine down
        by a run's doing but worker-1, for its reset; its control plane configured and an etcd member still. Returns
        how many Resets reached worker-1."""
        resets = 0
        for machine, what in self.lab.timeline():
            if what in TALOS_WRITES and (machine, what) != (RECLAIMED, "Reset"):
                raise Violation("%s of the foreign cluster got %s, and reclaim's one write is %s's reset" % (
                    machine, what, RECLAIMED))
            if what == "Reset":
                resets += 1
            if what.startswith("down:") and what != "down:unasked" and (machine, what) != (RECLAIMED, "down:resetting"):
                raise Violation("%s of the foreign cluster went down (%s), and no run asked" % (machine, what[5:]))
        total = self.lab.talos.control.calls(RECLAIMED).get("Reset", 0)
        if total > 1:
            raise Violation("%d Resets reached %s over all runs: a rerun reset it again" % (total, RECLAIMED))
        cp = self.lab.talos.machine("cp-1")
        if cp["mode"] != "configured" or not cp["etcd_member_id"]:
            raise Violation("the foreign control plane is %s (etcd member %s) after %s's reclaim" % (
                cp["mode"], cp["etcd_member_id"], RECLAIMED))
        return resets

    def check_managed(self):
        """No machine of the managed cluster touched: no write reached it, it stayed configured, in etcd."""
        writes = [(m, what) for m, what in self.managed.control.timeline() if what in TALOS_WRITES or
                  what.startswith("down:")]
        if writes:
            raise Violation("the managed cluster's machines got %s from reclaim" % writes[:3])
        cp = self.managed.machine("cp-1")
        if cp["mode"] != "configured" or not cp["etcd_member_id"] or cp["uuid"] != self.seeded["nodes"]["cp-1"]["uuid"]:
            raise Violation("the managed control plane is %s (etcd member %s) after a reclaim" % (
                cp["mode"], cp["etcd_member_id"]))

    def check_record(self):
        """The record states a pending machine only when the machine is reset (in maintenance mode with that UUID at
        that address); reclaim changes nothing else in it, and writes nothing else to the API server."""
        stored = record(self.lab)
        machine = self.lab.talos.machine(RECLAIMED)
        for entry in stored.get("machines") or []:
            if (entry.get("uuid"), entry.get("address")) != (self.target["uuid"], self.target["address"]):
                raise Violation("the record holds a machine entry reclaim was not asked for: %s" % entry)
            if machine["mode"] != "maintenance" or machine["uuid"] != self.target["uuid"]:
                raise Violation("the record states %s pending, and the machine is %s" % (RECLAIMED, machine["mode"]))
        others = dict((k, v) for k, v in stored.items() if k != "machines")
        if others != self.seeded:
            raise Violation("reclaim changed the record beyond its pending entry: %s" % sorted(
                k for k in set(others) | set(self.seeded) if others.get(k) != self.seeded.get(k)))
        wrote = sorted(set("%s %s/%s" % (e["verb"], (e.get("objectRef") or {}).get("resource"),
                                         (e.get("objectRef") or {}).get("name"))
                           for e in run_writes(self.lab.kube.audit_events(self.mark))
                           if (e.get("objectRef") or {}).get("name") not in (cluster_record.NAME, REFUSE_WRITES)))
        if wrote:
            raise Violation("reclaim wrote beyond the cluster record: %s" % wrote)

    def converged(self):
        machine = self.lab.talos.machine(RECLAIMED)
        if (machine["mode"], machine["uuid"], machine["address"]) != ("maintenance", self.target["uuid"],
                                                                      self.target["address"]):
            raise Violation("%s is %s with UUID %s at %s" % (
                RECLAIMED, machine["mode"], machine["uuid"], machine["address"]))
        pending = [(p.get("uuid"), p.get("address"), p.get("state"), p.get("source"))
                   for p in record(self.lab).get("machines") or []]
        if pending != [(self.target["uuid"], self.target["address"], "pending", "reclaim")]:
            raise Violation("the record's machines are %s" % pending)

    def stop(self):
        if self.managed is not None:
            self.managed.stop()
        super().stop()
