"""Benchmark: the Talos step as users run it, ``ansible-playbook maesh.ichor.upgrade``, with the Node-Ready waits on the
real API server (the lab agent reporting each Node as its machine comes back, every 0.1 s), on simulated machines whose
upgrade reboot takes a fixed time T (Talos v1.13.9 configs made by machinery, a cluster record at their versions).

1. ``serial``: batch 1 (one machine at a time, the default), T = 2 s, at 3 + 2 and 3 + 10 machines: the overhead per
   machine beyond its reboot is the growth of the wall time per machine minus T (what the run adds for each machine:
   its pull, install, drain, the gates' polling and the record), and the fixed part (the plan, the lock, the record,
   Ansible's own start) is stated apart. Of that overhead, the simulated machine's own time (its installer's run and
   its pause between answering Reboot and going down, read from the lab's timeline) is stated too, and the rest is
   the collection's: the goal's figure. The README once gave 0.76 s per machine: (wall - 13 T) / 13, the fixed part
   spread over the machines.
2. ``batched``: 3 control planes + 100 workers, batch 10, T = 20 s: the floor is (3 + 10 batches) x T; the wall time
   against it, and the collection's overhead per batch ((wall - floor) / 13, the preflight and the gates' own polling
   included).

Run by hand (the batched part takes about five minutes):

    ~/.cache/maesh-ichor/env-2.19/bin/python -m benchmarks.rollout

The last line is one JSON object: {"benchmark", "figures", "ratio", "goal"}.
"""

import json
import math
import os
import sys

from benchmarks import report
from tests import collection_path

collection_path.ensure()

# pylint: disable=wrong-import-position
from ansible_collections.maesh.ichor.plugins.module_utils.common import release  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient  # noqa: E402
from tests.lab.agent import LabAgent  # noqa: E402
from tests.lab.kube.cluster import KubeLab, binaries  # noqa: E402
from tests.lab.process import LabProcess  # noqa: E402

CASE = "v1.13/v1.13.9/k8s-older"
RECORD = dict(talos="v1.13.9", contract="v1.13", kubernetes="v1.35.4")
# (name, control planes, workers, batch, simulated reboot seconds)
RUNS = report.size((("serial-small", 3, 2, 1, 2.0), ("serial", 3, 10, 1, 2.0), ("batched", 3, 100, 10, 20.0)),
                   (("serial-small", 1, 1, 1, 0.5), ("serial", 1, 2, 1, 0.5), ("batched", 1, 4, 2, 0.5)))
GOAL_S = 0.3  # overhead per machine, one at a time


def _machine_own(timeline):
    """Seconds the simulated machines spent themselves beyond the reboot, per machine, from the lab's timeline: the
    installer's run (its Upgrade call to ``installer-done``) and the pause between the answer to Reboot and going
    down (a real machine's are minutes; the simulator's are fixed fractions of a second)."""
    first = {}
    spans = []
    for machine, what, at in timeline:
        if what in ("Upgrade", "Reboot"):
            first[machine, what] = at
        elif what == "installer-done" and (machine, "Upgrade") in first:
            spans.append(at - first.pop((machine, "Upgrade")))
        elif what == "down:rebooting" and (machine, "Reboot") in first:
            spans.append(at - first.pop((machine, "Reboot")))
    machines = len(set(m for m, what, at in timeline if what == "down:rebooting"))
    return sum(spans) / machines if machines else 0.0


def _roll(work, kube, name, controlplanes, workers, batch, reboot_s):
    """Seconds of one upgrade run that rolls every machine; the machines' count; the machines' own time per machine
    beyond the reboot (_machine_own)."""
    lab = LabProcess(os.path.join(work, name), controlplanes=controlplanes, workers=workers, version="v1.13.9",
                     case=CASE, reboot_seconds=reboot_s, upgrade_seconds=reboot_s).start(timeout=300)
    agent = LabAgent(kube.api_client(), talos_lab=lab, owner="bench-" + name, interval=0.1, refresh=False)
    try:
        client = KubeClient(kubeconfig=kube.kubeconfig)
        for api_version, kind, obj, namespace in (("v1", "ConfigMap", cluster_record.NAME, cluster_record.NAMESPACE),):
            if client.get(api_version, kind, obj, namespace) is not None:
                client.delete(api_version, kind, obj, namespace)
        cluster_record.update(client, lambda data: data.update(RECORD))
        agent.sync_once()
        agent.start()
        lab.control.reset_timeline()
        seconds = report.timed_playbook(lab, kube, os.path.join(work, name), "maesh.ichor.upgrade",
                                        "-e", "ichor_upgrade_worker_batch=%d" % batch,
                                        "-e", "ichor_upgrade_wait_timeout=600")
        assert set(m["version"] for m in lab.machines) == {release.TALOS}, lab.machines
        return seconds, controlplanes + workers, _machine_own(lab.control.timeline(at=True))
    finally:
        agent.stop()
        lab.stop()


def main():
    work = report.workdir("ichor-bench-rollout-")
    kube = KubeLab.start(workdir=os.path.join(work, "kube"), bins=binaries(build=True, stream=sys.stderr))
    figures = {}
    try:
        for name, controlplanes, workers, batch, reboot_s in RUNS:
            seconds, machines, own = _roll(work, kube, name, controlplanes, workers, batch, reboot_s)
            batches = controlplanes + int(math.ceil(workers / float(batch)))
            floor = batches * reboot_s
            figures[name] = {"machines": machines, "worker_batch": batch, "simulated_reboot_s": reboot_s,
                             "wall_s": round(seconds, 2), "floor_s": round(floor, 2),
                             "wall_over_floor": round(seconds / floor, 3),
                             "overhead_per_batch_s": round((seconds - floor) / batches, 3),
                             "machine_own_per_machine_s": round(own, 3)}
            if batch == 1:  # the fixed part spread over the machines, as the README once measured it
                figures[name]["overhead_spread_per_machine_s"] = round((seconds - floor) / machines, 3)
    finally:
        kube.stop()
    small, full = figures["serial-small"], figures["serial"]
    growth = (full["wall_s"] - small["wall_s"]) / (full["machines"] - small["machines"])
    per_machine = growth - full["simulated_reboot_s"]
    collection = per_machine - full["machine_own_per_machine_s"]
    full.update(overhead_per_machine_s=round(per_machine, 3), collection_per_machine_s=round(collection, 3),
                fixed_s=round(full["wall_s"] - full["machines"] * growth, 2))
    result = {"benchmark": "rollout", "figures": figures, "ratio": round(collection / GOAL_S, 3),
              "goal": "under %.1f s of the collection's overhead per machine through the playbook, one at a time (the "
                      "growth per machine beyond T, less the simulated machine's own install and pause); batched "
                      "within 10%% of (3 + batches) x T" % GOAL_S}
    report.write(result)
    for name, values in figures.items():
        for key, value in values.items():
            print("%-12s %-30s %s" % (name, key, value), file=sys.stderr)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
