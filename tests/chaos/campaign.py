"""The fault campaign: real playbooks through ``ansible-playbook`` against the lab (3 control planes and 2 workers of
simulated Talos machines, a real API server with its audit log), a fault at a point drawn from the seed, then one calm
rerun and a third run; invariants checked from outside the playbook (the simulator's own timeline and state, the
cluster record and lock as the API server holds them), never from the playbook's output.

A schedule is (playbook, fault, moment), all drawn from its seed, so one seed replays one schedule:
``python -m tests.chaos --seed SEED --count 1``.
"""

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record, lock
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient
from tests.integration.ansible_env import REPO, ansible_env, write_inventory
from tests.lab.agent import LabAgent
from tests.lab.kube.cluster import KubeLab
from tests.lab.process import LabProcess

CASE = os.path.join(REPO, "tests", "fixtures", "configs", "v1.13", "v1.13.9", "k8s-older")
CASE_VERSIONS = dict(talos="v1.13.9", contract="v1.13", kubernetes="v1.35.4")
CONTROLPLANES, WORKERS = 3, 2

# the calls that change a machine (as the simulator's timeline names them); the rest read
WRITES = frozenset(("ApplyConfiguration", "Upgrade", "Reboot", "Reset", "Bootstrap", "EtcdLeaveCluster",
                    "EtcdRemoveMemberByID", "Shutdown", "Pull"))
# what a playbook may do to a machine: a reset is never the upgrade's
RESETS = frozenset(("Reset",))

FAULTS = ("sigkill", "sigterm", "second_run", "unreachable", "lose_reply", "slow")
MACHINES = ["cp-%d" % i for i in range(1, CONTROLPLANES + 1)] + ["worker-%d" % i for i in range(1, WORKERS + 1)]
PLAYBOOKS = ("upgrade",)
RUN_TIMEOUT = 600


class Schedule:
    """One schedule, drawn from its seed: the playbook, the fault and its moment."""

    def __init__(self, seed):
        rng = random.Random(seed)
        self.seed = seed
        self.playbook = rng.choice(PLAYBOOKS)
        self.fault = rng.choice(FAULTS)
        # most faults wait for the run's first write and then a while longer (a fault before any write proves
        # nothing); some strike at any moment from the start
        self.after_first_write = rng.random() < 0.8
        self.delay = round(rng.uniform(0.0, 12.0) if self.after_first_write else rng.uniform(0.5, 8.0), 2)
        if self.fault == "second_run":  # two runs overlap where it matters: while the first rolls its machines
            self.delay = round(self.delay / 4.0, 2)
        self.machine = rng.choice(MACHINES)
        self.hold = round(rng.uniform(2.0, 8.0), 2)  # how long a machine stays unreachable or slow
        self.latency_ms = rng.choice((300, 800, 1500))

    def describe(self):
        what = self.fault
        if self.fault == "unreachable":
            what = "%s unreachable for %s s" % (self.machine, self.hold)
        elif self.fault == "slow":
            what = "%s answering %d ms late for %s s" % (self.machine, self.latency_ms, self.hold)
        elif self.fault == "lose_reply":  # armed from the start: the machine's next write loses its reply
            return "%s: %s loses the reply to its Talos upgrade (carried out)" % (self.playbook, self.machine)
        return "%s: %s %s s after %s" % (self.playbook, what, self.delay,
                                         "the first write" if self.after_first_write else "the start")

    def replay(self):
        return "python -m tests.chaos --seed %d --count 1" % self.seed


class Violation(AssertionError):
    """An invariant did not hold."""


class Lab:
    """A fresh lab per schedule: an API server (its own audit log) and the simulated machines, mirrored into it."""

    def __init__(self, work):
        self.work = work
        self.kube = KubeLab.start(workdir=os.path.join(work, "kube"))
        self.talos = LabProcess(os.path.join(work, "talos"), controlplanes=CONTROLPLANES, workers=WORKERS,
                                version=CASE_VERSIONS["talos"], case=CASE).start(timeout=60)
        self.talos.control.settings(kubeconfig_path=self.kube.kubeconfig)
        self.agent = LabAgent(self.kube.api_client(), talos_lab=self.talos, owner="chaos")
        self.agent.sync_once()
        self.agent.start()
        self.client = KubeClient(kubeconfig=self.kube.kubeconfig)
        # the record adopt would have left: the versions the cluster runs
        cluster_record.update(self.client, lambda data: data.update(CASE_VERSIONS))
        self.inventory = write_inventory(self.talos.state(), os.path.join(work, "inventory.yml"))
        with open(self.inventory) as handle:
            data = yaml.safe_load(handle)
        data["all"]["vars"]["ichor_kubeconfig"] = self.kube.kubeconfig
        with open(self.inventory, "w") as handle:
            yaml.safe_dump(data, handle)

    def stop(self):
        self.agent.stop()
        self.talos.stop()
        self.kube.stop()


def _playbook_args(schedule, lab):
    if schedule.playbook == "upgrade":
        return ["-i", lab.inventory, "maesh.ichor.upgrade", "-e", "ichor_upgrade_follow=true"]
    raise ValueError(schedule.playbook)


def _start(args, log):
    exe = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    return subprocess.Popen([exe] + args, env=ansible_env(), cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def _run(args, log_path):
    with open(log_path, "w") as log:
        proc = _start(args, log)
        code = proc.wait(RUN_TIMEOUT)
    with open(log_path) as handle:
        return code, handle.read()


def _first_write(timeline, since):
    return any(what in WRITES for _machine, what in timeline[since:])


def _gone(pgid, timeout=60.0):
    """Wait until no process of the run's group is left (a killed ansible-playbook's workers finish their task)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def _faults(lab, name):
    return next(m.get("faults") or {} for m in lab.talos.state(full=True)["machines"] if m["name"] == name)


def _faulted_run(schedule, lab, log_path):
    """The run with its fault; returns (its exit code, -1 when killed; whether the fault struck after the run's first
    write; seconds)."""
    start = len(lab.talos.control.timeline())
    if schedule.fault == "lose_reply":  # carried out, its reply lost once: the caller sees its deadline pass
        lab.talos.control.set_faults(schedule.machine, lose_reply="Upgrade")
    with open(log_path, "w") as log:
        proc = _start(_playbook_args(schedule, lab), log)
        began = time.monotonic()
        if schedule.fault == "lose_reply":  # it strikes on the machine's upgrade, itself a write, or never
            proc.wait(RUN_TIMEOUT)
            struck = "lose_reply" not in _faults(lab, schedule.machine)
            lab.talos.control.clear_faults(schedule.machine)
            return proc.returncode, struck, time.monotonic() - began
        if schedule.after_first_write:
            while proc.poll() is None and not _first_write(lab.talos.control.timeline(), start):
                time.sleep(0.05)
        deadline = time.monotonic() + schedule.delay
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if proc.poll() is not None:  # it ended before its fault: the fault did not land
            return proc.returncode, False, time.monotonic() - began
        landed = _first_write(lab.talos.control.timeline(), start)
        if schedule.fault in ("unreachable", "slow"):
            faults = dict(unreachable=True) if schedule.fault == "unreachable" else dict(latency_ms=schedule.latency_ms)
            lab.talos.control.set_faults(schedule.machine, **faults)
            deadline = time.monotonic() + schedule.hold
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            lab.talos.control.clear_faults(schedule.machine)
            proc.wait(RUN_TIMEOUT)
            return proc.returncode, landed, time.monotonic() - began
        if schedule.fault == "second_run":  # a second operator starts the same job: both run to their end
            with open(log_path + ".second", "w") as second_log:
                second = _start(_playbook_args(schedule, lab), second_log)
                second.wait(RUN_TIMEOUT)
            proc.wait(RUN_TIMEOUT)
            return proc.returncode, landed, time.monotonic() - began
        if schedule.fault == "sigkill":  # the host or the job's container dies: every process of the run
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # AWX's cancel: SIGTERM to ansible-playbook, then, after a grace, SIGKILL
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(60)
        if not _gone(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        return -1, landed, time.monotonic() - began


# -- the invariants, from outside the playbook ----------------------------------------------------------------------
def _control_planes(lab):
    return set(m["name"] for m in lab.talos.machines if m["role"] == "controlplane")


def check_machines(lab, timeline, complete=False):
    """Never two control planes down at once (etcd keeps its quorum of 3); no machine reset; none down twice; with
    ``complete`` (the calm rerun ended), each machine down exactly once: the Talos upgrade's one reboot. Returns how
    many times machines went down (the invariant's material)."""
    control_planes = _control_planes(lab)
    down, downs = set(), {}
    for machine, what in timeline:
        if what.startswith("down:"):
            down.add(machine)
            downs[machine] = downs.get(machine, 0) + 1
            if len(down & control_planes) > 1:
                raise Violation("control planes %s down at once" % sorted(down & control_planes))
        elif what == "boot":
            down.discard(machine)
        elif what in RESETS:
            raise Violation("%s was reset, and no run plans a reset" % machine)
    twice = sorted(m for m, count in downs.items() if count > 1)
    if twice:
        raise Violation("rebooted more than once in all (one Talos upgrade each): %s" % twice)
    never = sorted(m["name"] for m in lab.talos.machines if m["name"] not in downs)
    if complete and never:
        raise Violation("never went down, though the Talos upgrade reboots each machine once: %s" % never)
    members = [m for m in lab.talos.machines if m["role"] == "controlplane" and m.get("etcd_member_id")]
    if len(members) != CONTROLPLANES:
        raise Violation("etcd has %d members of %d control planes" % (len(members), CONTROLPLANES))
    return sum(downs.values())


def check_record(lab):
    """The cluster record never states a version the machines do not all have."""
    stored = cluster_record.read(lab.client).data
    lowest = min((m["version"] for m in lab.talos.machines), key=release.parse)
    if release.parse(stored["talos"]) > release.parse(lowest):
        raise Violation("the record states Talos %s while a machine runs %s" % (stored["talos"], lowest))
    kubelets = [n.get("kubelet") for n in _nodes(lab)]
    if stored.get("kubernetes") and kubelets and all(kubelets):
        low = min(kubelets, key=release.parse)
        if release.parse(stored["kubernetes"]) > release.parse(low):
            raise Violation("the record states Kubernetes %s while a kubelet runs %s" % (stored["kubernetes"], low))


def _nodes(lab):
    return [{"name": n["metadata"]["name"], "kubelet": ((n.get("status") or {}).get("nodeInfo") or {}).get(
        "kubeletVersion")} for n in lab.client.list("v1", "Node")]


def check_lock(lab):
    """No run holds the cluster lock once every run has ended."""
    lease = lab.client.get(lock.API_VERSION, "Lease", lock.NAME, lock.NAMESPACE)
    holder, _expires, expired = lock.state(lease, time.time()) if lease is not None else (None, None, True)
    if holder and not expired:
        raise Violation("the cluster lock is still held by %s after every run ended" % holder)


def converged(lab):
    """The release set reached, as the machines and the record show it."""
    versions = set(m["version"] for m in lab.talos.machines)
    stored = cluster_record.read(lab.client).data
    return versions == {release.TALOS} and (stored["talos"], stored["contract"], stored["kubernetes"]) == (
        release.TALOS, release.CONTRACT, release.KUBERNETES)


def run_schedule(schedule, work):
    """Run one schedule; returns its report (a dict). Raises nothing: a violation is in the report."""
    report = dict(seed=schedule.seed, schedule=schedule.describe(), replay=schedule.replay())
    os.makedirs(work, exist_ok=True)
    began = time.monotonic()
    lab = Lab(work)
    try:
        lab.talos.control.reset_timeline()
        code, landed, took = _faulted_run(schedule, lab, os.path.join(work, "faulted.log"))
        report.update(faulted_exit=code, landed_after_first_write=landed, faulted_s=round(took, 1))
        timeline = lab.talos.control.timeline()
        check_machines(lab, timeline)
        check_record(lab)
        code, out = _run(_playbook_args(schedule, lab), os.path.join(work, "calm.log"))
        report.update(calm_exit=code)
        if code != 0:
            raise Violation("the calm rerun failed (exit %d): %s" % (code, _last_error(out)))
        timeline = lab.talos.control.timeline()
        report["machine_downs"] = check_machines(lab, timeline, complete=True)
        check_record(lab)
        check_lock(lab)
        if not converged(lab):
            raise Violation("the calm rerun did not reach the release set: %s" % sorted(
                (m["name"], m["version"]) for m in lab.talos.machines))
        before = len(timeline)
        code, out = _run(_playbook_args(schedule, lab), os.path.join(work, "third.log"))
        writes = [entry for entry in lab.talos.control.timeline()[before:] if entry[1] in WRITES]
        if code != 0 or "changed=0" not in out or writes:
            raise Violation("the third run changed something (exit %d, writes %s)" % (code, writes[:5]))
        report.update(converged=True, violation=None)
    except Violation as exc:
        report.update(converged=False, violation=str(exc))
    except subprocess.TimeoutExpired as exc:  # a run that hangs is a finding too (its processes are left to the lab's end)
        report.update(converged=False, violation="a run did not end within %d s: %s" % (RUN_TIMEOUT, exc.cmd[-3:]))
    finally:
        lab.stop()
    report["seconds"] = round(time.monotonic() - began, 1)
    return report


def _last_error(out):
    lines = [line for line in out.splitlines() if line.startswith(("fatal:", "failed:", "ERROR"))]
    return (lines[-1] if lines else out.strip().splitlines()[-1] if out.strip() else "no output")[:400]


def campaign(seed, count, work=None, budget_s=None, stream=sys.stderr):
    """Run ``count`` schedules from ``seed`` (schedule i's seed is seed + i), within ``budget_s`` if given. Returns
    the summary: every report, the violations, the convergence rate, and whether at least half of each playbook's
    schedules struck after its first write."""
    work = work or tempfile.mkdtemp(prefix="ichor-chaos-")
    began = time.monotonic()
    reports = []
    for index in range(count):
        if budget_s is not None and reports and time.monotonic() - began > budget_s:
            break
        schedule = Schedule(seed + index)
        report = run_schedule(schedule, os.path.join(work, str(schedule.seed)))
        reports.append(report)
        stream.write("chaos %s\n" % json.dumps(report, sort_keys=True))
        stream.flush()
    landed = {}
    for report in reports:
        playbook = report["schedule"].split(":")[0]
        landed.setdefault(playbook, []).append(bool(report.get("landed_after_first_write")))
    violations = [r for r in reports if r.get("violation")]
    return dict(schedules=len(reports), violations=len(violations),
                convergence=round(sum(1 for r in reports if r.get("converged")) / float(len(reports) or 1), 3),
                landed_after_first_write=dict((p, "%d/%d" % (sum(v), len(v))) for p, v in landed.items()),
                enough_landed=all(sum(v) * 2 >= len(v) for v in landed.values()),
                failures=[dict(seed=r["seed"], violation=r["violation"], replay=r["replay"]) for r in violations],
                seconds=round(time.monotonic() - began, 1), machine=os.uname().nodename, cores=os.cpu_count(),
                work=work, reports=reports)
