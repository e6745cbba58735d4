"""config.drift, the edges mutation testing found untested (issue 43, scripts/mutation, group drift): the registry
mirror fold at its edges (a field it does not know, a value of another type or null, an entry that is no mapping, a
typed endpoint that is no mapping), a typed Cilium inline manifest found by its name among others, the printable
forms (a Difference's and a Drift's dict, the plan lines, the masked documents) in full, and a component image whose
tag states no version."""

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
