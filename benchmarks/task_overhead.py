"""Benchmark: what a task of this collection costs per host through ``ansible-playbook``, the way users run it
(issue 16), measured side by side in one run on this machine:

* ``maesh.ichor.talos_facts`` (an action plugin: it runs in Ansible's own process) against ``ansible.builtin.ping``
  (a module: its own process per host, ``connection: local``), one task, one host per simulated machine, at 5, 20
  and 50 machines, forks 5 and 50, three runs each (the median): wall time, and CPU time of the whole
  ``ansible-playbook`` (every process it waited for) minus the same play without the task, per host; the ratio of
  the two per-host costs;
* ``maesh.ichor.upgrade --check`` on 3 control planes and 10, 50 and 100 workers behind the release set, with the real
  API server: wall time and its growth law (least squares: a + b per machine);
* the rolling Talos step through ``maesh.ichor.upgrade`` (the real run) on 1 + 6 machines, three runs: what each
  machine costs (from the start of its batch to the start of the next, in Ansible's log) beyond the simulator's own
  upgrade time, the median over every machine.

Run by hand (about ten minutes on 2 cores):

    ~/.cache/maesh-ichor/env-2.19/bin/python -m benchmarks.task_overhead [--quick] [--only per_host|rolling_upgrade]

``--quick`` runs the smallest sizes only; ``--only`` measures one part and prints it. The last line is one JSON
object: {"benchmark", "figures", "ratio", "goal"}; it is also written to benchmarks/results/task_overhead.json.
"""

import argparse
import datetime
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import yaml

from benchmarks import report
from tests import collection_path

collection_path.ensure()

# pylint: disable=wrong-import-position
from tests.integration.ansible_env import ansible_env, write_inventory  # noqa: E402
from tests.lab.agent import LabAgent  # noqa: E402
from tests.lab.kube.cluster import KubeLab, binaries  # noqa: E402
from tests.lab.process import LabProcess  # noqa: E402

BEHIND = "v1.13/v1.13.9/k8s-older"  # real Talos configs: contract v1.13, Talos v1.13.9, Kubernetes 1.35.4
KUBELET = "v1.35.4"  # the case's Kubernetes, as each Node's kubelet


def _record(kube):
    """The cluster record adopt leaves for BEHIND's cluster: the upgrade plans only for a cluster it manages."""
    from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record  # noqa: E402
    from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient  # noqa: E402
    client = KubeClient(kubeconfig=kube.kubeconfig)
    cluster_record.update(client, lambda data: data.update(talos="v1.13.9", contract="v1.13", kubernetes=KUBELET))


RUNS = 3
GOALS = {"upgrade_check_103_s": 5.0, "task_ratio": 0.3, "roll_overhead_per_machine_s": 0.3}

PLAYBOOK = """\
- name: One task per host
  hosts: controlplane:worker
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
  tasks:
    - name: The task
      %s
"""
# the play without its task: what Ansible costs anyway, taken from each task's figure
NO_TASK = """\
- name: No task
  hosts: controlplane:worker
  connection: local
  gather_facts: false
  tasks: []
"""
TASKS = {
    "ping": "ansible.builtin.ping:",
    "talos_facts": "maesh.ichor.talos_facts:\n        talosconfig: \"{{ ichor_talosconfig }}\"\n"
                   "        node: \"{{ ansible_host }}\"",
}


def _exe():
    return os.path.join(os.path.dirname(sys.executable), "ansible-playbook")


def _play(args, env=None):
    """(wall seconds, CPU seconds of the playbook and every process it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([_exe()] + args, env=env or ansible_env(), capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit("ansible-playbook %s failed:\n%s\n%s" % (" ".join(args), proc.stdout[-3000:], proc.stderr[-2000:]))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout


def _inventory(lab, path, kubeconfig=None):
    inventory = write_inventory(lab.control.state(), path)
    if kubeconfig:
        data = yaml.safe_load(open(inventory))
        data["all"]["vars"]["ichor_kubeconfig"] = kubeconfig
        with open(inventory, "w") as handle:
            yaml.safe_dump(data, handle)
    return inventory


def per_host(work, sizes, forks_list):
    """talos_facts against ping: wall time, and CPU per host beyond the same play without the task (medians of RUNS),
    at each size and forks."""
    rows = []
    plays = dict((task, os.path.join(work, task + ".yml")) for task in ("none",) + tuple(TASKS))
    for task, body in TASKS.items():
        with open(plays[task], "w") as handle:
            handle.write(PLAYBOOK % body)
    with open(plays["none"], "w") as handle:
        handle.write(NO_TASK)
    for size in sizes:
        lab = LabProcess(os.path.join(work, "facts-%d" % size), controlplanes=1, workers=size - 1).start(timeout=120)
        try:
            inventory = _inventory(lab, os.path.join(work, "facts-%d.yml" % size))
            for forks in forks_list:
                row = {"machines": size, "forks": forks}
                cpu = {}
                for task, play in plays.items():
                    runs = [_play(["-i", inventory, "-f", str(forks), play])[:2] for _run in range(RUNS)]
                    row[task + "_wall_s"] = round(statistics.median(r[0] for r in runs), 3)
                    cpu[task] = statistics.median(r[1] for r in runs)
                for task in TASKS:
                    row[task + "_cpu_per_host_s"] = round((cpu[task] - cpu["none"]) / size, 3)
                row["no_task_cpu_s"] = round(cpu["none"], 3)
                row["cpu_ratio"] = round(row["talos_facts_cpu_per_host_s"] / row["ping_cpu_per_host_s"], 2)
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
        finally:
            lab.stop()
    return rows


def _growth(points):
    """Least squares a + b*n over [(n, seconds)]."""
    ns = [p[0] for p in points]
    ys = [p[1] for p in points]
    n_mean, y_mean = statistics.mean(ns), statistics.mean(ys)
    b = sum((n - n_mean) * (y - y_mean) for n, y in points) / sum((n - n_mean) ** 2 for n in ns)
    return round(y_mean - b * n_mean, 3), round(b, 4)


def upgrade_check(work, kube, workers_list):
    """upgrade --check wall time on 3 control planes and each number of workers."""
    rows = []
    for workers in workers_list:
        lab = LabProcess(os.path.join(work, "check-%d" % workers), controlplanes=3, workers=workers, case=BEHIND,
                         version="v1.13.9").start(timeout=180)
        agent = LabAgent(kube.api_client(), talos_lab=lab, default_kubelet=KUBELET, owner="bench")
        try:
            agent.sync_once()
            _record(kube)
            inventory = _inventory(lab, os.path.join(work, "check-%d.yml" % workers), kube.kubeconfig)
            runs = [_play(["-i", inventory, "maesh.ichor.upgrade", "--check"]) for _run in range(RUNS)]
            assert "next step: talos" in runs[0][2], runs[0][2][-2000:]
            rows.append({"machines": 3 + workers, "wall_s": round(statistics.median(r[0] for r in runs), 3),
                         "cpu_s": round(statistics.median(r[1] for r in runs), 3)})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        finally:
            agent.stop()
            lab.stop()
    return rows


def _roll(work, kube, workers, upgrade_seconds, reboot_seconds):
    """The real run of maesh.ichor.upgrade (its Talos step) on 1 + workers machines: each machine's cycle, read from
    Ansible's own log."""
    lab = LabProcess(tempfile.mkdtemp(dir=work, prefix="roll-%d-" % workers), controlplanes=1, workers=workers, case=BEHIND,
                     version="v1.13.9", upgrade_seconds=upgrade_seconds, reboot_seconds=reboot_seconds).start(timeout=120)
    # the Nodes follow the machines through their reboots: polled often, and only a change patched, so that the
    # simulated kubelets' lag and the agent's own work are not counted as the collection's
    agent = LabAgent(kube.api_client(), talos_lab=lab, default_kubelet=KUBELET, interval=0.05, owner="bench",
                     refresh=False)
    agent.start()
    try:
        _record(kube)  # each run starts from a cluster behind the set, as adopt leaves it
        inventory = _inventory(lab, os.path.join(lab.workdir, "inventory.yml"), kube.kubeconfig)
        log = os.path.join(lab.workdir, "ansible.log")
        _wall, _cpu, out = _play(["-i", inventory, "maesh.ichor.upgrade"], env=ansible_env({"ANSIBLE_LOG_PATH": log}))
        assert out.count("changed: [") >= 1 + workers, out[-2000:]
        with open(log) as handle:
            cycles = batch_cycles(handle)
        assert len(cycles) == 1 + workers, cycles
    finally:
        agent.stop()
        lab.stop()
    return cycles


_PLAY_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*\| PLAY \[(.*)\] \**$")
TALOS_PLAY = "Talos step, one machine at a time, control planes first"


def batch_cycles(lines):
    """Seconds from the start of each batch of the Talos step (its PLAY line in Ansible's log) to the start of the
    next: the next machine's batch, or for the last machine the play after the step. One machine's whole cost."""
    marks = []
    for line in lines:
        found = _PLAY_LINE.match(line.rstrip("\n"))
        if not found:
            continue
        when = datetime.datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S,%f")
        if found.group(2) == TALOS_PLAY:
            marks.append(when)
        elif marks:
            marks.append(when)
            break
    return [round((b - a).total_seconds(), 3) for a, b in zip(marks, marks[1:])]


# What the simulator itself spends on a v1.13+ machine's upgrade (tests/lab/talos_sim): the installer's three output
# lines 0.01 s apart (api.lifecycle_upgrade), 0.1 s before the Reboot it schedules starts (lab.schedule), then the
# machine is down for upgrade_seconds (lab.reboot: a machine with a pending version reboots that long, not
# reboot_seconds).
SIMULATED_UPGRADE_EXTRA_S = 3 * 0.01 + 0.1


def rolling_upgrade(work, kube, workers=6, upgrade_seconds=0.5, reboot_seconds=0.3, runs=RUNS):
    """The Talos step through the playbook: what each machine costs, from the start of its batch to the start of the
    next (read from Ansible's log, so the plan and the record around the step are not counted), less the
    simulator's own upgrade time. 1 + ``workers`` machines, ``runs`` runs: the median over every machine of every
    run, and the control plane's apart (it also waits for etcd)."""
    runs_cycles = [_roll(work, kube, workers, upgrade_seconds, reboot_seconds) for _run in range(runs)]
    every = [c for cycles in runs_cycles for c in cycles]
    simulated = SIMULATED_UPGRADE_EXTRA_S + upgrade_seconds
    per_machine = statistics.median(every)
    return {"machines": 1 + workers, "runs": runs, "cycles_s": runs_cycles,
            "per_machine_s": round(per_machine, 3),
            "controlplane_s": round(statistics.median(cycles[0] for cycles in runs_cycles), 3),
            "worker_s": round(statistics.median(c for cycles in runs_cycles for c in cycles[1:]), 3),
            "simulated_per_machine_s": simulated,
            "overhead_per_machine_s": round(per_machine - simulated, 3)}


def main():
    parser = argparse.ArgumentParser(prog="python -m benchmarks.task_overhead")
    parser.add_argument("--quick", action="store_true", help="the smallest sizes only")
    parser.add_argument("--only", choices=["per_host", "rolling_upgrade"],
                        help="measure only this and print it (the result file is written by a full run only)")
    args = parser.parse_args()
    sizes, forks_list, workers_list = ([5], [5], [10, 20]) if report.QUICK else ([5, 20, 50], [5, 50], [10, 50, 100])
    work = report.workdir("ichor-bench-overhead-")
    kube = KubeLab.start(workdir=os.path.join(work, "kube"), bins=binaries(build=True, stream=sys.stderr))
    try:
        if args.only == "per_host":
            print(json.dumps({"per_host": per_host(work, sizes, forks_list)}))
            return
        if args.only:
            print(json.dumps({args.only: rolling_upgrade(work, kube)}))
            return
        facts = per_host(work, sizes, forks_list)
        check = upgrade_check(work, kube, workers_list)
        roll = rolling_upgrade(work, kube)
    finally:
        kube.stop()
    a, b = _growth([(r["machines"], r["wall_s"]) for r in check])
    figures = {"per_host": facts, "upgrade_check": check,
               "upgrade_check_growth": "%.2f s + %.3f s per machine" % (a, b),
               "upgrade_check_at_103_s": round(a + b * 103, 2), "rolling_upgrade": roll}
    if len(sizes) > 1:  # what one more host costs: the slope of CPU over machines, per module and forks
        for forks in forks_list:
            rows = [r for r in facts if r["forks"] == forks]
            slopes = dict((task, _growth([(r["machines"], r[task + "_cpu_per_host_s"] * r["machines"]) for r in rows])[1])
                          for task in TASKS)
            figures["cpu_per_extra_host_forks_%d" % forks] = dict(slopes, ratio=round(slopes["talos_facts"] / slopes["ping"], 2))
    ratios = {"upgrade_check_103": round((a + b * 103) / GOALS["upgrade_check_103_s"], 3),
              "talos_facts_to_ping": round(max(r["cpu_ratio"] for r in facts if r["machines"] == max(sizes))
                                           / GOALS["task_ratio"], 3),
              "roll_overhead": round(roll["overhead_per_machine_s"] / GOALS["roll_overhead_per_machine_s"], 3)}
    result = {"benchmark": "task_overhead", "figures": figures, "ratio": ratios,
              "goal": "upgrade --check on 3 + 100 machines under %.0f s; talos_facts' CPU per host at most %.1f times "
                      "ping's at the largest size; the rolling Talos step's overhead under %.1f s per machine (each "
                      "ratio below 1 meets its goal)" % (
                          GOALS["upgrade_check_103_s"], GOALS["task_ratio"], GOALS["roll_overhead_per_machine_s"])}
    report.write(result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
