"""Benchmark: the rollout's Talos step on a simulated 3 control planes + 10 workers where each machine's
upgrade reboot takes a fixed simulated time. Writes the total, the sum of the simulated downtimes and the
overhead per machine (what the collection adds: the calls, the waits' polling, etcd checks). Run by hand:

    ~/.cache/maesh-ichor/env-2.19/bin/python -m benchmarks.talos_roll

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
from ansible_collections.maesh.ichor.plugins.module_utils.common import release  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as tc  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.talos import talosconfig  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import talos_step  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.talos import etcd  # noqa: E402
from tests.lab.process import LabProcess  # noqa: E402

REBOOT_SECONDS = 2.0


def main():
    work = report.workdir("ichor-bench-roll-")
    lab = LabProcess(os.path.join(work, "lab"), controlplanes=report.size(3, 1), workers=report.size(10, 1), version="v1.13.9",
                     reboot_seconds=REBOOT_SECONDS, upgrade_seconds=REBOOT_SECONDS).start(timeout=60)
    try:
        machines = lab.machines
        image = release.installer_image()
        target = talos_step.image_version(image)
        with tc.TalosClient(talosconfig.load(lab.talosconfig), timeout=10) as client:
            start = time.perf_counter()
            for m in sorted(machines, key=lambda x: (x["role"] != "controlplane", x["name"])):
                if m["role"] == "controlplane":
                    healthy, detail = etcd.health(client, m["address"])
                    if not healthy:
                        raise SystemExit(detail)
                talos_step.start_upgrade(client, m["address"], m["version"], image)
                talos_step.wait_back(client, None, m["address"], m["name"], m["role"], target, 120, interval=0.1)
            total = time.perf_counter() - start
        assert set(m["version"] for m in lab.machines) == {release.TALOS}
    finally:
        lab.stop()
    downtime = REBOOT_SECONDS * len(machines)
    overhead = (total - downtime) / len(machines)
    figures = {"machines": len(machines), "simulated_reboot_s": REBOOT_SECONDS, "total_s": round(total, 2),
               "sum_simulated_downtime_s": downtime, "overhead_per_machine_s": round(overhead, 3)}
    result = {"benchmark": "talos_roll", "figures": figures, "ratio": round(overhead / 1.0, 3),
              "goal": "under 1 second of overhead per machine beyond the simulated reboot"}
    report.write(result)
    for key, value in figures.items():
        print("%-26s %s" % (key, value))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
