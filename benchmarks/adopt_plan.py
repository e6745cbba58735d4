"""Benchmark: ``maesh.ichor.adopt --check`` on 3 control planes and 100 workers in the lab (simulated Talos machines
from real Talos configs, each answering 20 ms late; the real API server with a Node per machine), the way a platform
engineer runs it. Measures the playbook's wall time and splits the module's own time between the Talos calls (every
machine read at once), the Kubernetes read and the config engine (the mapping, the contract probe, the drift); the
rest of the wall time is Ansible's. Run by hand:

    ~/.cache/maesh-ichor/env-2.19/bin/python -m benchmarks.adopt_plan

The last line is one JSON object: {"benchmark", "figures", "ratio", "goal"}.
"""

import json
import os
import sys
import time

from benchmarks import report
from tests import collection_path

collection_path.ensure()

# pylint: disable=wrong-import-position
from kubernetes import client as k8s  # noqa: E402

from ansible_collections.maesh.ichor.plugins.module_utils.adopt import inspection  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.ansible_module.runner import Connections  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.cluster import facts as cluster_facts  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.machine import cluster_read  # noqa: E402
from tests.lab.agent import LabAgent  # noqa: E402
from tests.lab.kube.cluster import KubeLab, binaries  # noqa: E402
from tests.lab.process import LabProcess  # noqa: E402

CASE = "v1.14/v1.14.1/k8s-older"
CONTROLPLANES, WORKERS, LATENCY_MS = 3, report.size(100, 2), 20
GOAL_S = 15.0


class Timed:
    """Wall time spent in a function, summed over its calls."""

    def __init__(self, owner, name):
        self.owner, self.name, self.seconds = owner, name, 0.0
        self.original = getattr(owner, name)
        setattr(owner, name, self)

    def __call__(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return self.original(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start

    def restore(self):
        setattr(self.owner, self.name, self.original)


def _daemonsets(api):
    apps = k8s.AppsV1Api(api)
    for name, image, labels in (("kube-flannel", "ghcr.io/siderolabs/flannel:v0.27.4", {"k8s-app": "flannel"}),
                                ("kube-proxy", "registry.k8s.io/kube-proxy:v1.36.3", {"k8s-app": "kube-proxy"})):
        apps.create_namespaced_daemon_set("kube-system", {
            "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "kube-system",
                                                                       "labels": labels},
            "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                "containers": [{"name": name, "image": image}]}}}})


def main():
    work = report.workdir("ichor-bench-adopt-")
    kube = KubeLab.start(workdir=os.path.join(work, "kube"), bins=binaries(build=True, stream=sys.stderr))
    lab = LabProcess(os.path.join(work, "lab"), controlplanes=CONTROLPLANES, workers=WORKERS, case=CASE).start(timeout=120)
    agent = LabAgent(kube.api_client(), talos_lab=lab, owner="bench")
    try:
        agent.sync_once()
        _daemonsets(kube.api_client())
        for m in lab.machines:
            lab.control.set_faults(m["name"], latency_ms=LATENCY_MS)
        machines = [{"name": m["name"], "node": m["address"], "role": m["role"]} for m in lab.machines]
        # the module's own time, split: Talos calls, the Kubernetes read, the rest (the config engine)
        params = dict(talosconfig=lab.talosconfig, talosconfig_content=None, context=None, endpoint=None,
                      kubeconfig=kube.kubeconfig, kubeconfig_content=None, kube_context=None, timeout=60.0,
                      machines=machines, secrets=None, recover_from="cp-1", cni_unmanaged=True, version_contract=None)
        talos_calls = Timed(cluster_read, "read_cluster")
        kube_read = Timed(cluster_facts, "gather")
        conn = Connections(params)
        start = time.perf_counter()
        try:
            result = inspection.run(params, conn, True)
        finally:
            module_s = time.perf_counter() - start
            conn.close()
            talos_calls.restore()
            kube_read.restore()
        assert len(result["machines"]) == CONTROLPLANES + WORKERS and all(m["drift"]["zero"] for m in result["machines"])
        # the playbook, as users run it
        playbook_s = report.timed_playbook(lab, kube, work, "maesh.ichor.adopt", "--check", "-e",
                                           "ichor_cni_unmanaged=true", "-e", "ichor_adopt_recover_from=cp-1")
    finally:
        agent.stop()
        lab.stop()
        kube.stop()
    figures = {"machines": CONTROLPLANES + WORKERS, "talos_latency_ms": LATENCY_MS,
               "playbook_wall_s": round(playbook_s, 2), "module_s": round(module_s, 2),
               "talos_calls_s": round(talos_calls.seconds, 2), "kubernetes_read_s": round(kube_read.seconds, 2),
               "config_engine_s": round(module_s - talos_calls.seconds - kube_read.seconds, 2),
               "ansible_s": round(playbook_s - module_s, 2)}
    result = {"benchmark": "adopt_plan", "figures": figures, "ratio": round(playbook_s / GOAL_S, 3),
              "goal": "adopt --check on 3 control planes and 100 workers with 20 ms Talos latency under %d s on 2 cores"
                      % GOAL_S}
    report.write(result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
