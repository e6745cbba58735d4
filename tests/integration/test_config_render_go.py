"""Zero drift judged by REAL Talos machinery, not by our own normaliser.

Every fixture case a spec reproduces (tests/fixtures/configs, 112 cases, control plane and worker; the cases
whose case.json lists ``unrepresentable`` state what no spec field holds and are judged by
tests/integration/test_drift_oracle.py instead) is rendered by
plugins/module_utils/config from the bundle recovered from the fixture's control plane and the spec
built from its case.json. Each render is written to a temp dir and handed to tests/configgen:

* ``configgen compare FIXTURE RENDER`` with the binary of the fixture's generator (machinery v1.12.7,
  v1.13.9 or v1.14.1; v1.14.1 for the configs upgraded in place): both are loaded by machinery's
  loader, re-encoded without comments and compared byte for byte (document order included);
* ``configgen validate --strict --expect-count N`` over every config rendered here (N = the number
  rendered, so it FAILS if fewer configs arrive), with v1.14.1 and with each older binary over the
  contracts it knows.

Go is required: without it these tests FAIL (they are never skipped).
"""

import glob
import json
import os
import shutil
import subprocess

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.config import contracts, documents, render, secrets
from tests import config_cases
from tests.unit import test_typed_fields_property

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGGEN = os.path.join(REPO, "tests", "configgen")
CONFIGS = os.path.join(REPO, "tests", "fixtures", "configs")


def _representable(case_dir):
    with open(os.path.join(case_dir, "case.json")) as handle:
        return not json.load(handle).get("unrepresentable")


CASE_DIRS = sorted(d for d in (os.path.dirname(p) for p in glob.glob(os.path.join(CONFIGS, "*", "*", "*", "case.json"))) if _representable(d))
ROLES = ("controlplane", "worker")
GENERATOR_BINARY = {"v1.12.7": "v1.12", "v1.13.9": "v1.13", "v1.14.1": "v1.14"}

BUILD_TIMEOUT = 1800
RUN_TIMEOUT = 600


def _show(result):
    return "exit %s\n--- stdout ---\n%s\n--- stderr ---\n%s" % (result.returncode, result.stdout[-8000:], result.stderr[-4000:])


def _run(args):
    return subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL, check=False)


@pytest.fixture(scope="module")
def binaries():
    assert shutil.which("go"), "Go is not installed: tests/configgen needs Go >= 1.26.5 (this test never skips)"
    result = subprocess.run(["bash", os.path.join(CONFIGGEN, "build.sh")], capture_output=True, text=True,
                            timeout=BUILD_TIMEOUT, stdin=subprocess.DEVNULL, check=False)
    assert result.returncode == 0, "building tests/configgen failed\n" + _show(result)
    paths = dict(line.split(None, 1) for line in result.stdout.strip().splitlines())
    assert sorted(paths) == ["v1.12", "v1.13", "v1.14"], result.stdout
    return paths


def _binary_for(case_dir):
    generator = os.path.relpath(case_dir, CONFIGS).split(os.sep)[1]
    return GENERATOR_BINARY[generator.split("-to-")[-1]]


@pytest.fixture(scope="module")
def renders(tmp_path_factory):
    """[(fixture path, render path, binary version, contract)] for every case and role, plus fresh-bundle renders."""
    out = tmp_path_factory.mktemp("renders")
    items = []
    for case_dir in CASE_DIRS:
        with open(os.path.join(case_dir, "case.json")) as handle:
            case = json.load(handle)
        with open(os.path.join(case_dir, "controlplane.conf")) as handle:
            bundle = secrets.from_config(documents.parse(handle.read()))
        cluster_spec, machine_spec = config_cases.spec_of_case(case)
        name = os.path.relpath(case_dir, CONFIGS).replace(os.sep, "_")
        for role in ROLES:
            path = str(out / ("%s_%s.yaml" % (name, role)))
            with open(path, "w") as handle:
                handle.write(render.render_text(bundle, cluster_spec, config_cases.for_role(machine_spec, role)))
            items.append((os.path.join(case_dir, role + ".conf"), path, _binary_for(case_dir), case["contract"]))
    # the typed-field cases of the legacy contracts moved to v1.14 as the rollout's config step moves them
    for name in test_typed_fields_property.FIELD_CASES:
        if name == "kubelet-extra":
            continue  # refused at v1.14 (no kubelet extra mounts there)
        for contract, gen in (("v1.12", "v1.12.7"), ("v1.13", "v1.13.9")):
            moved, unused = test_typed_fields_property.moved_to_v114(os.path.join(CONFIGS, contract, gen, name))
            for role, docs in moved:
                path = str(out / ("moved_%s_%s_%s.yaml" % (contract, name, role)))
                with open(path, "w") as handle:
                    handle.write(documents.emit(docs))
                items.append((None, path, None, "v1.14"))
    # A freshly generated bundle, every contract, with a hostname and a managed Cilium spec.
    bundle = secrets.generate()
    cluster_spec = {"name": "fresh", "endpoint": "https://fresh.example.com:6443", "kubernetesVersion": "1.35.4",
                    "talosVersion": "v1.14.1", "cni": {"preset": "cilium", "kubeProxy": "replaced"},
                    "registries": [{"host": "docker.io", "endpoints": ["https://m.example.com"], "skipFallback": True}],
                    "certSANs": ["fresh.example.com"], "sysctls": {"vm.max_map_count": "262144"}, "kernelModules": ["br_netfilter"]}
    for contract in contracts.SUPPORTED:
        # the typed fields drawn by the unit property (values, counts, orders): machinery's validator judges a sample
        for seed in test_typed_fields_property.SEEDS[:12]:
            cluster, machines = test_typed_fields_property.spec(seed, contract)
            for role, machine in machines.items():
                path = str(out / ("typed_%s_%d_%s.yaml" % (contract, seed, role)))
                with open(path, "w") as handle:
                    handle.write(render.render_text(bundle, cluster, machine, contract))
                items.append((None, path, None, contract))
        for role in ROLES:
            path = str(out / ("fresh_%s_%s.yaml" % (contract, role)))
            with open(path, "w") as handle:
                handle.write(render.render_text(bundle, dict(cluster_spec, versionContract=contract),
                                                {"role": role, "hostname": "fresh-%s" % role[0]}))
            items.append((None, path, None, contract))
    return items


def test_every_fixture_case_is_rendered(renders):
    assert len([item for item in renders if item[0]]) == 2 * len(CASE_DIRS) == 336


@pytest.mark.parametrize("ver", ["v1.12", "v1.13", "v1.14"])
def test_compare_fixture_with_render(binaries, renders, ver):
    """Byte-identical after machinery's load + re-encode (document order counts: no --ignore-order)."""
    mine = [item for item in renders if item[0] and item[2] == ver]
    assert mine
    failures = []
    for fixture, rendered, unused_ver, unused_contract in mine:
        result = _run([binaries[ver], "compare", fixture, rendered])
        if result.returncode != 0 or not result.stdout.startswith("same "):
            failures.append("%s\n%s" % (os.path.relpath(fixture, CONFIGS), _show(result)))
    assert not failures, "%d of %d renders differ from the fixture:\n%s" % (len(failures), len(mine), "\n".join(failures[:5]))


@pytest.mark.parametrize("ver,allowed", [
    ("v1.14", ("v1.12", "v1.13", "v1.14")),
    ("v1.13", ("v1.12", "v1.13")),
    ("v1.12", ("v1.12",)),
])
def test_validate_every_render_strictly(binaries, renders, ver, allowed):
    paths = [item[1] for item in renders if item[3] in allowed]
    assert len(paths) >= 60
    result = _run([binaries[ver], "validate", "--strict", "--expect-count", str(len(paths))] + paths)
    assert result.returncode == 0, _show(result)
    assert len([line for line in result.stdout.splitlines() if line.startswith("ok ")]) == len(paths)
    assert "FAIL" not in result.stdout


def test_validate_fails_when_fewer_configs_arrive(binaries, renders):
    paths = [item[1] for item in renders]
    result = _run([binaries["v1.14"], "validate", "--strict", "--expect-count", str(len(paths))] + paths[:-1])
    assert result.returncode != 0, _show(result)


def test_compare_catches_a_wrong_render(binaries, renders):
    fixture, unused_rendered, ver, unused_contract = renders[0]
    other = [item for item in renders if item[0] and item[0] != fixture and item[2] == ver][0][1]
    result = _run([binaries[ver], "compare", fixture, other])
    assert result.returncode == 1 and "---" in result.stdout
