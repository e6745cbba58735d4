"""The typed fields of the machine and cluster spec (config/network.py, config/spec.py), as a property over generated
specs: for every contract and both roles, a render adopted back states the same spec, and rendering that spec again
gives the same bytes. Seeded and bounded; tests/integration/test_config_render_go.py has machinery judge the fixture
cases, tests/integration/test_typed_fields_machinery.py its validator a sample of these renders."""

import random

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.config import adopt, documents, drift, render
from ansible_collections.maesh.ichor.plugins.module_utils.config import spec as specs
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from tests.unit.test_config_engine import CONFIGS, load_case

import os

SEEDS = range(1, 61)
CONTRACTS = ("v1.12", "v1.13", "v1.14")
ROLES = ("controlplane", "worker")


def _bundle():
    return load_case(os.path.join(CONFIGS, "v1.14", "v1.14.1", "basic"))[1]


def _word(rand, length=6):
    return "".join(rand.choice("abcdefghijklmnopqrstuvwxyz0123456789") for unused in range(length))


def _v4(rand, prefix=24):
    return "10.%d.%d.%d/%d" % (rand.randrange(256), rand.randrange(256), rand.randrange(1, 255), prefix)


def _routes(rand):
    out = []
    if rand.random() < 0.5:
        out.append({"network": "0.0.0.0/0", "gateway": "10.0.0.1"})
    if rand.random() < 0.3:
        out.append({"network": "::/0", "gateway": "fd00::1"})
    for unused in range(rand.randrange(3)):
        route = {"network": "192.168.%d.0/24" % rand.randrange(256)}
        if rand.random() < 0.8:
            route["gateway"] = "10.0.0.%d" % rand.randrange(1, 255)
        if rand.random() < 0.5:
            route["metric"] = rand.randrange(1, 5000)
        out.append(route)
    rand.shuffle(out)
    return out


def _addressed(rand, item, controlplane, vips):
    if rand.random() < 0.8:
        item["addresses"] = [_v4(rand) for unused in range(rand.randrange(1, 3))]
    routes = _routes(rand)
    if routes:
        item["routes"] = routes
    if rand.random() < 0.4:
        item["mtu"] = rand.choice([1280, 1450, 1500, 9000])
    if controlplane and rand.random() < 0.3:
        vip = "10.99.%d.%d" % (rand.randrange(256), rand.randrange(1, 255))
        if vip not in vips:
            vips.add(vip)
            item["vip"] = vip
    return item


def machine_fields(rand, role):
    """A random machine spec's typed fields: counts, orders and values drawn."""
    controlplane = role == "controlplane"
    vips, names, interfaces = set(), ["eth%d" % n for n in range(8)], []
    rand.shuffle(names)
    for unused in range(rand.randrange(4)):
        if rand.random() < 0.3 and len(names) >= 3:
            item = {"name": "bond%d" % len(interfaces), "bond": {"interfaces": [names.pop(), names.pop()],
                                                                 "mode": rand.choice(["802.3ad", "active-backup", "balance-rr"])}}
            lacp = item["bond"]["mode"] == "802.3ad"
            for key, value in (("miimon", 100), ("updelay", 200), ("downdelay", 200), ("lacpRate", "fast"),
                               ("xmitHashPolicy", "layer3+4")):
                # machinery's rules: delays need miimon, lacpRate is 802.3ad's; it warns (strict validation fails) on an
                # 802.3ad bond without its delays
                if (rand.random() < 0.5 or lacp and key in ("miimon", "updelay", "downdelay")) and \
                        (key not in ("updelay", "downdelay") or "miimon" in item["bond"]) and (key != "lacpRate" or lacp):
                    item["bond"][key] = value
        elif names:
            item = {"name": names.pop()}
        else:
            break
        _addressed(rand, item, controlplane, vips)
        ids = rand.sample(range(1, 4095), rand.randrange(3))
        if ids:
            item["vlans"] = [_addressed(rand, {"id": vlan_id}, controlplane, vips) for vlan_id in ids]
        interfaces.append(item)
    fields = {"network": {"interfaces": interfaces, "nameservers": ["10.0.0.%d" % rand.randrange(1, 255) for unused in range(rand.randrange(3))]},
              "timeServers": [_word(rand) + ".ntp.example" for unused in range(rand.randrange(3))],
              "nodeLabels": dict(("example.com/" + _word(rand), rand.choice(["", _word(rand)])) for unused in range(rand.randrange(4))),
              "nodeTaints": dict(("example.com/" + _word(rand), _word(rand) + ":" + rand.choice(["NoSchedule", "NoExecute"]))
                                 for unused in range(rand.randrange(3))),
              "kubelet": {"extraArgs": dict((_word(rand), _word(rand)) for unused in range(rand.randrange(3))),
                          "nodeIPSubnets": [_v4(rand, 16) for unused in range(rand.randrange(3))]}}
    if rand.random() < 0.4:
        fields["kubelet"]["extraMounts"] = [{"destination": "/var/mnt/" + _word(rand), "type": "bind", "source": "/var/mnt/x",
                                             "options": rand.sample(["bind", "rshared", "rw", "ro"], 2)}]
    return fields


def cluster_fields(rand):
    out = dict((component, {"extraArgs": dict((_word(rand), _word(rand)) for unused in range(rand.randrange(3)))})
               for component in specs.COMPONENT_ARGS)
    if rand.random() < 0.5:
        out["auditPolicy"] = rand.choice([{}, {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [
            {"level": rand.choice(["None", "Metadata", "Request"]), "resources": [{"group": "", "resources": ["secrets"]}]},
            {"level": "Metadata"}]}])
    if rand.random() < 0.5:
        security = render.pod_security()
        security["defaults"]["enforce"] = rand.choice(["privileged", "baseline", "restricted"])
        security["exemptions"]["namespaces"] = sorted(rand.sample(["kube-system", "monitoring", "storage"], 2))
        out["admissionControl"] = rand.choice([[], [{"name": "PodSecurity", "configuration": security}]])
    return out


def spec(seed, contract):
    rand = random.Random(seed)
    cluster = load_case(os.path.join(CONFIGS, "v1.14", "v1.14.1", "basic"))[2]
    cluster = dict(cluster, versionContract=contract, **cluster_fields(rand))
    machines = dict((role, dict(machine_fields(rand, role), role=role)) for role in ROLES)
    if contract == "v1.14":
        for machine in machines.values():
            machine["kubelet"].pop("extraMounts", None)
    return cluster, machines


@pytest.mark.parametrize("contract", CONTRACTS)
@pytest.mark.parametrize("seed", SEEDS)
def test_a_render_adopted_back_states_the_same_spec_and_renders_the_same_bytes(seed, contract):
    bundle = _bundle()
    cluster, machines = spec(seed, contract)
    live = dict((role, render.render_text(bundle, cluster, machine, contract)) for role, machine in machines.items())
    adopted = adopt.read([(role, documents.parse(text), "v1.14.1") for role, text in live.items()])
    assert adopted.unmapped == []
    at = dict(adopted.cluster, versionContract=contract)
    for field in specs.COMPONENT_ARGS + ("auditPolicy", "admissionControl"):
        assert specs.cluster(at)[field] == specs.cluster(cluster)[field], field
    for (role, machine), stated in zip(machines.items(), adopted.machines):
        assert specs.machine(stated, at) == specs.machine(machine, cluster), role
        again = render.render_text(bundle, at, stated, contract)
        assert again == live[role]
        assert drift.drift(documents.parse(again), documents.parse(live[role]), at).zero


@pytest.mark.parametrize("seed", SEEDS[:20])
def test_each_new_leaf_changed_in_a_live_config_is_class_a_and_adoption_reproduces_it(seed):
    """A mutation of one typed field in a live config (another value, one more or one fewer, another order) is drift of
    class A against the spec before it, and adopting the mutated config renders it byte for byte."""
    bundle = _bundle()
    rand = random.Random(seed)
    contract = CONTRACTS[seed % 3]
    cluster, machines = spec(seed, contract)
    role = rand.choice(ROLES)
    before = machines[role]
    after = dict(before, **machine_fields(rand, role))
    if contract == "v1.14":
        after["kubelet"].pop("extraMounts", None)
    rendered_before = render.render(bundle, cluster, before, contract)
    live = documents.parse(render.render_text(bundle, cluster, after, contract))
    found = drift.drift(rendered_before, live, cluster)
    assert not found.blocked, found.hints()
    stated = adopt.read([(role, live, "v1.14.1")]).machines[0]
    assert render.render_text(bundle, cluster, stated, contract) == documents.emit(live)


def test_bad_typed_fields_are_refused_with_one_line():
    cluster = load_case(os.path.join(CONFIGS, "v1.14", "v1.14.1", "basic"))[2]
    bad = [
        (({"network": {"interfaces": [{"name": "eth0", "vip": "10.0.0.9"}]}}, "worker"), "a Layer 2 VIP is a control plane's"),
        (({"network": {"interfaces": [{"name": "eth0", "routes": [{"network": "0.0.0.0/0"}]}]}},), "needs a gateway of its family"),
        (({"network": {"interfaces": [{"name": "eth0", "routes": [{"network": "::/0", "gateway": "10.0.0.1"}]}]}},),
         "needs a gateway of its family"),
        (({"network": {"interfaces": [{"name": "eth0", "addresses": ["10.0.0.2"]}]}},), "with a prefix length"),
        (({"network": {"interfaces": [{"name": "eth0"}, {"name": "eth0"}]}},), "eth0 is configured twice"),
        (({"network": {"interfaces": [{"name": "eth0", "vlans": [{"id": 5}, {"id": 5}]}]}},), "VLAN 5 is listed twice"),
        (({"network": {"interfaces": [{"name": "eth0", "vlans": [{"id": 5000}]}]}},), "from 1 to 4094"),
        (({"network": {"interfaces": [{"name": "bond0", "bond": {"mode": "802.3ad"}}]}},), "must name the bond's links"),
        (({"network": {"interfaces": [{"name": "bond0", "bond": {"interfaces": ["a"], "mode": "balance-rr", "lacpRate": "fast"}}]}},),
         "lacpRate is only for mode 802.3ad"),
        (({"network": {"interfaces": [{"name": "bond0", "bond": {"interfaces": ["a"], "mode": "802.3ad", "updelay": 200}}]}},),
         "updelay and downdelay need miimon"),
        (({"network": {"interfaces": [{"name": "eth0", "dhcp": True}]}},), "unknown fields: dhcp"),
        (({"kubelet": {"extraArgs": {"feature-gates": ["A=true"]}}},), "must be a string"),
        (({"kubelet": {"extraMounts": [{"type": "bind"}]}},), "needs a destination"),
        (({"nodeLabels": ["a"]},), "nodeLabels must be a mapping"),
    ]
    for (fields, *role), message in bad:
        with pytest.raises(ConfigError, match=message) as exc:
            specs.machine(dict(fields, role=role[0] if role else "controlplane"), cluster)
        assert "\n" not in str(exc.value)
    with pytest.raises(ConfigError, match="refuses kube-apiserver extra argument.* oidc-issuer-url"):
        render.render(_bundle(), dict(cluster, apiServer={"extraArgs": {"oidc-issuer-url": "https://x"}}), {"role": "controlplane"}, "v1.14")
    render.render(_bundle(), dict(cluster, versionContract="v1.13", apiServer={"extraArgs": {"oidc-issuer-url": "https://x"}}),
                  {"role": "controlplane"}, "v1.13")
    with pytest.raises(ConfigError, match="no kubelet extra mounts"):
        render.render(_bundle(), cluster, {"role": "worker", "kubelet": {"extraMounts": [{"destination": "/x"}]}}, "v1.14")
    with pytest.raises(ConfigError, match="admissionControl\\[0\\] needs a name"):
        specs.cluster(dict(cluster, admissionControl=[{"name": "PodSecurity"}]))


FIELD_CASES = ("net-static", "net-bond-vlan", "vip", "vlan-vip", "node-labels-taints", "kubelet-extra", "components-args",
               "audit-admission")


def moved_to_v114(case_dir):
    """(role, render at v1.14) of a legacy-contract fixture case, from the spec adoption reads off its live configs:
    what the rollout's config step applies when it moves a cluster to the release set's contract."""
    case, bundle, unused_cluster, unused_machine, live = load_case(case_dir)
    adopted = adopt.read([(role, live[role], case["talos_version"]) for role in ROLES])
    at = dict(adopted.cluster, versionContract="v1.14")
    return [(role, render.render(bundle, at, machine, "v1.14")) for role, machine in zip(ROLES, adopted.machines)], adopted


@pytest.mark.parametrize("name", FIELD_CASES)
@pytest.mark.parametrize("contract,gen", [("v1.12", "v1.12.7"), ("v1.13", "v1.13.9")])
def test_the_config_step_carries_the_typed_fields_to_contract_v114(contract, gen, name):
    case_dir = os.path.join(CONFIGS, contract, gen, name)
    if name == "kubelet-extra":  # kubelet extra mounts have no v1.14 form: the move is refused with one line
        with pytest.raises(ConfigError, match="contract v1.14 has no kubelet extra mounts"):
            moved_to_v114(case_dir)
        return
    renders, adopted = moved_to_v114(case_dir)
    for role, docs in renders:
        legacy = documents.find(docs, documents.LEGACY).body
        assert "network" not in legacy["machine"] and "time" not in legacy["machine"], role
        again = adopt.read([(role, docs, "v1.14.1")])
        stated = adopted.machines[ROLES.index(role)]
        at = dict(adopted.cluster, versionContract="v1.14")
        assert specs.machine(again.machines[0], at) == specs.machine(stated, at), role
        if role == "controlplane":
            for field in specs.COMPONENT_ARGS + ("auditPolicy", "admissionControl"):
                assert again.cluster[field] == adopted.cluster[field], field
    kinds = set(doc.kind for role, docs in renders for doc in docs)
    expected = {"net-static": {"LinkConfig", "TimeSyncConfig"}, "net-bond-vlan": {"BondConfig", "VLANConfig"},
                "vip": {"Layer2VIPConfig"}, "vlan-vip": {"VLANConfig", "Layer2VIPConfig"}}.get(name, set())
    assert expected <= kinds


def test_a_vip_on_a_link_no_document_configures_is_kept():
    """A Layer 2 VIP on a link Talos configures by its default DHCP (no LinkConfig): adoption states the link with its
    VIP, and the render writes the Layer2VIPConfig alone (no LinkConfig that would change the link): zero drift, never
    a VIP removed."""
    bundle = _bundle()
    cluster = load_case(os.path.join(CONFIGS, "v1.14", "v1.14.1", "basic"))[2]
    docs = render.render(bundle, cluster, {"role": "controlplane"}, "v1.14")
    docs.append(documents.typed("Layer2VIPConfig", {"link": "eth0"}, name="10.5.0.100"))
    stated = adopt.read([("cp-1", docs, "v1.14.1")]).machines[0]
    assert stated["network"]["interfaces"] == [{"name": "eth0", "vip": "10.5.0.100"}]
    again = render.render(bundle, cluster, stated, "v1.14")
    assert documents.find(again, "LinkConfig") is None
    assert drift.drift(again, docs, cluster).zero


@pytest.mark.parametrize("contract", CONTRACTS)
def test_what_adoption_cannot_state_is_never_applied_as_a_removal(contract):
    """An interface the spec cannot state (a route without its network, a bond option it has no field for) is left out
    of the machine's spec: then the machines' network is unmapped and every path of it class C, never a class A
    removal a release would apply. A label machinery reads as text (``tier: 1``) is kept as text."""
    bundle = _bundle()
    cluster = dict(load_case(os.path.join(CONFIGS, "v1.14", "v1.14.1", "basic"))[2], versionContract=contract)
    machine = {"role": "worker", "network": {"interfaces": [
        {"name": "bond0", "addresses": ["10.5.0.3/24"], "bond": {"interfaces": ["eth0", "eth1"], "mode": "active-backup"}}]},
        "nodeLabels": {"tier": "1"}}
    docs = render.render(bundle, cluster, machine, contract)
    if contract == "v1.14":
        documents.find(docs, "BondConfig").body["primaryReselect"] = "always"
    else:
        documents.find(docs, documents.LEGACY).body["machine"]["network"]["interfaces"][0]["bond"]["arpIPTarget"] = ["10.5.0.1"]
    labels = (documents.find(docs, "KubeNodeConfig").body["labels"] if contract == "v1.14"
              else documents.find(docs, documents.LEGACY).body["machine"]["nodeLabels"])
    labels["tier"] = 1
    adopted = adopt.read([("w-1", docs, "v1.14.1")])
    assert adopted.machines[0]["nodeLabels"] == {"tier": "1"}
    if contract == "v1.14":  # a BondConfig field the spec has not is read past: that one path is class C
        assert adopted.unmapped == [] and adopted.machines[0]["network"]["interfaces"][0]["name"] == "bond0"
    else:  # the legacy bond is read whole: the interface cannot be stated, so the machines' network is unmapped
        assert adopted.unmapped == ["network.interfaces"] and adopted.machines[0]["network"]["interfaces"] == []
    at = dict(adopted.cluster, versionContract=contract)
    found = drift.drift(render.render(bundle, at, adopted.machines[0], contract), docs, at, unmapped=adopted.unmapped)
    network = [d for d in found.differences if "bond" in d.path.lower() or "interfaces" in d.path]
    assert network and all(d.cls == "C" for d in network) and found.patch() is None
    tier = "KubeNodeConfig:labels.tier" if contract == "v1.14" else "v1alpha1:machine.nodeLabels.tier"
    assert [d.path for d in found.differences if "tier" in d.path] == [tier]
