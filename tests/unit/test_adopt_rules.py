"""adopt.rules: the CNI table row by row (seed 0103 1.1, ADR 0104), the kube-proxy matrix (1.5), KubePrism in every
managed mode ("As built"), the contract override (seed 0113)."""

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.adopt import rules
from ansible_collections.maesh.ichor.plugins.module_utils.cluster import facts as kfacts

SEED_TAIL = ("Ichor will not install or operate it; to adopt the cluster with the CNI left exactly as it is, run again "
             "with ichor_cni_unmanaged=true.")


def _k8s(verdict, names=(), evidence=None, ready=0, nodes=2):
    return {"cni": {"verdict": verdict, "names": list(names), "evidence": evidence or ["CNI %s" % verdict]},
            "nodes_ready": ready, "nodes": [{"name": "n%d" % i} for i in range(nodes)]}


CPS_DEFAULT = {"cp-1": ""}
CPS_NONE = {"cp-1": "none"}
ONE_CONFIG = {"cp-1": ["05-cilium.conflist"], "w-1": ["05-cilium.conflist"]}


@pytest.mark.parametrize("verdict,mode,case", [(kfacts.HELM, rules.TAKEOVER, "B"), (kfacts.CLI, rules.TAKEOVER, "B"),
                                               (kfacts.MANIFEST, rules.TAKEOVER, "C")])
def test_a_foreign_cilium_is_taken_over_or_left_alone_with_the_flag(verdict, mode, case):
    out = rules.cni_outcome(_k8s(verdict, ["cilium"]), CPS_NONE, ONE_CONFIG, False)
    assert (out["mode"], out["preset"], out["row"]) == (mode, "cilium", verdict)
    assert ("case %s" % case) in out["lines"][1] and "ichor_cni_unmanaged=true" in out["lines"][1]
    left = rules.cni_outcome(_k8s(verdict, ["cilium"]), CPS_NONE, ONE_CONFIG, True)
    assert (left["mode"], left["preset"], left["talos_cni"]) == (rules.UNMANAGED, "unmanaged", "none")


def _releases(ours="deployed", foreign=()):
    return [dict(namespace="ichor-system", release="cilium", status=ours)] + [
        dict(namespace="kube-system", release="cilium", status=status) for status in foreign]


def test_our_own_release_is_only_checked_once_its_takeover_finished():
    k8s = dict(_k8s(kfacts.OURS, ["cilium"]), cilium_releases=_releases())
    out = rules.cni_outcome(k8s, CPS_NONE, ONE_CONFIG, False, "ichor-system/cilium")
    assert out["mode"] == rules.OURS and "only checks it" in out["lines"][1]


@pytest.mark.parametrize("releases, recorded, why", [
    # found by the fault campaign (adopt killed while helm wrote, seeds 2 and 36 of its scenario): the next run saw
    # "ours", skipped the takeover, and every machine's release failed for good
    (_releases("pending-install"), None, "the collection's release ichor-system/cilium is pending-install"),
    # the API server away between a foreign record's backup and its delete (seed 5): two deployed releases for good
    (_releases("deployed", ["deployed"]), "ichor-system/cilium",
     "the records of kube-system/cilium (deployed) are still there"),
    (_releases(), None, "the cluster record does not name ichor-system/cilium"),
])
def test_a_takeover_an_earlier_run_did_not_finish_is_finished_by_phase_3(releases, recorded, why):
    k8s = dict(_k8s(kfacts.OURS, ["cilium"]), cilium_releases=releases)
    out = rules.cni_outcome(k8s, CPS_NONE, ONE_CONFIG, False, recorded)
    assert out["mode"] == rules.TAKEOVER
    assert out["lines"][1] == "mode: managed, the takeover an earlier run began is not finished (%s): phase 3 " \
                              "finishes it" % why


@pytest.mark.parametrize("verdict,names", [(kfacts.FLANNEL, ["flannel"]), (kfacts.CALICO, ["calico"]),
                                           (kfacts.OTHER, ["weave"])])
def test_another_cni_is_unmanaged_only_with_the_seeds_words(verdict, names):
    evidence = ["CNI %s (DaemonSet kube-system/x, name)" % names[0]]
    with pytest.raises(rules.Refusal) as info:
        rules.cni_outcome(_k8s(verdict, names, evidence), CPS_DEFAULT, {"cp-1": ["10-x.conflist"]}, False)
    assert str(info.value) == "the CNI is %s (%s). %s" % (names[0], evidence[0], SEED_TAIL)
    k8s = _k8s(verdict, names, evidence)
    k8s["cni"]["daemonsets"] = [{"cni": names[0], "namespace": "kube-system", "name": "x", "why": "label app=x"}]
    with pytest.raises(rules.Refusal) as info:
        rules.cni_outcome(k8s, CPS_DEFAULT, {"cp-1": ["10-x.conflist"]}, False)
    assert str(info.value) == "the CNI is %s (DaemonSet kube-system/x, found by its label app=x). %s" % (
        names[0], SEED_TAIL)
    out = rules.cni_outcome(_k8s(verdict, names, evidence), CPS_DEFAULT, {"cp-1": ["10-x.conflist"]}, True)
    assert (out["mode"], out["preset"], out["talos_cni"]) == (rules.UNMANAGED, "unmanaged", "default")


def test_two_cnis_are_refused_even_with_the_flag_naming_both():
    evidence = ["two CNIs: cilium (DaemonSet kube-system/cilium, by name) and flannel (DaemonSet kube-system/kube-flannel, "
                "by name)"]
    for unmanaged in (False, True):
        with pytest.raises(rules.Refusal) as info:
            rules.cni_outcome(_k8s(kfacts.TWO, ["cilium", "flannel"], evidence), CPS_DEFAULT, {}, unmanaged)
        assert str(info.value).startswith("two CNIs: " + evidence[0]) and "also with ichor_cni_unmanaged" in str(info.value)
    # two CNI configs on one machine, whatever the DaemonSets say
    doubled = {"cp-1": ["05-cilium.conflist"], "w-1": ["10-flannel.conflist", "05-cilium.conflist"]}
    with pytest.raises(rules.Refusal) as info:
        rules.cni_outcome(_k8s(kfacts.HELM, ["cilium"]), CPS_NONE, doubled, True)
    assert "w-1 carries two CNI configs under /etc/cni/net.d: 05-cilium.conflist and 10-flannel.conflist" in str(info.value)


def test_no_cni_is_an_install_of_our_cilium_only_when_the_configs_say_none_and_no_node_is_ready():
    out = rules.cni_outcome(_k8s(kfacts.NONE, ready=0), CPS_NONE, {}, False)
    assert (out["mode"], out["preset"]) == (rules.INSTALL, "cilium")
    assert "mode: managed, no CNI: the collection's Cilium is installed first, then the cluster is adopted" in out["lines"][1]
    assert rules.cni_outcome(_k8s(kfacts.NONE), CPS_NONE, {}, True)["talos_cni"] == "none"
    with pytest.raises(rules.Refusal, match="1 of 2 Nodes are Ready: a CNI Ichor cannot see serves them"):
        rules.cni_outcome(_k8s(kfacts.NONE, ready=1), CPS_NONE, {}, False)
    with pytest.raises(rules.Refusal, match="select Talos's default flannel"):
        rules.cni_outcome(_k8s(kfacts.NONE), CPS_DEFAULT, {}, False)


def test_control_planes_that_select_different_cnis_are_refused():
    with pytest.raises(rules.Refusal) as info:
        rules.cni_outcome(_k8s(kfacts.HELM), {"cp-1": "none", "cp-2": "", "cp-3": "none"}, {}, False)
    assert str(info.value) == ("the control planes select different CNIs in their machine configs (the default on cp-2, "
                               "none on cp-1, cp-3): one cluster has one CNI; make them agree first")


@pytest.mark.parametrize("talos,daemonset,replacement,expected", [
    (True, True, False, "enabled"),
    (False, False, True, "replaced"),
    (False, False, False, "nothing routes Services"),
    (True, True, True, "two owners of Service routing"),
    (True, False, False, "no kube-proxy DaemonSet runs"),
    (False, True, True, "its DaemonSet still runs in kube-system"),
])
def test_the_kube_proxy_matrix_in_a_managed_mode(talos, daemonset, replacement, expected):
    for mode in (rules.TAKEOVER, rules.OURS):
        if expected in ("enabled", "replaced"):
            assert rules.kube_proxy_mode(mode, talos, daemonset, replacement)[0] == expected
        else:
            with pytest.raises(rules.Refusal, match=expected):
                rules.kube_proxy_mode(mode, talos, daemonset, replacement)


def test_unmanaged_records_the_talos_side_only_and_install_follows_it():
    assert rules.kube_proxy_mode(rules.UNMANAGED, True, False, True)[0] == "enabled"
    assert rules.kube_proxy_mode(rules.UNMANAGED, False, True, False)[0] == "replaced"
    assert rules.kube_proxy_mode(rules.INSTALL, False, False, None)[0] == "replaced"
    assert rules.kube_proxy_mode(rules.INSTALL, True, True, None)[0] == "enabled"


def test_kubeprism_is_required_on_7445_in_every_managed_mode_and_left_alone_unmanaged():
    good = {"cp-1": {"enabled": True, "port": 7445}, "w-1": {"enabled": True, "port": 7445}}
    bad = {"cp-1": {"enabled": False, "port": 0}, "w-1": {"enabled": True, "port": 7446}, "w-2": {"enabled": True, "port": 7445}}
    for mode in rules.MANAGED:
        assert rules.kubeprism(mode, good) == "KubePrism: on port 7445 on every machine"
        with pytest.raises(rules.Refusal) as info:
            rules.kubeprism(mode, bad)
        assert str(info.value).startswith("KubePrism is off on cp-1; on another port on w-1 (port 7446): ")
        assert str(info.value).endswith("then run adopt again; nothing was written")
    assert "left as each machine has it" in rules.kubeprism(rules.UNMANAGED, bad)


def test_the_contract_override_names_only_the_sets():
    assert rules.contract_override(None) is None and rules.contract_override(release.CONTRACT) == release.CONTRACT
    with pytest.raises(rules.Refusal, match="only name the release set's contract %s" % release.CONTRACT):
        rules.contract_override("v1.12")


def test_a_cluster_at_two_kubernetes_minors_is_refused_naming_the_split_and_the_way_forward():
    running = {("cp-1", "kube-apiserver"): "v1.36.3", ("cp-1", "kube-scheduler"): "v1.36.3",
               ("cp-1", "kubelet"): "v1.35.4", ("worker-1", "kubelet"): "v1.35.4"}
    with pytest.raises(rules.Refusal) as refused:
        rules.kubernetes_split(running)
    message = str(refused.value)
    assert message == ("the cluster runs Kubernetes at 2 minors (kube-apiserver v1.36.3 on cp-1; kube-scheduler v1.36.3 on "
                       "cp-1 | kubelet v1.35.4 on cp-1, worker-1): a Kubernetes upgrade stopped halfway, which no single "
                       "version describes, and adopting it would take components back a minor; finish the upgrade "
                       "(talosctl upgrade-k8s --to 1.36.3), then adopt")
    # patches of one minor, or one version: adopt goes on (the drift classes decide)
    rules.kubernetes_split({("cp-1", "kube-apiserver"): "v1.36.4", ("cp-1", "kubelet"): "v1.36.3"})
    rules.kubernetes_split({})
    many = dict((("worker-%d" % i, "kubelet"), "v1.35.4") for i in range(20))
    many[("cp-1", "kube-apiserver")] = "v1.36.3"
    with pytest.raises(rules.Refusal, match=r"kubelet v1\.35\.4 on worker-0, worker-1, worker-10, worker-11, worker-12, "
                                            r"worker-13 and 14 more\)"):
        rules.kubernetes_split(many)
