"""Where a benchmark's result goes: benchmarks/results/<benchmark>.json (not committed, not built)."""

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import yaml

from tests import collection_path
from tests.integration.ansible_env import ansible_env, write_inventory


# ``--quick``: every benchmark at its smallest size, as CI's smoke run does (it must finish and print its JSON line);
# its figures measure nothing and are not written.
QUICK = "--quick" in sys.argv[1:]


def size(full, quick):
    """The size a benchmark runs at: ``quick`` under ``--quick``, else ``full``."""
    return quick if QUICK else full


def write(result):
    """Write ``result`` ({"benchmark", "figures", "ratio", "goal"}) to benchmarks/results/<benchmark>.json; a quick
    run's result is marked and not written."""
    if QUICK:
        result["quick"] = True
        return
    out = os.path.join(collection_path.REPO, "benchmarks", "results")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "%s.json" % result["benchmark"]), "w") as handle:
        json.dump(result, handle, indent=2)


def workdir(prefix):
    """A new directory for a benchmark's labs, removed when the benchmark exits (it holds their talosconfigs and
    kubeconfigs, and tens of megabytes of etcd data); ``ICHOR_BENCH_KEEP=1`` keeps it."""
    work = tempfile.mkdtemp(prefix=prefix)
    if os.environ.get("ICHOR_BENCH_KEEP") != "1":
        atexit.register(shutil.rmtree, work, True)
    return work


def timed_playbook(lab, kube, work, playbook, *args):
    """Seconds of one ``ansible-playbook -i <the lab's inventory> <playbook> <args>`` as users run it (the lab's
    machines, talosconfig and the API server's kubeconfig); a failed run ends the benchmark with its output."""
    inventory = write_inventory(lab.control.state(), os.path.join(work, "inventory.yml"))
    with open(inventory) as handle:
        data = yaml.safe_load(handle)
    data["all"]["vars"]["ichor_kubeconfig"] = kube.kubeconfig
    with open(inventory, "w") as handle:
        yaml.safe_dump(data, handle)
    exe = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    start = time.perf_counter()
    proc = subprocess.run([exe, "-i", inventory, playbook] + list(args), env=ansible_env(), capture_output=True,
                          text=True, check=False)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(proc.stdout[-3000:] + proc.stderr[-2000:])
    return seconds
