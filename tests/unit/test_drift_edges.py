"""config.drift, the edges mutation testing found untested (issue 43, scripts/mutation, group drift): each class rule's
class and hint exactly; the registry mirror fold at its edges (a field it does not know, a value of another type or
null, an entry that is no mapping, a typed endpoint that is no mapping, every legacy host, the document left as it
was); machinery's placeholders dropped and nothing else; an empty container against content and against a sibling
whose name extends its own; Cilium's inline manifest found by name, typed or legacy, rendered or live; cert SANs
that agree or not on a control plane; the printable forms (a Difference's and a Drift's dict, the plan lines, the
masked documents) in full; component images added, dropped, or tagged without a version."""

from ansible_collections.maesh.ichor.plugins.module_utils.common.redact import REDACTED
from ansible_collections.maesh.ichor.plugins.module_utils.config import documents, drift

from tests import versions

HOST = "docker.io"
MIRROR = "registries/%s:" % HOST
CILIUM_MANIFEST = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: cilium\n  namespace: kube-system\n"
OTHER_MANIFEST = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n  namespace: kube-system\n"
APISERVER = "registry.k8s.io/kube-apiserver:%s" % versions.KUBERNETES


def _spec(preset="cilium"):
    cni = {"preset": preset, "kubeProxy": "replaced"} if preset == "cilium" else {"preset": preset}
    return {"name": "c", "endpoint": "https://c.example:6443", "kubernetesVersion": versions.KUBERNETES,
            "talosVersion": versions.TALOS, "cni": cni}


def _legacy_mirror(entry):
    return drift.normalise([documents.legacy({"machine": {"registries": {"mirrors": {HOST: entry}}}})])


def _typed_mirror(body):
    return drift.normalise([documents.typed("RegistryMirrorConfig", body, name=HOST)])


def _mirror_paths(flat):
    return dict((path, value) for path, value in flat.items() if path.startswith(MIRROR))


# ---------------------------------------------------------------------------- the mirror fold


def test_a_legacy_mirror_field_the_fold_does_not_know_stays_a_leaf_empty_or_not():
    flat = _legacy_mirror({"endpoints": ["https://m.example"], "weight": 3, "notes": ""})
    assert _mirror_paths(flat) == {MIRROR + "weight": 3, MIRROR + "notes": "", MIRROR + "endpoints": ["https://m.example"]}


def test_a_legacy_mirror_null_override_and_fallback_are_absent_not_leaves():
    flat = _legacy_mirror({"endpoints": ["https://m.example"], "overridePath": None, "skipFallback": None})
    assert _mirror_paths(flat) == {MIRROR + "endpoints": ["https://m.example"]}


def test_a_legacy_mirror_known_field_of_another_type_stays_a_leaf_and_folds_to_no_endpoints():
    flat = _legacy_mirror({"endpoints": "https://m.example"})
    assert _mirror_paths(flat) == {MIRROR + "endpoints": []}
    assert _mirror_paths(_legacy_mirror({"endpoints": ["https://m.example"], "overridePath": "yes"})) == {
        MIRROR + "overridePath": "yes", MIRROR + "endpoints": ["https://m.example"]}


def test_a_legacy_mirror_entry_that_is_no_mapping_is_a_leaf_at_the_hosts_own_path():
    assert _mirror_paths(_legacy_mirror(["https://m.example"])) == {MIRROR: ["https://m.example"], MIRROR + "endpoints": []}


def test_a_typed_mirror_null_fallback_is_absent_not_a_leaf():
    flat = _typed_mirror({"endpoints": [{"url": "https://m.example"}], "skipFallback": None})
    assert _mirror_paths(flat) == {MIRROR + "endpoints": ["https://m.example"]}
    flat = _typed_mirror({"endpoints": [{"url": "https://m.example"}], "skipFallback": True})
    assert _mirror_paths(flat) == {MIRROR + "endpoints": ["https://m.example"], MIRROR + "skipFallback": True}


def test_a_typed_endpoint_that_is_no_mapping_stays_a_leaf_and_the_next_one_still_folds():
    flat = _typed_mirror({"endpoints": ["https://a.example", {"url": "https://b.example"}]})
    assert _mirror_paths(flat) == {MIRROR + "endpoints[0]": "https://a.example", MIRROR + "endpoints": ["https://b.example"]}


def test_a_typed_endpoint_field_named_empty_is_a_leaf_at_the_endpoints_own_path():
    flat = _typed_mirror({"endpoints": [{"url": "https://a.example", "": "x", "weight": 2}]})
    assert _mirror_paths(flat) == {MIRROR + "endpoints[0]": "x", MIRROR + "endpoints[0].weight": 2,
                                   MIRROR + "endpoints": ["https://a.example"]}


# ---------------------------------------------------------------------------- Cilium's inline manifest


def _inline(name, manifest):
    return documents.typed("KubeInlineManifestConfig", {"manifest": manifest}, name=name)


def test_a_typed_inline_manifest_is_cilium_by_its_own_contents_found_by_its_name():
    for rendered in ([_inline("other", OTHER_MANIFEST), _inline("cilium", CILIUM_MANIFEST)],
                     [_inline("cilium", CILIUM_MANIFEST), _inline("other", OTHER_MANIFEST)]):
        result = drift.drift(rendered, [], _spec())
        assert [(d.path, d.cls) for d in result.differences] == [
            ("KubeInlineManifestConfig/cilium:", "B"), ("KubeInlineManifestConfig/cilium:manifest", "B"),
            ("KubeInlineManifestConfig/other:", "C"), ("KubeInlineManifestConfig/other:manifest", "C")]


def test_a_typed_inline_manifest_without_contents_is_not_cilium():
    rendered = [documents.typed("KubeInlineManifestConfig", {}, name="cilium")]
    result = drift.drift(rendered, [], _spec())
    assert [(d.path, d.cls) for d in result.differences] == [("KubeInlineManifestConfig/cilium:", "C")]


# ---------------------------------------------------------------------------- printable forms


def test_a_difference_prints_path_change_class_and_hint_and_repr_names_them():
    diff = drift.Difference("v1alpha1:machine.certSANs", ["a"], None)
    diff.cls, diff.hint = "A", drift.HINT_CERT_SANS
    assert diff.to_dict() == {"path": "v1alpha1:machine.certSANs", "change": "add", "class": "A",
                              "hint": drift.HINT_CERT_SANS, "rendered": ["a"], "live": None}
    assert repr(diff) == "Difference(A add v1alpha1:machine.certSANs)"
    diff.hint = None
    assert diff.to_dict() == {"path": "v1alpha1:machine.certSANs", "change": "add", "class": "A",
                              "rendered": ["a"], "live": None}


def _mixed():
    """A drift with a class A, a class B and two class C paths under one hint."""
    rendered = [documents.legacy({"machine": {"certSANs": ["a.example"]}}), _inline("cilium", CILIUM_MANIFEST)]
    live = [documents.legacy({"machine": {"certSANs": ["b.example"], "foo": 1, "bar": 2}})]
    return drift.drift(rendered, live, _spec(), contract="v1.14")


def test_a_drifts_counts_name_each_class():
    result = _mixed()
    assert result.counts() == {"A": 1, "B": 2, "C": 2}
    assert drift.Drift([]).counts() == {"A": 0, "B": 0, "C": 0}


def test_a_drifts_plan_lines_in_full():
    assert _mixed().lines() == [
        "class A (representable): change v1alpha1:machine.certSANs",
        "class B (Ichor-owned, needs consent): add KubeInlineManifestConfig/cilium:",
        "class B (Ichor-owned, needs consent): add KubeInlineManifestConfig/cilium:manifest",
        "class C (blocks): no spec field covers this path: v1alpha1:machine.bar, v1alpha1:machine.foo"]


def test_a_drifts_dict_in_full():
    def entry(path, change, cls, rendered, live, hint=None):
        out = {"path": path, "change": change, "class": cls}
        if hint:
            out["hint"] = hint
        out.update(rendered=rendered, live=live)
        return out
    assert _mixed().to_dict() == {
        "contract": "v1.14",
        "zero": False,
        "counts": {"A": 1, "B": 2, "C": 2},
        "A": [entry("v1alpha1:machine.certSANs", "change", "A", ["a.example"], ["b.example"], drift.HINT_CERT_SANS)],
        "B": [entry("KubeInlineManifestConfig/cilium:", "add", "B", "present", None),
              entry("KubeInlineManifestConfig/cilium:manifest", "add", "B", CILIUM_MANIFEST, None)],
        "C": [entry("v1alpha1:machine.bar", "remove", "C", None, 2, drift.HINT_OTHER),
              entry("v1alpha1:machine.foo", "remove", "C", None, 1, drift.HINT_OTHER)],
        "hints": [{"hint": drift.HINT_OTHER, "paths": ["v1alpha1:machine.bar", "v1alpha1:machine.foo"]}],
        "secret_drift": False,
    }
    assert drift.Drift([]).to_dict() == {"contract": None, "zero": True, "counts": {"A": 0, "B": 0, "C": 0},
                                         "A": [], "B": [], "C": [], "hints": [], "secret_drift": False}


def test_masked_documents_keep_kind_name_and_every_value_but_the_secrets():
    docs = [documents.legacy({"machine": {"type": "worker", "token": "abcdef.0123456789abcdef"}}),
            documents.typed("HostnameConfig", {"hostname": "w1"})]
    masked = drift.mask_docs(docs)
    assert [(doc.kind, doc.name, doc.body) for doc in masked] == [
        ("v1alpha1", None, {"machine": {"type": "worker", "token": REDACTED}}),
        ("HostnameConfig", None, {"apiVersion": "v1alpha1", "kind": "HostnameConfig", "hostname": "w1"})]
    named = drift.mask_docs([documents.typed("RegistryMirrorConfig", {"endpoints": []}, name=HOST)])
    assert (named[0].kind, named[0].name) == ("RegistryMirrorConfig", HOST)


# ---------------------------------------------------------------------------- component images


def test_an_image_whose_tag_states_no_version_is_never_a_minor_back():
    assert not drift.minor_back("registry.k8s.io/kube-apiserver:latest", APISERVER)
    assert not drift.minor_back(APISERVER, "registry.k8s.io/kube-apiserver:latest")


def test_a_component_image_the_render_adds_is_class_a_and_one_it_drops_class_c():
    path = "v1alpha1:machine.kubelet.image"
    kubelet = "ghcr.io/siderolabs/kubelet:%s" % versions.KUBERNETES
    added, dropped = drift.Difference(path, kubelet, None), drift.Difference(path, None, kubelet)
    drift.classify([added, dropped], _spec())
    assert (added.cls, added.hint) == ("A", "spec.kubernetesVersion")
    assert (dropped.cls, dropped.hint) == ("C", drift.HINT_IMAGE)


# ---------------------------------------------------------------------------- cert SANs, empty containers, compare


def _sans(machine, api, controlplane=True):
    cluster = {"apiServer": {"certSANs": api}}
    if controlplane:
        cluster["apiServer"]["image"] = APISERVER
    return [documents.legacy({"machine": {"certSANs": machine}, "cluster": cluster})]


def test_a_control_plane_whose_machine_and_api_server_sans_agree_drifts_in_class_a():
    result = drift.drift(_sans(["b.example"], ["b.example"]), _sans(["a.example"], ["a.example"]), _spec())
    assert [(d.path, d.cls, d.hint) for d in result.differences] == [
        ("v1alpha1:cluster.apiServer.certSANs", "A", drift.HINT_CERT_SANS),
        ("v1alpha1:machine.certSANs", "A", drift.HINT_CERT_SANS)]
    result = drift.drift(_sans(["b.example"], ["b.example"]), _sans(["a.example"], ["c.example"]), _spec())
    assert [(d.cls, d.hint) for d in result.differences] == [("C", drift.HINT_SANS_SPLIT)] * 2


def _typed_sans(machine, api):
    return [documents.legacy({"machine": {"certSANs": machine}}),
            documents.typed("KubeAPIServerConfig", {"image": APISERVER, "certExtraSANs": api})]


def test_a_typed_control_plane_whose_machine_and_api_server_sans_agree_drifts_in_class_a():
    result = drift.drift(_typed_sans(["b.example"], ["b.example"]), _typed_sans(["a.example"], ["a.example"]), _spec())
    assert [(d.path, d.cls, d.hint) for d in result.differences] == [
        ("KubeAPIServerConfig:certExtraSANs", "A", drift.HINT_CERT_SANS),
        ("v1alpha1:machine.certSANs", "A", drift.HINT_CERT_SANS)]
    result = drift.drift(_typed_sans(["b.example"], ["b.example"]), _typed_sans(["a.example"], ["c.example"]), _spec())
    assert [(d.cls, d.hint) for d in result.differences] == [("C", drift.HINT_SANS_SPLIT)] * 2


def test_a_control_plane_without_any_sans_is_not_split():
    live = [documents.legacy({"cluster": {"apiServer": {"image": APISERVER}}})]
    rendered = [documents.legacy({"machine": {"certSANs": ["a.example"]}, "cluster": {"apiServer": {"image": APISERVER}}})]
    result = drift.drift(rendered, live, _spec())
    assert [(d.path, d.cls) for d in result.differences] == [("v1alpha1:machine.certSANs", "A")]


def test_an_empty_container_faces_only_content_below_it_not_a_sibling_whose_name_extends_its_own():
    rendered = [documents.legacy({"machine": {"kernel": {}}})]
    live = [documents.legacy({"machine": {"kernelXtra": 1}})]
    assert [(d.path, d.change) for d in drift.compare(rendered, live)] == [
        ("v1alpha1:machine.kernel", "add"), ("v1alpha1:machine.kernelXtra", "remove")]
    live = [documents.legacy({"machine": {"kernel": {"modules": [{"name": "br_netfilter"}]}}})]
    assert [(d.path, d.change) for d in drift.compare(rendered, live)] == [
        ("v1alpha1:machine.kernel.modules[br_netfilter].name", "remove")]


def test_compare_leaves_each_difference_unclassified():
    found = drift.compare([documents.legacy({"machine": {"type": "worker"}})], [])
    assert [(d.path, d.cls, d.hint) for d in found] == [("v1alpha1:", None, None), ("v1alpha1:machine.type", None, None)]


# ---------------------------------------------------------------------------- each class rule, class and hint exactly

DISK = 'disk.dev_path == "/dev/sda"'
# (path, rendered, live, managed, keywords of _classify_one) -> (class, hint)
RULES = [
    ("v1alpha1:machine.token", "a", "b", True, {}, ("C", drift.HINT_SECRETS)),
    ("KubeEtcdEncryptionConfig:config", "a", "b", True, {}, ("C", drift.HINT_ENCRYPTION)),
    ("v1alpha1:cluster.network.cni.name", "none", "flannel", False, {"unmapped": ("cni",)},
     ("C", drift.HINT_DISAGREE % "spec.cni")),
    ("v1alpha1:machine.certSANs", ["a"], ["b"], False, {"unmapped": ("certSANs",)},
     ("C", drift.HINT_DISAGREE % "spec.certSANs")),
    ("registries/docker.io:endpoints", ["a"], ["b"], False, {"mixed_hosts": {"docker.io"}}, ("C", drift.HINT_MIRROR_MIXED)),
    ("registries/ghcr.io:endpoints", ["a"], ["b"], False, {"mixed_hosts": {"docker.io"}}, ("A", drift.HINT_REGISTRIES)),
    ("registries/endpoints:endpoints", ["a"], ["b"], False, {"mixed_hosts": {"docker.io"}}, ("A", drift.HINT_REGISTRIES)),
    ("v1alpha1:machine.certSANs", ["a"], ["b"], False, {}, ("A", drift.HINT_CERT_SANS)),
    ("v1alpha1:machine.certSANs", ["a"], ["b"], False, {"split_sans": True}, ("C", drift.HINT_SANS_SPLIT)),
    ("v1alpha1:cluster.inlineManifests[cilium].contents", "a", None, True, {"cilium_entries": {"cilium"}}, ("B", None)),
    ("KubeInlineManifestConfig/cilium:manifest", "a", None, True, {"cilium_entries": {"cilium"}}, ("B", None)),
    ("KubeInlineManifestConfig/cilium:manifest", "a", None, False, {"cilium_entries": {"cilium"}}, ("C", drift.HINT_INLINE)),
    ("v1alpha1:cluster.extraManifests", ["a"], None, True, {}, ("C", drift.HINT_INLINE)),
    ("KubeExternalManifestConfig/custom-cni:url", "a", None, True, {}, ("C", drift.HINT_CUSTOM_CNI)),
    ("v1alpha1:cluster.network.cni.urls", ["a"], None, False, {}, ("C", drift.HINT_CUSTOM_CNI)),
    ("v1alpha1:cluster.network.cni.name", "none", "flannel", True, {}, ("B", None)),
    ("v1alpha1:cluster.network.cni.name", "none", "flannel", False, {}, ("A", "spec.cni.unmanaged.talosCNI")),
    ("v1alpha1:cluster.network.cni.name", None, "none", False, {}, ("A", "spec.cni.unmanaged.talosCNI")),
    ("v1alpha1:cluster.network.cni.name", "flannel", "custom", False, {}, ("C", drift.HINT_CUSTOM_CNI)),
    ("KubeFlannelCNIConfig:", "present", None, True, {}, ("B", None)),
    ("KubeFlannelCNIConfig:", "present", None, False, {}, ("A", "spec.cni.unmanaged.talosCNI")),
    ("v1alpha1:cluster.proxy.disabled", True, None, True, {}, ("B", None)),
    ("KubeProxyConfig:enabled", False, True, False, {}, ("A", "spec.cni.kubeProxy")),
    ("RegistryTLSConfig/ghcr.io:insecureSkipVerify", True, None, False, {}, ("C", drift.HINT_REGISTRY_AUTH)),
    ("UnattendedInstallConfig:provisioning.diskSelector.match", DISK, None, False, {}, ("A", drift.HINT_INSTALL)),
    ("UnattendedInstallConfig:provisioning.diskSelector.match", None, DISK, False, {}, ("A", drift.HINT_INSTALL)),
    ("UnattendedInstallConfig:provisioning.diskSelector.match", "disk.size > 10", DISK, False, {},
     ("C", drift.HINT_INSTALL)),
    ("HostnameConfig:hostname", "a", "b", False, {}, ("A", "machine hostname")),
    ("registries/docker.io:weight", 1, None, False, {}, ("C", drift.HINT_MIRROR_MIXED)),
    ("v1alpha1:machine.install.extraKernelArgs", ["a"], None, False, {}, ("C", drift.HINT_INSTALL)),
    ("UnattendedInstallConfig:provisioning.grubUseUKICmdline", True, None, False, {}, ("C", drift.HINT_INSTALL)),
    ("v1alpha1:machine.kubelet.extraArgs.foo", "a", None, False, {}, ("A", "the machine's kubelet.extraArgs")),
    ("KubeletConfig:extraArgs.foo", None, ["a", "b"], False, {}, ("C", drift.HINT_ARGS_LIST)),
    ("KubeNodeConfig:labels.node-role.kubernetes.io/control-plane", "", None, False, {}, ("C", drift.HINT_ROLE_LABEL)),
    ("KubeNodeConfig:labels.example.com/tier", "", None, False, {}, ("A", "the machine's nodeLabels")),
    ("v1alpha1:machine.network.interfaces[0].dhcp", None, True, False, {}, ("C", drift.HINT_NETWORK)),
    ("DHCPv4Config/eth0:", None, "present", False, {}, ("C", drift.HINT_NETWORK)),
    ("LinkConfig/eth0:addresses[0].routePriority", None, 5, False, {}, ("C", drift.HINT_NETWORK)),
    ("BondConfig/bond0:bondMode", "802.3ad", "active-backup", False, {}, ("A", "the machine's network and timeServers")),
    ("v1alpha1:cluster.apiServer.extraArgs.oidc-issuer-url", "x", None, False, {"unmapped": ("apiServer",)},
     ("C", drift.HINT_DISAGREE % "spec.apiServer")),
]


def test_each_class_rule_gives_its_class_and_hint_exactly():
    for path, rendered, live, managed, keywords, expected in RULES:
        keywords = dict(keywords)
        cilium_entries = keywords.pop("cilium_entries", set())
        found = drift._classify_one(drift.Difference(path, rendered, live), managed, cilium_entries, **keywords)
        assert found == expected, (path, rendered, live, managed)


def test_classify_finds_cilium_by_a_legacy_entrys_name_and_in_the_live_config_alone():
    legacy = [documents.legacy({"cluster": {"inlineManifests": [{"name": "cni", "contents": CILIUM_MANIFEST}]}})]
    result = drift.drift(legacy, [], _spec())
    assert [(d.path, d.cls) for d in result.differences if d.path.startswith("v1alpha1:cluster.")] == [
        ("v1alpha1:cluster.inlineManifests[cni].contents", "B"), ("v1alpha1:cluster.inlineManifests[cni].name", "B")]
    result = drift.drift([], [_inline("cilium", CILIUM_MANIFEST)], _spec())
    assert [(d.path, d.change, d.cls) for d in result.differences] == [
        ("KubeInlineManifestConfig/cilium:", "remove", "B"), ("KubeInlineManifestConfig/cilium:manifest", "remove", "B")]


def test_classify_finds_mixed_mirror_hosts_in_the_live_config():
    mixed = [{"url": "https://a.example", "overridePath": True}, {"url": "https://b.example"}]
    live = [documents.typed("RegistryMirrorConfig", {"endpoints": mixed}, name=HOST)]
    rendered = [documents.typed("RegistryMirrorConfig", {"endpoints": [{"url": "https://a.example"}]}, name=HOST)]
    result = drift.drift(rendered, live, _spec())
    assert [(d.path, d.cls, d.hint) for d in result.differences] == [
        (MIRROR + "endpoints", "C", drift.HINT_MIRROR_MIXED), (MIRROR + "overridePath", "C", drift.HINT_MIRROR_MIXED)]


def test_drift_passes_the_fields_the_machines_disagree_on():
    rendered = [documents.legacy({"cluster": {"network": {"cni": {"name": "none"}}}})]
    live = [documents.legacy({"cluster": {"network": {"cni": {"name": "flannel"}}}})]
    result = drift.drift(rendered, live, _spec("unmanaged"), unmapped=("cni",))
    assert [(d.path, d.cls, d.hint) for d in result.differences] == [
        ("v1alpha1:cluster.network.cni.name", "C", drift.HINT_DISAGREE % "spec.cni")]


def test_a_drift_keeps_the_contract_it_is_made_with():
    assert drift.Drift([], contract="v1.14").contract == "v1.14"
    assert drift.Drift([]).contract is None


# ---------------------------------------------------------------------------- normalise and compare


def test_normalise_reads_every_document_after_a_typed_mirror():
    flat = drift.normalise([documents.typed("RegistryMirrorConfig", {"endpoints": []}, name=HOST),
                            documents.typed("HostnameConfig", {"hostname": "w1"})])
    assert flat["HostnameConfig:hostname"] == "w1"


def test_normalise_folds_every_legacy_host_and_leaves_the_document_as_it_was():
    body = {"machine": {"registries": {"mirrors": {HOST: {"endpoints": ["https://a.example"]},
                                                   "ghcr.io": {"endpoints": ["https://b.example"]}}}}}
    doc = documents.legacy(body)
    flat = drift.normalise([doc])
    assert flat == {"v1alpha1:": "present",
                    MIRROR + "endpoints": ["https://a.example"], "registries/ghcr.io:endpoints": ["https://b.example"]}
    assert doc.body == {"machine": {"registries": {"mirrors": {HOST: {"endpoints": ["https://a.example"]},
                                                               "ghcr.io": {"endpoints": ["https://b.example"]}}}}}


def test_normalise_keeps_legacy_mirrors_that_are_empty_or_no_mapping_as_leaves():
    for mirrors in ({}, ["x"]):
        flat = drift.normalise([documents.legacy({"machine": {"registries": {"mirrors": mirrors}}})])
        assert flat == {"v1alpha1:": "present", "v1alpha1:machine.registries.mirrors": mirrors}


def test_normalise_drops_exactly_machinerys_empty_placeholders():
    flat = drift.normalise([documents.legacy({"cluster": {"extraManifests": [], "inlineManifests": []},
                                              "machine": {"registries": {}, "certSANs": []}})])
    assert flat == {"v1alpha1:": "present", "v1alpha1:machine.certSANs": []}
    flat = drift.normalise([documents.legacy({"cluster": {"extraManifests": ["https://x.example/a.yaml"]}})])
    assert flat == {"v1alpha1:": "present", "v1alpha1:cluster.extraManifests": ["https://x.example/a.yaml"]}


def test_a_live_empty_container_facing_rendered_content_is_no_difference_and_later_paths_still_compare():
    rendered = [documents.legacy({"machine": {"kernel": {"modules": [{"name": "br_netfilter"}]}, "type": "worker"}})]
    live = [documents.legacy({"machine": {"kernel": {}, "type": "controlplane"}})]
    assert [(d.path, d.change) for d in drift.compare(rendered, live)] == [
        ("v1alpha1:machine.kernel.modules[br_netfilter].name", "add"), ("v1alpha1:machine.type", "change")]
    live = [documents.legacy({"machine": {"kernel": {}, "kernelXtra": 1}})]
    rendered = [documents.legacy({"machine": {"kernelXtra": 1}})]
    assert [(d.path, d.change) for d in drift.compare(rendered, live)] == [("v1alpha1:machine.kernel", "remove")]


def test_the_v112_network_placeholder_is_no_fields_drift():
    """``machine.network: {}`` is what contract v1.12 writes and v1.13 does not: drift of no field (class C, as before
    the network had fields), so the probe's class C counts still tell the contracts apart."""
    found = drift._classify_one(drift.Difference("v1alpha1:machine.network", {}, None), False, set())
    assert found == ("C", drift.HINT_OTHER)
