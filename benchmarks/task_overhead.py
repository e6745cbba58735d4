"""Benchmark: what a task of this collection costs per host through ``ansible-playbook``, the way users run it
(issue 16), measured side by side in one run on this machine:

* ``maesh.ichor.talos_facts`` (an action plugin: it runs in Ansible's own process) against ``ansible.builtin.ping``
  (a module: its own process per host, ``connection: local``), one task, one host per simulated machine, at 5, 20
  and 50 machines, forks 5 and 50, three runs each (the median): wall time, and CPU time of the whole
  ``ansible-playbook`` (every process it waited for) minus the same play without the task, per host; the ratio of
  the two per-host costs;
* ``maesh.ichor.upgrade --check`` on 3 control planes and 10, 50 and 100 workers behind the release set, with the real
  API server: wall time and its growth law (least squares: a + b per machine);
(The rolling Talos step through the playbook, once measured here from each machine's play, is one task now:
``benchmarks/rollout.py`` measures it.)

Run by hand (about ten minutes on 2 cores):

    ~/.cache/maesh-ichor/env-2.19/bin/python -m benchmarks.task_overhead [--quick] [--only per_host]

``--quick`` runs the smallest sizes only; ``--only`` measures one part and prints it. The last line is one JSON
object: {"benchmark", "figures", "ratio", "goal"}; it is also written to benchmarks/results/task_overhead.json.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
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
GOALS = {"upgrade_check_103_s": 5.0, "task_ratio": 0.3}

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


def main():
    parser = argparse.ArgumentParser(prog="python -m benchmarks.task_overhead")
    parser.add_argument("--quick", action="store_true", help="the smallest sizes only")
    parser.add_argument("--only", choices=["per_host"],
                        help="measure only this and print it (the result file is written by a full run only)")
    args = parser.parse_args()
    sizes, forks_list, workers_list = ([5], [5], [10, 20]) if report.QUICK else ([5, 20, 50], [5, 50], [10, 50, 100])
    work = report.workdir("ichor-bench-overhead-")
    kube = KubeLab.start(workdir=os.path.join(work, "kube"), bins=binaries(build=True, stream=sys.stderr))
    try:
        if args.only == "per_host":
            print(json.dumps({"per_host": per_host(work, sizes, forks_list)}))
            return
        facts = per_host(work, sizes, forks_list)
        check = upgrade_check(work, kube, workers_list)
    finally:
        kube.stop()
    a, b = _growth([(r["machines"], r["wall_s"]) for r in check])
    figures = {"per_host": facts, "upgrade_check": check,
               "upgrade_check_growth": "%.2f s + %.3f s per machine" % (a, b),
               "upgrade_check_at_103_s": round(a + b * 103, 2)}
    if len(sizes) > 1:  # what one more host costs: the slope of CPU over machines, per module and forks
        for forks in forks_list:
            rows = [r for r in facts if r["forks"] == forks]
            slopes = dict((task, _growth([(r["machines"], r[task + "_cpu_per_host_s"] * r["machines"]) for r in rows])[1])
                          for task in TASKS)
            figures["cpu_per_extra_host_forks_%d" % forks] = dict(slopes, ratio=round(slopes["talos_facts"] / slopes["ping"], 2))
    ratios = {"upgrade_check_103": round((a + b * 103) / GOALS["upgrade_check_103_s"], 3),
              "talos_facts_to_ping": round(max(r["cpu_ratio"] for r in facts if r["machines"] == max(sizes))
                                           / GOALS["task_ratio"], 3)}
    result = {"benchmark": "task_overhead", "figures": figures, "ratio": ratios,
              "goal": "upgrade --check on 3 + 100 machines under %.0f s; talos_facts' CPU per host at most %.1f times "
                      "ping's at the largest size (each ratio below 1 meets its goal); the rolling Talos step's "
                      "overhead is benchmarks/rollout.py's" % (GOALS["upgrade_check_103_s"], GOALS["task_ratio"])}
    report.write(result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
