"""Registry credentials by reference (config/registry_auth.py): a Secret in ichor-system named by
registries[].authSecretRef, rendered in the contract's form, compared in either form, never shown."""

import base64
import json
import os

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.config import documents, drift, registry_auth, render
from ansible_collections.maesh.ichor.plugins.module_utils.config import spec as specs
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from tests.unit.test_config_engine import CONFIGS, load_case

MARKER = "ICHORregistryPASSWORDmarker0123456789"


class Kube:
    def __init__(self, secrets):
        self.secrets = secrets
        self.asked = []

    def get(self, api_version, kind, name, namespace=None):
        self.asked.append((api_version, kind, name, namespace))
        data = self.secrets.get(name)
        if data is None:
            return None
        return {"data": dict((key, base64.b64encode(value.encode()).decode()) for key, value in data.items())}


def _cluster(**registry):
    cluster = load_case(os.path.join(CONFIGS, "v1.14", "v1.14.1", "basic"))[2]
    entry = dict({"host": "ghcr.io", "authSecretRef": {"name": "ghcr-pull"}}, **registry)
    return dict(cluster, registries=[entry])


def _bundle(password=MARKER):
    bundle = load_case(os.path.join(CONFIGS, "v1.14", "v1.14.1", "basic"))[1]
    spec = specs.cluster(_cluster())
    return registry_auth.attach(bundle, Kube({"ghcr-pull": {"username": "robot", "password": password}}), spec)


def test_the_spec_keeps_the_secrets_name_only_and_refuses_anything_else():
    spec = specs.cluster(_cluster())
    assert spec["registries"] == [{"host": "ghcr.io", "endpoints": [], "overridePath": False, "skipFallback": False,
                                   "authSecretRef": {"name": "ghcr-pull"}}]
    for ref in ({"name": "ghcr-pull", "password": "x"}, {"name": "Bad_Name"}, "ghcr-pull", {}):
        with pytest.raises(ConfigError, match="authSecretRef must be"):
            specs.cluster(_cluster(authSecretRef=ref))
    with pytest.raises(ConfigError, match="has no endpoints and no authSecretRef"):
        specs.cluster(dict(_cluster(), registries=[{"host": "ghcr.io"}]))
    with pytest.raises(ConfigError, match="unknown field password"):
        specs.cluster(_cluster(password="x"))


def test_credentials_are_read_from_the_secret_and_a_secret_that_cannot_serve_is_one_line_without_a_value():
    spec = specs.cluster(_cluster())
    kube = Kube({"ghcr-pull": {"username": "robot", "password": MARKER}})
    held = registry_auth.read(kube, spec)
    assert kube.asked == [("v1", "Secret", "ghcr-pull", "ichor-system")]
    assert held["ghcr.io"]["password"].reveal() == MARKER and MARKER not in repr(held)
    for secrets, message in (({}, "Secret ichor-system/ghcr-pull does not exist"),
                             ({"ghcr-pull": {"username": "robot"}}, "holds no credentials"),
                             ({"ghcr-pull": {"password": MARKER}}, "holds no credentials")):
        with pytest.raises(ConfigError, match=message) as exc:
            registry_auth.read(Kube(secrets), spec)
        assert MARKER not in str(exc.value) and "\n" not in str(exc.value)
    with pytest.raises(ConfigError, match="the cluster's kubeconfig is needed"):
        registry_auth.read(None, spec)
    assert registry_auth.read(None, specs.cluster(dict(_cluster(), registries=[]))) == {}
    bundle = load_case(os.path.join(CONFIGS, "v1.14", "v1.14.1", "basic"))[1]
    with pytest.raises(ConfigError, match="whose credentials were not read"):
        render.render(bundle, spec, {"role": "worker"}, "v1.14")


@pytest.mark.parametrize("contract", ["v1.12", "v1.13", "v1.14"])
def test_rendered_in_the_contracts_form_compared_in_either_form_and_never_shown(contract):
    bundle = _bundle()
    cluster = dict(_cluster(), versionContract=contract)
    docs = render.render(bundle, cluster, {"role": "worker"}, contract)
    if contract == "v1.14":
        assert documents.find(docs, "RegistryAuthConfig", "ghcr.io").body["password"] == MARKER
    else:
        auth = documents.find(docs, documents.LEGACY).body["machine"]["registries"]["config"]["ghcr.io"]["auth"]
        assert auth == {"username": "robot", "password": MARKER}
    other_form = render.render(bundle, dict(cluster, versionContract="v1.14" if contract != "v1.14" else "v1.13"), {"role": "worker"},
                               "v1.14" if contract != "v1.14" else "v1.13")
    folded = dict((path, value) for path, value in drift.normalise(docs).items() if "RegistryAuth" in path)
    assert folded == dict((path, value) for path, value in drift.normalise(other_form).items() if "RegistryAuth" in path)
    assert drift.drift(render.render(bundle, cluster, {"role": "worker"}, contract), docs, cluster).zero
    # the Secret holds a new password: class A, applied; without the reference: class C, with the hint
    renewed = render.render(_bundle("renewed-" + MARKER[:8]), cluster, {"role": "worker"}, contract)
    found = drift.drift(renewed, docs, cluster)
    assert [(d.path, d.cls) for d in found.differences] == [("RegistryAuthConfig/ghcr.io:password", "A")]
    plain = dict(cluster, registries=[])
    found = drift.drift(render.render(bundle, plain, {"role": "worker"}, contract), docs, plain)
    assert found.blocked and [g["hint"] for g in found.hints()] == [drift.HINT_REGISTRY_AUTH]
    shown = json.dumps([found.to_dict(), found.lines(), documents.emit(drift.mask_docs(docs))])
    assert MARKER not in shown and "renewed-" not in json.dumps(drift.drift(renewed, docs, cluster).to_dict())


def test_the_record_names_the_secret_and_the_rollout_adds_the_reference_to_the_spec_it_reads():
    stored = {"registries": [{"host": "ghcr.io", "endpoints": [], "authSecretRef": {"name": "ghcr-pull"}},
                             {"host": "docker.io", "endpoints": ["https://m"]}]}
    record = type("Record", (), {"get": lambda self, key: stored if key == "cluster" else None})()
    refs = registry_auth.record_refs(record)
    assert refs == {"ghcr.io": "ghcr-pull"}
    merged = registry_auth.with_refs([{"host": "docker.io", "endpoints": ["https://m"]}], refs)
    assert merged == [{"host": "docker.io", "endpoints": ["https://m"]}, {"host": "ghcr.io", "endpoints": [], "authSecretRef": {"name": "ghcr-pull"}}]
    assert registry_auth.with_refs([{"host": "ghcr.io", "endpoints": ["https://g"]}], refs) == [
        {"host": "ghcr.io", "endpoints": ["https://g"], "authSecretRef": {"name": "ghcr-pull"}}]


def test_the_machines_filter_reads_each_machines_settings_from_its_host_variables():
    from ansible_collections.maesh.ichor.plugins.filter.machines import machines
    network = {"interfaces": [{"name": "eth0", "addresses": ["10.5.0.2/24"], "vip": "10.5.0.100"}], "nameservers": ["10.5.0.1"]}
    hostvars = {"cp-1": {"ansible_host": "10.5.0.2", "ichor_network": network, "ichor_time_servers": ["pool.ntp.org"],
                         "ichor_node_labels": {"zone": "a"}, "ichor_node_taints": {"dedicated": "db:NoSchedule"},
                         "ichor_kubelet": {"extraArgs": {"max-pods": "250"}}},
                "w-1": {"ichor_network": {}, "ichor_time_servers": []}}
    found = machines({"controlplane": ["cp-1"], "worker": ["w-1"]}, hostvars, details=True)
    assert found == [{"name": "cp-1", "node": "10.5.0.2", "role": "controlplane", "network": network, "timeServers": ["pool.ntp.org"],
                      "nodeLabels": {"zone": "a"}, "nodeTaints": {"dedicated": "db:NoSchedule"},
                      "kubelet": {"extraArgs": {"max-pods": "250"}}},
                     {"name": "w-1", "node": "w-1", "role": "worker"}]
    assert machines({"controlplane": ["cp-1"]}, hostvars) == [{"name": "cp-1", "node": "10.5.0.2", "role": "controlplane"}]
