"""cilium_takeover's preconditions and diff gate (check mode) on the real chart, real helm and the lab's real
API server, from foreign installs made as users make them (tests/lab/cilium): seed 0103's A5, A6, A7, the empty
gate of the same chart and values, the kube-proxy and KubePrism rules, and check mode writing nothing."""

import functools
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import threading

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.cilium import takeover
from ansible_collections.maesh.ichor.plugins.module_utils.cilium.errors import CiliumError, Refused
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient

from tests.integration.ansible_env import ansible_playbook
from tests.lab.cilium import fixtures
from tests.lab.cilium.fixtures import TALOS_VALUES, merged

pytestmark = pytest.mark.lab

cilium_charts = fixtures.cilium_charts
cilium_lab = fixtures.cilium_lab

USER_VALUES = {"debug": {"enabled": True}, "cluster": {"name": "prod"}, "hubble": {"relay": {"enabled": False}}}
ENABLED_VALUES = merged(TALOS_VALUES, {"kubeProxyReplacement": False})
for _key in ("k8sServiceHost", "k8sServicePort"):
    ENABLED_VALUES.pop(_key)


class Conn:
    def __init__(self, kubeconfig):
        self.client = KubeClient(kubeconfig=kubeconfig)

    def kube(self):
        return self.client


def _params(kube_lab, cilium_charts, **extra):
    params = dict(chart=cilium_charts["1.20"]["chart"], chart_digest=None, helm=kube_lab.bins["helm"],
                  kubeconfig=kube_lab.kubeconfig, kubeconfig_content=None, kube_context=None, timeout=30.0, kube_proxy=None, kubeprism_port=7445,
                  cilium_values=None, accept_cilium_changes=False, accept_cilium_diff=False)
    params.update(extra)
    return params


def _check(kube_lab, cilium_charts, kubeconfig=None, **extra):
    params = _params(kube_lab, cilium_charts, **extra)
    if kubeconfig:
        params["kubeconfig"] = kubeconfig
    return takeover.run(params, Conn(params["kubeconfig"]), True)


def _refused(kube_lab, cilium_charts, **extra):
    with pytest.raises(Refused) as info:
        _check(kube_lab, cilium_charts, **extra)
    return info.value


def _by_path(result, obj):
    return dict((e["path"], e) for e in result["gate"] if e["object"] == obj)


def _reader(kube_lab, namespace):
    """A ServiceAccount kubeconfig (bound to cluster-admin): its own audit identity, so its writes can be counted."""
    return kube_lab.service_account_kubeconfig(namespace, "takeover", rbac={"cluster_roles": ["cluster-admin"]})


def _resource_versions(kube_lab, rendered):
    client = KubeClient(kubeconfig=kube_lab.kubeconfig)
    out = {}
    for doc in yaml.safe_load_all(rendered):
        if doc:
            meta = doc["metadata"]
            live = client.get(doc["apiVersion"], doc["kind"], meta["name"], meta.get("namespace"))
            out[(doc["kind"], meta.get("namespace"), meta["name"])] = live["metadata"]["resourceVersion"] if live else None
    return out


def test_the_same_chart_and_values_as_the_live_install_give_an_empty_gate_and_write_nothing(
        cilium_lab, cilium_charts, kube_lab, kube_namespace):
    lab = cilium_lab(nodes=2)
    lab.helm_install("1.20", merged(TALOS_VALUES, USER_VALUES))
    lab.wait_ready()
    lab.agent.stop(remove_nodes=False)  # statuses stay as they are: every resourceVersion is stable now
    reader = _reader(kube_lab, kube_namespace)
    before = _resource_versions(kube_lab, open(lab.manifests[-1]).read())
    mark = kube_lab.audit_mark()
    result = _check(kube_lab, cilium_charts, kubeconfig=reader)
    assert result["gate"] == [] and result["diff"] == []
    assert "diff gate: empty (25 objects rendered, every one as it runs)" in result["plan"]
    assert result["changed"] is True and result["step"] == "takeover"
    assert result["values_source"] == "record" and result["user_values"] == USER_VALUES
    assert result["cilium"] == {"version": "1.20.4", "image": "quay.io/cilium/cilium:v1.20.4", "chart": "1.20.4",
                                "kube_proxy": "replaced", "tunnel": "vxlan", "ipam": "kubernetes", "nodes": 2}
    assert [r["name"] for r in result["records"]] == ["sh.helm.release.v1.cilium.v1"]
    assert result["values"]["namespaceOverride"] == "kube-system"
    assert any(line.startswith("delete foreign record kube-system/sh.helm.release.v1.cilium.v1") for line in result["plan"])
    user = "system:serviceaccount:%s:takeover" % kube_namespace
    assert kube_lab.mutating_requests(since=mark, user=user) == []
    dry_runs = [e for e in kube_lab.audit_events(since=mark) if e.get("verb") == "patch" and e["user"]["username"] == user]
    assert len(dry_runs) == 50  # each of the 25 objects: its scratch copy and itself, both dryRun=All
    assert _resource_versions(kube_lab, open(lab.manifests[-1]).read()) == before


def test_case_c_with_the_values_it_was_rendered_with_gives_an_empty_gate(cilium_lab, cilium_charts, kube_lab):
    lab = cilium_lab(nodes=2)
    lab.template_apply("1.20", merged(TALOS_VALUES, USER_VALUES))
    lab.wait_ready()
    result = _check(kube_lab, cilium_charts, cilium_values=merged(TALOS_VALUES, USER_VALUES))
    assert result["gate"] == [] and result["records"] == [] and result["values_source"] == "cilium_values"
    # without them the collection's defaults render, and the gate shows what that changes
    bare = _refused(kube_lab, cilium_charts)
    assert "needs" not in bare.message and "accept_cilium_diff" in bare.message
    paths = _by_path(bare.result, "ConfigMap kube-system/cilium-config")
    assert paths["data.debug"]["change"] == "differs" and paths["data.cluster-name"]["chart"] == "default"


def test_a5_an_extra_annotation_and_argument_are_reported_and_an_extra_configmap_is_left_alone(
        cilium_lab, cilium_charts, kube_lab):
    lab = cilium_lab(nodes=2)
    lab.helm_install("1.20", TALOS_VALUES)
    ds = lab.apps.read_namespaced_daemon_set("cilium", "kube-system")
    args = ds.spec.template.spec.containers[0].args + ["--enable-extra-thing=true"]
    lab.apps.patch_namespaced_daemon_set("cilium", "kube-system", {
        "metadata": {"annotations": {"example.com/owner": "team-net"}},
        "spec": {"template": {"spec": {"containers": [{"name": "cilium-agent", "args": args}]}}}})
    lab.core.create_namespaced_config_map("kube-system", {"metadata": {"name": "cilium-extra"}, "data": {"a": "b"}})
    lab.extra.append(("v1", "ConfigMap", "kube-system", "cilium-extra"))
    lab.wait_ready()
    refused = _refused(kube_lab, cilium_charts)
    assert refused.message == ("diff gate: 2 differences in 1 of 25 objects; review them (--diff shows each object) and "
                               "set accept_cilium_diff to accept")
    gate = _by_path(refused.result, "DaemonSet kube-system/cilium")
    assert gate['metadata.annotations["example.com/owner"]'] == {
        "object": "DaemonSet kube-system/cilium", "path": 'metadata.annotations["example.com/owner"]',
        "change": "live only, kept", "live": "team-net", "chart": None}
    extra_arg = gate["spec.template.spec.containers[cilium-agent].args"]
    assert extra_arg["change"] == "differs" and extra_arg["live"] == args and extra_arg["chart"] == args[:-1]
    (diff,) = refused.result["diff"]
    assert "--enable-extra-thing=true" in diff["before"] and "--enable-extra-thing=true" not in diff["after"]
    accepted = _check(kube_lab, cilium_charts, accept_cilium_diff=True)
    assert len(accepted["gate"]) == 2 and accepted["changed"] is True
    assert not any("cilium-extra" in line for line in accepted["plan"])
    assert lab.core.read_namespaced_config_map("cilium-extra", "kube-system").data == {"a": "b"}


def test_a6_an_older_minor_is_refused_one_lower_is_an_upgrade_and_a_newer_one_is_refused(
        cilium_lab, cilium_charts, kube_lab):
    lab = cilium_lab(nodes=2)
    lab.helm_install("1.18", TALOS_VALUES)
    lab.wait_ready()
    refused = _refused(kube_lab, cilium_charts)
    assert refused.message == ("Cilium 1.18.6 is more than one minor below the chart 1.20.4: upgrade it with the tool "
                               "that installed it first (to 1.19), then run the takeover again")
    assert refused.result["step"] == "none" and refused.result["gate"] == []
    assert refused.result["plan"][-1] == "refused: " + refused.message  # like every other refusal
    # the user upgrades it with helm, one minor: now one below the chart, taken over as an upgrade
    lab.apply_crds("1.19")
    lab.render("1.19", TALOS_VALUES)
    kube_lab.helm("upgrade", "cilium", cilium_charts["1.19"]["chart"], "-n", "kube-system",
                  "-f", lab.file("values.json", TALOS_VALUES))
    lab.wait_ready()
    diff_refused = _refused(kube_lab, cilium_charts)
    assert diff_refused.result["step"] == "upgrade" and "accept_cilium_diff" in diff_refused.message
    upgrade = _check(kube_lab, cilium_charts, accept_cilium_diff=True)
    assert upgrade["step"] == "upgrade" and upgrade["cilium"]["version"] == "1.19.5"
    assert "Cilium 1.19.5 runs (DaemonSet kube-system/cilium): an older minor: the takeover is an upgrade to 1.20.4" \
        in upgrade["plan"]
    assert "upgrade: Cilium 1.19.5 -> 1.20.4" in upgrade["plan"]
    images = _by_path(upgrade, "DaemonSet kube-system/cilium")["spec.template.spec.containers[cilium-agent].image"]
    assert (images["live"], images["chart"]) == ("quay.io/cilium/cilium:v1.19.5", "quay.io/cilium/cilium:v1.20.4")
    # a newer minor than the chart's
    kube_lab.helm("upgrade", "cilium", cilium_charts["1.20"]["chart"], "-n", "kube-system",
                  "-f", lab.file("values.json", TALOS_VALUES), "--set", "image.tag=v1.21.0")
    lab.render("1.20", TALOS_VALUES)
    lab.wait_ready()
    newer = _refused(kube_lab, cilium_charts)
    assert newer.message.startswith("Cilium 1.21.0 is newer than this collection's chart 1.20.4: a takeover would "
                                    "downgrade it")
    assert newer.result["plan"][-1] == "refused: " + newer.message


def test_a7_cluster_pool_is_refused_and_each_tunnel_is_mapped_and_kept(cilium_lab, cilium_charts, kube_lab):
    lab = cilium_lab(nodes=2)
    lab.helm_install("1.20", merged(TALOS_VALUES, {"ipam": {"mode": "cluster-pool"}}))
    lab.wait_ready()
    refused = _refused(kube_lab, cilium_charts)
    assert refused.message == ("Cilium runs IPAM mode cluster-pool; only kubernetes is taken over: changing IPAM "
                               "renumbers every pod (never accepted)")
    assert _refused(kube_lab, cilium_charts, accept_cilium_changes=True, accept_cilium_diff=True).message == \
        refused.message
    variants = [({"tunnelProtocol": "geneve"}, "geneve", {"routingMode": "tunnel", "tunnelProtocol": "geneve"}),
                ({"routingMode": "native", "ipv4NativeRoutingCIDR": "10.244.0.0/16", "autoDirectNodeRoutes": True},
                 "native", {"routingMode": "native"}),
                ({"routingMode": "tunnel", "tunnelProtocol": "vxlan"}, "vxlan",
                 {"routingMode": "tunnel", "tunnelProtocol": "vxlan"})]
    for user, tunnel, owned in variants:
        values = merged(TALOS_VALUES, user)
        lab.render("1.20", values)
        kube_lab.helm("upgrade", "cilium", cilium_charts["1.20"]["chart"], "-n", "kube-system",
                      "-f", lab.file("values.json", values))
        lab.wait_ready()
        result = _check(kube_lab, cilium_charts)
        assert result["cilium"]["tunnel"] == tunnel, tunnel
        assert dict((k, result["values"].get(k)) for k in ("routingMode", "tunnelProtocol")) == \
            dict({"routingMode": None, "tunnelProtocol": None}, **owned), tunnel
        assert result["gate"] == [], (tunnel, result["gate"])
        assert "tunnel: %s (kept; immutable after the takeover)" % tunnel in result["plan"]


def test_kube_proxy_mode_and_kubeprism(cilium_lab, cilium_charts, kube_lab):
    lab = cilium_lab(nodes=2, kube_proxy=True)
    lab.helm_install("1.20", TALOS_VALUES)  # replaces kube-proxy while kube-proxy runs
    lab.wait_ready()
    assert _refused(kube_lab, cilium_charts).message == (
        "kube-proxy runs and Cilium's kubeProxyReplacement is true: two owners of Service routing; disable one of "
        "them deliberately first")
    lab.render("1.20", ENABLED_VALUES)
    kube_lab.helm("upgrade", "cilium", cilium_charts["1.20"]["chart"], "-n", "kube-system",
                  "-f", lab.file("values.json", ENABLED_VALUES))
    lab.wait_ready()
    result = _check(kube_lab, cilium_charts)
    assert result["cilium"]["kube_proxy"] == "enabled" and result["gate"] == []
    assert result["values"]["kubeProxyReplacement"] is False and "k8sServiceHost" not in result["values"]
    assert _check(kube_lab, cilium_charts, kube_proxy="enabled")["cilium"]["kube_proxy"] == "enabled"
    assert _refused(kube_lab, cilium_charts, kube_proxy="replaced").message == (
        "kube_proxy is replaced, but kube-system runs the kube-proxy DaemonSet (enabled); give the mode that runs (the "
        "cluster spec's cni.kubeProxy)")


def test_kube_proxy_disabled_with_no_replacement_is_refused(cilium_lab, cilium_charts, kube_lab, kube_namespace):
    lab = cilium_lab(nodes=2, kube_proxy=False)
    lab.helm_install("1.20", ENABLED_VALUES)  # kubeProxyReplacement false, and no kube-proxy DaemonSet
    lab.wait_ready()
    reader = _reader(kube_lab, kube_namespace)
    mark = kube_lab.audit_mark()
    refused = _refused(kube_lab, cilium_charts, kubeconfig=reader)
    assert refused.message == ("kube-proxy is disabled and Cilium's kubeProxyReplacement is false: nothing routes "
                               "Services; switch one of them deliberately first")
    assert refused.result["gate"] == [] and refused.result["changed"] is False
    assert kube_lab.mutating_requests(since=mark, user="system:serviceaccount:%s:takeover" % kube_namespace) == []
    # the operator's claim does not change what runs: the same refusal with the mode given
    assert _refused(kube_lab, cilium_charts, kube_proxy="replaced").message == refused.message


def test_a_changed_kubeprism_endpoint_needs_accept_cilium_changes(cilium_lab, cilium_charts, kube_lab):
    lab = cilium_lab(nodes=2)
    values = merged(TALOS_VALUES, {"k8sServiceHost": "api.lab.example", "k8sServicePort": 6443})
    lab.helm_install("1.20", values)
    lab.wait_ready()
    refused = _refused(kube_lab, cilium_charts)
    assert refused.message == ("the takeover would change k8sServiceHost, k8sServicePort on the running data plane; "
                               "set accept_cilium_changes to accept")
    assert "owned k8sServicePort: 6443 -> 7445 (a change on the running data plane: needs accept_cilium_changes)" \
        in refused.result["plan"]
    result = _check(kube_lab, cilium_charts, accept_cilium_changes=True, accept_cilium_diff=True)
    env = _by_path(result, "DaemonSet kube-system/cilium")
    host = env['spec.template.spec.containers[cilium-agent].env[KUBERNETES_SERVICE_HOST].value']
    assert (host["live"], host["chart"]) == ("api.lab.example", "localhost")


def test_an_unhealthy_cilium_is_refused_and_one_node_gets_one_operator_replica(cilium_lab, cilium_charts, kube_lab):
    lab = cilium_lab(nodes=1)
    lab.helm_install("1.20", TALOS_VALUES)  # the chart's two operator replicas: one stays Pending on one Node
    lab.agent.sync_once()
    refused = _refused(kube_lab, cilium_charts)
    assert refused.message == ("Cilium is not healthy (DaemonSet kube-system/cilium: 1 of 1 nodes ready; Deployment "
                               "kube-system/cilium-operator: 1 of 2 replicas ready); fix it before the takeover")
    lab.render("1.20", merged(TALOS_VALUES, {"operator": {"replicas": 1}}))
    kube_lab.helm("upgrade", "cilium", cilium_charts["1.20"]["chart"], "-n", "kube-system", "--reuse-values",
                  "--set", "operator.replicas=1")
    lab.wait_ready()
    result = _check(kube_lab, cilium_charts)
    assert result["values"]["operator"] == {"replicas": 1} and result["gate"] == []


def test_refusals_before_anything_is_compared(cilium_lab, cilium_charts, kube_lab):
    assert _refused(kube_lab, cilium_charts).message == (
        "no Cilium runs here (no DaemonSet kube-system/cilium): there is nothing to take over")
    with pytest.raises(CiliumError, match="is Cilium 1.19.5; this collection's release set pins Cilium 1.20.4 "
                                          r"\(no override\)"):
        _check(kube_lab, cilium_charts, chart=cilium_charts["1.19"]["chart"])
    with pytest.raises(CiliumError, match="has digest sha256:"):
        _check(kube_lab, cilium_charts, chart_digest="sha256:" + "0" * 64)
    lab = cilium_lab(nodes=2)
    lab.helm_install("1.20", TALOS_VALUES)
    lab.wait_ready()
    refused = _refused(kube_lab, cilium_charts, cilium_values={"debug": {"enabled": True}})
    assert refused.message == ("cilium_values is for a Cilium without a Helm record; this one has "
                               "kube-system/sh.helm.release.v1.cilium.v1, whose values are lifted")


def playbook(tmp_path, check, **args):
    task = {"maesh.ichor.cilium_takeover": args, "register": "ichor_result", "ignore_errors": True}
    save = {"ansible.builtin.copy": {"content": "{{ ichor_result | to_json }}", "dest": str(tmp_path / "result.json")},
            "check_mode": False}
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [task, save],
             "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"}}]
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump(play))
    temp = tmp_path / "tmp"  # the run's own temp dir: what helm's files leave behind is this run's alone
    temp.mkdir(exist_ok=True)
    proc = ansible_playbook(str(path), "-i", "localhost,", "-c", "local", *(["--check", "--diff"] if check else []),
                            env={"TMPDIR": str(temp)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads((tmp_path / "result.json").read_text()), proc.stdout


def test_the_module_in_check_mode_prints_the_gate_with_diff_and_writes_nothing(cilium_lab, cilium_charts, kube_lab,
                                                                               kube_namespace, tmp_path):
    lab = cilium_lab(nodes=2)
    lab.helm_install("1.20", TALOS_VALUES)
    lab.apps.patch_namespaced_daemon_set("cilium", "kube-system", {"metadata": {"annotations": {"example.com/x": "y"}}})
    lab.wait_ready()
    lab.agent.stop(remove_nodes=False)
    reader = _reader(kube_lab, kube_namespace)
    with open(reader) as handle:
        content = handle.read()
    mark = kube_lab.audit_mark()
    args = dict(kubeconfig_content=content, chart=cilium_charts["1.20"]["chart"], helm=kube_lab.bins["helm"],
                accept_cilium_diff=True)
    result, out = playbook(tmp_path, True, **args)
    assert result["changed"] is True and not result.get("failed")
    assert [(e["path"], e["change"]) for e in result["gate"]] == [('metadata.annotations["example.com/x"]',
                                                                   "live only, kept")]
    assert "example.com/x: y" in out  # --diff shows the object
    user = "system:serviceaccount:%s:takeover" % kube_namespace
    assert kube_lab.mutating_requests(since=mark, user=user) == []
    assert not [name for name in os.listdir(str(tmp_path / "tmp")) if name.startswith("ichor-helm-")]


def test_the_chart_is_pulled_from_a_chart_repository_mirror_with_its_digest(cilium_lab, cilium_charts, kube_lab, tmp_path):
    """chart omitted: helm pulls the set's version from the repository (here a mirror served on loopback, as an
    air-gapped site keeps one: index.yaml made by helm repo index); the digest is checked on what was pulled."""
    lab = cilium_lab(nodes=2)
    lab.helm_install("1.20", TALOS_VALUES)
    lab.wait_ready()
    served = tmp_path / "repo"
    served.mkdir()
    tgz = shutil.copy(cilium_charts["1.20"]["chart"], str(served / "cilium-1.20.4.tgz"))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = "http://127.0.0.1:%d" % server.server_address[1]
        kube_lab.helm("repo", "index", str(served), "--url", url)
        with open(tgz, "rb") as handle:
            digest = "sha256:" + hashlib.sha256(handle.read()).hexdigest()
        result = _check(kube_lab, cilium_charts, chart=None, chart_repository=url, chart_digest=digest)
        assert result["gate"] == [] and result["cilium"]["chart"] == "1.20.4"
        with pytest.raises(CiliumError) as info:
            _check(kube_lab, cilium_charts, chart=None, chart_repository=url, chart_digest="sha256:" + "0" * 64)
        assert str(info.value) == "the chart cilium-1.20.4.tgz has digest %s, not sha256:%s" % (digest, "0" * 64)
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def oci_registry(tmp_path):
    """An OCI registry on loopback over TLS (tests/lab/cilium/registry: go-containerregistry's), its CA trusted by the
    helm the module runs through SSL_CERT_FILE, as a site's own CA would be."""
    from tests.lab import pki
    binary = subprocess.run(["bash", os.path.join(os.path.dirname(fixtures.__file__), "registry", "build.sh")],
                            capture_output=True, text=True, check=True, timeout=600).stdout.strip().splitlines()[-1]
    ca = pki.new_ca()
    crt, key = pki.issue_server(ca, "localhost", ["127.0.0.1"]).write(str(tmp_path), "registry")
    ca_file = str(tmp_path / "registry-ca.pem")
    with open(ca_file, "wb") as handle:
        handle.write(ca.cert_pem)
    proc = subprocess.Popen([binary, "127.0.0.1:0", crt, key], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("listening "), line
        saved = os.environ.get("SSL_CERT_FILE")
        os.environ["SSL_CERT_FILE"] = ca_file
        try:
            yield {"address": line.split(" ", 1)[1], "ca_file": ca_file}
        finally:
            if saved is None:
                os.environ.pop("SSL_CERT_FILE", None)
            else:
                os.environ["SSL_CERT_FILE"] = saved
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_chart_is_pulled_from_an_oci_registry_with_its_digest(cilium_lab, cilium_charts, kube_lab, oci_registry):
    """chart: oci://...: helm pulls the set's version from the registry (pushed there with helm push, as a site
    mirrors the chart); the digest is checked on what was pulled."""
    lab = cilium_lab(nodes=2)
    lab.helm_install("1.20", TALOS_VALUES)
    lab.wait_ready()
    tgz = cilium_charts["1.20"]["chart"]
    kube_lab.helm("push", tgz, "oci://%s/charts" % oci_registry["address"], "--ca-file", oci_registry["ca_file"])
    with open(tgz, "rb") as handle:
        digest = "sha256:" + hashlib.sha256(handle.read()).hexdigest()
    reference = "oci://%s/charts/cilium" % oci_registry["address"]
    result = _check(kube_lab, cilium_charts, chart=reference, chart_digest=digest)
    assert result["gate"] == [] and result["cilium"]["chart"] == "1.20.4"
    assert "chart: cilium 1.20.4 (%s), helm " % reference in "\n".join(result["plan"])
    with pytest.raises(CiliumError) as info:
        _check(kube_lab, cilium_charts, chart=reference, chart_digest="sha256:" + "0" * 64)
    assert str(info.value).startswith("the chart cilium-1.20.4.tgz has digest %s, not sha256:" % digest)
