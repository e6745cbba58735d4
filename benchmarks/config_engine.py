"""Benchmark: contract probing and drift of the machine-config engine, for one machine and for 100.

Each machine's work is what adoption does per node: parse the live config (the fixture text, with
talosctl's comments), map its class A spec (adopt.from_config), then probe: render at every contract from
the running Talos version down to v1.12 and classify the drift of each. The 100 machines' configs are the
fixtures (control planes and workers of every contract and generator, cycled). Run by hand:

    ~/.cache/maesh-ichor/env-2.19/bin/python -m benchmarks.config_engine

Not a timed test. The goal: under 50 ms per machine per contract on this machine. The last line is one
JSON object: {"benchmark", "figures", "ratio", "goal"} (ratio = measured ms per machine per contract / 50).
"""

import glob
import json
import os
import time

from benchmarks import report
from tests import collection_path

collection_path.ensure()

# pylint: disable=wrong-import-position
from ansible_collections.maesh.ichor.plugins.module_utils.config import adopt, documents, probing, secrets  # noqa: E402

CONFIGS = os.path.join(collection_path.REPO, "tests", "fixtures", "configs")
GOAL_MS = 50.0


def machines():
    """[(live text, bundle, running version)] for every fixture config."""
    out = []
    for case_dir in sorted(os.path.dirname(p) for p in glob.glob(os.path.join(CONFIGS, "*", "*", "*", "case.json"))):
        with open(os.path.join(case_dir, "case.json")) as handle:
            case = json.load(handle)
        with open(os.path.join(case_dir, "controlplane.conf")) as handle:
            cp_text = handle.read()
        bundle = secrets.from_config(documents.parse(cp_text))
        for role in ("controlplane", "worker"):
            with open(os.path.join(case_dir, role + ".conf")) as handle:
                out.append((handle.read(), bundle, case["talos_version"], case["contract"]))
    return out


def one(text, bundle, running):
    """Parse, map and probe one machine; returns (chosen contract, number of contracts probed)."""
    live = documents.parse(text)
    cluster_spec, machine_spec = adopt.from_config(live, running)
    chosen, results = probing.probe(bundle, cluster_spec, machine_spec, live, running)
    return chosen, len(results)


def run(batch):
    start = time.perf_counter()
    contracts_probed = 0
    wrong = 0
    for text, bundle, running, expected in batch:
        chosen, count = one(text, bundle, running)
        contracts_probed += count
        wrong += chosen != expected
    return time.perf_counter() - start, contracts_probed, wrong


def main():
    pool = machines()
    single = [item for item in pool if item[2] == "v1.14.1" and item[3] == "v1.14"][:1]
    hundred = [pool[index % len(pool)] for index in range(report.size(100, 10))]
    run(single)  # warm-up (imports, caches)
    single_times = []
    for unused in range(report.size(5, 1)):
        single_times.append(run(single))
    hundred_times = [run(hundred) for unused in range(report.size(3, 1))]
    best_single = min(single_times, key=lambda item: item[0])
    best_hundred = min(hundred_times, key=lambda item: item[0])
    per_machine_single = best_single[0] * 1000.0
    per_contract_single = per_machine_single / best_single[1]
    per_machine = best_hundred[0] * 1000.0 / len(hundred)
    per_contract = best_hundred[0] * 1000.0 / best_hundred[1]
    figures = {
        "one_machine_ms": round(per_machine_single, 2),
        "one_machine_contracts_probed": best_single[1],
        "one_machine_ms_per_contract": round(per_contract_single, 2),
        "hundred_machines_s": round(best_hundred[0], 3),
        "hundred_machines_contracts_probed": best_hundred[1],
        "per_machine_ms": round(per_machine, 2),
        "per_machine_per_contract_ms": round(per_contract, 2),
        "probe_choices_wrong": best_hundred[2],
    }
    print("one machine (v1.14, 3 contracts probed): %.1f ms (%.1f ms per contract)" % (per_machine_single, per_contract_single))
    print("100 machines (%d contract renders): %.2f s, %.1f ms per machine, %.1f ms per machine per contract" % (
        best_hundred[1], best_hundred[0], per_machine, per_contract))
    result = {"benchmark": "config_engine", "figures": figures, "ratio": round(per_contract / GOAL_MS, 4),
              "goal": "under %d ms per machine per contract (ratio < 1)" % GOAL_MS}
    report.write(result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
