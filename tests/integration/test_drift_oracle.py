"""The drift rule, judged by REAL Talos machinery: every leaf in which a live config and our render differ
is in the drift report, or the machine is blocked (issue 11 §2).

The oracle is ``configgen leaves`` (tests/configgen/src/leaves.go, machinery v1.14.1): it loads both
configs with machinery's loader, re-encodes them canonically and lists the differing leaves itself,
sharing no code with plugins/module_utils/config. The variants and the coverage rule are those of
tests/unit/test_drift_property.py:

* every fixture config as it is (476 configs; adopted, and declared from case.json where a spec
  reproduces the case), always;
* mutated variants (a leaf changed, emptied, set to "" or {}, removed; a typed document added, removed,
  or the typed documents reordered) over every fixture config: CI runs a seeded sample of 1000
  (seed 11; about half a minute on two busy cores).

A variant machinery itself refuses to load is not a config a machine can run: it is counted, not judged.
More: ICHOR_DRIFT_SEED=<n>, ICHOR_DRIFT_COUNT=<n>, ICHOR_DRIFT_ALL=1 (every variant of every config;
hours). Go is required: without it this test FAILS (it is never skipped).
"""

import json
import os
import shutil
import subprocess

import pytest

from tests.unit import test_drift_property as prop

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGGEN = os.path.join(REPO, "tests", "configgen")
BUILD_TIMEOUT = 1800
RUN_TIMEOUT = 1800


@pytest.fixture(scope="module")
def oracle():
    assert shutil.which("go"), "Go is not installed: tests/configgen needs Go >= 1.26.5 (this test never skips)"
    result = subprocess.run(["bash", os.path.join(CONFIGGEN, "build.sh"), "v1.14"], capture_output=True, text=True,
                            timeout=BUILD_TIMEOUT, stdin=subprocess.DEVNULL, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout.split()[1]


def leaves(binary, pairs):
    """{(a, b): result} from one ``configgen leaves --pairs -`` run."""
    text = "".join("%s\t%s\n" % pair for pair in pairs)
    result = subprocess.run([binary, "leaves", "--pairs", "-"], input=text, capture_output=True, text=True,
                            timeout=RUN_TIMEOUT, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    out = {}
    for line in result.stdout.splitlines():
        item = json.loads(line)
        out[(item["a"], item["b"])] = item
    assert len(out) == len(set(pairs))
    return out


def judge(binary, tmp_path, runs):
    """runs: [(config, variant name, live text)]. Returns (counts, failures)."""
    pairs, checks = [], []
    for index, (config, name, live_text) in enumerate(runs):
        live_path = str(tmp_path / ("%d-live.yaml" % index))
        with open(live_path, "w") as handle:
            handle.write(live_text)
        for scenario in ("adopted", "declared") if config.representable else ("adopted",):
            outcome = prop.engine(config, live_text, scenario)
            assert outcome.state != "refused" or "\n" not in outcome.reason
            if outcome.state == "refused":
                checks.append((config, name, scenario, outcome, None))
                continue
            rendered_path = str(tmp_path / ("%d-%s-render.yaml" % (index, scenario)))
            with open(rendered_path, "w") as handle:
                handle.write(outcome.rendered)
            pairs.append((rendered_path, live_path))
            checks.append((config, name, scenario, outcome, (rendered_path, live_path)))
    results = leaves(binary, pairs) if pairs else {}
    counts = {"open": 0, "blocked": 0, "refused": 0, "machinery refuses the variant": 0}
    failures = []
    for config, name, scenario, outcome, pair in checks:
        if pair is None:
            counts["refused"] += 1
            continue
        found = results[pair]
        if found.get("error", "").startswith("A:"):
            failures.append("%r %s (%s): machinery cannot load our render: %s" % (config, name, scenario, found["error"]))
            continue
        if found.get("error"):
            counts["machinery refuses the variant"] += 1
            continue
        counts[outcome.state] += 1
        missing = prop.uncovered(found["leaves"], outcome)
        if missing:
            failures.append("%r %s (%s): not reported and not blocked: %s" % (config, name, scenario, missing[:5]))
    return counts, failures


def test_oracle_lists_leaves(oracle, tmp_path):
    config = prop.configs("v1.14/v1.14.1/worker-label-empty")[1]
    path = os.path.join(config.case_dir, "worker.conf")
    assert leaves(oracle, [(path, path)])[(path, path)]["leaves"] == []
    node = [prop._label(b) for b in config.bodies].index("KubeNodeConfig")
    bodies = prop.mutate(config, ("remove", node, ("labels", "node-role.kubernetes.io/worker"), None), {})
    changed = tmp_path / "changed.yaml"
    changed.write_text(prop.emit(bodies))
    assert leaves(oracle, [(path, str(changed))])[(path, str(changed))]["leaves"] == ["KubeNodeConfig:labels.node-role.kubernetes.io/worker"]
    # machinery reads "" as the empty node IP setting: no leaf differs, although the YAML does
    bodies = prop.mutate(config, ("blank", node, ("nodeIP",), None), {})
    changed.write_text(prop.emit(bodies))
    assert leaves(oracle, [(path, str(changed))])[(path, str(changed))]["leaves"] == []


def test_every_fixture_as_it_is(oracle, tmp_path):
    every = prop.configs()
    assert len(every) == 476
    counts, failures = judge(oracle, tmp_path, [(config, "as generated", config.text) for config in every])
    assert not failures, "\n".join(failures[:20])
    # every reproducible case renders with zero drift; the others are reported and block
    assert counts["refused"] == 0 and counts["machinery refuses the variant"] == 0, counts


def test_mutated_variants(oracle, tmp_path):
    every = prop.configs()
    pool = prop.document_pool(every)
    runs = [(config, prop.describe(variant), prop.emit(prop.mutate(config, variant, pool)))
            for config, variant in prop.all_variants(every, pool, prop.SEED, prop.count(1000))]
    counts, failures = judge(oracle, tmp_path, runs)
    assert not failures, "%d failures, counts %s:\n%s" % (len(failures), counts, "\n".join(failures[:20]))
    assert counts["open"] >= 20 and counts["blocked"] >= 20, counts
