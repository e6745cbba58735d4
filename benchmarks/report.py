"""Where a benchmark's result goes: benchmarks/results/<benchmark>.json (not committed, not built)."""

import atexit
import json
import os
import shutil
import sys
import tempfile

from tests import collection_path


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
