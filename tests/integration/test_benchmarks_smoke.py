"""Every benchmark runs once at its smallest size (``--quick``): it must finish and print its JSON result line. No
timing is asserted (a smoke run measures nothing); what it guards is a benchmark that no longer runs against the
code it measures (one patched a function that had moved, and the README's figure could not be reproduced)."""

import json
import os
import subprocess
import sys

import pytest

from tests import collection_path

pytestmark = pytest.mark.lab

BENCHMARKS = sorted(name[:-3] for name in os.listdir(os.path.join(collection_path.REPO, "benchmarks"))
                    if name.endswith(".py") and name not in ("__init__.py", "report.py"))


def test_every_benchmark_is_smoke_run():
    assert BENCHMARKS == ["adopt_plan", "cilium_takeover", "config_engine", "installer_prune", "rollout", "scale",
                          "status", "talos_fanout", "talos_roll", "task_overhead"]


@pytest.mark.parametrize("name", BENCHMARKS)
def test_the_benchmark_runs_at_its_smallest_size(name):
    proc = subprocess.run([sys.executable, "-m", "benchmarks." + name, "--quick"], cwd=collection_path.REPO,
                          capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["benchmark"] == name and result["quick"] is True and result["figures"], result
