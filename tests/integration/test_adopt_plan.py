"""adopt_plan (adopt's first phase) against the lab: simulated Talos machines started from configs real Talos code made,
the real API server with its audit log, real helm and the real Cilium chart. Seed 0103's B group as far as the plan
goes: B1 (flannel and Calico refused without the flag, nothing written anywhere; Cilium plus a second CNI refused with
it), B4 (KubePrism off refused in enabled and in replaced mode), B8 (v1.11 refused, a mixed cluster naming its
machines), the unmanaged plan of a flannel cluster (zero drift, every machine held), the takeover plan of a case C
Cilium, the kube-proxy rule on the lab, and the module through ansible-playbook with no secret in its -vvvv output."""

import base64
import json
import os
import shutil
import stat
import sys

import pytest
import yaml
from kubernetes import client as k8s

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.adopt import inspection
from ansible_collections.maesh.ichor.plugins.module_utils.ansible_module.runner import Connections
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.config import secrets
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as talos_client
from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine, talosconfig

from tests import versions
from tests.integration.ansible_env import REPO, ansible_playbook
from tests.integration.test_cilium_inline import _case_c
from tests.lab.cilium import fixtures
from tests.lab.cilium.fixtures import TALOS_VALUES, merged

# the ansible-core floor (2.16) runs the tests marked modules: the module, the playbook and the AWX run below
pytestmark = [pytest.mark.lab]

cilium_charts = fixtures.cilium_charts
cilium_lab = fixtures.cilium_lab

CONFIGS = os.path.join(REPO, "tests", "fixtures", "configs")
# flannel (Talos's default), kube-proxy on, KubePrism on 7445, Kubernetes 1.36.3 (behind the set, as the lab's API server)
BASIC = os.path.join(CONFIGS, "v1.14", "v1.14.1", "k8s-older")
KUBEPRISM_OFF = os.path.join(CONFIGS, "v1.13", "v1.14.1", "kubeprism-off")
SEED_TAIL = ("Ichor will not install or operate it; to adopt the cluster with the CNI left exactly as it is, run again "
             "with ichor_cni_unmanaged=true.")
SEED_OLD = ("Talos %s is older than the oldest version Ichor adopts (%s). Upgrade Talos first, with talosctl or "
            "your usual tool, and run adopt again." % (versions.bare(versions.BELOW_OLDEST_TALOS), versions.OLDEST_TALOS))
READS = {"Version", "Get", "List", "EtcdMemberList", "EtcdStatus"}  # reads only
ENABLED_VALUES = merged(TALOS_VALUES, {"kubeProxyReplacement": False})


def _machines(lab):
    return [{"name": m["name"], "node": m["address"], "role": m["role"]} for m in lab.machines]


class Reader:
    """The identity the plan runs as: a ServiceAccount of its own (bound to cluster-admin, so that only what the
    module does is tested), so the audit log tells its requests from the lab's."""

    def __init__(self, kube_lab, namespace):
        self.kubeconfig = kube_lab.service_account_kubeconfig(namespace, "adopt", rbac={"cluster_roles": ["cluster-admin"]})
        self.user = "system:serviceaccount:%s:adopt" % namespace
        self.kube_lab = kube_lab

    def writes(self, mark):
        return self.kube_lab.mutating_requests(since=mark, user=self.user)


@pytest.fixture
def reader(kube_lab, kube_namespace):
    return Reader(kube_lab, kube_namespace)


def _params(lab, reader, **extra):
    cp = [m for m in lab.machines if m["role"] == "controlplane"][0]
    params = dict(talosconfig=lab.talosconfig, talosconfig_content=None, context=None, endpoint=None,
                  kubeconfig=reader.kubeconfig, kubeconfig_content=None, kube_context=None, timeout=30.0,
                  machines=_machines(lab), secrets=None, recover_from=cp["name"], cni_unmanaged=False,
                  version_contract=None)
    params.update(extra)
    return params


def _plan(lab, reader, **extra):
    params = _params(lab, reader, **extra)
    conn = Connections(params)
    try:
        return inspection.run(params, conn, True)
    finally:
        conn.close()


def _refused(lab, reader, **extra):
    with pytest.raises(IchorError) as info:
        _plan(lab, reader, **extra)
    assert info.value.result["plan"][-1] == "refused: " + info.value.message
    return info.value


def _policies(kube_lab):
    """The CiliumNetworkPolicies in ichor-system ([] when the CRD is not there at all)."""
    found = kube_lab.kubectl("get", "ciliumnetworkpolicies.cilium.io", "-n", "ichor-system", "-o", "name", check=False)
    return sorted(line.split("/", 1)[1] for line in found.stdout.split()) if found.returncode == 0 else []


def _only_reads(lab, also=()):
    for m in lab.machines:
        calls = set(lab.control.calls(m["name"])) - {"etcd-peer-port"}
        assert calls <= READS | set(also), "%s got %s" % (m["name"], sorted(calls - READS))


class Workloads:
    """DaemonSets as other tools leave them (removed afterwards)."""

    def __init__(self, kube_lab):
        self.apps = k8s.AppsV1Api(kube_lab.api)
        self.core = k8s.CoreV1Api(kube_lab.api)
        self.made = []

    def daemonset(self, namespace, name, image, labels):
        try:
            self.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        except k8s.exceptions.ApiException as exc:
            if exc.status != 409:
                raise
        self.apps.create_namespaced_daemon_set(namespace, {
            "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                "containers": [{"name": name, "image": image}]}}}})
        self.made.append((namespace, name))

    def flannel(self):  # as Talos deploys it
        self.daemonset("kube-system", "kube-flannel", "ghcr.io/siderolabs/flannel:v0.27.4", {"k8s-app": "flannel"})

    def kube_proxy(self):
        self.daemonset("kube-system", "kube-proxy", "registry.k8s.io/kube-proxy:v1.36.3", {"k8s-app": "kube-proxy"})

    def cleanup(self):
        for namespace, name in self.made:
            self.apps.delete_namespaced_daemon_set(name, namespace)


@pytest.fixture
def workloads(kube_lab):
    made = Workloads(kube_lab)
    yield made
    made.cleanup()


def _flannel_cluster(talos_kube_lab, workloads, **kwargs):
    lab = talos_kube_lab(case=BASIC, controlplanes=kwargs.pop("controlplanes", 1), workers=kwargs.pop("workers", 2),
                         **kwargs)
    workloads.flannel()
    workloads.kube_proxy()
    return lab


def test_b1_flannel_is_refused_without_the_flag_and_nothing_is_written(talos_kube_lab, kube_lab, workloads, reader):
    lab = _flannel_cluster(talos_kube_lab, workloads)
    before = dict((m["name"], m["machine_config"]) for m in lab.control.machines())
    mark = kube_lab.audit_mark()
    refused = _refused(lab, reader)
    assert refused.message == "the CNI is flannel (DaemonSet kube-system/kube-flannel, found by its name). " + SEED_TAIL
    assert refused.result["versions"]["refused"] is False
    # nothing written: no mutating request of ours, no write call on a machine, every config byte for byte
    assert reader.writes(mark) == []
    _only_reads(lab)
    assert dict((m["name"], m["machine_config"]) for m in lab.control.machines()) == before
    assert not cluster_record.read(KubeClient(kubeconfig=kube_lab.kubeconfig)).exists


def test_b1_unmanaged_a_flannel_cluster_is_planned_with_zero_drift_and_every_machine_held(
        talos_kube_lab, kube_lab, workloads, reader):
    lab = _flannel_cluster(talos_kube_lab, workloads)
    mark = kube_lab.audit_mark()
    result = _plan(lab, reader, cni_unmanaged=True)
    assert result["changed"] is False
    assert (result["cni"]["row"], result["cni"]["mode"], result["cni"]["preset"], result["cni"]["talos_cni"]) == (
        "flannel", "unmanaged", "unmanaged", "default")
    assert result["kube_proxy"] == "enabled" and result["contract"] == "v1.14"
    assert [(m["name"], m["role"], m["held"], m["drift"]["zero"]) for m in result["machines"]] == [
        (m["name"], m["role"], True, True) for m in lab.machines]
    assert [m["uuid"] for m in result["machines"]] == [m["uuid"] for m in lab.machines]
    assert result["consent"] == [] and result["record"]["cni"] == {
        "preset": "unmanaged", "kubeProxy": "enabled", "unmanaged": {"talosCNI": "default"}}
    assert result["record"]["detected"] == {"cni": "flannel", "version": "0.27.4"}
    plan = result["plan"]
    assert "mode: unmanaged (ichor_cni_unmanaged=true): the CNI is left exactly as it is; talosCNI default" in plan
    assert "KubePrism: left as each machine has it (unmanaged mode)" in plan
    assert "class B consent (ichor_accept_changes): nothing" in plan
    assert plan[-1].startswith("CA rotation advised: ") and result["advice"] == plan[-1]
    assert reader.writes(mark) == []
    _only_reads(lab)


def test_b1_calico_is_refused_and_cilium_with_a_second_cni_is_refused_even_with_the_flag(
        talos_kube_lab, kube_lab, workloads, reader):
    lab = talos_kube_lab(case=BASIC, controlplanes=1, workers=1)
    workloads.kube_proxy()
    workloads.daemonset("calico-system", "calico-node", "docker.io/calico/node:v3.30.3", {"k8s-app": "calico-node"})
    refused = _refused(lab, reader)
    assert refused.message.startswith("the CNI is calico (") and refused.message.endswith(SEED_TAIL)
    workloads.daemonset("kube-system", "cilium", "quay.io/cilium/cilium:v1.20.4", {"k8s-app": "cilium"})
    for unmanaged in (False, True):
        two = _refused(lab, reader, cni_unmanaged=unmanaged)
        assert two.message.startswith("two CNIs: ") and "calico" in two.message and "cilium" in two.message
        assert "refused, also with ichor_cni_unmanaged=true" in two.message
    _only_reads(lab)


def test_two_cni_configs_on_one_machine_are_refused_even_with_the_flag(talos_kube_lab, kube_lab, workloads, reader):
    lab = _flannel_cluster(talos_kube_lab, workloads, workers=1)
    worker = [m["name"] for m in lab.machines if m["role"] == "worker"][0]
    lab.control.set_cni_files(worker, {"05-cilium.conflist": "{}", "10-flannel.conflist": "{}"})
    refused = _refused(lab, reader, cni_unmanaged=True)
    assert ("%s carries two CNI configs under /etc/cni/net.d: 05-cilium.conflist and 10-flannel.conflist" % worker) \
        in refused.message


def test_b8_talos_below_v1_12_is_refused_and_a_mixed_cluster_names_its_machines(
        talos_kube_lab, kube_lab, workloads, reader):
    below = versions.BELOW_OLDEST_TALOS
    lab = _flannel_cluster(talos_kube_lab, workloads, workers=2, overrides=["worker-2:version=" + below])
    refused = _refused(lab, reader, cni_unmanaged=True)
    assert refused.message == SEED_OLD + " Below %s: worker-2 (%s)." % (versions.OLDEST_TALOS, below)
    assert refused.result["versions"]["older"] == ["worker-2"] and "cni" not in refused.result
    _only_reads(lab)


def test_a_talos_newer_than_the_set_is_refused(talos_kube_lab, kube_lab, workloads, reader):
    newer = versions.minor_ahead(release.TALOS)
    lab = _flannel_cluster(talos_kube_lab, workloads, workers=1, overrides=["worker-1:version=%s" % newer])
    refused = _refused(lab, reader, cni_unmanaged=True)
    assert refused.message == ("Talos on worker-1 is %s, newer than the release set's %s; this collection cannot "
                               "manage it." % (newer, release.TALOS))


def _patched(lab, name, mutate):
    """Apply a changed copy of a machine's own config (as talosctl patch mc does)."""
    m = [x for x in lab.machines if x["name"] == name][0]
    docs = [d for d in yaml.safe_load_all(m["machine_config"]) if d]
    mutate(docs)
    with talos_client.TalosClient(talosconfig.load(lab.talosconfig)) as client:
        machine.apply_config(client, m["address"], yaml.safe_dump_all(docs, sort_keys=False))


def test_b4_kubeprism_off_refuses_a_managed_adoption_in_enabled_and_in_replaced_mode(
        talos_kube_lab, kube_lab, cilium_lab, workloads, reader):
    lab = talos_kube_lab(case=KUBEPRISM_OFF, controlplanes=1, workers=1)
    cilium = cilium_lab(nodes=0)  # the Nodes are the Talos machines'
    # enabled: Talos runs kube-proxy, Cilium's replacement is off
    workloads.kube_proxy()
    cilium.helm_install(versions.CILIUM_MINOR, ENABLED_VALUES)
    cilium.wait_ready()
    mark = kube_lab.audit_mark()
    refused = _refused(lab, reader)
    assert refused.message.startswith("KubePrism is off on cp-1, worker-1: a managed Cilium reaches the API server "
                                      "through KubePrism on port 7445 on every machine")
    assert refused.message.endswith("nothing was written")
    assert "kube-proxy: enabled (Talos runs kube-proxy (machine configs), Cilium kubeProxyReplacement false)" in \
        refused.result["plan"]
    # replaced: kube-proxy disabled in Talos (cluster.proxy.disabled) and its DaemonSet gone, the replacement on
    for name in ("cp-1", "worker-1"):
        _patched(lab, name, lambda docs: docs[0]["cluster"].setdefault("proxy", {}).update(disabled=True))
    workloads.cleanup()
    workloads.made = []
    kube_lab.helm("upgrade", "cilium", cilium_charts_path(cilium), "-n", "kube-system",
                  "-f", cilium.file("values.json", TALOS_VALUES))
    cilium.wait_ready()
    refused = _refused(lab, reader)
    assert refused.message.startswith("KubePrism is off on cp-1, worker-1: ")
    assert "kube-proxy: replaced (Talos has disabled kube-proxy (machine configs), Cilium kubeProxyReplacement true)" \
        in refused.result["plan"]
    # the same cluster adopted unmanaged: KubePrism left as it is
    assert _plan(lab, reader, cni_unmanaged=True)["cni"]["mode"] == "unmanaged"
    assert reader.writes(mark) == []


def cilium_charts_path(cilium):
    return cilium.charts[versions.CILIUM_MINOR]["chart"]


def test_the_kube_proxy_rule_on_the_lab_two_owners_refused(
        talos_kube_lab, kube_lab, cilium_lab, cilium_charts, reader):
    lab, cilium = _case_c(talos_kube_lab, cilium_lab)  # kube-proxy disabled in Talos, Cilium replaces it
    kube_lab.kubectl("apply", "-f", "-", input_text=json.dumps({
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "kube-proxy", "namespace": "kube-system"},
        "spec": {"selector": {"matchLabels": {"k8s-app": "kube-proxy"}}, "template": {
            "metadata": {"labels": {"k8s-app": "kube-proxy"}},
            "spec": {"containers": [{"name": "kube-proxy", "image": "registry.k8s.io/kube-proxy:v1.36.3"}]}}}}))
    cilium.extra.append(("apps/v1", "DaemonSet", "kube-system", "kube-proxy"))
    refused = _refused(lab, reader)
    assert refused.message == ("kube-proxy: the machine configs disable it but its DaemonSet still runs in kube-system; "
                               "make them agree first")


def test_a_case_c_cilium_is_planned_for_the_takeover(talos_kube_lab, kube_lab, cilium_lab, cilium_charts, reader):
    lab, unused_cilium = _case_c(talos_kube_lab, cilium_lab)
    for m in lab.machines:  # the set-up applied the inline manifest to the control plane's config
        lab.control.reset_calls(m["name"])
    mark = kube_lab.audit_mark()
    result = _plan(lab, reader)
    assert (result["cni"]["row"], result["cni"]["mode"], result["cni"]["preset"]) == ("cilium-manifest", "takeover", "cilium")
    assert result["cni"]["version"] == "1.19.5" and result["kube_proxy"] == "replaced"
    assert "KubePrism: on port 7445 on every machine" in result["plan"]
    assert result["contract"] == "v1.13"  # the fixture's configs were made for contract v1.13
    assert [m["held"] for m in result["machines"]] == [True, True]
    assert [i["name"] for i in result["cluster_spec"]["inlineManifests"]] == ["cilium"]
    # phase 4 renders without the entry the takeover hands over: its leaving cp-1's config is class B, listed for
    # consent, as the release will find it; the worker has no entry and zero drift
    cp, worker = result["machines"]
    assert cp["name"] == "cp-1" and cp["reason"] == "class B needs consent (ichor_accept_changes)"
    entry = ["remove v1alpha1:cluster.inlineManifests[cilium].contents", "remove v1alpha1:cluster.inlineManifests[cilium].name"]
    assert sorted("%s %s" % (d["change"], d["path"]) for d in cp["drift"]["B"]) == entry
    assert not cp["drift"]["C"] and not cp["drift"]["A"]
    assert sorted(result["consent"]) == ["cp-1: " + line for line in entry]
    assert "class B consent (ichor_accept_changes): %s" % "; ".join(result["consent"]) in result["plan"]
    assert worker["drift"]["zero"] and worker["reason"] == "released in phase 4 once its drift is zero after class A"
    assert "phase 3: the Cilium takeover (maesh.ichor.cilium_takeover; its check mode plans its preconditions and " \
        "diff gate)" in result["plan"]
    assert reader.writes(mark) == []
    _only_reads(lab)


def test_a_contract_override_other_than_the_sets_is_refused(talos_kube_lab, kube_lab, workloads, reader):
    lab = _flannel_cluster(talos_kube_lab, workloads, workers=1)
    refused = _refused(lab, reader, cni_unmanaged=True, version_contract="v1.13")
    assert refused.message == "version_contract v1.13: an override may only name the release set's contract %s" % (
        release.CONTRACT)
    assert _plan(lab, reader, cni_unmanaged=True, version_contract=release.CONTRACT)["contract"] == release.CONTRACT


def test_another_clusters_bundle_is_refused(talos_kube_lab, kube_lab, workloads, tmp_path, reader):
    lab = _flannel_cluster(talos_kube_lab, workloads, workers=1)
    other = os.path.join(CONFIGS, "v1.14", "v1.14.1", "basic", "secrets.yaml")
    refused = _refused(lab, reader, cni_unmanaged=True, recover_from=None, secrets=other)
    assert refused.message == ("cp-1: the secrets bundle belongs to another cluster: its Talos CA is not the one in the "
                               "live config")


@pytest.mark.floor
def test_the_module_in_check_mode_through_ansible_playbook_prints_the_plan_and_no_secret(
        talos_kube_lab, kube_lab, workloads, tmp_path):
    lab = _flannel_cluster(talos_kube_lab, workloads, workers=1)
    bundle = yaml.safe_load(open(os.path.join(BASIC, "secrets.yaml")))
    markers = [bundle["cluster"]["secret"], bundle["trustdinfo"]["token"], bundle["secrets"]["bootstraptoken"],
               bundle["secrets"]["secretboxencryptionsecret"]]
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "Plan the adoption", "maesh.ichor.adopt_plan": {
            "talosconfig": lab.talosconfig, "kubeconfig": kube_lab.kubeconfig, "machines": _machines(lab),
            "recover_from": "cp-1", "cni_unmanaged": True}, "register": "planned"},
        {"ansible.builtin.copy": {"content": "{{ planned | to_json }}", "dest": str(tmp_path / "result.json")},
         "check_mode": False}],
        "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"}}]
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump(play))
    proc = ansible_playbook(str(path), "-i", "localhost,", "-c", "local", "--check", "--diff", "-vvvv")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["changed"] is False and result["cni"]["mode"] == "unmanaged"
    assert "PLAN (check mode: nothing was written)" in proc.stdout
    assert all(marker and marker not in proc.stdout + proc.stderr for marker in markers)
    assert all(marker not in (tmp_path / "result.json").read_text() for marker in markers)


def _adopt(inv, *extra, env=None):
    proc = ansible_playbook("-i", inv, "maesh.ichor.adopt", *extra, env=env)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return proc


@pytest.fixture
def adoption_cleanup(kube_lab):
    """Adopt writes into the shared API server: the record, the bundle Secret and the lock go again afterwards."""
    yield
    kube = KubeClient(kubeconfig=kube_lab.kubeconfig)
    for api_version, kind, name in (("v1", "Secret", "ichor-secrets-bundle"), ("v1", "ConfigMap", "ichor-cluster"),
                                    ("coordination.k8s.io/v1", "Lease", "ichor-cluster-lock")):
        if kube.get(api_version, kind, name, "ichor-system") is not None:
            kube.delete(api_version, kind, name, "ichor-system")


def test_the_guides_plan_command_prints_the_plan_without_the_plan_callback(
        talos_kube_lab, kube_lab, workloads, tmp_path):
    """Issue 26 section 7: `adopt --check --diff` as docs/adopt.md writes it, with Ansible's default output alone, shows
    the plan (the role prints it); a run without --check and without ichor_adopt_confirm prints it above the line that
    says so. Nothing is written."""
    from tests.integration.test_upgrade import _inventory
    lab = _flannel_cluster(talos_kube_lab, workloads, workers=1)
    inv = _inventory(lab, tmp_path)
    mark = kube_lab.audit_mark()
    no_callback = {"ANSIBLE_CALLBACKS_ENABLED": "ansible.builtin.default"}  # the default output alone
    # the machine's line: the inventory's name, then the hostname Talos reports (its own, not the inventory's)
    wanted = ["cp-1: %s (%s): Talos v1.14.1, controlplane, running" % (lab.machine("cp-1")["hostname"], lab.address("cp-1")),
              "mode: unmanaged (ichor_cni_unmanaged=true): the CNI is left exactly as it is; talosCNI default",
              "cp-1: zero drift at v1.14; held (released in phase 4 once its drift is zero after class A)",
              "phase 2 would write: the cluster record ichor-system/ichor-cluster (new;"]
    for extra in (("--check", "--diff"), ()):
        proc = _adopt(inv, *extra, "-e", "ichor_adopt_recover_from=cp-1", "-e", "ichor_cni_unmanaged=true",
                      env=no_callback)
        assert proc.returncode == 0, proc.stdout[-4000:]
        assert "PLAN (check mode" not in proc.stdout and "\nPLAN\n" not in proc.stdout
        shown = proc.stdout.split("PLAY RECAP", 1)[0]
        for line in wanted:
            assert line in shown, shown[-4000:]
    stop = "The plan above is what adopt does; run again with -e ichor_adopt_confirm=true to adopt."
    assert shown.index(wanted[-1]) < shown.index(stop)
    assert [e for e in kube_lab.mutating_requests(since=mark, user="lab-admin")
            if (e.get("objectRef") or {}).get("subresource") != "status"] == []
    _only_reads(lab)


def test_a_cluster_halfway_through_a_kubernetes_upgrade_is_refused_with_the_way_forward(
        talos_kube_lab, kube_lab, workloads, reader, tmp_path):
    """Issue 26 §2: configs real Talos code made, the control-plane components at Kubernetes 1.36.3 and every kubelet
    at 1.35.4 (a Kubernetes upgrade stopped halfway). Adopt planned the API server a minor back as class A; it refuses,
    naming the split and the way forward, and writes nothing anywhere."""
    from tests.integration.test_upgrade import _inventory
    lab = talos_kube_lab(case=os.path.join(CONFIGS, "v1.13", "v1.14.1", "k8s-upgrade-halfway"), controlplanes=1, workers=1)
    workloads.flannel()
    workloads.kube_proxy()
    mark = kube_lab.audit_mark()
    refused = _refused(lab, reader, cni_unmanaged=True)
    assert refused.message.startswith("the cluster runs Kubernetes at 2 minors (kube-apiserver v1.36.3 on cp-1;")
    # a kubelet is known by its Node: the name Talos gives it
    assert "kubelet v1.35.4 on %s)" % ", ".join(sorted(lab.node_name(n) for n in ("cp-1", "worker-1"))) in refused.message
    assert refused.message.endswith("finish the upgrade (talosctl upgrade-k8s --to 1.36.3), then adopt")
    assert reader.writes(mark) == []
    _only_reads(lab)
    inv = _inventory(lab, tmp_path, ichor_adopt_recover_from="cp-1")
    proc = _adopt(inv, "--check", "--diff", "-e", "ichor_cni_unmanaged=true")
    assert proc.returncode != 0 and "a Kubernetes upgrade stopped halfway" in proc.stdout, proc.stdout[-3000:]


def test_the_plan_reads_103_machines_through_one_endpoint_that_allows_ten_streams(
        talos_kube_lab, workloads, tmp_path):
    """Every machine is read through the first endpoint (the node metadata), nine reads each, sixteen machines at once:
    144 streams wanted on one connection, where this server allows 10 (and ends the connection of a client that opens
    more). The transport waits for the server's SETTINGS and queues what its limit does not allow."""
    from tests.integration.test_upgrade import _inventory
    lab = _flannel_cluster(talos_kube_lab, workloads, controlplanes=3, workers=100, max_streams=10, start_timeout=120)
    inv = _inventory(lab, tmp_path, ichor_adopt_recover_from="cp-1")
    proc = _adopt(inv, "--check", "-e", "ichor_cni_unmanaged=true")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "could not be read" not in proc.stdout
    read = [m["name"] for m in lab.control.machines() if "Version" in lab.control.calls(m["name"])]
    assert len(read) == 103
    assert "mode: unmanaged (ichor_cni_unmanaged=true)" in proc.stdout


def test_the_adopt_playbook_plans_then_adopts_a_flannel_cluster_unmanaged_and_a_rerun_changes_nothing(
        talos_kube_lab, kube_lab, workloads, tmp_path, adoption_cleanup):
    from tests.integration.test_upgrade import _inventory
    lab = _flannel_cluster(talos_kube_lab, workloads, workers=1)
    inv = _inventory(lab, tmp_path, ichor_adopt_recover_from="cp-1")
    kube = KubeClient(kubeconfig=kube_lab.kubeconfig)
    mark = kube_lab.audit_mark()
    refused = _adopt(inv, "--check", "--diff")
    assert refused.returncode != 0 and "the CNI is flannel (DaemonSet kube-system/kube-flannel" in refused.stdout
    planned = _adopt(inv, "--check", "--diff", "-e", "ichor_cni_unmanaged=true", "-e", "ichor_adopt_confirm=true")
    assert planned.returncode == 0, planned.stdout[-4000:]
    assert "PLAN (check mode: nothing was written)" in planned.stdout
    assert "mode: unmanaged (ichor_cni_unmanaged=true)" in planned.stdout and "CA rotation advised" in planned.stdout
    assert [e for e in kube_lab.mutating_requests(since=mark, user="lab-admin")
            if (e.get("objectRef") or {}).get("subresource") != "status"] == []
    assert not cluster_record.read(kube).exists

    bundle_file = tmp_path / "keep" / "secrets.yaml"
    bundle_file.parent.mkdir(mode=0o700)
    snapshots = tmp_path / "keep" / "etcd"
    args = ["-e", "ichor_cni_unmanaged=true", "-e", "ichor_adopt_confirm=true", "-e", "ichor_adopt_secrets_file=%s" % bundle_file,
            "-e", "ichor_adopt_etcd_snapshot_dir=%s" % snapshots]
    adopted = _adopt(inv, *args)
    assert adopted.returncode == 0, adopted.stdout[-6000:]
    record = cluster_record.read(kube)
    assert record.get("adoption")["adopted"] is True and record.get("adoption")["mode"] == "unmanaged"
    assert record.get("cluster")["cni"] == {"preset": "unmanaged", "kubeProxy": "enabled",
                                            "unmanaged": {"talosCNI": "default"}}
    assert record.get("contract") == "v1.14" and record.get("held") == {}
    assert dict((name, n["uuid"]) for name, n in record.get("nodes").items()) == dict(
        (m["name"], m["uuid"]) for m in lab.machines)
    assert "cp-1: released (hold lifted)" in adopted.stdout and "worker-1: released (hold lifted)" in adopted.stdout
    stored = kube.get("v1", "Secret", "ichor-secrets-bundle", "ichor-system")
    fixture = secrets.load(os.path.join(BASIC, "secrets.yaml"))
    assert secrets.parse(base64.b64decode(stored["data"]["bundle.yaml"]).decode()).fingerprint() == fixture.fingerprint()
    assert stat.S_IMODE(os.stat(bundle_file).st_mode) == 0o600
    assert secrets.load(str(bundle_file)).fingerprint() == fixture.fingerprint()
    assert kube.get("coordination.k8s.io/v1", "Lease", "ichor-cluster-lock", "ichor-system") is None
    # phase 4 began with an etcd snapshot of the control plane, a 0600 file named after the cluster
    (snapshot,) = list(snapshots.iterdir())
    assert snapshot.name.startswith("k8s-older-") and stat.S_IMODE(os.stat(snapshot).st_mode) == 0o600
    assert lab.control.calls("cp-1").get("EtcdSnapshot") == 1
    _only_reads(lab, also=("EtcdSnapshot",))  # zero drift: nothing applied to a machine
    again = _adopt(inv, *args)
    assert again.returncode == 0 and "changed=0" in again.stdout, again.stdout[-6000:]
    assert "cp-1: not held (released earlier); nothing to do" in again.stdout
    assert len(list(snapshots.iterdir())) == 1  # nothing held: no second snapshot
    _only_reads(lab, also=("EtcdSnapshot",))


def test_a_case_c_cilium_is_adopted_taken_over_and_its_inline_entry_released_machine_by_machine(
        talos_kube_lab, kube_lab, cilium_lab, cilium_charts, tmp_path, adoption_cleanup):
    """B6 and A1 through the playbook: phase 2 holds every machine and applies nothing; phase 3 takes the inline
    manifest Cilium over (an upgrade from 1.19); phase 4 releases the control plane (its class B change, the inline
    entry leaving its config, consented) and the worker (zero drift), one at a time; a rerun changes nothing."""
    from tests.integration.test_upgrade import _inventory
    lab, cilium = _case_c(talos_kube_lab, cilium_lab)
    for m in lab.machines:
        lab.control.reset_calls(m["name"])
    inv = _inventory(lab, tmp_path, ichor_adopt_recover_from="cp-1", ichor_adopt_cilium_chart=cilium_charts[versions.CILIUM_MINOR]["chart"],
                     ichor_adopt_helm=kube_lab.bins["helm"], ichor_adopt_cilium_values=TALOS_VALUES,
                     ichor_adopt_etcd_snapshot_dir=str(tmp_path / "etcd"))
    kube = KubeClient(kubeconfig=kube_lab.kubeconfig)
    # the takeover's gate is not empty (an upgrade from 1.19): the plan refuses without consent, writing nothing
    refused = _adopt(inv, "--check", "--diff")
    assert refused.returncode != 0 and "set accept_cilium_diff to accept" in refused.stdout, refused.stdout[-6000:]
    planned = _adopt(inv, "--check", "--diff", "-e", "ichor_accept_cilium_diff=true")
    assert planned.returncode == 0, planned.stdout[-6000:]
    assert "phase 3: the Cilium takeover" in planned.stdout and "upgrade: Cilium 1.19.5 -> %s" % release.CILIUM in planned.stdout
    assert not cluster_record.read(kube).exists
    _only_reads(lab)
    # a takeover that fails after the write phase: the run fails saying so, every machine stays held, nothing applied
    from tests.integration.test_cilium_release import _failing_helm
    broken, unused_count = _failing_helm(tmp_path, kube_lab.bins["helm"], failures=1000)
    args = ["-e", "ichor_adopt_confirm=true", "-e", "ichor_accept_cilium_diff=true"]
    stopped = _adopt(inv, *args + ["-e", "ichor_adopt_helm=%s" % broken])
    assert stopped.returncode != 0 and "the Cilium takeover did not complete" in stopped.stdout, stopped.stdout[-6000:]
    assert "the machines stay held" in stopped.stdout
    assert sorted(cluster_record.read(kube).get("held")) == ["cp-1", "worker-1"]
    assert [c for m in lab.machines for c in lab.control.calls(m["name"]) if c == "ApplyConfiguration"] == []
    assert kube.get("coordination.k8s.io/v1", "Lease", "ichor-cluster-lock", "ichor-system") is None
    # the rerun continues where it stopped: taken over, then released one at a time, control plane first
    args += ["-e", "ichor_accept_changes=true"]
    adopted = _adopt(inv, *args)
    assert adopted.returncode == 0, adopted.stdout[-8000:]
    record = cluster_record.read(kube)
    assert record.get("held") == {} and record.get("cilium")["release"] == "ichor-system/cilium"
    assert record.get("cilium")["inlineManifests"] == ["cilium"]
    assert adopted.stdout.index("cp-1: released (hold lifted)") < adopted.stdout.index("worker-1: released (hold lifted)")
    applied = dict((m["name"], lab.control.calls(m["name"]).get("ApplyConfiguration", 0)) for m in lab.machines)
    assert applied["cp-1"] >= 1 and applied["worker-1"] == 0, applied
    cp = [m for m in lab.control.machines() if m["name"] == "cp-1"][0]
    docs = [d for d in yaml.safe_load_all(cp["machine_config"]) if d]
    assert not (docs[0].get("cluster") or {}).get("inlineManifests"), "the Cilium inline entry is still in cp-1's config"
    image = kube.get("apps/v1", "DaemonSet", "cilium", "kube-system")["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == "quay.io/cilium/cilium:v" + release.CILIUM  # the lab packages the set's minor as the set's chart
    again = _adopt(inv, *args)
    assert again.returncode == 0 and "changed=0" in again.stdout, again.stdout[-8000:]


def test_b6_three_control_planes_are_released_one_at_a_time_each_back_before_the_next_is_touched(
        talos_kube_lab, kube_lab, cilium_lab, cilium_charts, tmp_path, adoption_cleanup):
    """B6 on three control planes: each carries the Cilium inline entry (a class B change, consented), each apply
    reboots it (the lab's apply_needs_reboot), and the simulator's timeline shows cp-2's apply only after cp-1 booted
    again, cp-3's after cp-2's, the worker last; no apply reaches a machine before phase 3 completed."""
    from tests.integration.test_cilium_inline import CASE as CILIUM_INLINE, _talos
    from tests.integration.test_upgrade import _inventory
    lab = talos_kube_lab(case=CILIUM_INLINE, controlplanes=3, workers=1, version=release.TALOS)
    cilium = cilium_lab(nodes=0)
    cilium.template_apply("1.19", TALOS_VALUES)
    cilium.wait_ready()
    cilium.render(versions.CILIUM_MINOR, TALOS_VALUES)  # what the takeover installs, for teardown
    manifest = open(cilium.manifests[0]).read()
    controlplanes = [m for m in lab.machines if m["role"] == "controlplane"]
    with _talos(lab) as client:
        for cp in controlplanes:  # the entry becomes the rendered chart on every control plane
            docs = [d for d in yaml.safe_load_all(cp["machine_config"]) if d]
            (entry,) = docs[0]["cluster"]["inlineManifests"]
            entry["contents"] = manifest
            machine.apply_config(client, cp["address"], yaml.safe_dump_all(docs, sort_keys=False))
    for cp in controlplanes:
        lab.control.set_faults(cp["name"], apply_needs_reboot=True)
    lab.control.reset_timeline()
    inv = _inventory(lab, tmp_path, ichor_adopt_recover_from="cp-1", ichor_adopt_cilium_chart=cilium_charts[versions.CILIUM_MINOR]["chart"],
                     ichor_adopt_helm=kube_lab.bins["helm"], ichor_adopt_cilium_values=TALOS_VALUES,
                     ichor_adopt_etcd_snapshot_dir=str(tmp_path / "etcd"))
    adopted = _adopt(inv, "-e", "ichor_adopt_confirm=true", "-e", "ichor_accept_cilium_diff=true",
                     "-e", "ichor_accept_changes=true")
    assert adopted.returncode == 0, adopted.stdout[-8000:]
    assert cluster_record.read(KubeClient(kubeconfig=kube_lab.kubeconfig)).get("held") == {}
    timeline = lab.control.timeline()
    applies = [(i, name) for i, (name, what) in enumerate(timeline) if what == "ApplyConfiguration"]
    order = []  # each machine's applies (the immediate try a reboot-needing change refuses, then the one that reboots)
    for i, name in applies:
        if not order or order[-1][0] != name:
            order.append((name, []))
        order[-1][1].append(i)
    assert [name for name, unused in order] == ["cp-1", "cp-2", "cp-3"], applies
    for (name, mine), (following, theirs) in zip(order, order[1:]):
        between = [what for n, what in timeline[mine[-1]:theirs[0]] if n == name]
        assert "down:rebooting" in between and between.index("boot") > between.index("down:rebooting"), (
            "%s was applied before %s came back: %s" % (following, name, between))
    # nothing was applied before the takeover's Helm release existed: the applies follow phase 3's etcd snapshot
    snapshot = [i for i, (name, what) in enumerate(timeline) if what == "EtcdSnapshot"]
    assert snapshot and snapshot[0] < applies[0][0]
    assert adopted.stdout.index("cp-3: released (hold lifted)") < adopted.stdout.index("worker-1: released (hold lifted)")


@pytest.mark.floor
def test_the_rollout_and_talos_machine_config_refuse_a_machine_adopt_holds(
        talos_kube_lab, kube_lab, workloads, tmp_path, adoption_cleanup):
    from ansible_collections.maesh.ichor.plugins.module_utils.adopt import release as adopt_release
    from ansible_collections.maesh.ichor.plugins.module_utils.adopt import write as adopt_write
    from ansible_collections.maesh.ichor.plugins.module_utils.k8s import lock
    lab = _flannel_cluster(talos_kube_lab, workloads, workers=1)
    kube = KubeClient(kubeconfig=kube_lab.kubeconfig)
    lock.acquire(kube, "holds-test", 600)
    admin = Reader.__new__(Reader)
    admin.kubeconfig = kube_lab.kubeconfig
    params = dict(_params(lab, admin, cni_unmanaged=True), holder="holds-test")
    conn = Connections(params)
    try:
        written = adopt_write.run(params, conn, False)
    finally:
        conn.close()
    assert written["held"] == ["cp-1", "worker-1"]
    machines = _machines(lab)
    cluster = {"name": "k8s-older", "endpoint": "https://k8s-older.example.com:6443", "kubernetesVersion": "1.36.3",
               "versionContract": "v1.14", "cni": {"preset": "unmanaged", "kubeProxy": "enabled",
                                                   "unmanaged": {"talosCNI": "default"}}}
    tasks = [
        ("release_check", {"machines": machines}),
        ("talos_upgrade", {"node": machines[1]["node"], "name": "worker-1", "role": "worker"}),
        ("talos_machine_config", {"node": machines[1]["node"], "secrets": os.path.join(BASIC, "secrets.yaml"),
                                  "cluster": cluster, "machine": {"role": "worker", "install": {
                                      "disk": "/dev/sda", "image": "ghcr.io/siderolabs/installer:v1.14.1"}}}),
    ]
    play = [{"hosts": "localhost", "gather_facts": False, "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"},
             "module_defaults": {"group/maesh.ichor.talos": {"talosconfig": lab.talosconfig},
                                 "group/maesh.ichor.k8s": {"kubeconfig": kube_lab.kubeconfig}},
             "tasks": [{"name": name, "maesh.ichor." + name: args, "register": "r%d" % i, "ignore_errors": True}
                       for i, (name, args) in enumerate(tasks)] + [
                 {"ansible.builtin.copy": {"content": "{{ [r0, r1, r2] | to_json }}", "dest": str(tmp_path / "r.json")},
                  "check_mode": False}]}]
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump(play))
    proc = ansible_playbook(str(path), "-i", "localhost,", "-c", "local")
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout[-4000:]
    results = json.loads((tmp_path / "r.json").read_text())
    held = ("%s held by adopt: adopt's release phase lifts the hold first (maesh.ichor.adopt with "
            "ichor_adopt_confirm=true); nothing was written")
    assert [r.get("msg") for r in results] == [held % "cp-1, worker-1", held % "worker-1", held % "worker-1"], results
    _only_reads(lab)
    # released (zero drift), the same modules go on
    for name in ("cp-1", "worker-1"):
        conn = Connections(dict(params, name=name, accept_changes=False, wait_timeout=60.0))
        try:
            assert adopt_release.run(dict(params, name=name, accept_changes=False, wait_timeout=60.0), conn, False)["released"]
        finally:
            conn.close()
    proc = ansible_playbook(str(path), "-i", "localhost,", "-c", "local", "--check")
    results = json.loads((tmp_path / "r.json").read_text())
    assert not any(r.get("failed") for r in results), results
    lock.release(kube, "holds-test")


@pytest.mark.parametrize("case,talos,contract", [
    ("v1.12/v1.12.7/basic", "v1.12.7", "v1.12"),
    ("v1.13/v1.13.9/basic", "v1.13.9", "v1.13"),
    ("v1.14/v1.14.1/k8s-older", "v1.14.1", "v1.14"),
])
def test_d1_d4_a_flannel_cluster_adopted_unmanaged_at_each_contract_keeps_its_configs_and_rolls_without_cilium(
        talos_kube_lab, kube_lab, workloads, tmp_path, adoption_cleanup, case, talos, contract):
    """D1: the configs are byte-identical after the adoption (the first render changes nothing on the node); D4: the
    rollout that follows plans the Talos and Kubernetes steps and no Cilium step (the preset is unmanaged)."""
    from ansible_collections.maesh.ichor.plugins.module_utils.rollout import check
    from tests.integration.test_upgrade import _inventory
    lab = talos_kube_lab(case=os.path.join(CONFIGS, case), controlplanes=1, workers=1, version=talos)
    workloads.flannel()
    workloads.kube_proxy()
    before = dict((m["name"], m["machine_config"]) for m in lab.control.machines())
    inv = _inventory(lab, tmp_path, ichor_adopt_recover_from="cp-1", ichor_cni_unmanaged=True,
                     ichor_adopt_etcd_snapshot_dir=str(tmp_path / "etcd"))
    adopted = _adopt(inv, "-e", "ichor_adopt_confirm=true")
    assert adopted.returncode == 0, adopted.stdout[-6000:]
    assert "version contract: %s" % contract in adopted.stdout
    record = cluster_record.read(KubeClient(kubeconfig=kube_lab.kubeconfig))
    assert (record.get("contract"), record.get("held"), record.get("adoption")["mode"]) == (contract, {}, "unmanaged")
    assert dict((m["name"], m["machine_config"]) for m in lab.control.machines()) == before
    _only_reads(lab, also=("EtcdSnapshot",))
    assert "changed=0" in _adopt(inv, "-e", "ichor_adopt_confirm=true").stdout
    params = dict(talosconfig=lab.talosconfig, talosconfig_content=None, context=None, endpoint=None,
                  kubeconfig=kube_lab.kubeconfig, kubeconfig_content=None, kube_context=None, timeout=30.0,
                  machines=_machines(lab), cluster=None, secrets=None, desired={})
    conn = Connections(params)
    try:
        judged = check.run(params, conn, True)
    finally:
        conn.close()
    steps = [s["step"] for s in judged["steps"]]
    assert steps[0] == "talos" and "cilium" not in steps, steps


def test_d3_a_cilium_adopted_unmanaged_is_left_alone_by_the_cilium_modules_and_the_rollout(
        talos_kube_lab, kube_lab, cilium_lab, cilium_charts, tmp_path, adoption_cleanup):
    """D3: no Helm record touched, cilium_release refused with the seed's words, no Cilium step although 1.19 is
    behind the set."""
    from ansible_collections.maesh.ichor.plugins.module_utils.cilium import release as cilium_release
    from ansible_collections.maesh.ichor.plugins.module_utils.cilium.errors import Refused
    from ansible_collections.maesh.ichor.plugins.module_utils.rollout import check
    from tests.integration.test_upgrade import _inventory
    lab, cilium = _case_c(talos_kube_lab, cilium_lab)
    inv = _inventory(lab, tmp_path, ichor_adopt_recover_from="cp-1", ichor_cni_unmanaged=True,
                     ichor_adopt_etcd_snapshot_dir=str(tmp_path / "etcd"))
    adopted = _adopt(inv, "-e", "ichor_adopt_confirm=true")
    assert adopted.returncode == 0, adopted.stdout[-6000:]
    # the Cilium inline entry stays in the config: render cannot express it unmanaged (class C), so cp-1 stays held
    record = cluster_record.read(KubeClient(kubeconfig=kube_lab.kubeconfig))
    assert record.get("adoption")["mode"] == "unmanaged" and list(record.get("held")) == ["cp-1"]
    assert "class C" in record.get("held")["cp-1"] and cilium.records("ichor-system") == []
    # Cilium detected and its CRD there: the policies are applied although the CNI is not managed
    assert "maesh.ichor's network policies are applied: Cilium runs and the CRD" in adopted.stdout
    assert _policies(kube_lab) == ["ichor-system-default-deny"]
    params = dict(chart=cilium_charts[versions.CILIUM_MINOR]["chart"], chart_digest=None, helm=kube_lab.bins["helm"],
                  kubeconfig=kube_lab.kubeconfig, kubeconfig_content=None, kube_context=None, timeout=30.0,
                  install=False, cilium_values=None, kube_proxy=None, tunnel=None, kubeprism_port=7445,
                  control_planes=None, wait=True, wait_timeout=60.0)
    conn = Connections(params)
    try:
        with pytest.raises(Refused) as info:
            cilium_release.run(params, conn, True)
    finally:
        conn.close()
    assert info.value.message == "the CNI is not managed by Ichor (spec.cni.preset: unmanaged)"
    from ansible_collections.maesh.ichor.plugins.module_utils.cilium import takeover
    params.update(accept_cilium_changes=False, accept_cilium_diff=True)
    conn = Connections(params)
    try:
        with pytest.raises(Refused) as info:
            takeover.run(params, conn, True)
    finally:
        conn.close()
    assert info.value.message == "the CNI is not managed by Ichor (spec.cni.preset: unmanaged)"
    from tests.integration.test_cilium_inline import CASE as CILIUM_INLINE
    params = dict(talosconfig=lab.talosconfig, talosconfig_content=None, context=None, endpoint=None,
                  kubeconfig=kube_lab.kubeconfig, kubeconfig_content=None, kube_context=None, timeout=30.0,
                  machines=_machines(lab), cluster=None, secrets=os.path.join(CILIUM_INLINE, "secrets.yaml"), desired={})
    conn = Connections(params)
    try:
        with pytest.raises(IchorError, match="^cp-1 held by adopt"):
            check.run(params, conn, True)
        params["machines"] = [m for m in _machines(lab) if m["name"] != "cp-1"]  # the rollout of what is released
        judged = check.run(params, conn, True)
    finally:
        conn.close()
    assert judged["cni"]["unmanaged"] is True and "cilium" not in [s["step"] for s in judged["steps"]]
    assert [r["component"] for r in judged["versions"]] == ["Talos", "Version contract", "Kubernetes"]


def test_b5_a_v1_12_config_running_on_talos_v1_14_is_probed_as_v1_12(talos_kube_lab, kube_lab, workloads, reader):
    """A cluster generated by talosctl v1.12 and upgraded in place keeps its v1.12-form config: forcing v1.14 would
    turn fields into drift (the ADR 0075 failure); probing finds v1.12 with no class C path."""
    lab = talos_kube_lab(case=os.path.join(CONFIGS, "upgraded", "v1.12.7-to-v1.14.1", "basic"), controlplanes=1,
                         workers=1, version="v1.14.1")
    workloads.flannel()
    workloads.kube_proxy()
    result = _plan(lab, reader, cni_unmanaged=True)
    assert result["contract"] == "v1.12" and all(m["drift"]["zero"] for m in result["machines"])
    assert all(m["talos"] == "v1.14.1" and m["probed"] == "v1.12" for m in result["machines"])
    line = [line for line in result["plan"] if line.startswith("version contract: v1.12 (probed: ")][0]
    counts = dict(part.split(" C=") for part in line.split("probed: ")[1].split(";")[0].split(" ", 1)[1].split(", "))
    assert int(counts["v1.12"]) == 0 and int(counts["v1.14"]) > 0, line


def test_b7_a_non_cilium_inline_manifest_blocks_its_machine_and_nothing_is_applied_to_it(
        talos_kube_lab, kube_lab, workloads, tmp_path, adoption_cleanup):
    from tests.integration.test_upgrade import _inventory
    lab = talos_kube_lab(case=os.path.join(CONFIGS, "v1.13", "v1.14.1", "inline-other"), controlplanes=1, workers=1)
    workloads.flannel()
    workloads.kube_proxy()
    inv = _inventory(lab, tmp_path, ichor_adopt_recover_from="cp-1", ichor_cni_unmanaged=True,
                     ichor_adopt_etcd_snapshot_dir=str(tmp_path / "etcd"))
    adopted = _adopt(inv, "-e", "ichor_adopt_confirm=true", "-e", "ichor_accept_changes=true")
    assert adopted.returncode == 0, adopted.stdout[-6000:]
    record = cluster_record.read(KubeClient(kubeconfig=kube_lab.kubeconfig))
    assert list(record.get("held")) == ["cp-1"] and record.get("held")["cp-1"].startswith("class C: ")
    assert "cp-1: stays held (cp-1" in adopted.stdout or "cp-1: stays held" in adopted.stdout
    assert "worker-1: released (hold lifted)" in adopted.stdout
    assert lab.control.calls("cp-1").get("ApplyConfiguration", 0) == 0


@pytest.mark.floor
def test_adopt_through_ansible_runner_as_awx_runs_it_leaks_no_credential(
        talos_kube_lab, kube_lab, workloads, tmp_path, adoption_cleanup):
    """AWX's way: a private data dir, the talosconfig and kubeconfig injected as 0600 files by credential types (their
    paths in env/envvars), survey answers as !unsafe extravars; adopt plans, then adopts; the runner's artifacts and
    stdout hold no credential and no bundle secret."""
    import ansible_runner
    from tests.integration.ansible_env import ansible_env
    from tests.integration.test_reclaim import files_text, marked_talosconfig
    from tests.integration.test_upgrade import _inventory
    lab = _flannel_cluster(talos_kube_lab, workloads, workers=1)
    private = tmp_path / "runner"
    for sub in ("project", "env", "inventory"):
        (private / sub).mkdir(parents=True)
    (private / "project" / "adopt.yml").write_text(
        "---\n- name: Adopt\n  ansible.builtin.import_playbook: maesh.ichor.adopt\n")
    inv = yaml.safe_load(open(_inventory(lab, tmp_path)))
    for key in ("ichor_talosconfig", "ichor_kubeconfig"):
        inv["all"]["vars"].pop(key, None)  # the credentials come from AWX's injectors, not the inventory
    (private / "inventory" / "hosts.yml").write_text(yaml.safe_dump(inv))
    talosconfig = str(private / "env" / "tmp_ichor_talosconfig")
    markers = marked_talosconfig(lab, talosconfig)
    kubeconfig = str(private / "env" / "tmp_ichor_kubeconfig")
    shutil.copy(kube_lab.kubeconfig, kubeconfig)
    os.chmod(kubeconfig, 0o600)
    kube_token = [line.split(":", 1)[1].strip() for line in open(kubeconfig) if "token:" in line or "client-key-data" in line]
    bundle = yaml.safe_load(open(os.path.join(BASIC, "secrets.yaml")))
    markers += [m for m in kube_token if len(m) > 16] + [bundle["cluster"]["secret"], bundle["trustdinfo"]["token"]]
    env = ansible_env()
    envvars = dict((k, env[k]) for k in ("ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_CALLBACKS_ENABLED", "ANSIBLE_LOCAL_TEMP",
                                         "ANSIBLE_NOCOLOR"))
    envvars.update(PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
                   TALOSCONFIG=talosconfig, KUBECONFIG=kubeconfig)
    (private / "env" / "envvars").write_text(yaml.safe_dump(envvars))
    results = []
    for survey in ({"ichor_adopt_recover_from": "cp-1", "ichor_cni_unmanaged": True},
                   {"ichor_adopt_recover_from": "cp-1", "ichor_cni_unmanaged": True, "ichor_adopt_confirm": True,
                    "ichor_adopt_etcd_snapshot_dir": str(tmp_path / "etcd")}):
        with open(str(private / "env" / "extravars"), "w") as handle:
            for key, value in survey.items():
                handle.write("%s: !unsafe %s\n" % (key, json.dumps(value)))
            handle.write("awx_user_name: alice\nawx_job_id: 7\n")
        run = ansible_runner.run(private_data_dir=str(private), playbook="adopt.yml", quiet=True)
        results.append((run.rc, run.stdout.read()))
    assert [rc for rc, unused_out in results] == [0, 0], results[-1][1][-4000:]
    assert "PLAN" in results[0][1] and "worker-1: released (hold lifted)" in results[1][1]
    assert cluster_record.read(KubeClient(kubeconfig=kube_lab.kubeconfig)).get("held") == {}
    texts = files_text(private, skip=(os.path.abspath(talosconfig), os.path.abspath(kubeconfig)))
    assert any("artifacts" in path for path in texts)
    for path, text in texts.items():
        for marker in markers:
            assert marker not in text, (path, marker[:12])


def test_b3_the_recovered_bundle_mints_a_client_certificate_the_machines_accept(
        talos_kube_lab, kube_lab, workloads, tmp_path, adoption_cleanup):
    """The bundle adopt recovers (stored in Secret ichor-secrets-bundle) holds the cluster's Talos CA: an os:admin
    certificate issued from it is accepted by every machine, as the collection's later runs rely on. A wrong bundle is
    refused before anything is written."""
    from tests.lab import pki
    from tests.integration.test_upgrade import _inventory
    lab = _flannel_cluster(talos_kube_lab, workloads, workers=1)
    inv = _inventory(lab, tmp_path, ichor_adopt_recover_from="cp-1", ichor_cni_unmanaged=True,
                     ichor_adopt_etcd_snapshot_dir=str(tmp_path / "etcd"))
    assert _adopt(inv, "-e", "ichor_adopt_confirm=true").returncode == 0
    stored = KubeClient(kubeconfig=kube_lab.kubeconfig).get("v1", "Secret", "ichor-secrets-bundle", "ichor-system")
    bundle = secrets.parse(base64.b64decode(stored["data"]["bundle.yaml"]).decode())
    ca = pki.KeyPair(pki.load_cert_pem(bundle.crt("os").encode()), pki.load_key_pem(bundle.key("os").encode()))
    client_pair = pki.issue_client(ca, roles=("os:admin",), common_name="maesh-ichor")
    minted = str(tmp_path / "minted-talosconfig")
    endpoints = [m["address"] for m in lab.machines if m["role"] == "controlplane"]
    pki.write_talosconfig(minted, {"minted": {"endpoints": endpoints, "nodes": [], "ca": ca, "client": client_pair}},
                          "minted")
    with talos_client.TalosClient(talosconfig.load(minted)) as client:
        answers = client.fan_out(lambda node: machine.version(client, node), [m["address"] for m in lab.machines])
    assert all(a.error is None and a.message["tag"] == m["version"] for a, m in
               zip([answers[m["address"]] for m in lab.machines], lab.machines)), answers
    # another cluster's bundle: refused, nothing written
    wrong = os.path.join(CONFIGS, "v1.14", "v1.14.1", "basic", "secrets.yaml")
    refused = _adopt(inv, "-e", "ichor_adopt_recover_from=", "-e", "ichor_secrets=%s" % wrong, "--check")
    assert refused.returncode != 0 and "the secrets bundle belongs to another cluster" in refused.stdout


def test_a_machine_new_to_an_adopted_cluster_is_held_then_released_never_reset(
        talos_kube_lab, kube_lab, workloads, tmp_path, adoption_cleanup):
    """ADR 0128 through adopt: a machine that carries the cluster's CAs but is not in the record (added after the
    adoption) is added by the next run, held, then released with the same render; nothing resets it, and the machines
    adopted before keep their release."""
    from tests.integration.test_upgrade import _inventory
    lab = _flannel_cluster(talos_kube_lab, workloads, workers=2)
    inv = _inventory(lab, tmp_path, ichor_adopt_recover_from="cp-1", ichor_cni_unmanaged=True,
                     ichor_adopt_etcd_snapshot_dir=str(tmp_path / "etcd"))
    data = yaml.safe_load(open(inv))
    later = data["all"]["children"]["worker"]["hosts"].pop("worker-2")
    with open(inv, "w") as handle:
        yaml.safe_dump(data, handle)
    assert _adopt(inv, "-e", "ichor_adopt_confirm=true").returncode == 0
    kube = KubeClient(kubeconfig=kube_lab.kubeconfig)
    assert sorted(cluster_record.read(kube).get("nodes")) == ["cp-1", "worker-1"]
    data["all"]["children"]["worker"]["hosts"]["worker-2"] = later
    with open(inv, "w") as handle:
        yaml.safe_dump(data, handle)
    planned = _adopt(inv, "--check", "--diff")
    assert planned.returncode == 0 and "worker-2: zero drift" in planned.stdout, planned.stdout[-4000:]
    grown = _adopt(inv, "-e", "ichor_adopt_confirm=true")
    assert grown.returncode == 0, grown.stdout[-4000:]
    assert "worker-2: released (hold lifted)" in grown.stdout and "worker-1: not held (released earlier)" in grown.stdout
    record = cluster_record.read(kube)
    assert sorted(record.get("nodes")) == ["cp-1", "worker-1", "worker-2"] and record.get("held") == {}
    assert all(set(lab.control.calls(m["name"])) - {"etcd-peer-port"} <= READS | {"EtcdSnapshot"} for m in lab.machines)


def test_no_cni_our_cilium_is_installed_first_then_the_cluster_is_adopted_managed(
        talos_kube_lab, kube_lab, cilium_lab, cilium_charts, workloads, tmp_path, adoption_cleanup):
    """ADR 0104: cni.name none, no CNI DaemonSet anywhere, every Node NotReady: the plan installs the collection's
    Cilium (phase 3, cilium_release install) and adopts the cluster managed; a rerun changes nothing."""
    from tests.integration.test_upgrade import _inventory
    from tests.lab.agent import LabAgent
    lab = talos_kube_lab(case=os.path.join(CONFIGS, "v1.13", "v1.14.1", "cni-none"), controlplanes=1, workers=1)
    workloads.kube_proxy()
    # no CNI: the kubelets report NotReady; workloads are still made ready (the lab's stand-in for what runs)
    lab.agent.stop(remove_nodes=False)
    core = k8s.CoreV1Api(kube_lab.api)
    for m in lab.machines:
        core.patch_node_status(m["hostname"], {"status": {"conditions": [
            {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "network plugin not ready"}]}})
    runner = LabAgent(kube_lab.api_client(), talos_lab=None, owner="no-cni").start()
    cilium = cilium_lab(nodes=0)
    # what the install leaves (its objects in kube-system: namespaceOverride), for teardown
    cilium.render(versions.CILIUM_MINOR, merged(TALOS_VALUES, {"namespaceOverride": "kube-system"}), namespace="ichor-system")
    # the CRDs Cilium's operator creates when it starts (the lab runs no operator)
    cilium.apply_crds(versions.CILIUM_MINOR)
    try:
        inv = _inventory(lab, tmp_path, ichor_adopt_recover_from="cp-1", ichor_adopt_cilium_chart=cilium_charts[versions.CILIUM_MINOR]["chart"],
                         ichor_adopt_helm=kube_lab.bins["helm"], ichor_adopt_etcd_snapshot_dir=str(tmp_path / "etcd"))
        planned = _adopt(inv, "--check", "--diff")
        assert planned.returncode == 0, planned.stdout[-4000:]
        assert "mode: managed, no CNI: the collection's Cilium is installed first, then the cluster is adopted" in planned.stdout
        adopted = _adopt(inv, "-e", "ichor_adopt_confirm=true", "-e", "ichor_accept_changes=true")
        assert adopted.returncode == 0, adopted.stdout[-6000:]
        record = cluster_record.read(KubeClient(kubeconfig=kube_lab.kubeconfig))
        assert record.get("adoption")["mode"] == "install" and record.get("cilium")["release"] == "ichor-system/cilium"
        assert record.get("held") == {} and record.get("cluster")["cni"]["preset"] == "cilium"
        assert [s.metadata.labels["status"] for s in cilium.records("ichor-system")] == ["deployed"]
        # the gate follows live detection: phase 2's installer found no Cilium, the one after phase 3 applies them
        assert "the installer runs again after phase 3 has installed Cilium" in planned.stdout
        assert "maesh.ichor's network policies are not applied: the CNI is none" in adopted.stdout
        assert "maesh.ichor's network policies are applied: Cilium runs" in adopted.stdout
        assert _policies(kube_lab) == ["ichor-system-default-deny"]
        again = _adopt(inv, "-e", "ichor_adopt_confirm=true", "-e", "ichor_accept_changes=true")
        assert again.returncode == 0 and "changed=0" in again.stdout, again.stdout[-6000:]
    finally:
        runner.stop(remove_nodes=False)


@pytest.mark.parametrize("case,daemonset,replacement,expected", [
    ("k8s-older", True, "false", "enabled"),
    ("kube-proxy-disabled", False, "true", "replaced"),
    ("kube-proxy-disabled", False, "false", "nothing routes Services"),
    ("k8s-older", True, "true", "two owners of Service routing"),
    ("k8s-older", False, "false", "no kube-proxy DaemonSet runs"),
])
def test_b2_the_kube_proxy_matrix_on_the_lab(talos_kube_lab, kube_lab, workloads, reader, case, daemonset, replacement,
                                             expected):
    """Talos's kube-proxy (the machine configs, and whether its DaemonSet runs) against Cilium's kube-proxy-replacement
    (cilium-config): agreeing sides map to the spec's cni.kubeProxy, the others are refused with the reason."""
    lab = talos_kube_lab(case=os.path.join(CONFIGS, "v1.13", "v1.14.1", case), controlplanes=1, workers=1)
    workloads.daemonset("kube-system", "cilium", "quay.io/cilium/cilium:v1.20.4", {"k8s-app": "cilium"})
    if daemonset:
        workloads.kube_proxy()
    core = k8s.CoreV1Api(kube_lab.api)
    core.create_namespaced_config_map("kube-system", {"metadata": {"name": "cilium-config"},
                                                      "data": {"kube-proxy-replacement": replacement}})
    try:
        if expected in ("enabled", "replaced"):
            assert _plan(lab, reader)["kube_proxy"] == expected
        else:
            refused = _refused(lab, reader)
            assert expected in refused.message, refused.message
            assert "contract" not in refused.result  # refused before the bundle and the drift
    finally:
        core.delete_namespaced_config_map("cilium-config", "kube-system")


def test_d2_a_calico_cluster_adopted_unmanaged_records_calico_and_keeps_its_configs(
        talos_kube_lab, kube_lab, workloads, tmp_path, adoption_cleanup):
    from tests.integration.test_upgrade import _inventory
    lab = talos_kube_lab(case=BASIC, controlplanes=1, workers=1)
    workloads.kube_proxy()
    workloads.daemonset("calico-system", "calico-node", "docker.io/calico/node:v3.30.3", {"k8s-app": "calico-node"})
    before = dict((m["name"], m["machine_config"]) for m in lab.control.machines())
    inv = _inventory(lab, tmp_path, ichor_adopt_recover_from="cp-1", ichor_cni_unmanaged=True,
                     ichor_adopt_etcd_snapshot_dir=str(tmp_path / "etcd"))
    adopted = _adopt(inv, "-e", "ichor_adopt_confirm=true")
    assert adopted.returncode == 0, adopted.stdout[-4000:]
    record = cluster_record.read(KubeClient(kubeconfig=kube_lab.kubeconfig))
    assert record.get("adoption")["detected"] == {"cni": "calico", "version": "3.30.3"}
    assert record.get("cluster")["cni"]["preset"] == "unmanaged" and record.get("held") == {}
    assert dict((m["name"], m["machine_config"]) for m in lab.control.machines()) == before
    # the "policies not applied" notice, in the plan and from the installer; no policy in ichor-system
    notice = ("maesh.ichor's network policies are not applied: the CNI is calico, and they are CiliumNetworkPolicies; "
              "the ichor-system namespace is not isolated by the collection")
    assert adopted.stdout.count(notice) >= 2, adopted.stdout[-6000:]
    assert _policies(kube_lab) == []


def test_d4_an_unmanaged_flannel_cluster_is_rolled_to_the_set_through_talos_config_and_kubernetes_steps_only(
        talos_kube_lab, kube_lab, workloads, tmp_path, adoption_cleanup):
    """D4: after an unmanaged adoption the rollout runs the Talos, config and Kubernetes steps to the release set and
    no Cilium step; flannel's DaemonSet and the CNI-relevant paths of every config stay as they were."""
    from tests.integration.test_upgrade import V113_K8S_135, _assert_at_the_set, _inventory, _upgrade
    lab = talos_kube_lab(case=V113_K8S_135, controlplanes=1, workers=1, version="v1.13.9")
    workloads.flannel()
    workloads.kube_proxy()
    inv = _inventory(lab, tmp_path, ichor_adopt_recover_from="cp-1", ichor_cni_unmanaged=True,
                     ichor_adopt_etcd_snapshot_dir=str(tmp_path / "etcd"))
    assert _adopt(inv, "-e", "ichor_adopt_confirm=true").returncode == 0
    flannel = k8s.AppsV1Api(kube_lab.api).read_namespaced_daemon_set("kube-flannel", "kube-system")
    rolled = _upgrade(inv, "-e", "ichor_upgrade_follow=true")
    assert rolled.returncode == 0, rolled.stdout[-6000:]
    tasks = [line.split(":", 1)[-1].split("]")[0].strip() for line in rolled.stdout.splitlines() if line.startswith("TASK [")]
    assert "Upgrade the Cilium release to the release set's chart" not in tasks
    assert "Upgrade Kubernetes (control planes, kube-proxy, kubelets; no reboot)" in tasks
    _assert_at_the_set(lab, inv)
    after = k8s.AppsV1Api(kube_lab.api).read_namespaced_daemon_set("kube-flannel", "kube-system")
    assert (after.metadata.generation, after.spec.template.spec.containers[0].image) == (
        flannel.metadata.generation, flannel.spec.template.spec.containers[0].image)
    for m in lab.control.machines():
        docs = [d for d in yaml.safe_load_all(m["machine_config"]) if d]
        assert not any(d.get("kind") == "KubeFlannelCNIConfig" and d.get("$patch") == "delete" for d in docs), m["name"]
