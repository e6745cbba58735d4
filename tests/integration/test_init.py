"""Init (seed 0113 decision 2; seed 0103 section 2; ADR 0128) against the lab: simulated Talos machines in
maintenance mode, the real API server, real helm and the real Cilium chart, through ansible-playbook."""

import json
import os
import stat
import subprocess

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record, nodes
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient

from tests import versions
from tests.integration import test_conformance as conformance
from tests.integration.ansible_env import ansible_playbook
from tests.lab.cilium import fixtures as cilium_fixtures
from tests.lab.cilium.fixtures import TALOS_VALUES, merged

pytestmark = pytest.mark.lab

cilium_charts = cilium_fixtures.cilium_charts
cilium_lab = cilium_fixtures.cilium_lab
conformance_bin = conformance.conformance_bin


def _inventory(lab, tmp_path, names=None, uuids=None, hostvars=None, **extra):
    """The inventory an operator writes for init: each machine's address and expected UUID (``uuids`` overrides
    some: a lease that moved), and per machine name the host variables in ``hostvars`` (its spec fields)."""
    keep = tmp_path / "keep"
    keep.mkdir(mode=0o700, exist_ok=True)
    groups = {"controlplane": {"hosts": {}}, "worker": {"hosts": {}}}
    for m in lab.machines:
        if names is None or m["name"] in names:
            groups[m["role"]]["hosts"][m["name"]] = {"ansible_host": m["address"],
                                                     "ichor_uuid": (uuids or {}).get(m["name"], m["uuid"])}
            groups[m["role"]]["hosts"][m["name"]].update((hostvars or {}).get(m["name"], {}))
    variables = {"ichor_init_cluster_name": "lab", "ichor_init_secrets_file": str(keep / "secrets.yaml"),
                 "ichor_init_talosconfig_file": str(keep / "talosconfig"),
                 "ichor_init_kubeconfig_file": str(keep / "kubeconfig")}
    variables.update(extra)
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump({"all": {"vars": variables, "children": groups}}))
    return str(path), keep


def _init(inv, *extra):
    proc = ansible_playbook("-i", inv, "maesh.ichor.init", *extra)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return proc


KUBE_PROXY = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "kube-proxy", "namespace": "kube-system"},
              "spec": {"selector": {"matchLabels": {"k8s-app": "kube-proxy"}}, "template": {
                  "metadata": {"labels": {"k8s-app": "kube-proxy"}},
                  "spec": {"containers": [{"name": "kube-proxy", "image": "registry.k8s.io/kube-proxy:%s" % release.KUBERNETES}]}}}}


@pytest.fixture
def init_cleanup(kube_lab):
    """Init writes into the shared API server: the record, the bundle Secret, the lock and the kube-proxy DaemonSet
    (Talos's bootstrap manifests deploy it: the lab has it made by the test) go again afterwards."""
    yield
    kube = KubeClient(kubeconfig=kube_lab.kubeconfig)
    if kube.get("apps/v1", "DaemonSet", "kube-proxy", "kube-system") is not None:
        kube.delete("apps/v1", "DaemonSet", "kube-proxy", "kube-system")
    for api_version, kind, name in (("v1", "Secret", "ichor-secrets-bundle"), ("v1", "ConfigMap", "ichor-cluster"),
                                    ("coordination.k8s.io/v1", "Lease", "ichor-cluster-lock")):
        if kube.get(api_version, kind, name, "ichor-system") is not None:
            kube.delete(api_version, kind, name, "ichor-system")


def _cilium(cilium_lab, kube_lab, cilium_charts, kube_proxy=True):
    """What init's Cilium install needs from the lab, as init's variables (the chart and helm): what the install
    leaves, rendered for teardown (its objects in kube-system: namespaceOverride), and unless ``kube_proxy`` is
    false the kube-proxy DaemonSet (Talos deploys it from its bootstrap manifests; nothing runs them in the lab)."""
    cilium_lab(nodes=0).render(versions.CILIUM_MINOR, merged(TALOS_VALUES, {"namespaceOverride": "kube-system"}), namespace="ichor-system")
    if kube_proxy:
        KubeClient(kubeconfig=kube_lab.kubeconfig).apply(KUBE_PROXY, "lab")
    return dict(ichor_init_cilium_chart=cilium_charts[versions.CILIUM_MINOR]["chart"], ichor_init_helm=kube_lab.bins["helm"])


def test_three_control_planes_and_two_workers_from_maintenance_mode_to_a_ready_cluster(
        talos_kube_lab, kube_lab, cilium_lab, cilium_charts, tmp_path, init_cleanup, conformance_bin):
    lab = talos_kube_lab(controlplanes=3, workers=2, mode="maintenance", bootstrapped=False, version=release.TALOS)
    inv, keep = _inventory(lab, tmp_path, **_cilium(cilium_lab, kube_lab, cilium_charts, kube_proxy=False))
    mark = kube_lab.audit_mark()
    # the operator's KUBECONFIG names another cluster (here: none that exists): init never reads it
    planned = ansible_playbook("-i", inv, "maesh.ichor.init", "--check",
                               env={"KUBECONFIG": str(tmp_path / "another-clusters-kubeconfig")})
    assert planned.returncode == 0, planned.stdout[-6000:]
    assert "PLAN (check mode: nothing was written)" in planned.stdout
    assert "etcd: bootstrapped once, on cp-1" in planned.stdout
    for m in lab.machines:
        assert "%s (%s): maintenance mode, UUID %s: gets the %s config at contract %s" % (
            m["name"], m["address"], m["uuid"], m["role"], release.CONTRACT) in planned.stdout
        assert "ApplyConfiguration" not in lab.control.calls(m["name"])
    assert os.listdir(str(keep)) == []
    assert kube_lab.mutating_requests(since=mark, user="lab-admin") == []
    # Talos deploys kube-proxy from its bootstrap manifests (kube-proxy enabled); nothing runs them in the lab
    KubeClient(kubeconfig=kube_lab.kubeconfig).apply(KUBE_PROXY, "lab")

    made = _init(inv)
    assert made.returncode == 0, made.stdout[-8000:]
    state = dict((m["name"], m) for m in lab.control.machines())
    assert all(m["mode"] == "configured" for m in state.values()), state
    assert sum(lab.control.calls(m["name"]).get("Bootstrap", 0) for m in lab.machines) == 1
    for name in ("secrets.yaml", "talosconfig", "kubeconfig"):
        assert stat.S_IMODE(os.stat(str(keep / name)).st_mode) == 0o600, name
    kube = KubeClient(kubeconfig=kube_lab.kubeconfig)
    record = cluster_record.read(kube)
    assert record.get("cluster")["cni"]["preset"] == "cilium" and record.get("contract") == release.CONTRACT
    assert sorted(record.get("nodes")) == sorted(m["name"] for m in lab.machines) and not record.get("held")
    assert record.get("cilium")["release"] == "ichor-system/cilium"
    assert kube.get("v1", "Secret", "ichor-secrets-bundle", "ichor-system") is not None
    ready = [nodes.ready(nodes.get(kube, m["hostname"]) or {}) for m in lab.control.machines()]
    assert ready == [True] * 5, ready  # a Node per machine, Ready

    again = _init(inv)
    assert again.returncode == 0 and "changed=0" in again.stdout, again.stdout[-8000:]
    assert sum(lab.control.calls(m["name"]).get("Bootstrap", 0) for m in lab.machines) == 1

    # machinery's own client reads the machines with init's talosconfig as talosctl would: the certificate minted
    # from the bundle is accepted, every config decodes with machinery's types and passes its strict validation (metal),
    # etcd lists the three control planes
    addresses = dict((role, ",".join(m["address"] for m in lab.machines if m["role"] == role))
                     for role in ("controlplane", "worker"))
    read = subprocess.run([conformance_bin, "cluster", "--talosconfig", str(keep / "talosconfig"), "--context", "lab",
                           "--controlplanes", addresses["controlplane"], "--workers", addresses["worker"], "--cluster-name", "lab"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert read.returncode == 0 and "summary (cluster): 23 ok, 0 FAIL" in read.stdout, read.stdout + read.stderr


NAMESERVERS = ["10.5.0.1", "1.1.1.1"]
TIME_SERVERS = ["10.5.0.1", "time.cloudflare.com"]
VIP = "10.5.0.100"


def _static_network(lab):
    """Host variables of a cluster on static addresses: each control plane a bond0 of eth0+eth1 (802.3ad) at
    10.5.0.1N/24 with a default route, VLAN 100 on it at 192.168.100.1N/24 and the Layer 2 VIP on bond0; each worker
    a static eth0 at 10.5.0.2N/24 and VLAN 100 on it; nameservers and time servers on all. Also what machinery must
    read back from each config (the conformance program's --expect-network), by the machine's lab address."""
    hostvars, expected, counts = {}, {}, {"controlplane": 0, "worker": 0}
    for m in lab.machines:
        counts[m["role"]] += 1
        n = counts[m["role"]]
        route = [{"network": "0.0.0.0/0", "gateway": "10.5.0.1"}]
        if m["role"] == "controlplane":
            link, host, vlan_host = "bond0", "10.5.0.1%d/24" % n, "192.168.100.1%d/24" % n
            interface = {"name": link, "addresses": [host], "routes": route, "vip": VIP,
                         "bond": {"interfaces": ["eth0", "eth1"], "mode": "802.3ad", "miimon": 100, "updelay": 200,
                                  "downdelay": 200},
                         "vlans": [{"id": 100, "addresses": [vlan_host]}]}
        else:
            link, host, vlan_host = "eth0", "10.5.0.2%d/24" % n, "192.168.100.2%d/24" % n
            interface = {"name": link, "addresses": [host], "routes": route, "vlans": [{"id": 100, "addresses": [vlan_host]}]}
        hostvars[m["name"]] = {"ichor_network": {"interfaces": [interface], "nameservers": NAMESERVERS},
                               "ichor_time_servers": TIME_SERVERS}
        expected[m["address"]] = {
            "links": [link, link + ".100"], "addresses": {link: [host], link + ".100": [vlan_host]},
            "vips": ["%s@bond0" % VIP] if m["role"] == "controlplane" else [],
            "nameservers": NAMESERVERS, "timeServers": TIME_SERVERS}
    return hostvars, expected


def test_a_cluster_on_static_addresses_a_bond_a_vlan_and_a_layer_2_vip_read_back_and_validated_by_machinery(
        talos_kube_lab, kube_lab, cilium_lab, cilium_charts, tmp_path, init_cleanup, conformance_bin):
    """Issue proof: a cluster initialised with static addresses, a bond, a VLAN and a VIP, its configs read back by
    machinery's client and validated by machinery's validator. The lab does not route 10.5.0.0/24: its machines keep
    their loopback addresses (init reaches them there, ansible_host), the Kubeconfig call answers the lab API server's
    own kubeconfig whatever the endpoint (as for any endpoint), and the lab agent's Nodes carry the lab addresses."""
    lab = talos_kube_lab(controlplanes=3, workers=1, mode="maintenance", bootstrapped=False, version=release.TALOS)
    hostvars, expected = _static_network(lab)
    inv, keep = _inventory(lab, tmp_path, hostvars=hostvars, ichor_init_endpoint="https://%s:6443" % VIP,
                           **_cilium(cilium_lab, kube_lab, cilium_charts, kube_proxy=False))
    planned = ansible_playbook("-i", inv, "maesh.ichor.init", "--check")
    assert planned.returncode == 0, planned.stdout[-6000:]
    assert ("API endpoint: Layer 2 VIP %s, held by one control plane at a time, moved to another when it fails: "
            "cp-1, cp-2, cp-3" % VIP) in planned.stdout, planned.stdout[-6000:]
    assert "cluster lab, endpoint https://%s:6443" % VIP in planned.stdout
    assert "do not state the VIP" not in planned.stdout and "is not on the VIP" not in planned.stdout
    for m in lab.machines:
        assert "%s (%s): maintenance mode, UUID %s: gets the %s config at contract %s" % (
            m["name"], m["address"], m["uuid"], m["role"], release.CONTRACT) in planned.stdout
        assert "ApplyConfiguration" not in lab.control.calls(m["name"])
    assert os.listdir(str(keep)) == []
    KubeClient(kubeconfig=kube_lab.kubeconfig).apply(KUBE_PROXY, "lab")

    made = _init(inv)
    assert made.returncode == 0, made.stdout[-8000:]
    assert all(m["mode"] == "configured" for m in lab.control.machines())
    assert sum(lab.control.calls(m["name"]).get("Bootstrap", 0) for m in lab.machines) == 1
    kube = KubeClient(kubeconfig=kube_lab.kubeconfig)
    ready = [nodes.ready(nodes.get(kube, m["hostname"]) or {}) for m in lab.control.machines()]
    assert ready == [True] * 4, ready
    again = _init(inv)
    assert again.returncode == 0 and "changed=0" in again.stdout, again.stdout[-8000:]

    # what the machines now hold, read with machinery's client and init's talosconfig: every config passes machinery's
    # strict validation (metal), and machinery reads the links (bond0 / eth0 and their VLAN), their addresses, the
    # VIP on the control planes' bond0 (none on the worker), the nameservers and the time servers from it
    expect = tmp_path / "expect-network.json"
    expect.write_text(json.dumps(expected))
    addresses = dict((role, ",".join(m["address"] for m in lab.machines if m["role"] == role))
                     for role in ("controlplane", "worker"))
    read = subprocess.run([conformance_bin, "cluster", "--talosconfig", str(keep / "talosconfig"), "--context", "lab",
                           "--controlplanes", addresses["controlplane"], "--workers", addresses["worker"],
                           "--cluster-name", "lab", "--expect-network", str(expect)],
                          capture_output=True, text=True, timeout=300, check=False)
    # per machine: client.New, Version, MachineConfig, validation, 5 network checks; EtcdMemberList on 3 control planes
    assert read.returncode == 0 and "summary (cluster): 39 ok, 0 FAIL" in read.stdout, read.stdout + read.stderr
    for m in lab.machines:
        assert "ok cluster %s config validates (metal, strict)" % m["address"] in read.stdout
    cp = [m["address"] for m in lab.machines if m["role"] == "controlplane"][0]
    assert "ok cluster %s config links (NetworkCommonLinkConfigs) are [bond0, bond0.100]" % cp in read.stdout
    assert "ok cluster %s config Layer 2 VIPs (NetworkVirtualIPConfigs) are [%s@bond0]" % (cp, VIP) in read.stdout
    # and the checks bite: the worker stated with the control planes' VIP, no VLAN and the nameservers swapped
    worker = [m["address"] for m in lab.machines if m["role"] == "worker"][0]
    expected[worker].update(links=["eth0"], vips=[VIP], nameservers=NAMESERVERS[::-1])
    expect.write_text(json.dumps({worker: expected[worker]}))
    wrong = subprocess.run([conformance_bin, "cluster", "--talosconfig", str(keep / "talosconfig"), "--context", "lab",
                            "--controlplanes", addresses["controlplane"], "--workers", worker, "--cluster-name", "lab",
                            "--expect-network", str(expect)], capture_output=True, text=True, timeout=300, check=False)
    assert wrong.returncode == 1 and "summary (cluster): 21 ok, 3 FAIL" in wrong.stdout, wrong.stdout + wrong.stderr
    for line in ("FAIL cluster %s config links (NetworkCommonLinkConfigs) are [eth0]: machinery reads [eth0, eth0.100]",
                 "FAIL cluster %s config Layer 2 VIPs (NetworkVirtualIPConfigs) are [10.5.0.100]: machinery reads []",
                 "FAIL cluster %s config nameservers (NetworkResolverConfig) are [1.1.1.1, 10.5.0.1]: machinery reads "
                 "[10.5.0.1, 1.1.1.1]"):
        assert line % worker in wrong.stdout, wrong.stdout


# -- refusals: each before anything is sent to a machine or written anywhere ------------------------------

@pytest.fixture(scope="module")
def refusal_lab(tmp_path_factory):
    """Two control planes and a worker in maintenance mode, and a machine another cluster configured."""
    from tests.lab.process import LabProcess
    lab = LabProcess(str(tmp_path_factory.mktemp("init-refusals")), controlplanes=2, workers=1, mode="maintenance",
                     bootstrapped=False, version=release.TALOS,
                     additions=[{"name": "foreign", "role": "worker", "version": release.TALOS, "mode": "configured"}]).start()
    yield lab
    lab.stop()


REFUSALS = [
    ("another Talos", dict(ichor_init_talos_version="v1.13.9"), None,
     "talos v1.13.9 is not the release set's %s; this collection manages only its release set (no override) "
     "(release set: Talos %s, contract %s, Kubernetes %s, Cilium %s)" % (
         release.TALOS, release.TALOS, release.CONTRACT, release.KUBERNETES, release.CILIUM)),
    ("another contract", dict(ichor_init_version_contract="v1.13"), None, "contract v1.13 is not the release set's"),
    ("another Kubernetes", dict(ichor_init_kubernetes_version="1.35.2"), None,
     "kubernetes 1.35.2 is not the release set's %s" % release.KUBERNETES),
    ("unmanaged", dict(ichor_init_cluster={"cni": {"preset": "unmanaged"}}), None,
     "init never writes cni.preset unmanaged: that mode exists for adopting a running cluster alone"),
    ("KubePrism off", dict(ichor_init_cluster={"kubePrism": {"enabled": False}}), None,
     "init renders KubePrism on port 7445 on every machine"),
    ("no control plane", {}, ["worker-1"],
     "the inventory has no control plane (group controlplane): a cluster needs at least one"),
    ("a moved lease", {}, "uuid", "answers with UUID "),
    ("two Layer 2 VIPs", dict(hostvars={"cp-1": {"ichor_network": {"interfaces": [{"name": "eth0", "vip": "10.5.0.100"}]}},
                                        "cp-2": {"ichor_network": {"interfaces": [{"name": "eth0", "vip": "10.5.0.101"}]}}}),
     ["cp-1", "cp-2", "worker-1"],
     "the control planes state more than one Layer 2 VIP (10.5.0.100 on cp-1; 10.5.0.101 on cp-2): the API endpoint is "
     "one VIP that every control plane states"),
    ("another cluster's machine", {}, ["cp-1", "foreign"],
     "is configured, and not by this cluster (it does not accept this talosconfig's CA, and it refuses the "
     "maintenance API"),
]


@pytest.mark.parametrize("case,extra,names,message", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_init_refuses_before_anything_is_sent_or_written(refusal_lab, tmp_path, case, extra, names, message):
    lab = refusal_lab
    uuids = None
    if names == "uuid":
        names, uuids = ["cp-1", "worker-1"], {"worker-1": "00000000-0000-0000-0000-00000000beef"}
    inv, keep = _inventory(lab, tmp_path, names or ["cp-1", "worker-1"], uuids, **extra)
    before = dict((m["name"], lab.control.calls(m["name"]).get("ApplyConfiguration", 0)) for m in lab.machines)
    for mode in (["--check"], []):
        proc = _init(inv, *mode)
        assert proc.returncode != 0 and message in proc.stdout, proc.stdout[-4000:]
        assert os.listdir(str(keep)) == []
    assert dict((m["name"], lab.control.calls(m["name"]).get("ApplyConfiguration", 0)) for m in lab.machines) == before
    if case == "another cluster's machine":
        assert "reclaim it with maesh.ichor.reclaim" in proc.stdout


def test_an_even_number_of_control_planes_is_a_warning_in_the_plan(refusal_lab, tmp_path):
    inv, unused_keep = _inventory(refusal_lab, tmp_path, ["cp-1", "cp-2", "worker-1"])
    proc = _init(inv, "--check")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert ("2 control planes: etcd tolerates no more failures than with 1 (a quorum of 2 needs 2); an odd number is "
            "the usual choice") in proc.stdout
    # without the plan callback, the plan is the output of the role's task that prints it
    proc = ansible_playbook("-i", inv, "maesh.ichor.init", "--check",
                            env={"ANSIBLE_CALLBACKS_ENABLED": "ansible.builtin.default"})
    assert proc.returncode == 0 and "PLAN (check mode" not in proc.stdout, proc.stdout[-4000:]
    printed = proc.stdout.split("Print the plan (the machines, their configs, where etcd is bootstrapped)]", 1)
    assert len(printed) == 2, proc.stdout[-4000:]
    assert "etcd: bootstrapped once, on cp-1" in printed[1] and "2 control planes: etcd tolerates" in printed[1]


def test_an_unreachable_machine_is_named_and_nothing_is_sent(refusal_lab, tmp_path):
    inv, unused_keep = _inventory(refusal_lab, tmp_path, ["cp-1", "worker-1"])
    data = yaml.safe_load(open(inv))
    data["all"]["children"]["worker"]["hosts"]["worker-1"]["ansible_host"] = "127.0.0.1"  # no Talos API there
    open(inv, "w").write(yaml.safe_dump(data))
    proc = _init(inv, "--check")
    assert proc.returncode != 0 and "worker-1 (127.0.0.1) does not answer: " in proc.stdout, proc.stdout[-4000:]


def test_a_given_bundle_that_does_not_validate_is_refused(refusal_lab, tmp_path):
    inv, keep = _inventory(refusal_lab, tmp_path, ["cp-1", "worker-1"])
    (keep / "secrets.yaml").write_text("cluster:\n  id: x\n")
    os.chmod(str(keep / "secrets.yaml"), 0o600)
    proc = _init(inv, "--check")
    assert proc.returncode != 0 and "secrets" in proc.stdout.split("refused: ")[-1], proc.stdout[-4000:]
    assert (keep / "secrets.yaml").read_text() == "cluster:\n  id: x\n"


def test_a_machine_that_does_not_come_back_and_a_lost_bootstrap_reply_a_rerun_continues_and_never_bootstraps_twice(
        talos_kube_lab, kube_lab, cilium_lab, cilium_charts, tmp_path, init_cleanup):
    lab = talos_kube_lab(controlplanes=1, workers=1, mode="maintenance", bootstrapped=False, version=release.TALOS)
    inv, unused_keep = _inventory(lab, tmp_path, ichor_init_wait_timeout=3, **_cilium(cilium_lab, kube_lab, cilium_charts))
    # the worker's install takes longer than the run waits: the run fails naming it
    lab.control.set_timing("worker-1", install_seconds=8)
    lab.control.set_faults("cp-1", lose_reply="Bootstrap")
    stopped = _init(inv)
    assert stopped.returncode != 0, stopped.stdout[-4000:]
    worker = [m for m in lab.machines if m["name"] == "worker-1"][0]
    assert "%s did not come back with its config within 3s" % worker["address"] in stopped.stdout
    lab.control.set_timing("worker-1", install_seconds=0.2)
    # the rerun goes on (cp-1 is configured: zero drift) and bootstraps; the machine does it, its reply is lost
    import time
    time.sleep(8)
    lost = _init(inv)
    assert lost.returncode != 0 and "DEADLINE_EXCEEDED" in lost.stdout, lost.stdout[-4000:]
    assert lab.control.calls("cp-1").get("Bootstrap") == 1
    # the next run reads the member first and does not bootstrap again
    done = _init(inv, "-e", "ichor_init_wait_timeout=120")
    assert done.returncode == 0, done.stdout[-6000:]
    cp = [m for m in lab.machines if m["name"] == "cp-1"][0]
    assert "etcd: bootstrapped (cp-1 lists " in done.stdout
    assert "etcd is bootstrapped (%s lists the members " % cp["address"] in done.stdout
    assert lab.control.calls("cp-1").get("Bootstrap") == 1


def _secret_values(keep):
    """What must never show up anywhere: the bundle's secrets and keys, the talosconfig's and kubeconfig's keys."""
    bundle = yaml.safe_load(open(str(keep / "secrets.yaml")))
    found = [bundle["cluster"]["secret"], bundle["trustdinfo"]["token"], bundle["secrets"]["bootstraptoken"],
             bundle["secrets"]["secretboxencryptionsecret"]] + [pair["key"] for pair in bundle["certs"].values()]
    config = yaml.safe_load(open(str(keep / "talosconfig")))
    found += [c["key"] for c in config["contexts"].values()]
    kube = yaml.safe_load(open(str(keep / "kubeconfig")))
    for user in kube.get("users") or []:
        found += [v for k, v in (user.get("user") or {}).items() if k in ("client-key-data", "token")]
    return [value for value in found if value and len(value) > 16]


@pytest.mark.floor
def test_init_through_ansible_runner_as_awx_runs_it_leaks_no_secret(
        talos_kube_lab, kube_lab, cilium_lab, cilium_charts, tmp_path, init_cleanup):
    """AWX's way: a private data dir, the inventory as a file, the survey answers as !unsafe extravars; init makes 3+2
    machines into a cluster, a second job changes nothing, and neither the runner's artifacts nor its stdout hold a
    secret of the bundle, the talosconfig or the kubeconfig it wrote."""
    from tests.integration.awx import AwxJob
    lab = talos_kube_lab(controlplanes=3, workers=2, mode="maintenance", bootstrapped=False, version=release.TALOS)
    chart = _cilium(cilium_lab, kube_lab, cilium_charts)
    inv, keep = _inventory(lab, tmp_path)
    data = yaml.safe_load(open(inv))
    survey = data["all"].pop("vars")
    survey.update(chart)
    job = AwxJob(tmp_path / "runner", "init")
    job.inventory(data)
    outputs = [job.run(survey, job_id=8 + i) for i in range(2)]
    assert [rc for rc, unused_out in outputs] == [0, 0], outputs[-1][1][-4000:]
    assert "changed=0" in outputs[1][1], outputs[1][1][-4000:]
    assert all(m["mode"] == "configured" for m in lab.control.machines())
    markers = _secret_values(keep)
    assert len(markers) >= 8, "the sweep needs the secrets it looks for"
    assert job.sweep(markers, [out for unused_rc, out in outputs]) == []


def test_a_machine_reclaimed_from_another_cluster_is_pending_then_joins_with_init(
        talos_kube_lab, kube_lab, cilium_lab, cilium_charts, tmp_path, init_cleanup):
    """maesh.ichor.reclaim resets a machine another cluster configured and records it pending in this cluster's
    record; listed in the inventory, init's join configures it (the maintenance API, its UUID checked) and the record
    takes it from pending into its machines; nothing is bootstrapped again."""
    lab = talos_kube_lab(controlplanes=1, workers=1, mode="maintenance", bootstrapped=False, version=release.TALOS,
                         additions=[{"name": "foreign", "role": "worker", "version": release.TALOS, "mode": "configured"}])
    chart = _cilium(cilium_lab, kube_lab, cilium_charts)
    inv, keep = _inventory(lab, tmp_path, names=["cp-1", "worker-1"], **chart)
    assert _init(inv).returncode == 0
    foreign = [m for m in lab.machines if m["name"] == "foreign"][0]
    reclaim = ["-e", "ichor_talosconfig=%s" % (keep / "talosconfig"), "-e", "ichor_talos_context=lab",
               "-e", "ichor_kubeconfig=%s" % (keep / "kubeconfig"), "-e", "ichor_reclaim_cluster_name=lab",
               "-e", "ichor_reclaim_node=%s" % foreign["address"],
               "-e", "ichor_reclaim_foreign_talosconfig=%s" % lab.talosconfig, "-e", "ichor_reclaim_foreign_context=lab",
               "-e", "ichor_reclaim_confirm_uuid=%s" % foreign["uuid"],
               "-e", "ichor_reclaim_force_ungraceful=true"]  # its cluster has no control plane left to drain with
    reclaimed = ansible_playbook("-i", "localhost,", "maesh.ichor.reclaim", *reclaim)
    assert reclaimed.returncode == 0, reclaimed.stdout[-6000:]
    kube = KubeClient(kubeconfig=kube_lab.kubeconfig)
    pending = [p for p in cluster_record.read(kube).get("machines") or [] if p.get("state") == "pending"]
    assert [(p["uuid"], p["address"]) for p in pending] == [(foreign["uuid"], foreign["address"])]
    # the plan names it while the inventory does not list it
    planned = _init(inv, "--check")
    assert "pending in the cluster record: %s (UUID %s): not in the inventory" % (
        foreign["address"], foreign["uuid"]) in planned.stdout
    inv, keep = _inventory(lab, tmp_path, **chart)
    joined = _init(inv)
    assert joined.returncode == 0, joined.stdout[-6000:]
    assert "pending in the cluster record: %s (UUID %s): in the inventory, joins now" % (
        foreign["address"], foreign["uuid"]) in joined.stdout
    record = cluster_record.read(kube)
    assert record.get("nodes")["foreign"]["uuid"] == foreign["uuid"]
    assert [p for p in record.get("machines") or [] if p.get("state") == "pending"] == []
    assert [m["mode"] for m in lab.control.machines() if m["name"] == "foreign"] == ["configured"]
    assert sum(lab.control.calls(m["name"]).get("Bootstrap", 0) for m in lab.machines) == 1


def test_control_planes_join_a_running_cluster_one_at_a_time_with_etcd_healthy_before_and_after(
        talos_kube_lab, kube_lab, cilium_lab, cilium_charts, tmp_path, init_cleanup):
    """A cluster made with one control plane; two more in maintenance mode are added to the inventory: init's join
    takes the cluster lock, checks etcd before each, applies one, sees etcd healthy on it after, then the next.
    The lock lasts 2 s and the join longer: renewed before each machine, before Cilium and by each stage of the
    installer, it stays the run's (the fault campaign's init schedule of seed 1 found a join that outlived its lock
    refused by its own installer, naming the run itself as the holder)."""
    lab = talos_kube_lab(controlplanes=3, workers=1, mode="maintenance", bootstrapped=False, version=release.TALOS)
    chart = _cilium(cilium_lab, kube_lab, cilium_charts)
    inv, unused_keep = _inventory(lab, tmp_path, names=["cp-1", "worker-1"], **chart)
    assert _init(inv).returncode == 0
    lab.control.reset_timeline()
    inv, unused_keep = _inventory(lab, tmp_path, **chart)
    for name in ("cp-2", "cp-3"):  # each join takes longer than the lock's duration
        lab.control.set_timing(name, install_seconds=1.5, reboot_seconds=1.5)
    joined = _init(inv, "-e", "ichor_init_lock_duration=2")
    assert joined.returncode == 0, joined.stdout[-6000:]
    assert "new control planes join one at a time, etcd healthy before and after each" in joined.stdout
    assert "TASK [maesh.ichor.init : Take the cluster lock (machines join a running cluster)]" in joined.stdout
    timeline = lab.control.timeline()
    applies = [i for i, (name, what) in enumerate(timeline) if what == "ApplyConfiguration"]
    assert [timeline[i][0] for i in applies] == ["cp-2", "cp-3"], [timeline[i] for i in applies]
    # cp-3 is applied only after cp-2 booted into its config and its own etcd member answered
    between = timeline[applies[0]:applies[1]]
    assert ("cp-2", "boot") in between and ("cp-2", "EtcdStatus") in between[between.index(("cp-2", "boot")):]
    # and etcd was asked on cp-1 before cp-2 was touched
    assert ("cp-1", "EtcdStatus") in timeline[:applies[0]]
    record = cluster_record.read(KubeClient(kubeconfig=kube_lab.kubeconfig))
    assert sorted(record.get("nodes")) == ["cp-1", "cp-2", "cp-3", "worker-1"]
    assert sum(lab.control.calls(m["name"]).get("Bootstrap", 0) for m in lab.machines) == 1
