"""Benchmark: the read-only entry points at fleet size, as users run them: ``maesh.ichor.adopt --check`` (a cluster
not yet adopted), then ``maesh.ichor.upgrade --check`` and ``maesh.ichor.status`` (the cluster adopted: the record adopt
writes, its holds released), on 3 control planes and N workers (N = 100, 300, 1000; simulated machines from real Talos
configs made by machinery, the real API server with a Node per machine). For each run: the wall time, the peak RSS of
the controller (the largest process of the ``ansible-playbook`` run: getrusage of its children), and the most
connections open to the lab's machines at one moment (every call passes the talosconfig's endpoint, one connection
carrying at most the fan-out limit's streams; never above the limit); then the growth per machine (least squares over
the sizes). Run by hand (about ten minutes):

    ~/.cache/maesh-ichor/env-2.19/bin/python -m benchmarks.scale

The last line is one JSON object: {"benchmark", "figures", "ratio", "goal"}.
"""

import json
import os
import subprocess
import sys
import time

import yaml

from benchmarks import report
from benchmarks.status import _adopt, _fit
from tests import collection_path

collection_path.ensure()

# pylint: disable=wrong-import-position
from ansible_collections.maesh.ichor.plugins.module_utils.common import fanout  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient  # noqa: E402
from tests.integration.ansible_env import ansible_env, write_inventory  # noqa: E402
from tests.lab.agent import LabAgent  # noqa: E402
from tests.lab.kube.cluster import KubeLab, binaries  # noqa: E402
from tests.lab.process import LabProcess  # noqa: E402

CASE = "v1.14/v1.14.1/k8s-older"
CONTROLPLANES = 3
SIZES = report.size((100, 300, 1000), (2, 4))  # workers
RUNS = (("adopt_check", "maesh.ichor.adopt", "--check", "-e", "ichor_cni_unmanaged=true", "-e",
         "ichor_adopt_recover_from=cp-1"), ("upgrade_check", "maesh.ichor.upgrade", "--check"),
        ("status", "maesh.ichor.status"))
GOAL_S, GOAL_RSS_MB = 30.0, 1024
# runs the playbook and says, on its last line of stderr, the largest RSS among its processes (KiB)
MEASURED = ("import resource, subprocess, sys; code = subprocess.call(sys.argv[1:]); "
            "sys.stderr.write('maxrss %d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(code)")


def _inventory(lab, kube, work):
    inventory = write_inventory(lab.control.state(), os.path.join(work, "inventory.yml"))
    with open(inventory) as handle:
        data = yaml.safe_load(handle)
    data["all"]["vars"].update(ichor_kubeconfig=kube.kubeconfig)
    with open(inventory, "w") as handle:
        yaml.safe_dump(data, handle)
    return inventory


def _run(lab, inventory, playbook, *args):
    """(seconds, peak RSS in MiB, the most connections open to the lab's machines at once) of one run; a failed run
    ends the benchmark."""
    lab.control.connections(reset=True)
    exe = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", MEASURED, exe, "-i", inventory, playbook] + list(args),
                          env=ansible_env(), capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(proc.stdout[-3000:] + proc.stderr[-2000:])
    rss_kib = int(proc.stderr.strip().splitlines()[-1].split()[1])
    return seconds, rss_kib / 1024.0, lab.control.connections()["peak"]


def _size(work, kube, workers):
    lab = LabProcess(os.path.join(work, "lab-%d" % workers), controlplanes=CONTROLPLANES, workers=workers,
                     case=CASE).start(timeout=600)
    agent = LabAgent(kube.api_client(), talos_lab=lab, owner="scale-%d" % workers, refresh=False)
    out = {}
    try:
        client = KubeClient(kubeconfig=kube.kubeconfig)
        if client.get("v1", "ConfigMap", cluster_record.NAME, cluster_record.NAMESPACE) is not None:
            client.delete("v1", "ConfigMap", cluster_record.NAME, cluster_record.NAMESPACE)
        agent.sync_once()
        inventory = _inventory(lab, kube, os.path.join(work, "lab-%d" % workers))
        for name, playbook, *args in RUNS:
            if name == "upgrade_check":  # the cluster adopted and settled, as status and upgrade find it
                _adopt(lab, kube, [{"name": m["name"], "node": m["address"], "role": m["role"]} for m in lab.machines])
            seconds, rss, peak = _run(lab, inventory, playbook, *args)
            out[name] = {"wall_s": round(seconds, 2), "peak_rss_mib": round(rss, 1), "peak_connections": peak}
    finally:
        agent.stop()
        lab.stop()
    return out


def main():
    work = report.workdir("ichor-bench-scale-")
    kube = KubeLab.start(workdir=os.path.join(work, "kube"), bins=binaries(build=True, stream=sys.stderr))
    by_size = {}
    try:
        for workers in SIZES:
            by_size[CONTROLPLANES + workers] = _size(work, kube, workers)
            print(json.dumps({str(CONTROLPLANES + workers): by_size[CONTROLPLANES + workers]}), file=sys.stderr)
    finally:
        kube.stop()
    figures = {"fanout_limit": fanout.CONCURRENCY, "by_machines": dict((str(n), v) for n, v in by_size.items())}
    for name, *unused in RUNS:
        intercept, slope = _fit([(n, v[name]["wall_s"]) for n, v in by_size.items()])
        figures[name + "_s_per_machine"] = round(slope, 4)
        figures[name + "_s_fixed"] = round(intercept, 2)
    largest = by_size[max(by_size)]
    worst = max(v["wall_s"] for v in largest.values())
    result = {"benchmark": "scale", "figures": figures, "ratio": round(worst / GOAL_S, 3),
              "goal": "adopt --check, upgrade --check and status each under %d s at 3 + 1000 machines, peak RSS under "
                      "%d MiB, never more calls at once than the fan-out limit" % (GOAL_S, GOAL_RSS_MB)}
    report.write(result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
