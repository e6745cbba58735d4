"""Benchmark: what a task of this collection costs per host through ``ansible-playbook``, the way users run it
(issue 16), measured side by side in one run on this machine:

* each module's start-up: its process alone up to its first call (the AnsiballZ file Ansible ran, against a machine
  and an API server that refuse the connection), ``talos_facts`` and ``talos_upgrade`` against ``ping``;
* ``maesh.ichor.talos_facts`` against ``ansible.builtin.ping`` (both ``connection: local``, one task, one host per
  simulated machine) at 5, 20 and 50 machines, forks 5 and 50, three runs each (the median): wall time and CPU time
  (the playbook and its module processes) per host, what one more host costs (the slope), and the ratios;
* ``maesh.ichor.upgrade --check`` on 3 control planes and 10, 50 and 100 workers behind the release set, with the real
  API server: wall time and its growth law (least squares: a + b per machine);
* the rolling Talos step through ``maesh.ichor.upgrade`` (the real run) on 1 + 6 machines, three runs: what each
  machine costs (from the start of its batch to the start of the next, in Ansible's log) beyond the simulator's own
  upgrade time, the median over every machine.

Run by hand (about ten minutes on 2 cores):

    ~/.cache/maesh-ichor/env-2.19/bin/python -m benchmarks.task_overhead [--quick] [--only start_up|rolling_upgrade]

``--quick`` runs the smallest sizes only; ``--only`` measures one part and prints it. The last line is one JSON
object: {"benchmark", "figures", "ratio", "goal"}; it is also written to benchmarks/results/task_overhead.json.
"""

import argparse
import datetime
import json
import os
import re
import resource
import shutil
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
from tests.lab.kube.cluster import KubeLab, binaries, _free_port as free_port  # noqa: E402 pylint: disable=protected-access
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
GOALS = {"upgrade_check_103_s": 15.0, "startup_ratio": 1.5, "roll_overhead_per_machine_s": 1.0}

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
    """talos_facts against ping: per host wall and CPU (medians of RUNS) at each size and forks."""
    rows = []
    for task, body in TASKS.items():
        with open(os.path.join(work, task + ".yml"), "w") as handle:
            handle.write(PLAYBOOK % body)
    for size in sizes:
        lab = LabProcess(os.path.join(work, "facts-%d" % size), controlplanes=1, workers=size - 1).start(timeout=120)
        try:
            inventory = _inventory(lab, os.path.join(work, "facts-%d.yml" % size))
            for forks in forks_list:
                row = {"machines": size, "forks": forks}
                for task in TASKS:
                    runs = [_play(["-i", inventory, "-f", str(forks), os.path.join(work, task + ".yml")])[:2]
                            for _run in range(RUNS)]
                    row[task + "_wall_s"] = round(statistics.median(r[0] for r in runs), 3)
                    row[task + "_cpu_per_host_s"] = round(statistics.median(r[1] for r in runs) / size, 3)
                row["cpu_ratio"] = round(row["talos_facts_cpu_per_host_s"] / row["ping_cpu_per_host_s"], 2)
                row["wall_ratio"] = round(row["talos_facts_wall_s"] / row["ping_wall_s"], 2)
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
        finally:
            lab.stop()
    return rows


# What a module process costs up to its first call: each module's AnsiballZ file (kept with ANSIBLE_KEEP_REMOTE_FILES)
# run on its own against a machine and an API server that refuse the connection (a real talosconfig and kubeconfig
# whose endpoints are a closed port), so every import, the talosconfig's parse and the TLS set-up are counted and the
# first dial fails at once; ping is the anchor. The modules run in rounds, each once per round, and the ratio is the
# median over the rounds of each round's own ratio: on this machine kind the least CPU time of 20 runs moved by 15%
# from one benchmark run to the next (the ratio of the least times read 1.21 to 1.57 on the same code), while a
# round's two runs share whatever slows the machine then. Where valgrind is installed, each process's instruction
# count (callgrind, PYTHONHASHSEED=0: the same every run) gives the ratio a figure that does not move at all.
STARTUP_MODULES = (("ansible.builtin.ping", ""),
                   ("maesh.ichor.talos_facts", "node=127.0.0.1 talosconfig={talosconfig}"),
                   ("maesh.ichor.talos_upgrade", "node=127.0.0.1 role=worker talosconfig={talosconfig} "
                                                 "kubeconfig={kubeconfig}"))
STARTUP_RUNS = 40


def _cpu_of(argv):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _refusing(work, kube):
    """A talosconfig (of a lab machine: real CA and client certificate) and a kubeconfig (the lab API server's) whose
    endpoints are a port nothing listens on."""
    port = free_port()  # nothing listens on it
    lab = LabProcess(os.path.join(work, "startup"), controlplanes=1, workers=0).start(timeout=120)
    try:
        with open(lab.talosconfig) as handle:
            talos = yaml.safe_load(handle)
    finally:
        lab.stop()
    for context in talos["contexts"].values():
        context["endpoints"] = ["127.0.0.1:%d" % port]
        context.pop("nodes", None)
    with open(kube.kubeconfig) as handle:
        kubeconfig = yaml.safe_load(handle)
    for cluster in kubeconfig["clusters"]:
        cluster["cluster"]["server"] = "https://127.0.0.1:%d" % port
    paths = {"port": port}
    for name, doc in (("talosconfig", talos), ("kubeconfig", kubeconfig)):
        paths[name] = os.path.join(work, "refusing-" + name)
        with open(paths[name], "w") as handle:
            yaml.safe_dump(doc, handle)
        os.chmod(paths[name], 0o600)
    return paths


def startup(work, kube):
    """{module: least CPU seconds of its process alone, up to its first call}, and each module's ratio to ping's."""
    kept = os.path.join(work, "kept")
    env = ansible_env({"ANSIBLE_KEEP_REMOTE_FILES": "1", "ANSIBLE_REMOTE_TMP": kept})
    adhoc = os.path.join(os.path.dirname(sys.executable), "ansible")
    refusing = _refusing(work, kube)
    wrappers = {}
    for module, args in STARTUP_MODULES:
        before = set(_kept_files(kept))
        done = subprocess.run([adhoc, "localhost", "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable,
                               "-m", module, "-a", args.format(**refusing)], env=env, capture_output=True, text=True,
                              check=False)
        if module != "ansible.builtin.ping":  # it got as far as its first call, which found nothing listening
            assert "FAILED" in done.stdout and "127.0.0.1:%d" % refusing["port"] in done.stdout, done.stdout[-1500:]
        wrapper = sorted(set(_kept_files(kept)) - before)
        assert len(wrapper) == 1, wrapper
        wrappers[module.rsplit(".", 1)[-1]] = wrapper[0]
    # interleaved, one run of each module per round: whatever else slows the machine for a while slows them alike
    cpu = dict((name, []) for name in wrappers)
    for _round in range(STARTUP_RUNS):
        for name, wrapper in wrappers.items():
            cpu[name].append(_cpu_of([sys.executable, wrapper]))
    others = [name for name in wrappers if name != "ping"]
    return {"cpu_s": dict((name, round(statistics.median(runs), 3)) for name, runs in cpu.items()),
            "least_cpu_s": dict((name, round(min(runs), 3)) for name, runs in cpu.items()),
            "ratio_to_ping": dict((name, round(statistics.median(
                module / ping for module, ping in zip(cpu[name], cpu["ping"])), 2)) for name in others),
            "ratio_of_least_to_ping": dict((name, round(min(cpu[name]) / min(cpu["ping"]), 2)) for name in others),
            "instructions": _instructions(wrappers),
            "talos_facts_parts_ms": _parts(wrappers["talos_facts"], refusing)}


def _instructions(wrappers):
    """{module: instructions of its process (callgrind)} and each module's ratio to ping's; None without valgrind."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    env = dict(os.environ, PYTHONHASHSEED="0")
    counts = {}
    for name, wrapper in wrappers.items():
        done = subprocess.run([valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, wrapper],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
        counts[name] = int(re.search(r"Collected : (\d+)", done.stderr).group(1))
    return {"count": counts, "ratio_to_ping": dict(
        (name, round(count / counts["ping"], 3)) for name, count in counts.items() if name != "ping")}


def _parts(wrapper, refusing):
    """Where talos_facts's start-up goes (benchmarks/startup_parts.py in a fresh process, the least of each part
    over STARTUP_RUNS runs): its AnsiballZ payload exploded next to the wrapper, compiled as from the zip."""
    subprocess.run([sys.executable, wrapper, "explode"], capture_output=True, check=True)
    payload = os.path.join(os.path.dirname(wrapper), "debug_dir")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "startup_parts.py")
    runs = [json.loads(subprocess.run([sys.executable, script, payload, refusing["talosconfig"]], capture_output=True,
                                      text=True, check=True).stdout) for _run in range(STARTUP_RUNS)]
    return dict((part, min(run[part] for run in runs)) for part in runs[0])


def _kept_files(kept):
    for root, _dirs, files in os.walk(kept):
        for name in files:
            if name.startswith("AnsiballZ_"):
                yield os.path.join(root, name)


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
    parser.add_argument("--only", choices=["start_up", "rolling_upgrade"],
                        help="measure only this and print it (the result file is written by a full run only)")
    args = parser.parse_args()
    sizes, forks_list, workers_list = ([5], [5], [10, 20]) if args.quick else ([5, 20, 50], [5, 50], [10, 50, 100])
    work = report.workdir("ichor-bench-overhead-")
    kube = KubeLab.start(workdir=os.path.join(work, "kube"), bins=binaries(build=True, stream=sys.stderr))
    try:
        if args.only:
            print(json.dumps({args.only: {"start_up": startup, "rolling_upgrade": rolling_upgrade}[args.only](work, kube)}))
            return
        start_up = startup(work, kube)
        facts = per_host(work, sizes, forks_list)
        check = upgrade_check(work, kube, workers_list)
        roll = rolling_upgrade(work, kube)
    finally:
        kube.stop()
    a, b = _growth([(r["machines"], r["wall_s"]) for r in check])
    figures = {"start_up": start_up, "per_host": facts, "upgrade_check": check,
               "upgrade_check_growth": "%.2f s + %.3f s per machine" % (a, b),
               "upgrade_check_at_103_s": round(a + b * 103, 2), "rolling_upgrade": roll}
    if len(sizes) > 1:  # what one more host costs: the slope of CPU over machines, per module and forks
        for forks in forks_list:
            rows = [r for r in facts if r["forks"] == forks]
            slopes = dict((task, _growth([(r["machines"], r[task + "_cpu_per_host_s"] * r["machines"]) for r in rows])[1])
                          for task in TASKS)
            figures["cpu_per_extra_host_forks_%d" % forks] = dict(slopes, ratio=round(slopes["talos_facts"] / slopes["ping"], 2))
    ratios = {"upgrade_check_103": round((a + b * 103) / GOALS["upgrade_check_103_s"], 3),
              "start_up": round(start_up["ratio_to_ping"]["talos_facts"] / GOALS["startup_ratio"], 3),
              "roll_overhead": round(roll["overhead_per_machine_s"] / GOALS["roll_overhead_per_machine_s"], 3)}
    result = {"benchmark": "task_overhead", "figures": figures, "ratio": ratios,
              "goal": "upgrade --check on 3 + 100 machines under %.0f s; a Talos-only module's start-up (talos_facts' "
                      "process alone) within %.1f times ping's; the rolling Talos step's overhead under %.0f s per "
                      "machine (each ratio below 1 meets its goal)" % (
                          GOALS["upgrade_check_103_s"], GOALS["startup_ratio"], GOALS["roll_overhead_per_machine_s"])}
    report.write(result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
