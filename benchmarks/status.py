"""Benchmark: ``maesh.ichor.status`` on 3 control planes and 100 workers in the lab (simulated Talos machines from real
Talos configs, each answering 20 ms late; the real API server with a Node per machine), adopted first (the cluster
record adopt writes, its holds released), the way an AWX schedule runs it. Measures the playbook's wall time, splits
the module's own time between the Talos reads (every machine at once), the drift (a render and a comparison per
machine) and the rest (the release position, etcd, the record, the Nodes, the certificates), and states the growth
per machine from the module's time at 3 + 10, 3 + 50 and 3 + 100 machines (the record and the inventory cut to each
size). The collection's bundle is installed first, so that its objects are judged too (a dry run each). Run by hand:

    ~/.cache/maesh-ichor/env-2.19/bin/python -m benchmarks.status

The last line is one JSON object: {"benchmark", "figures", "ratio", "goal"}.
"""

import json
import os
import sys
import time

from benchmarks import report
from benchmarks.adopt_plan import Timed
from tests import collection_path

collection_path.ensure()

# pylint: disable=wrong-import-position
from ansible_collections.maesh.ichor.plugins.module_utils.adopt import inspection  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.adopt import write as adopt_write  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.ansible_module.runner import Connections  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.installer import stages as installer_stages  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.status import flow, readings  # noqa: E402
from tests.lab.agent import LabAgent  # noqa: E402
from tests.lab.kube.cluster import KubeLab, binaries  # noqa: E402
from tests.lab.process import LabProcess  # noqa: E402

CASE = "v1.14/v1.14.1/k8s-older"
CONTROLPLANES, WORKERS, LATENCY_MS = 3, report.size(100, 4), 20
SIZES = report.size((10, 50, 100), (2, 4))  # workers, for the growth per machine
GOAL_S = 10.0
BUNDLE = os.path.join(collection_path.REPO, "roles", "installer", "files", "bundle")


def _params(lab, kube, machines, **extra):
    return dict(talosconfig=lab.talosconfig, talosconfig_content=None, context=None, endpoint=None,
                kubeconfig=kube.kubeconfig, kubeconfig_content=None, kube_context=None, timeout=60.0,
                machines=machines, **extra)


def _adopt(lab, kube, machines):
    """The record adopt writes for these machines, none of them held (a cluster adopted and settled)."""
    params = _params(lab, kube, machines, secrets=None, recover_from="cp-1", cni_unmanaged=True,
                     version_contract=None)
    conn = Connections(params)
    try:
        result, unused_bundle = inspection.inspect(params, conn)
    finally:
        conn.close()
    client = KubeClient(kubeconfig=kube.kubeconfig)

    def settled(data):
        data.clear()
        adopt_write._record(data, result)  # pylint: disable=protected-access
        data["held"] = {}
    cluster_record.update(client, settled)


def _install(lab, kube):
    """The collection's bundle installed, as maesh.ichor.install leaves it (so that the status judges it)."""
    params = _params(lab, kube, [], bundle=[BUNDLE], network_policies=[], namespace="ichor-system",
                     snapshot_file=None, holder=None)
    conn = Connections(params)
    try:
        applied = installer_stages.run_stage(installer_stages.apply_run, params, conn, False)
        installer_stages.run_stage(installer_stages.prune_run, dict(params, run_id=applied["run_id"]), conn, False)
    finally:
        conn.close()


def _module(lab, kube, machines):
    """(seconds, the result, the Talos read's seconds, the drift's seconds) of one in-process run."""
    reads, drift = Timed(readings, "read"), Timed(readings, "compare")
    params = _params(lab, kube, machines, expiry_days=30, hold_days=14, acknowledge=False, requested_by=None,
                     bundle=[BUNDLE], network_policies=[], installer_namespace="ichor-system")
    conn = Connections(params)
    start = time.perf_counter()
    try:
        result = flow.run(params, conn, True)
    finally:
        seconds = time.perf_counter() - start
        conn.close()
        reads.restore()
        drift.restore()
    return seconds, result, reads.seconds, drift.seconds


def _fit(points):
    """Least squares (intercept, slope) of (machines, seconds)."""
    xs, ys = [float(x) for x, y in points], [y for x, y in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def main():
    work = report.workdir("ichor-bench-status-")
    kube = KubeLab.start(workdir=os.path.join(work, "kube"), bins=binaries(build=True, stream=sys.stderr))
    lab = LabProcess(os.path.join(work, "lab"), controlplanes=CONTROLPLANES, workers=WORKERS, case=CASE).start(timeout=120)
    agent = LabAgent(kube.api_client(), talos_lab=lab, owner="bench")
    growth = []
    try:
        agent.sync_once()
        for m in lab.machines:
            lab.control.set_faults(m["name"], latency_ms=LATENCY_MS)
        _install(lab, kube)
        every = [{"name": m["name"], "node": m["address"], "role": m["role"]} for m in lab.machines]
        cps = [m for m in every if m["role"] == "controlplane"]
        for workers in SIZES:
            machines = cps + [m for m in every if m["role"] == "worker"][:workers]
            _adopt(lab, kube, machines)
            seconds = _module(lab, kube, machines)[0]
            growth.append((len(machines), seconds))
        _adopt(lab, kube, every)
        module_s, result, reads_s, drift_s = _module(lab, kube, every)
        status = result["status"]
        drifting = [m["name"] for m in status["machines"] if not (m["drift"] or {}).get("zero")]
        assert len(status["machines"]) == len(every) and not drifting, (drifting, result["plan"][:5])
        # the playbook, as an AWX schedule runs it (a cluster adopted from a Talos behind the release set: info
        # findings only, nothing that needs a person, so it passes)
        playbook_s = report.timed_playbook(lab, kube, work, "maesh.ichor.status")
    finally:
        agent.stop()
        lab.stop()
        kube.stop()
    intercept, slope = _fit(growth)
    figures = {"machines": CONTROLPLANES + WORKERS, "talos_latency_ms": LATENCY_MS,
               "playbook_wall_s": round(playbook_s, 2), "module_s": round(module_s, 2),
               "talos_reads_s": round(reads_s, 2), "drift_s": round(drift_s, 2),
               "rest_s": round(module_s - reads_s - drift_s, 2), "ansible_s": round(playbook_s - module_s, 2),
               "module_s_by_machines": dict((str(n), round(s, 2)) for n, s in growth),
               "module_s_fixed": round(intercept, 3), "module_s_per_machine": round(slope, 4),
               "findings": result["plan"][0]}
    result = {"benchmark": "status", "figures": figures, "ratio": round(playbook_s / GOAL_S, 3),
              "goal": "maesh.ichor.status on 3 control planes and 100 workers with 20 ms Talos latency under %d s"
                      % GOAL_S}
    report.write(result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
