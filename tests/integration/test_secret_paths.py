"""The list of secret paths (plugins/module_utils/config/secret_paths.py), judged by REAL Talos machinery.

``configgen redact`` applies machinery's config container ``RedactSecrets`` to a config and lists the
leaves it replaced (tests/configgen/src/leaves.go). Over every fixture (the secrets-legacy, secrets-typed,
luks-legacy and luks-volume cases carry every secret field besides the bundle's), with machinery v1.14.1,
and v1.13.9 and v1.12.7 over the contracts they know:

* every path machinery redacts is in our list (secret_paths.what), not only caught by the name heuristic;
* no value machinery redacts shows in the documents masked for ``--diff`` nor in a drift report.

Go is required: without it these tests FAIL (they are never skipped).
"""

import json
import os
import shutil
import subprocess

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.config import documents, drift, render, secret_paths, secrets
from tests.unit import test_drift_property as prop
from tests import config_cases

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGGEN = os.path.join(REPO, "tests", "configgen")
BUILD_TIMEOUT = 1800
RUN_TIMEOUT = 600
# the fields only the extra cases carry: the fixtures must exercise each of them
EXPECTED = (
    "v1alpha1:machine.systemDiskEncryption.ephemeral.keys[0].static.passphrase",
    "VolumeConfig/EPHEMERAL:encryption.keys[0].static.passphrase",
    "UserVolumeConfig/data:encryption.keys[0].static.passphrase",
    "RegistryAuthConfig/ghcr.io:password",
    "RegistryTLSConfig/registry.corp.example:5000:clientIdentity.key",
    "v1alpha1:machine.registries.config.ghcr.io.auth.password",
    "v1alpha1:machine.network.interfaces[1].vip.hcloud.apiToken",
    "WireguardConfig/wg0:peers[0].presharedKey",
    "HCloudVIPConfig/192.168.1.50:apiToken",
    "SideroLinkConfig:apiUrl",
    "KubeEtcdEncryptionConfig:config.resources[0].providers[0].secretbox.keys[0].secret",
    "v1alpha1:cluster.aescbcEncryptionSecret",
)


@pytest.fixture(scope="module")
def binaries():
    assert shutil.which("go"), "Go is not installed: tests/configgen needs Go >= 1.26.5 (this test never skips)"
    result = subprocess.run(["bash", os.path.join(CONFIGGEN, "build.sh")], capture_output=True, text=True,
                            timeout=BUILD_TIMEOUT, stdin=subprocess.DEVNULL, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    return dict(line.split(None, 1) for line in result.stdout.strip().splitlines())


def redacted(binary, paths):
    result = subprocess.run([binary, "redact"] + paths, capture_output=True, text=True, timeout=RUN_TIMEOUT,
                            stdin=subprocess.DEVNULL, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    out = {}
    for line in result.stdout.splitlines():
        item = json.loads(line)
        assert not item.get("error"), item
        out[item["file"]] = item["paths"]
    assert sorted(out) == sorted(paths)
    return out


def _values(text):
    """{leaf path as the oracle writes it: value} of a config's scalar leaves."""
    out = {}

    def walk(label, value, path):
        if isinstance(value, dict):
            for key, item in value.items():
                walk(label, item, "%s.%s" % (path, key) if path else str(key))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(label, item, "%s[%d]" % (path, index))
        else:
            out[label + path] = value

    for body in prop.yaml.load_all(text, Loader=prop.LOADER):
        if isinstance(body, dict):
            for key, value in body.items():
                if "kind" not in body or key not in prop.IDENTITY:
                    walk(prop._label(body) + ":", value, str(key))
    return out


@pytest.mark.parametrize("ver,pattern", [("v1.14", "*/*/*"), ("v1.13", "v1.1[23]/*/*"), ("v1.12", "v1.12/*/*")])
def test_every_path_machinery_redacts_is_in_our_list(binaries, ver, pattern):
    configs = prop.configs(pattern)
    found = redacted(binaries[ver], [os.path.join(c.case_dir, c.role + ".conf") for c in configs])
    missing = sorted(set(path for paths in found.values() for path in paths if secret_paths.what(path) is None))
    assert not missing, missing
    seen = set(path for paths in found.values() for path in paths)
    if ver == "v1.14":
        assert set(EXPECTED) <= seen, sorted(set(EXPECTED) - seen)


def test_no_redacted_value_is_ever_shown(binaries):
    configs = prop.configs()
    found = redacted(binaries["v1.14"], [os.path.join(c.case_dir, c.role + ".conf") for c in configs])
    leaks = []
    for config in configs:
        values = _values(config.text)
        secret_values = [str(values[path]) for path in found[os.path.join(config.case_dir, config.role + ".conf")]]
        secret_values = [value for value in secret_values if len(value) >= 8]
        docs = documents.parse(config.text)
        shown = documents.emit(drift.mask_docs(docs))
        # a drift report that names every leaf: the render of another cluster's bundle and an empty spec
        bundle = secrets.load(os.path.join(config.case_dir, "secrets.yaml"))
        cluster_spec, machine_spec = config_cases.spec_of_case(config.case)
        other = dict(cluster_spec, registries=[], certSANs=[], sysctls={}, kernelModules=[], inlineManifests=[])
        result = drift.drift(render.render(bundle, other, config_cases.for_role(machine_spec, config.role)), docs, other)
        shown += json.dumps(result.to_dict()) + "\n".join(result.lines())
        leaks.extend("%r: %s" % (config, value[:6]) for value in secret_values if value in shown)
    assert not leaks, leaks[:20]
