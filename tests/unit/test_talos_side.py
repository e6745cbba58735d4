"""config.talos_side: what a live config says about the Talos side, read from every config real Talos code
generated (tests/fixtures/configs: contracts v1.12, v1.13 and v1.14, legacy and typed forms), checked against
the options each case was generated with (its case.json)."""

import glob
import json
import os

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.config import talos_side
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CASES = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(REPO, "tests", "fixtures", "configs", "*", "*", "*", "case.json")))


def _read(case_dir, role):
    with open(os.path.join(case_dir, "case.json")) as f:
        case = json.load(f)
    with open(os.path.join(case_dir, "%s.conf" % role)) as f:
        return case, talos_side.facts(f.read())


def test_every_contract_and_form_is_covered():
    forms = set()
    for case_dir in CASES:
        forms.add(_read(case_dir, "controlplane")[1]["form"])
    assert len(CASES) > 50 and forms == {"legacy", "typed"}


@pytest.mark.parametrize("role", ["controlplane", "worker"])
@pytest.mark.parametrize("case_dir", CASES, ids=lambda p: os.path.relpath(p, os.path.join(REPO, "tests", "fixtures", "configs")))
def test_facts_are_the_generation_options(case_dir, role):
    case, facts = _read(case_dir, role)
    assert facts["config_role"] == role
    assert facts["kubeprism"] == {"enabled": case["kubeprism"]["enabled"], "port": case["kubeprism"]["port"]}
    cni_stated = role == "controlplane" or facts["form"] == "legacy"  # a v1.14 worker's config carries no CNI
    if cni_stated:
        assert facts["kube_proxy"]["enabled"] is not case["kube_proxy_disabled"]
        assert facts["cni"]["name"] == case["cni"]["name"]
        assert facts["cni"]["urls"] == case["cni"]["urls"]
        assert facts["cni"]["flannel_document"] is (facts["form"] == "typed" and case["cni"]["name"] == "flannel")
    else:
        assert facts["cni"] == {"name": "", "urls": [], "flannel_document": False}
    if role == "controlplane":
        manifests = case["inline_manifests"]
        assert [m["name"] for m in facts["inline_manifests"]] == [m["name"] for m in manifests]
        assert [m["size"] for m in facts["inline_manifests"]] == [len(m["contents"].encode()) for m in manifests]
        cilium = "kind: DaemonSet\nmetadata:\n  name: cilium\n"
        assert [m["cilium"] for m in facts["inline_manifests"]] == [cilium in m["contents"] for m in manifests]
        assert set(case["cert_sans"]) <= set(facts["cert_sans"]["api_server"])
    else:
        assert facts["inline_manifests"] == []
    assert set(case["cert_sans"]) <= set(facts["cert_sans"]["machine"])
    install = facts["install"]
    assert install["image"] == case["install_image"] and install["wipe"] is case["install_wipe"]
    assert install["disk"] == case["install_disk"] or '"%s"' % case["install_disk"] in install["disk_selector"]
    mirrors = dict((m["host"], m) for m in facts["registries"]["mirrors"])
    want_mirrors = dict(case["registry_mirrors"])
    if case["name"] == "mirrors-mixed":  # a patch adds it (a mirror with per-endpoint overridePath: no spec field)
        want_mirrors["docker.io"] = {"endpoints": ["https://harbor.example.com/v2/proxy-docker.io",
                                                   "https://docker-mirror.example.com"], "skip_fallback": False}
    assert sorted(mirrors) == sorted(want_mirrors)
    for host, want in want_mirrors.items():
        assert mirrors[host]["endpoints"] == want["endpoints"]
        assert mirrors[host]["skip_fallback"] is want["skip_fallback"]


def test_contents_and_credentials_are_not_facts():
    text = """version: v1alpha1
machine:
  type: worker
  registries:
    mirrors:
      docker.io: {endpoints: ["https://mirror.example.com"]}
    config:
      mirror.example.com:
        auth: {username: u, password: SECRET-PASSWORD}
        tls: {clientIdentity: {crt: Y3J0, key: S0VZ}}
cluster:
  network: {cni: {name: custom, urls: ["https://example.com/cni.yaml"]}}
  proxy: {disabled: true, mode: ipvs}
  extraManifests: ["https://example.com/extra.yaml"]
  inlineManifests:
    - {name: other, contents: "apiVersion: v1\\nkind: ConfigMap\\nmetadata: {name: x}\\ndata: {token: SECRET-TOKEN}\\n"}
---
apiVersion: v1alpha1
kind: RegistryAuthConfig
name: ghcr.io
username: u
password: SECRET-PASSWORD-2
"""
    facts = talos_side.facts(text)
    assert "SECRET" not in json.dumps(facts)
    assert facts["registries"] == {"mirrors": [{"host": "docker.io", "endpoints": ["https://mirror.example.com"], "skip_fallback": False}],
                                   "auth": ["ghcr.io", "mirror.example.com"], "tls": ["mirror.example.com"]}
    assert facts["cni"] == {"name": "custom", "urls": ["https://example.com/cni.yaml"], "flannel_document": False}
    assert facts["kube_proxy"] == {"enabled": False, "mode": "ipvs"}
    assert facts["external_manifests"] == [{"name": "", "url": "https://example.com/extra.yaml"}]
    assert facts["inline_manifests"] == [{"name": "other", "cilium": False, "size": len(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {token: SECRET-TOKEN}\n")}]
    assert facts["kubeprism"] == {"enabled": False, "port": 0}


def test_shapes_a_config_does_not_have_read_as_absent():
    facts = talos_side.facts("version: v1alpha1\nmachine: {type: worker, features: {kubePrism: {enabled: yes, port: x}}, "
                             "certSANs: [1, a]}\ncluster: {network: {cni: [1]}, inlineManifests: [x, {name: 1}]}\n")
    assert facts["kubeprism"] == {"enabled": True, "port": 7445}
    assert facts["cert_sans"]["machine"] == ["a"]
    assert facts["cni"]["name"] == "flannel"
    assert facts["inline_manifests"] == [{"name": "", "cilium": False, "size": 0}]
    with pytest.raises(ConfigError):
        talos_side.facts("- not a config\n")
