"""The fault campaign: real playbooks through ``ansible-playbook`` against the lab (3 control planes and 2 workers of
simulated Talos machines, a real API server with its audit log), a fault at a point drawn from the seed, then one calm
rerun started at once and a third run; invariants checked from outside the playbook (the simulator's own timeline and
state, the cluster record and the Lease as the API server holds them, the audit log's users and times, Helm's
records), never from the playbook's output but for the third run's PLAY RECAP. The runs hold the production lock (the
roles' defaults) and each writes as a Kubernetes user of its own.

A schedule is (playbook, fault, moment), all drawn from its seed, so one seed replays one schedule:
``python -m tests.chaos --seed SEED --count 1``.
"""

import concurrent.futures
import hashlib
import itertools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from tests.chaos import adopt, init, install, reclaim, upgrade
from tests.chaos.scenario import (REFUSE_WRITES, TALOS_WRITES, Violation, check_lock_free, check_lock_history,
                                  check_not_applied_while_held, check_quiet_after, check_unchanged_recap,
                                  check_writes_apart, production_lock_duration, run_writes)
from tests.integration.ansible_env import REPO, ansible_env

# the faults that start a second run while the first goes on: the same playbook, an install, an upgrade
SECOND_RUNS = ("second_run", "second_other", "second_upgrade")
# the faults that end the run: SIGKILL of every process of it (its host or container dies), of ansible-playbook alone
# (the OOM killer's pick: its workers and its lock's heartbeat must notice), AWX's cancel, and a SIGKILL followed at
# once by another operator's upgrade
KILLS = ("sigkill", "sigkill_playbook", "sigterm", "sigkill_upgrade")
# the longest an operator's next run may wait after a run ended: the calm rerun starts well within it
NEXT_RUN_WITHIN_S = 120.0
# every playbook the campaign drives, by name; a schedule draws one
SCENARIOS = dict((scenario.playbook, scenario) for scenario in (
    adopt.Adopt, init.Init, install.Install, reclaim.Reclaim, upgrade.Upgrade))
PLAYBOOKS = tuple(sorted(SCENARIOS))
RUN_TIMEOUT = 600


class Schedule:
    """One schedule, drawn from its seed: the playbook, the fault and its moment."""

    def __init__(self, seed):
        rng = random.Random(seed)
        self.seed = seed
        self.playbook = rng.choice(PLAYBOOKS)
        self.fault = rng.choice(SCENARIOS[self.playbook].faults)
        # most faults wait for the run's first write and then a while longer (a fault before any write proves
        # nothing); some strike at any moment from the start
        self.after_first_write = rng.random() < 0.8
        self.delay = round(rng.uniform(0.0, 12.0) if self.after_first_write else rng.uniform(0.5, 8.0), 2)
        if self.fault in SECOND_RUNS:  # two runs overlap where it matters: while the first writes
            self.delay = round(self.delay / 4.0, 2)
        self.machine_index = rng.randrange(1000)  # which machine, among the scenario's, a machine fault strikes
        self.hold = round(rng.uniform(2.0, 8.0), 2)  # how long a machine or the API server stays away
        self.latency_ms = rng.choice((300, 800, 1500))
        # drawn last, so that the draws above (and the regression seeds' machine and moment faults) stay as they were:
        # a kill strikes at a point anywhere over the run's writing, and half the SIGKILLs strike ansible-playbook alone
        point, alone = rng.random(), rng.random() < 0.5
        if self.fault == "sigkill" and alone:
            self.fault = "sigkill_playbook"
        if self.fault in KILLS and self.after_first_write:
            self.delay = round(point * SCENARIOS[self.playbook].write_span, 2)

    def machine(self, names):
        return names[self.machine_index % len(names)] if names else None

    def describe(self, names=()):
        what, machine = self.fault, self.machine(list(names))
        if self.fault == "unreachable":
            what = "%s unreachable for %s s" % (machine, self.hold)
        elif self.fault == "slow":
            what = "%s answering %d ms late for %s s" % (machine, self.latency_ms, self.hold)
        elif self.fault == "reboot":
            what = "%s rebooting unasked (down %s s)" % (machine, self.hold)
        elif self.fault == "apiserver_restart":
            what = "the API server restarted (down %s s)" % self.hold
        elif self.fault == "refuse_writes":
            what = "the API server refusing writes for %s s" % self.hold
        elif self.fault == "second_other":
            what = "an install run started"
        elif self.fault == "second_upgrade":
            what = "an upgrade run started"
        elif self.fault == "sigkill_upgrade":
            what = "SIGKILL, then at once an upgrade run,"
        elif self.fault == "sigkill":
            what = "SIGKILL of every process"
        elif self.fault == "sigkill_playbook":
            what = "SIGKILL of ansible-playbook alone"
        elif self.fault == "lose_reply":  # armed from the start: the machine's next write loses its reply
            return "%s: %s loses the reply to its next write (carried out)" % (self.playbook, machine)
        return "%s: %s %s s after %s" % (self.playbook, what, self.delay,
                                         "the first write" if self.after_first_write else "the start")

    def replay(self):
        return "python -m tests.chaos --seed %d --count 1" % self.seed


# Every process of a run carries this in its environment with the run's own value: ansible-playbook's workers start
# sessions of their own (setsid), so neither the process group nor the parent chain finds them all; the environment,
# which the workers and what they start (helm) inherit, does.
RUN_MARK = "ICHOR_CHAOS_RUN"
_STARTED = []  # the runs of the schedule in progress: none is left behind when it ends (a hung run, a crash)
_RUNS = itertools.count(1)


def _start(scenario, run, log, args=None):
    """Start ``run`` ("faulted", "second", "calm", "third") of the scenario (``args``: another playbook's instead of
    its own), writing as its own Kubernetes user. The process carries ``run``, and ``ended_at``: the epoch its
    ansible-playbook was gone (stamped by a thread that waits for it), None while it runs."""
    exe = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    mark = "%d-%d" % (os.getpid(), next(_RUNS))
    args = (scenario.args(run) if args is None else args) + scenario.identity(run)
    proc = subprocess.Popen([exe] + args, env=ansible_env({RUN_MARK: mark}), cwd=REPO, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    proc.mark, proc.run, proc.ended_at = mark, run, None

    def stamp():
        proc.wait()
        proc.ended_at = time.time()
    threading.Thread(target=stamp, name="chaos-%s-end" % run, daemon=True).start()
    _STARTED.append(proc)
    return proc


def _ended(procs):
    """{run: epoch its ansible-playbook was gone} and {pid: the same} of the runs (each has ended)."""
    for proc in procs:
        while proc.ended_at is None:  # its thread stamps it a moment after the process is reaped
            time.sleep(0.01)
    return dict((p.run, p.ended_at) for p in procs), dict((p.pid, p.ended_at) for p in procs)


def _processes(mark, name=None):
    """The pids of the run's processes (``name``: only those whose command starts so), with their argv."""
    needle = ("%s=%s" % (RUN_MARK, mark)).encode()
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % entry, "rb") as handle:
                if needle not in handle.read().split(b"\0"):
                    continue
            with open("/proc/%s/cmdline" % entry, "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:
            continue
        if name is None or os.path.basename(argv[0]).startswith(name.encode()):
            found[int(entry)] = argv
    return found


def _kill_run(proc):
    """SIGKILL every process of the run, as when its host or container dies: stopped first, so that none starts
    another meanwhile, then killed."""
    for unused_attempt in range(5):
        pids = _processes(proc.mark)
        if not pids:
            break
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        time.sleep(0.1)
    proc.wait(30)


def _gone(proc, timeout=60.0):
    """Wait until no process of the run is left."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _processes(proc.mark):
            return True
        time.sleep(0.1)
    return False


def _kill_left():
    while _STARTED:
        proc = _STARTED.pop()
        if proc.poll() is None or _processes(proc.mark):
            _kill_run(proc)


def _run(scenario, run, log_path, args=None):
    with open(log_path, "w") as log:
        proc = _start(scenario, run, log, args)
        code = proc.wait(RUN_TIMEOUT)
    with open(log_path) as handle:
        return code, handle.read()


class _Writes:
    """Whether the run has written yet: a Talos write in the simulator's timeline, or a write of the run's in the
    API server's audit log (the lab agent's, the lock's and Events left out)."""

    def __init__(self, lab):
        self.lab = lab
        self.timeline_start = len(lab.timeline())
        self.audit_start = lab.kube.audit_mark()
        self.polls = 0
        self.first_at = None  # when a poll first saw a write (monotonic)

    def seen(self, audit_every=4):
        """Polled: the audit log is read at one poll in ``audit_every`` (it costs a request and a read)."""
        if self.first_at is None and self._look(audit_every):
            self.first_at = time.monotonic()
        return self.first_at is not None

    def _look(self, audit_every):
        if any(what in TALOS_WRITES for _machine, what in self.lab.timeline()[self.timeline_start:]):
            return True
        self.polls += 1
        if self.polls % audit_every:
            return False
        try:
            return bool(run_writes(self.lab.kube.audit_events(self.audit_start)))
        except Exception:  # pylint: disable=broad-except  # the API server is away (restarting): not known yet
            return False


def _faults(lab, name):
    return next(m.get("faults") or {} for m in lab.talos.state(full=True)["machines"] if m["name"] == name)


def _helm_writing(proc):
    """The pid of a helm of the run that writes a release (upgrade, install, rollback), or None."""
    for pid, argv in _processes(proc.mark, "helm").items():
        if len(argv) > 1 and argv[1] in (b"upgrade", b"install", b"rollback"):
            return pid
    return None


def _wait(proc, seconds):
    deadline = time.monotonic() + seconds
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)


def refuse_writes(lab, on):
    """The API server refuses every write a run makes (a ValidatingAdmissionPolicy denying them: as an admission
    webhook that is down, or etcd out of space, would) or stops refusing. The lab agent's Node and status writes and
    the lab's own control plane pass."""
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": REFUSE_WRITES}, "spec": {
                  "failurePolicy": "Fail",
                  "matchConstraints": {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"],
                                                          "operations": ["CREATE", "UPDATE", "DELETE"]}]},
                  "matchConditions": [{"name": "not-the-lab", "expression": (
                      "!request.userInfo.username.startsWith('system:') && request.resource.resource != 'nodes' && "
                      "request.subResource != 'status' && request.resource.group != 'admissionregistration.k8s.io'")}],
                  "validations": [{"expression": "false",
                                   "message": "the API server refuses writes for a while (the fault campaign)"}]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": REFUSE_WRITES},
               "spec": {"policyName": REFUSE_WRITES, "validationActions": ["Deny"]}}
    if on:
        lab.client.create(policy)
        lab.client.create(binding)
    else:
        lab.client.delete("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", REFUSE_WRITES)
        lab.client.delete("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", REFUSE_WRITES)


def _reboot_unasked(lab, proc, machine, seconds, patience=20.0):
    """Reboot the machine unasked as soon as it can be: one down or busy already (the run's own reboot or reset) is
    tried again until it is up, while the run goes on, for ``patience`` seconds. Returns whether it rebooted."""
    deadline = time.monotonic() + patience
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            lab.talos.control.reboot(machine, seconds=seconds)
            return True
        except Exception:  # pylint: disable=broad-except  # down or busy (409): try again in a moment
            time.sleep(0.25)
    return False


def _kill(proc, fault):
    """End the run as ``fault`` does (one of KILLS)."""
    if fault in ("sigkill", "sigkill_upgrade"):  # the host or the job's container dies: every process
        _kill_run(proc)
    elif fault == "sigkill_playbook":  # ansible-playbook alone: its workers and heartbeat live on until they notice
        proc.kill()
        proc.wait(30)
    else:  # AWX's cancel: SIGTERM to ansible-playbook, then, after a grace, SIGKILL to what is left
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            pass
        if not _gone(proc, 30):
            _kill_run(proc)


def _faulted_run(schedule, scenario, log_path):
    """The run with its fault; returns (its exit code, or None when the fault ended it; whether the fault struck after
    the run's first write; seconds; seconds from its start to its first write seen, or None)."""
    lab = scenario.lab
    writes = _Writes(lab)
    machine = schedule.machine(scenario.fault_machines())
    if schedule.fault == "lose_reply":  # carried out, its reply lost once: the caller sees its deadline pass
        lab.talos.control.set_faults(machine, lose_reply=scenario.lose_reply_method)
    with open(log_path, "w") as log:
        proc = _start(scenario, "faulted", log)
        began = time.monotonic()
        if schedule.fault == "lose_reply":  # it strikes on the machine's write, or never
            proc.wait(RUN_TIMEOUT)
            struck = "lose_reply" not in _faults(lab, machine)
            lab.talos.control.clear_faults(machine)
            return proc.returncode, struck, time.monotonic() - began, None
        if schedule.fault == "helm_kill":  # helm killed in the middle of writing a release, once the run starts one
            pid = None
            while proc.poll() is None and pid is None:
                pid = _helm_writing(proc)
                time.sleep(0.01)
            time.sleep(schedule.delay / 60.0)  # up to 0.2 s into helm's work
            if pid is None or _helm_writing(proc) != pid:  # no helm wrote, or it was done before its fault
                proc.wait(RUN_TIMEOUT)
                return proc.returncode, False, time.monotonic() - began, _since(writes, began)
            landed = writes.seen(audit_every=1)
            os.kill(pid, signal.SIGKILL)
            proc.wait(RUN_TIMEOUT)
            return proc.returncode, landed, time.monotonic() - began, _since(writes, began)
        if schedule.after_first_write:
            while proc.poll() is None and not writes.seen():
                time.sleep(0.05)
        _wait(proc, schedule.delay)
        if proc.poll() is not None:  # it ended before its fault: the fault did not land
            return proc.returncode, False, time.monotonic() - began, _since(writes, began)
        landed = writes.seen(audit_every=1)
        if schedule.fault in ("unreachable", "slow"):
            faults = dict(unreachable=True) if schedule.fault == "unreachable" else dict(latency_ms=schedule.latency_ms)
            lab.talos.control.set_faults(machine, **faults)
            _wait(proc, schedule.hold)
            lab.talos.control.clear_faults(machine)
        elif schedule.fault == "reboot":  # a machine down on its own: a control plane's etcd member with it
            landed = landed and _reboot_unasked(lab, proc, machine, schedule.hold)
        elif schedule.fault == "apiserver_restart":
            lab.kube.restart_apiserver(down_s=schedule.hold)
        elif schedule.fault == "refuse_writes":
            refuse_writes(lab, True)
            _wait(proc, schedule.hold)
            refuse_writes(lab, False)
        elif schedule.fault in SECOND_RUNS:  # a second operator starts a job: both run to their end
            args = None if schedule.fault == "second_run" else \
                scenario.upgrade_args() if schedule.fault == "second_upgrade" else scenario.other_args()
            with open(log_path + ".second", "w") as second_log:
                scenario.second_exit = _start(scenario, "second", second_log, args).wait(RUN_TIMEOUT)
        elif schedule.fault in KILLS:
            _kill(proc, schedule.fault)
            if schedule.fault == "sigkill_upgrade":  # another operator upgrades at once: it takes the dead run's lock
                with open(log_path + ".second", "w") as second_log:
                    scenario.second_exit = _start(scenario, "second", second_log, scenario.upgrade_args()).wait(
                        RUN_TIMEOUT)
            return None, landed, time.monotonic() - began, _since(writes, began)
        else:
            raise ValueError("unknown fault %r" % schedule.fault)
        proc.wait(RUN_TIMEOUT)
        return proc.returncode, landed, time.monotonic() - began, _since(writes, began)


def _since(writes, began):
    return round(writes.first_at - began, 1) if writes.first_at is not None else None


def _done(scenario, run, code, playbook=None):
    """A run that exits 0 has done all its work, judged from outside (the scenario's converged(): what the playbook
    must have achieved; the other playbook's run, its own)."""
    if code != 0:
        return
    try:
        scenario.other_done() if playbook == "other" else scenario.converged()
    except Violation as exc:
        raise Violation("the %s run exited 0 without having done its work: %s" % (run, exc))


def run_schedule(schedule, work):
    """Run one schedule; returns its report (a dict). Raises nothing: a violation is in the report."""
    report = dict(seed=schedule.seed, playbook=schedule.playbook, fault=schedule.fault, replay=schedule.replay())
    shutil.rmtree(work, ignore_errors=True)  # a replay starts from nothing, as the schedule did (no earlier files)
    os.makedirs(work)
    began = time.monotonic()
    scenario = SCENARIOS[schedule.playbook](work)
    scenario.fault = schedule.fault
    try:
        lab = scenario.start()
        report["schedule"] = schedule.describe(scenario.fault_machines())
        if lab.talos:
            lab.talos.control.reset_timeline()
        code, landed, took, first = _faulted_run(schedule, scenario, os.path.join(work, "faulted.log"))
        report.update(faulted_exit=code, landed_after_first_write=landed, faulted_s=round(took, 1),
                      first_write_s=first)
        _done(scenario, "faulted", code)
        if scenario.second_exit is not None:
            report.update(second_exit=scenario.second_exit, second=_last_error(_read(work, "faulted.log.second")))
            if schedule.fault in ("second_run", "second_other"):
                _done(scenario, "second", scenario.second_exit, "other" if schedule.fault == "second_other" else None)
        check_not_applied_while_held(lab)
        scenario.check(complete=False)
        scenario.settle()
        # the next run starts at once, as an operator's next job or AWX's next schedule does: nothing waits for the
        # lock. A dead run's lock must not refuse it (its playbook is gone: the lock is taken over)
        after = time.time() - max(_ended(list(_STARTED))[0].values())
        if after > NEXT_RUN_WITHIN_S:
            raise RuntimeError("the machines took %.0f s to settle: the calm rerun could not start within %d s" % (
                after, NEXT_RUN_WITHIN_S))
        code, out = _run(scenario, "calm", os.path.join(work, "calm.log"))
        report.update(calm_exit=code, calm_after_s=round(after, 1))
        if code != 0:
            raise Violation("the calm rerun, started %.1f s after the last run ended, failed (exit %d): %s" % (
                after, code, _last_error(out)))
        _done(scenario, "calm", code)
        report.update(scenario.check(complete=True))
        report.update(holds=check_not_applied_while_held(lab))
        check_lock_free(lab)
        before = len(lab.timeline())
        mark = lab.kube.audit_mark()
        code, out = _run(scenario, "third", os.path.join(work, "third.log"))
        talos = [entry for entry in lab.timeline()[before:] if entry[1] in TALOS_WRITES]
        api = ["%s %s/%s" % (e["verb"], (e.get("objectRef") or {}).get("resource"), (e.get("objectRef") or {}).get(
            "name")) for e in run_writes(lab.kube.audit_events(mark))]
        if code != 0 or talos or api:
            raise Violation("the third run changed something (exit %d, Talos writes %s, API writes %s)" % (
                code, talos[:5], api[:5]))
        report.update(third_hosts=check_unchanged_recap(out))
        _done(scenario, "third", code)
        check_lock_free(lab)
        report.update(_judge_runs(scenario, lab.kube.audit_events(lab.audit_start), list(_STARTED)))
        check_not_applied_while_held(lab)
        report.update(converged=True, violation=None)
    except Violation as exc:
        report.update(converged=False, violation=str(exc))
    except subprocess.TimeoutExpired as exc:  # a run that hangs is a finding too
        report.update(converged=False, violation="a run did not end within %d s: %s" % (RUN_TIMEOUT, exc.cmd[-3:]))
    except Exception as exc:  # pylint: disable=broad-except  # the lab or the campaign failed: nothing was judged
        report.update(converged=False, violation=None, error="%s: %s" % (type(exc).__name__, str(exc)[:400]))
    finally:
        _kill_left()
        scenario.stop()
    report["seconds"] = round(time.monotonic() - began, 1)
    return report


def _judge_runs(scenario, events, procs):
    """The runs against one another, from the audit log: the lock (production duration, never taken from a live run),
    no two runs' writes interleaved (where the playbook holds the lock), and no run writing on after its
    ansible-playbook was gone. Returns figures for the report."""
    by_run, by_pid = _ended(procs)
    figures = dict(lock_handovers=check_lock_history(events, by_pid, production_lock_duration()))
    if scenario.locked:
        figures.update(writes=check_writes_apart(events))
    check_quiet_after(events, by_run)
    return figures


def _read(work, name):
    with open(os.path.join(work, name)) as handle:
        return handle.read()


def _last_error(out):
    lines = [line for line in out.splitlines() if line.startswith(("fatal:", "failed:", "ERROR"))]
    return (lines[-1] if lines else out.strip().splitlines()[-1] if out.strip() else "no output")[:400]


# every kind of fault a schedule can draw
FAULT_KINDS = tuple(sorted(set(f for scenario in SCENARIOS.values() for f in scenario.faults) | {"sigkill_playbook"}))
# the seeds whose schedules found something (README, "What it found"); 2939 and 3067 have lab tests of their own
REGRESSION_SEEDS = (2939, 2963, 2992, 3067)
# CI's commit-derived seeds start here, above every soak's (tests/chaos/used_seeds.txt)
COMMIT_SEEDS_FROM = 10 ** 6


def commit_seed(commit):
    """The first seed CI's slice searches from, derived from the commit (its id): each commit meets other schedules,
    and any of them replays with its seed."""
    return COMMIT_SEEDS_FROM + int(hashlib.sha256(commit.encode()).hexdigest()[:12], 16) % 10 ** 8


def head_commit():
    """The checkout's commit id ("unknown" outside a git checkout)."""
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True,
                              timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _strikes_early(schedule):
    """Whether the schedule's fault meets the run while it writes, by its draw: after the first write, a kill within
    the first 60% of the playbook's writing, another fault within 4 s; lose_reply and helm_kill strike on a write of
    their own."""
    if schedule.fault in ("lose_reply", "helm_kill"):
        return True
    limit = 0.6 * SCENARIOS[schedule.playbook].write_span if schedule.fault in KILLS else 4.0
    return schedule.after_first_write and schedule.delay <= limit


def slice_seeds(start, limit=100000):
    """From ``start`` on, the first seed of each fault kind (and of each playbook) whose fault strikes while the run
    writes: a short slice (CI's) in which every kind of fault meets a run that writes."""
    kinds, playbooks = {}, {}
    for seed in range(start, start + limit):
        schedule = Schedule(seed)
        if not _strikes_early(schedule):
            continue
        if schedule.fault not in kinds:
            kinds[schedule.fault] = seed
            playbooks.setdefault(schedule.playbook, seed)
        elif schedule.playbook not in playbooks and len(kinds) == len(FAULT_KINDS):
            playbooks[schedule.playbook] = seed
        if len(kinds) == len(FAULT_KINDS) and len(playbooks) == len(PLAYBOOKS):
            return sorted(set(kinds.values()) | set(playbooks.values()))
    raise RuntimeError("no slice within %d seeds of %d: fault kinds %s" % (limit, start, sorted(kinds)))


def ci_slice(commit=None):
    """CI's slice: the regression seeds not tested on their own, and from the commit's seed on, one schedule of each
    fault kind and each playbook. Returns (commit, seeds)."""
    commit = commit or head_commit()
    return commit, sorted(set(REGRESSION_SEEDS) - {2939, 3067} | set(slice_seeds(commit_seed(commit))))


def _run_seed(seed, work):
    schedule = Schedule(seed)
    return run_schedule(schedule, os.path.join(work, str(schedule.seed)))


def campaign(seed, count, work=None, budget_s=None, stream=sys.stderr, jobs=1, seeds=None):
    """Run ``count`` schedules from ``seed`` (schedule i's seed is seed + i; or the given ``seeds``), within
    ``budget_s`` if given, ``jobs``
    at a time (each schedule has a lab of its own; more than one at a time makes every run slower, which the faults'
    moments, drawn relative to the runs' own writes, do not depend on). Returns the summary: every report, the
    violations, the convergence rate, and whether at least half of each playbook's schedules struck after its first
    write."""
    work = work or tempfile.mkdtemp(prefix="ichor-chaos-")
    began = time.monotonic()
    reports = []

    def done(report):
        reports.append(report)
        stream.write("chaos %s\n" % json.dumps(report, sort_keys=True))
        stream.flush()

    def within_budget():
        return budget_s is None or not reports or time.monotonic() - began <= budget_s

    seeds = list(seeds) if seeds is not None else list(range(seed, seed + count))
    if jobs <= 1:
        for next_seed in seeds:
            if not within_budget():
                break
            done(_run_seed(next_seed, work))
    else:
        with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
            pending = set()
            for next_seed in seeds:
                pending.add(pool.submit(_run_seed, next_seed, work))
                if len(pending) < jobs:
                    continue
                finished, pending = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
                for future in finished:
                    done(future.result())
                if not within_budget():
                    break
            for future in concurrent.futures.as_completed(pending):
                done(future.result())
        reports.sort(key=lambda r: r["seed"])
    landed, kinds = {}, {}
    for report in reports:
        landed.setdefault(report["playbook"], []).append(bool(report.get("landed_after_first_write")))
        kinds.setdefault(report["fault"], []).append(bool(report.get("landed_after_first_write")))
    violations = [r for r in reports if r.get("violation")]
    errors = [r for r in reports if r.get("error")]
    return dict(schedules=len(reports), violations=len(violations), errors=len(errors),
                convergence=round(sum(1 for r in reports if r.get("converged")) / float(len(reports) or 1), 3),
                landed_after_first_write=dict((p, "%d/%d" % (sum(v), len(v))) for p, v in landed.items()),
                faults=dict((k, "%d/%d" % (sum(v), len(v))) for k, v in sorted(kinds.items())),
                enough_landed=all(sum(v) * 2 >= len(v) for v in landed.values()),
                failures=[dict(seed=r["seed"], violation=r.get("violation"), error=r.get("error"), replay=r["replay"])
                          for r in violations + errors],
                seconds=round(time.monotonic() - began, 1), machine=os.uname().nodename, cores=os.cpu_count(),
                work=work, reports=reports)
