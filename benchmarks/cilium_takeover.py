"""Benchmark: cilium_takeover's diff gate and a full takeover, on the real chart against a live install.

The lab API server with two Nodes, the lab agent marking workloads ready, and Cilium installed the way users
install it (``helm install cilium`` into kube-system with Talos's values and user values, chart 1.20 = the
lab's stand-in for the set's 1.20.4). Then, through the module's backend (``takeover.run``, the code the
module runs):

* the check-mode run, three times: all the preconditions, the values lifted from the record, ``helm template``
  (render), and the gate (for each of the chart's objects: fetch the live one, two server-side dry runs,
  compare). The render and the gate are timed apart by wrapping ``Helm.template`` and ``gate.run``.
* one full takeover (``helm upgrade --install --take-ownership``, readiness, backups read back, foreign
  records deleted, the cluster record written), then a rerun, which must change nothing.

Run by hand (the kube lab builds on first use; the charts come from the Go module proxy, cached):

    ~/.cache/maesh-ichor/env-2.19/bin/python -m benchmarks.cilium_takeover

The last line is one JSON object: {"benchmark", "figures", "goal", "met"}; the same object is written to
benchmarks/results/cilium_takeover.json.
"""

import json
import os
import statistics
import sys
import time

from benchmarks import report
from tests import collection_path

collection_path.ensure()

# pylint: disable=wrong-import-position
from ansible_collections.maesh.ichor.plugins.module_utils.ansible_module import specs  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import gate, helm, takeover  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient  # noqa: E402
from tests.lab.cilium import charts  # noqa: E402
from tests.lab.cilium.fixtures import TALOS_VALUES, CiliumLab, merged  # noqa: E402
from tests.lab.kube.cluster import KubeLab  # noqa: E402

USER_VALUES = {"debug": {"enabled": True}, "cluster": {"name": "bench"}}
GATE_GOAL_S = 5.0


class Conn:
    def __init__(self, kubeconfig):
        self.client = KubeClient(kubeconfig=kubeconfig)

    def kube(self):
        return self.client


class Timer:
    """Wraps a function and sums the seconds spent in it."""

    def __init__(self, owner, name):
        self.owner, self.name, self.original, self.seconds = owner, name, getattr(owner, name), 0.0
        self.last = None
        timer = self

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                timer.last = timer.original(*args, **kwargs)
                return timer.last
            finally:
                timer.seconds += time.perf_counter() - start
        setattr(owner, name, timed)

    def take(self):
        seconds, self.seconds = self.seconds, 0.0
        return seconds

    def restore(self):
        setattr(self.owner, self.name, self.original)


def params(lab, chart):
    """The module's options with their defaults, as AnsibleModule hands them to the backend."""
    spec = specs.spec(dict(takeover.options(), **specs.wait(600)), kube=True)
    out = dict((name, definition.get("default")) for name, definition in spec.items())
    out.update(chart=chart, helm=lab.bins["helm"], kubeconfig=lab.kubeconfig, timeout=30.0)
    return out


def main():
    work = report.workdir("ichor-bench-cilium-")
    lab = KubeLab.start(workdir=os.path.join(work, "kube"))
    cilium = None
    render = Timer(helm.Helm, "template")
    compare = Timer(gate, "run")
    try:
        found = charts.ensure(lab.bins["helm"], stream=sys.stderr)
        cilium = CiliumLab(lab, found, work)
        cilium.add_nodes(2)
        cilium.start_agent()
        cilium.helm_install("1.20", merged(TALOS_VALUES, USER_VALUES))
        cilium.wait_ready()
        given = params(lab, found["1.20"]["chart"])

        checks = []
        for _run in range(report.size(3, 1)):
            start = time.perf_counter()
            result = takeover.run(dict(given), Conn(lab.kubeconfig), True)
            checks.append({"total": time.perf_counter() - start, "render": render.take(), "gate": compare.take()})
            if result["gate"]:
                raise SystemExit("the gate is not empty for the chart and values the live install was made with: %s"
                                 % result["gate"][:5])
        objects = compare.last.objects

        start = time.perf_counter()
        done = takeover.run(dict(given), Conn(lab.kubeconfig), False)
        full = time.perf_counter() - start
        start = time.perf_counter()
        again = takeover.run(dict(given), Conn(lab.kubeconfig), False)
        rerun = time.perf_counter() - start
        if not done["changed"] or again["changed"]:
            raise SystemExit("the takeover did not change the cluster, or its rerun did: %s / %s"
                             % (done["plan"], again["plan"]))
    finally:
        render.restore()
        compare.restore()
        if cilium is not None:
            cilium.cleanup()
        lab.stop()

    def median(key):
        return round(statistics.median(c[key] for c in checks), 3)
    figures = {"check_mode_s": median("total"), "render_s": median("render"), "gate_fetch_and_compare_s": median("gate"),
               "gate_s": round(statistics.median(c["render"] + c["gate"] for c in checks), 3),
               "objects_rendered": objects, "takeover_s": round(full, 3), "rerun_s": round(rerun, 3),
               "cores": os.cpu_count()}
    result = {"benchmark": "cilium_takeover", "figures": figures,
              "goal": "the diff gate (render, fetch, compare) under %.0f s on 2 cores" % GATE_GOAL_S,
              "met": figures["gate_s"] < GATE_GOAL_S}
    report.write(result)
    for key, value in sorted(figures.items()):
        print("%-26s %s" % (key, value))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
