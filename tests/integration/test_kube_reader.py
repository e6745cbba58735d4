"""KubeReader against the lab's real kube-apiserver, judged by KubeClient (the kubernetes package) on the same
server: the same objects for a Node and a ConfigMap, None for what does not exist, and the same one line for every
failure (unreachable, a CA that did not sign the server, 401, 403), for a client certificate, a ServiceAccount
token, a tokenFile and files named relative to the kubeconfig; a kubeconfig it does not speak goes to KubeClient;
a per-machine module reading through it never imports the kubernetes package."""

import base64
import os

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.ansible_module import runner
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import kubeconfig, reader
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient, KubeError

from tests.lab.kube.cluster import _CA, _cert_pem, _free_port  # pylint: disable=protected-access

pytestmark = pytest.mark.lab


def _both(path, **options):
    """(KubeClient, KubeReader) of the kubeconfig at ``path``."""
    config = kubeconfig.load(kubeconfig=path)
    assert reader.covers(config), config.user.keys()
    return KubeClient(kubeconfig=path, **options), reader.KubeReader(config, **options)


def _failure(fn, *args):
    with pytest.raises(KubeError) as info:
        fn(*args)
    text = str(info.value)
    assert "\n" not in text
    return text


def _edited(src, tmp_path, edit, name="kubeconfig"):
    with open(src) as f:
        doc = yaml.safe_load(f)
    edit(doc)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    os.chmod(str(path), 0o600)
    return str(path)


@pytest.fixture
def node(kube_lab):
    admin = KubeClient(kubeconfig=kube_lab.kubeconfig)
    name = "reader-%s" % base64.b32encode(os.urandom(5)).decode().lower()
    admin.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"ichor.test/reader": "1"}}})
    yield name
    admin.delete("v1", "Node", name)


def test_the_same_objects_as_kubeclient_with_a_client_certificate(kube_lab, kube_namespace, node):
    kube, read = _both(kube_lab.kubeconfig)
    kube.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "record", "namespace": kube_namespace},
                 "data": {"machines": "cp-1"}})
    for args in (("v1", "Node", node), ("v1", "ConfigMap", "record", kube_namespace)):
        got = read.get(*args)
        assert got == kube.get(*args)
        assert got["metadata"]["name"] == args[2] and got["metadata"]["uid"]
    for args in (("v1", "Node", "no-such-node"), ("v1", "ConfigMap", "absent", kube_namespace),
                 ("v1", "ConfigMap", "record", "no-such-namespace")):
        assert read.get(*args) is None and kube.get(*args) is None
    read.close()
    assert read.get("v1", "Node", node)["metadata"]["name"] == node  # a closed reader connects again


def test_a_serviceaccount_token_and_a_token_file(kube_lab, kube_namespace, tmp_path):
    path = kube_lab.service_account_kubeconfig(kube_namespace, "reads", rbac=[
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}])
    args = _settings(kube_lab, kube_namespace)
    kube, read = _both(path)
    assert read.get(*args)["data"] == {"mode": "strict"}
    assert read.get(*args) == kube.get(*args)

    def token_file(doc):
        user = doc["users"][0]["user"]
        (tmp_path / "token").write_text(user.pop("token") + "\n")
        user["tokenFile"] = str(tmp_path / "token")
    kube, read = _both(_edited(path, tmp_path, token_file))
    assert read.get(*args)["data"] == {"mode": "strict"}


def _settings(kube_lab, namespace):
    KubeClient(kubeconfig=kube_lab.kubeconfig).create({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": namespace},
        "data": {"mode": "strict"}})
    return ("v1", "ConfigMap", "settings", namespace)


def test_files_named_relative_to_the_kubeconfig(kube_lab, kube_namespace, tmp_path):
    """certificate-authority, client-certificate and client-key as files beside the kubeconfig, named relatively."""
    def as_files(doc):
        cluster, user = doc["clusters"][0]["cluster"], doc["users"][0]["user"]
        for body, field, name in ((cluster, "certificate-authority", "ca.crt"), (user, "client-certificate", "me.crt"),
                                  (user, "client-key", "me.key")):
            (tmp_path / name).write_bytes(base64.b64decode(body.pop(field + "-data")))
            body[field] = name
    path = _edited(kube_lab.kubeconfig, tmp_path, as_files)
    kube, read = _both(path)
    args = _settings(kube_lab, kube_namespace)
    assert read.get(*args)["data"] == {"mode": "strict"}
    assert read.get(*args) == kube.get(*args)


def test_every_failure_in_kubeclients_words(kube_lab, kube_namespace, tmp_path):
    def elsewhere(doc):
        doc["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:%d" % _free_port()

    def foreign_ca(doc):
        ca_pem = _cert_pem(_CA("another-cluster-ca").cert)
        doc["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(ca_pem).decode()

    def bad_token(doc):
        doc["users"][0]["user"]["token"] = base64.urlsafe_b64encode(os.urandom(48)).decode().rstrip("=")

    nobody = kube_lab.service_account_kubeconfig(kube_namespace, "nobody")
    cases = [(_edited(kube_lab.kubeconfig, tmp_path, elsewhere, "elsewhere"), ("v1", "Node", "cp-1")),
             (_edited(kube_lab.kubeconfig, tmp_path, foreign_ca, "foreign-ca"), ("v1", "Node", "cp-1")),
             (_edited(nobody, tmp_path, bad_token, "bad-token"), ("v1", "ConfigMap", "settings", kube_namespace)),
             (nobody, ("v1", "ConfigMap", "settings", kube_namespace)),
             (nobody, ("v1", "Node", "cp-1"))]
    seen = []
    for path, args in cases:
        kube, read = _both(path, timeout=5)
        said = _failure(read.get, *args)
        assert said == _failure(kube.get, *args)
        seen.append(said)
    assert "connection refused" in seen[0]
    assert "not signed by the kubeconfig's certificate-authority" in seen[1]
    assert "401 Unauthorized" in seen[2] and "403 Forbidden" in seen[3] and 'cannot get resource "nodes"' in seen[4]


def test_a_kubeconfig_it_does_not_speak_goes_to_kubeclient(kube_lab, kube_namespace, tmp_path):
    def basic_auth(doc):
        doc["users"][0]["user"]["username"] = "admin"

    def tls_server_name(doc):
        doc["clusters"][0]["cluster"]["tls-server-name"] = "127.0.0.1"
    for edit in (basic_auth, tls_server_name):
        path = _edited(kube_lab.kubeconfig, tmp_path, edit)
        conn = runner.Connections(dict(kubeconfig=path, timeout=5.0))
        assert isinstance(conn.kube_reader(), KubeClient)
        conn.close()
    conn = runner.Connections(dict(kubeconfig=kube_lab.kubeconfig, timeout=5.0))
    assert isinstance(conn.kube_reader(), reader.KubeReader)
    assert conn.kube_reader().get(*_settings(kube_lab, kube_namespace))["data"] == {"mode": "strict"}
    conn.close()
