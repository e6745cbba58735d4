"""adopt.rules, the edges mutation testing found untested (issue 43, scripts/mutation): each plan line and refusal in
full, so a rule that picks the wrong branch or words shows; the boundaries (six names shown, the highest version by
its numbers)."""

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.adopt import rules
from ansible_collections.maesh.ichor.plugins.module_utils.cluster import facts as kfacts
from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.talos import KUBEPRISM_PORT

FLAG = "ichor_cni_unmanaged=true"
TAKEN_OVER = ("mode: managed, Cilium taken over as the collection's Helm release (case %s, phase 3); or adopt it "
              "unmanaged with " + FLAG)
UNMANAGED_ONLY = ("Ichor will not install or operate it; to adopt the cluster with the CNI left exactly as it is, run "
                  "again with %s." % FLAG)


def _k8s(verdict, names=(), evidence=None, ready=0, nodes=2, daemonsets=None):
    k8s = {"cni": {"verdict": verdict, "names": list(names), "evidence": evidence or ["CNI %s" % verdict]},
           "nodes_ready": ready, "nodes": [{"name": "n%d" % i} for i in range(nodes)]}
    if daemonsets is not None:
        k8s["cni"]["daemonsets"] = daemonsets
    return k8s


def _refusal(call, *args):
    with pytest.raises(rules.Refusal) as info:
        call(*args)
    return str(info.value)


def test_six_names_are_shown_whole_and_a_seventh_is_counted():
    assert rules._names(list("abcdef")) == "a, b, c, d, e, f"
    assert rules._names(list("abcdefg")) == "a, b, c, d, e, f and 1 more"


def test_a_split_names_the_highest_version_by_its_numbers_not_its_text():
    running = {("cp-1", "kube-apiserver"): "v1.35.10", ("cp-2", "kube-apiserver"): "v1.35.9",
               ("w-1", "kubelet"): "v1.34.2"}
    message = _refusal(rules.kubernetes_split, running)
    assert message.endswith("(talosctl upgrade-k8s --to 1.35.10), then adopt")
    assert message.startswith("the cluster runs Kubernetes at 2 minors (kube-apiserver v1.35.10 on cp-1; "
                              "kube-apiserver v1.35.9 on cp-2 | kubelet v1.34.2 on w-1): ")


def test_every_foreign_record_left_is_named():
    k8s = dict(_k8s(kfacts.OURS, ["cilium"]), cilium_releases=[
        dict(namespace="ichor-system", release="cilium", status="deployed"),
        dict(namespace="kube-system", release="cilium", status="deployed"),
        dict(namespace="kube-system", release="cilium2", status="failed")])
    assert rules.unfinished_takeover(k8s, "ichor-system/cilium") == \
        "the records of kube-system/cilium (deployed), kube-system/cilium2 (failed) are still there"


def test_the_cni_line_names_the_daemonsets_and_the_rest_of_the_evidence():
    daemonsets = [{"namespace": "kube-system", "name": "cilium", "why": "name"},
                  {"namespace": "kube-system", "name": "cilium-envoy", "why": "label"}]
    k8s = _k8s(kfacts.HELM, ["cilium"], ["CNI cilium", "helm release kube-system/cilium", "second"], daemonsets=daemonsets)
    line = ("CNI: cilium-helm (DaemonSet kube-system/cilium, found by its name; DaemonSet kube-system/cilium-envoy, "
            "found by its label; helm release kube-system/cilium; second)")
    assert rules.cni_outcome(k8s, {"cp-1": "none"}, {"cp-1": ["05-cilium.conflist"]}, False) == dict(
        row=kfacts.HELM, mode=rules.TAKEOVER, preset="cilium", talos_cni="none", lines=[line, TAKEN_OVER % "B"])
    assert rules.cni_outcome(k8s, {"cp-1": "none"}, {"cp-1": ["05-cilium.conflist"]}, True) == dict(
        row=kfacts.HELM, mode=rules.UNMANAGED, preset="unmanaged", talos_cni="none", lines=[
            line, "mode: unmanaged (%s): the CNI is left exactly as it is; talosCNI none" % FLAG])


@pytest.mark.parametrize("verdict,case,talos,talos_cni", [(kfacts.HELM, "B", "none", "none"),
                                                          (kfacts.MANIFEST, "C", "", "default")])
def test_without_daemonsets_the_cni_line_is_the_evidence(verdict, case, talos, talos_cni):
    out = rules.cni_outcome(_k8s(verdict, ["cilium"], ["e1", "e2"]), {"cp-1": talos}, {}, False)
    assert out == dict(row=verdict, mode=rules.TAKEOVER, preset="cilium", talos_cni=talos_cni,
                       lines=["CNI: %s (e1; e2)" % verdict, TAKEN_OVER % case])


def test_two_configs_on_machines_are_each_named_and_the_two_cnis_verdict_first():
    doubled = {"w-1": ["b", "a"], "w-2": ["c", "d"], "w-3": ["e"]}
    tail = ". Ichor cannot say what it would leave alone: refused, also with %s; remove one of them first" % FLAG
    assert _refusal(rules.cni_outcome, _k8s(kfacts.HELM, ["cilium"], ["e1"]), {"cp-1": "none"}, doubled, False) == (
        "two CNIs: w-1 carries two CNI configs under /etc/cni/net.d: a and b; w-2 carries two CNI configs under "
        "/etc/cni/net.d: c and d" + tail)
    assert _refusal(rules.cni_outcome, _k8s(kfacts.TWO, ["cilium", "flannel"], ["cilium and flannel", "e2"]),
                    {"cp-1": "none"}, {"w-1": ["b", "a"]}, False) == (
        "two CNIs: cilium and flannel; w-1 carries two CNI configs under /etc/cni/net.d: a and b" + tail)


def test_no_cni_plan_and_refusals_in_full():
    assert rules.cni_outcome(_k8s(kfacts.NONE, [], ["no CNI"]), {"cp-1": "none"}, {}, False) == dict(
        row=kfacts.NONE, mode=rules.INSTALL, preset="cilium", talos_cni="none", lines=[
            "CNI: none (no CNI)", "mode: managed, no CNI: the collection's Cilium is installed first, then the cluster "
            "is adopted; or adopt it unmanaged with " + FLAG])
    assert _refusal(rules.cni_outcome, _k8s(kfacts.NONE, [], ["no CNI"], ready=1, nodes=3), {"cp-1": "none"}, {},
                    False) == ("no CNI DaemonSet runs and cni.name is none, yet 1 of 3 Nodes are Ready: a CNI Ichor "
                               "cannot see serves them. " + UNMANAGED_ONLY)
    said = ("no CNI DaemonSet runs in any namespace, but the machine configs select %s (cluster.network.cni.name): the "
            "cluster's network is not what its configs say; repair it first")
    assert _refusal(rules.cni_outcome, _k8s(kfacts.NONE), {"cp-1": "flannel"}, {}, False) == said % "the CNI 'flannel'"
    assert _refusal(rules.cni_outcome, _k8s(kfacts.NONE), {"cp-1": ""}, {}, False) == said % "Talos's default flannel"


def test_another_cni_without_names_is_named_by_its_verdict():
    assert _refusal(rules.cni_outcome, _k8s(kfacts.FLANNEL, [], ["CNI flannel"]), {"cp-1": ""}, {}, False) == \
        "the CNI is %s (CNI flannel). %s" % (kfacts.FLANNEL, UNMANAGED_ONLY)


@pytest.mark.parametrize("mode,tail", [
    (rules.UNMANAGED, "; recorded as it is, no consistency check in unmanaged mode"),
    (rules.INSTALL, "; the Cilium installed matches it"),
    (rules.OURS, None),
    (rules.TAKEOVER, None),
])
def test_the_kube_proxy_line_in_every_mode(mode, tail):
    for talos, recorded, says in ((True, "enabled", "Talos runs kube-proxy (machine configs)"),
                                  (False, "replaced", "Talos has disabled kube-proxy (machine configs)")):
        ending = tail or ", Cilium kubeProxyReplacement %s" % str(not talos).lower()
        line = "kube-proxy: %s (%s%s)" % (recorded, says, ending)
        assert rules.kube_proxy_mode(mode, talos, talos, not talos) == (recorded, line)


def test_the_kube_proxy_disagreements_in_full():
    assert _refusal(rules.kube_proxy_mode, rules.OURS, True, False, None) == \
        "kube-proxy: the machine configs enable it but no kube-proxy DaemonSet runs; make them agree first"
    assert _refusal(rules.kube_proxy_mode, rules.OURS, False, True, None) == \
        "kube-proxy: the machine configs disable it but its DaemonSet still runs in kube-system; make them agree first"
    assert _refusal(rules.kube_proxy_mode, rules.TAKEOVER, True, True, True) == (
        "kube-proxy runs (Talos) and Cilium's kubeProxyReplacement is true: two owners of Service routing; disable one "
        "of them deliberately first")
    assert _refusal(rules.kube_proxy_mode, rules.TAKEOVER, False, False, False) == (
        "kube-proxy is disabled in Talos and Cilium's kubeProxyReplacement is false: nothing routes Services; switch "
        "one of them deliberately first")


def test_kubeprism_refusals_in_full():
    tail = (": a managed Cilium reaches the API server through KubePrism on port {0} on every machine, and enabling it "
            "needs a reboot adopt never orders. Enable it on port {0} on every machine first "
            "(machine.features.kubePrism or a KubePrismConfig document), then run adopt again; nothing was "
            "written").format(KUBEPRISM_PORT)
    off = {"a": {"enabled": False, "port": 0}, "b": {"enabled": False, "port": KUBEPRISM_PORT}}
    assert _refusal(rules.kubeprism, rules.OURS, off) == "KubePrism is off on a, b" + tail
    elsewhere = {"a": {"enabled": True, "port": 1}, "b": {"enabled": True, "port": 2}}
    assert _refusal(rules.kubeprism, rules.INSTALL, elsewhere) == \
        "KubePrism is on another port on a (port 1), b (port 2)" + tail
    assert rules.kubeprism(rules.UNMANAGED, elsewhere) == "KubePrism: left as each machine has it (unmanaged mode)"


def test_the_contract_override_in_full():
    assert _refusal(rules.contract_override, "v1.12") == (
        "version_contract v1.12: an override may only name the release set's contract %s" % release.CONTRACT)
    assert rules.contract_override("") is None


def test_our_release_and_an_unfinished_takeover_return_the_whole_outcome():
    ours = [dict(namespace="ichor-system", release="cilium", status="deployed")]
    k8s = dict(_k8s(kfacts.OURS, ["cilium"], ["e1"]), cilium_releases=ours)
    assert rules.cni_outcome(k8s, {"cp-1": "none"}, {}, False, "ichor-system/cilium") == dict(
        row=kfacts.OURS, mode=rules.OURS, preset="cilium", talos_cni="none", lines=[
            "CNI: %s (e1)" % kfacts.OURS, "mode: managed, the collection's Cilium release exists: adopt only checks it"])
    out = rules.cni_outcome(k8s, {"cp-1": ""}, {}, False, None)
    assert dict(out, lines=None) == dict(row=kfacts.OURS, mode=rules.TAKEOVER, preset="cilium", talos_cni="default",
                                         lines=None)


def test_another_cni_names_each_of_its_names_and_all_its_evidence():
    assert _refusal(rules.cni_outcome, _k8s(kfacts.OTHER, ["weave", "kube-router"], ["e1", "e2"]), {"cp-1": ""}, {},
                    False) == "the CNI is weave, kube-router (e1; e2). %s" % UNMANAGED_ONLY
