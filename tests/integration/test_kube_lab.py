"""Tests of the lab's real Kubernetes control plane (tests/lab/kube): version, RBAC, TokenRequest,
audit log, namespace and garbage-collector controllers, and the real helm binary."""

import json
import os
import time

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.lab.kube.cluster import (ADMIN_USER, HELM_VERSION, KUBE_VERSION, is_dry_run,
                                    event_user)

pytestmark = pytest.mark.lab


def _wait_gone(read, timeout=90.0):
    """Poll read() until it raises 404; False on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            read()
        except ApiException as e:
            if e.status == 404:
                return True
            raise
        time.sleep(0.25)
    return False


def _configmap(name, data=None, owner=None):
    meta = client.V1ObjectMeta(name=name)
    if owner is not None:
        meta.owner_references = [client.V1OwnerReference(
            api_version="v1", kind="ConfigMap", name=owner.metadata.name, uid=owner.metadata.uid)]
    return client.V1ConfigMap(metadata=meta, data=data or {"k": "v"})


# --- version ---------------------------------------------------------------------------------

def test_server_reports_pinned_version(kube_lab):
    assert KUBE_VERSION == "v1.36.3"
    assert kube_lab.version == KUBE_VERSION
    info = client.VersionApi(kube_lab.api).get_code()
    assert info.git_version == KUBE_VERSION
    assert (info.major, info.minor) == ("1", "36")
    assert kube_lab.server.startswith("https://127.0.0.1:")


def test_kubectl_reports_pinned_version(kube_lab):
    out = json.loads(kube_lab.kubectl("version", "-o", "json").stdout)
    assert out["clientVersion"]["gitVersion"] == KUBE_VERSION
    assert out["serverVersion"]["gitVersion"] == KUBE_VERSION


def test_admin_kubeconfig_is_private(kube_lab):
    assert os.stat(kube_lab.kubeconfig).st_mode & 0o777 == 0o600


# --- RBAC and TokenRequest -------------------------------------------------------------------

def test_rbac_denies_unbound_service_account(kube_lab, kube_namespace):
    kc = kube_lab.service_account_kubeconfig(kube_namespace, "nobody")
    assert os.stat(kc).st_mode & 0o777 == 0o600
    core = client.CoreV1Api(kube_lab.api_client(kc))
    with pytest.raises(ApiException) as err:
        core.list_namespaced_pod(kube_namespace)
    assert err.value.status == 403
    assert "system:serviceaccount:%s:nobody" % kube_namespace in err.value.body


def test_rbac_allows_bound_service_account(kube_lab, kube_namespace):
    rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
    kc = kube_lab.service_account_kubeconfig(kube_namespace, "reader", rbac=rules)
    core = client.CoreV1Api(kube_lab.api_client(kc))
    assert core.list_namespaced_pod(kube_namespace).items == []
    # only what the Role grants: configmaps and other namespaces stay forbidden
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map(kube_namespace)
    assert err.value.status == 403
    with pytest.raises(ApiException) as err:
        core.list_namespaced_pod("default")
    assert err.value.status == 403


def test_rbac_cluster_role_binding(kube_lab, kube_namespace):
    kc = kube_lab.service_account_kubeconfig(kube_namespace, "viewer",
                                             rbac={"cluster_roles": ["view"]})
    core = client.CoreV1Api(kube_lab.api_client(kc))
    core.list_namespaced_config_map("default")
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map("default", _configmap("viewer-may-not"))
    assert err.value.status == 403


def test_token_request(kube_lab, kube_namespace):
    kube_lab.service_account_kubeconfig(kube_namespace, "tokened")
    token = kube_lab.service_account_token(kube_namespace, "tokened", expiration_seconds=600)
    assert token.count(".") == 2  # a JWT
    review = client.AuthenticationV1Api(kube_lab.api).create_token_review(
        client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token)))
    assert review.status.authenticated is True
    assert review.status.user.username == "system:serviceaccount:%s:tokened" % kube_namespace


# --- audit log -------------------------------------------------------------------------------

def test_audit_log_separates_dry_run(kube_lab, kube_namespace):
    core = client.CoreV1Api(kube_lab.api)
    mark = kube_lab.audit_mark()
    core.create_namespaced_config_map(kube_namespace, _configmap("dry"), dry_run="All")
    with pytest.raises(ApiException):
        core.read_namespaced_config_map("dry", kube_namespace)
    core.create_namespaced_config_map(kube_namespace, _configmap("real"))

    events = [e for e in kube_lab.audit_events(since=mark)
              if (e.get("objectRef") or {}).get("namespace") == kube_namespace
              and e.get("verb") == "create"]
    creates = [(is_dry_run(e), e["responseStatus"]["code"]) for e in events]
    assert sorted(creates) == [(False, 201), (True, 201)]
    assert all(event_user(e) == ADMIN_USER for e in events)
    assert any("dryRun=All" in e["requestURI"] for e in events)

    writes = kube_lab.mutating_requests(since=mark, namespace=kube_namespace)
    assert len(writes) == 1
    assert writes[0]["verb"] == "create" and not is_dry_run(writes[0])
    assert writes[0]["objectRef"]["resource"] == "configmaps"

    # nothing after a fresh mark
    mark = kube_lab.audit_mark()
    core.read_namespaced_config_map("real", kube_namespace)
    assert kube_lab.mutating_requests(since=mark) == []


def test_a_cached_list_is_served_from_the_watch_cache_and_holds_the_same(kube_lab, kube_namespace):
    """KubeClient.list(cached=True) asks with resourceVersion=0 (the API server's watch cache, no wait for it to
    catch up with etcd): the rollout's polled Pod gate reads so; a default list is a consistent read."""
    from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient
    core = client.CoreV1Api(kube_lab.api)
    core.create_namespaced_config_map(kube_namespace, _configmap("listed"))
    kube = KubeClient(kubeconfig=kube_lab.kubeconfig)
    mark = kube_lab.audit_mark()
    consistent = kube.list("v1", "ConfigMap", kube_namespace)
    deadline = time.monotonic() + 10  # the cache follows etcd within moments
    cached = kube.list("v1", "ConfigMap", kube_namespace, cached=True)
    while "listed" not in [c["metadata"]["name"] for c in cached] and time.monotonic() < deadline:
        time.sleep(0.1)
        cached = kube.list("v1", "ConfigMap", kube_namespace, cached=True)
    assert sorted(c["metadata"]["name"] for c in cached) == sorted(c["metadata"]["name"] for c in consistent)
    lists = [e["requestURI"] for e in kube_lab.audit_events(since=mark)
             if e.get("verb") == "list" and (e.get("objectRef") or {}).get("namespace") == kube_namespace]
    assert "resourceVersion=0" not in lists[0] and all("resourceVersion=0" in uri for uri in lists[1:]), lists


def test_audit_since_time(kube_lab, kube_namespace):
    start = time.time()
    time.sleep(0.01)
    client.CoreV1Api(kube_lab.api).create_namespaced_config_map(kube_namespace, _configmap("t"))
    writes = kube_lab.mutating_requests(since=start, namespace=kube_namespace)
    assert [w["objectRef"]["name"] for w in writes] == ["t"]


# --- controllers -----------------------------------------------------------------------------

def test_namespace_deletion_finishes(kube_lab):
    core = client.CoreV1Api(kube_lab.api)
    ns = kube_lab.new_namespace("doomed")
    core.create_namespaced_config_map(ns, _configmap("content"))
    core.create_namespaced_service_account(ns, client.V1ServiceAccount(
        metadata=client.V1ObjectMeta(name="sa")))
    core.delete_namespace(ns)
    assert _wait_gone(lambda: core.read_namespace(ns)), \
        "namespace %s still terminating: %s" % (ns, core.read_namespace(ns).status)


def test_owner_reference_cascades(kube_lab, kube_namespace):
    core = client.CoreV1Api(kube_lab.api)
    owner = core.create_namespaced_config_map(kube_namespace, _configmap("owner"))
    core.create_namespaced_config_map(kube_namespace, _configmap("child", owner=owner))
    core.create_namespaced_config_map(kube_namespace, _configmap("bystander"))
    core.delete_namespaced_config_map("owner", kube_namespace)
    assert _wait_gone(lambda: core.read_namespaced_config_map("child", kube_namespace))
    core.read_namespaced_config_map("bystander", kube_namespace)


# --- helm ------------------------------------------------------------------------------------

CHART = """\
apiVersion: v2
name: lab-tiny
version: 0.1.0
appVersion: "1.0"
kubeVersion: ">= 1.36.0-0"
"""

TEMPLATE = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-cm
data:
  greeting: {{ .Values.greeting | quote }}
  kube: {{ .Capabilities.KubeVersion.Version | quote }}
"""


def test_helm_version(kube_lab):
    assert HELM_VERSION == "v3.21.4"
    out = kube_lab.helm("version", "--short").stdout.strip()
    assert out.startswith(HELM_VERSION), out
    assert 'Version:"%s"' % HELM_VERSION in kube_lab.helm("version").stdout


def test_helm_install_and_uninstall(kube_lab, kube_namespace, tmp_path):
    chart = tmp_path / "lab-tiny"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(CHART)
    (chart / "values.yaml").write_text("greeting: hello\n")
    (chart / "templates" / "cm.yaml").write_text(TEMPLATE)

    core = client.CoreV1Api(kube_lab.api)
    kube_lab.helm("install", "tiny", str(chart), "-n", kube_namespace,
                  "--set", "greeting=hi", "--wait", "--timeout", "60s")
    cm = core.read_namespaced_config_map("tiny-cm", kube_namespace)
    assert cm.data == {"greeting": "hi", "kube": KUBE_VERSION}
    assert cm.metadata.labels["app.kubernetes.io/managed-by"] == "Helm"
    assert cm.metadata.annotations["meta.helm.sh/release-name"] == "tiny"
    secret = core.read_namespaced_secret("sh.helm.release.v1.tiny.v1", kube_namespace)
    assert secret.type == "helm.sh/release.v1"
    assert secret.metadata.labels["status"] == "deployed"
    listed = json.loads(kube_lab.helm("list", "-n", kube_namespace, "-o", "json").stdout)
    assert [(r["name"], r["status"]) for r in listed] == [("tiny", "deployed")]

    kube_lab.helm("uninstall", "tiny", "-n", kube_namespace, "--wait")
    assert _wait_gone(lambda: core.read_namespaced_config_map("tiny-cm", kube_namespace), 30)
    assert json.loads(kube_lab.helm("list", "-n", kube_namespace, "-o", "json").stdout) == []


def test_helm_respects_rbac(kube_lab, kube_namespace, tmp_path):
    """helm under a ServiceAccount without rights is refused by the API server."""
    chart = tmp_path / "c"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(CHART)
    (chart / "templates" / "cm.yaml").write_text(TEMPLATE)
    kc = kube_lab.service_account_kubeconfig(kube_namespace, "helmless")
    proc = kube_lab.helm("install", "nope", str(chart), "-n", kube_namespace, check=False,
                         kubeconfig=kc)
    assert proc.returncode != 0
    assert "forbidden" in proc.stderr.lower(), proc.stderr
