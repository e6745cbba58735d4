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


def _live_credentials(docs):
    """{host: {field: value}} of the registry credentials a machinery-made config holds, in either form."""
    out = {}
    for doc in documents.find_all(docs, "RegistryAuthConfig"):
        out[doc.name] = dict((key, doc.body[key]) for key in registry_auth.FIELDS if key in doc.body)
    config = documents.get_path(documents.find(docs, documents.LEGACY).body, "machine.registries.config") or {}
    for host, entry in config.items():
        if "auth" in entry:
            out[host] = dict(entry["auth"])
    return out


@pytest.mark.parametrize("case", ["secrets-typed", "secrets-legacy"])
@pytest.mark.parametrize("generated", ["v1.12/v1.12.7", "v1.13/v1.13.9", "v1.14/v1.14.1"])
def test_machinery_made_credentials_are_class_a_with_their_secrets_named_and_c_without(generated, case):
    """The registry credentials machinery's generator wrote (three hosts: username and password, auth, identityToken;
    either form): named by authSecretRef whose Secrets hold them, no credential path differs; changed in a Secret,
    only class A; named by none, class C with the hint."""
    unused_case, bundle, cluster, machine, live = load_case(os.path.join(CONFIGS, generated, case))
    for role in ("controlplane", "worker"):
        held = _live_credentials(live[role])
        assert len(held) == 3
        refs = dict((host, "cred-%d" % index) for index, host in enumerate(sorted(held)))
        named = dict(cluster, registries=registry_auth.with_refs(cluster.get("registries"), refs))
        kube = Kube(dict((refs[host], creds) for host, creds in held.items()))
        registry_auth.attach(bundle, kube, specs.cluster(named))
        machine_spec = dict(machine, role=role)
        found = drift.drift(render.render(bundle, named, machine_spec), live[role], named)
        assert not [d.path for d in found.differences if d.path.startswith("RegistryAuthConfig/")]
        assert not [d for d in found.differences if "registries.config" in d.path and ".auth" in d.path]
        changed = dict(held)
        host = sorted(held)[0]
        changed[host] = dict(held[host], **dict((key, "changed-" + value) for key, value in held[host].items() if key != "username"))
        registry_auth.attach(bundle, Kube(dict((refs[h], creds) for h, creds in changed.items())), specs.cluster(named))
        found = drift.drift(render.render(bundle, named, machine_spec), live[role], named)
        moved = [(d.path, d.cls) for d in found.differences if d.path.startswith("RegistryAuthConfig/")]
        assert moved and all(cls == "A" for unused, cls in moved) and "changed-" not in json.dumps(found.to_dict())
        plain = dict(cluster, registries=cluster.get("registries") or [])
        found = drift.drift(render.render(bundle, plain, machine_spec), live[role], plain)
        auth = [d for d in found.differences if d.path.startswith("RegistryAuthConfig/")]
        assert auth and all(d.cls == "C" and d.hint == drift.HINT_REGISTRY_AUTH for d in auth)


def test_cluster_fields_only_when_every_control_plane_states_the_same():
    unused_case, bundle, cluster, machine, live = load_case(os.path.join(CONFIGS, "v1.14", "v1.14.1", "components-args"))
    from ansible_collections.maesh.ichor.plugins.module_utils.config import adopt
    same = adopt.read([("cp-1", live["controlplane"], "v1.14.1"), ("cp-2", live["controlplane"], "v1.14.1"),
                       ("w-1", live["worker"], "v1.14.1")])
    assert same.unmapped == [] and same.cluster["apiServer"]["extraArgs"]
    other = documents.parse(documents.emit(live["controlplane"]))
    documents.find(other, "KubeAPIServerConfig").body["extraArgs"]["event-ttl"] = "3h"
    split = adopt.read([("cp-1", live["controlplane"], "v1.14.1"), ("cp-2", other, "v1.14.1"), ("w-1", live["worker"], "v1.14.1")])
    assert split.unmapped == ["apiServer"]
    found = drift.drift(render.render(bundle, split.cluster, dict(split.machines[1])), other, split.cluster, unmapped=split.unmapped)
    assert [(d.path, d.cls, d.hint) for d in found.differences] == [
        ("KubeAPIServerConfig:extraArgs.event-ttl", "C", drift.HINT_DISAGREE % "spec.apiServer")]


def test_the_rollout_reads_the_credentials_the_record_names_and_finds_the_machines_form():
    from ansible_collections.maesh.ichor.plugins.module_utils.rollout import model as rollout
    case, bundle, cluster, machine, live = load_case(os.path.join(CONFIGS, "v1.14", "v1.14.1", "basic"))
    kube = Kube({"ghcr-pull": {"username": "robot", "password": MARKER}})
    named = dict(cluster, registries=[{"host": "ghcr.io", "authSecretRef": {"name": "ghcr-pull"}}])
    registry_auth.attach(bundle, kube, specs.cluster(named))
    machines = [rollout.Machine(role, "10.5.0.%d" % index, role, case["talos_version"],
                                render.render_text(bundle, named, dict(machine, role=role), "v1.14"))
                for index, role in enumerate(("controlplane", "worker"), 2)]
    found = rollout.model(machines, auth_refs={"ghcr.io": "ghcr-pull"}, kube=kube)
    assert [m.form for m in found.machines] == ["v1.14", "v1.14"]
    assert found.cluster["registries"][0]["authSecretRef"] == {"name": "ghcr-pull"} and MARKER not in json.dumps(found.cluster)
    with pytest.raises(ConfigError, match="is not what the cluster's spec renders") as exc:
        rollout.model(machines)  # nobody named the Secret: the credentials are drift the rollout would drop
    assert MARKER not in str(exc.value)
