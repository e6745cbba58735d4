"""Benchmark: one Talos Version call, the same call to 50 machines one after the other, and
fanned out concurrently, against the lab with 100 ms latency injected in every simulated machine
(standing for network and node time). Run by hand:

    ~/.cache/maesh-ichor/env-2.19/bin/python -m benchmarks.talos_fanout

Prints the figures, writes them to benchmarks/results/talos_fanout.json, and prints as its last
line one JSON object: {"benchmark", "figures", "ratio", "goal"}. Not a pass/fail test.
"""

import json
import os
import sys
import time

from benchmarks import report
from tests import collection_path

collection_path.ensure()

# pylint: disable=wrong-import-position
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as tc  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine, talosconfig  # noqa: E402
from tests.lab.process import LabProcess  # noqa: E402

MACHINES = report.size(50, 5)
LATENCY_MS = 100
ROUNDS = report.size(3, 1)


def main():
    work = report.workdir("ichor-bench-")
    lab = LabProcess(os.path.join(work, "lab"), controlplanes=1, workers=MACHINES - 1, latency_ms=LATENCY_MS)
    lab.start(timeout=120)
    try:
        nodes = [m["address"] for m in lab.machines]
        with tc.TalosClient(talosconfig.load(lab.talosconfig), timeout=30) as client:
            client.run(machine.version(client, nodes[1]))  # connect once: measure calls, not the handshake
            one, serial, fanout = [], [], []
            for _round in range(ROUNDS):
                t = time.perf_counter()
                client.run(machine.version(client, nodes[1]))
                one.append(time.perf_counter() - t)
                t = time.perf_counter()
                for node in nodes:
                    client.run(machine.version(client, node))
                serial.append(time.perf_counter() - t)
                t = time.perf_counter()
                results = client.fan_out(lambda n: machine.version(client, n), nodes)
                fanout.append(time.perf_counter() - t)
                failed = [n for n, r in results.items() if r.error]
                if failed:
                    raise SystemExit("fan-out failed for %s" % failed)
    finally:
        lab.stop()
    figures = {
        "machines": MACHINES,
        "latency_ms": LATENCY_MS,
        "one_call_s": round(min(one), 4),
        "serial_50_s": round(min(serial), 4),
        "fanout_50_s": round(min(fanout), 4),
        "fanout_over_one_call": round(min(fanout) / min(one), 2),
    }
    result = {"benchmark": "talos_fanout", "figures": figures, "ratio": round(min(fanout) / min(serial), 4),
              "goal": "fan-out at most 0.2 of serial, close to one call's time"}
    report.write(result)
    for key, value in figures.items():
        print("%-22s %s" % (key, value))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
