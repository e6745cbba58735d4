"""Errors that say what happened, against the lab: the simulated Talos machines (which answer with the
status codes and messages real Talos sends) and the real kube-apiserver. Every case asserts the exact
one-line text, and that no secret of the run is in it."""

import base64
import os
import secrets as pysecrets
import socket

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.config import secrets as bundles
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient, KubeError
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as tc
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, talosconfig

pytestmark = pytest.mark.lab

CASE = "v1.14/v1.14.1/basic"


def _raises(cls, fn, *args, **kwargs):
    with pytest.raises(cls) as exc:
        fn(*args, **kwargs)
    text = str(exc.value)
    assert "\n" not in text
    return text


# -- Talos ----------------------------------------------------------------------------------------

def test_a_refused_config_is_quoted_with_every_secret_redacted(talos_lab):
    lab = talos_lab(controlplanes=1, workers=1, case=CASE)
    bundle = bundles.load(os.path.join(lab.case, "secrets.yaml"))  # the run holds the bundle
    worker = lab.machine("worker-1")
    docs = list(yaml.safe_load_all(worker["machine_config"]))
    legacy = [d for d in docs if d.get("version") == "v1alpha1" and "kind" not in d][0]
    # a machine token no heuristic would catch: only the config we sent says it is one
    token = "wt-" + pysecrets.token_hex(10)
    legacy["machine"]["token"] = token
    # mis-indented keys: Talos quotes unknown keys with their values
    legacy["token"] = token
    legacy["secretboxEncryptionSecret"] = bundle.secretbox_secret.reveal()
    apply = tc.request_type("ApplyConfiguration")
    request = apply(data=yaml.safe_dump_all(docs, sort_keys=False).encode(), mode=apply.AUTO)
    with tc.TalosClient(talosconfig.load(lab.talosconfig), timeout=10) as client:
        text = _raises(errors.TalosCallError, client.call, "ApplyConfiguration", request, node=worker["address"])
    assert text == ("%s: INVALID_ARGUMENT (ApplyConfiguration): the machine refused the request as invalid; the machine "
                    "said: unknown keys found during decoding: token: <redacted> secretboxEncryptionSecret: <redacted>"
                    % worker["address"])
    assert token not in text and bundle.secretbox_secret.reveal() not in text
    assert lab.machine("worker-1")["machine_config"] == worker["machine_config"]


def test_control_plane_calls_on_a_worker(talos_lab):
    lab = talos_lab(controlplanes=1, workers=1)
    worker = lab.address("worker-1")
    said = {"EtcdMemberList": "member list is only available on control plane nodes",
            "EtcdStatus": "etcd status is only available on control plane nodes",
            "Kubeconfig": "kubeconfig is only available on control plane nodes"}
    with tc.TalosClient(talosconfig.load(lab.talosconfig), timeout=10) as client:
        for call, message in sorted(said.items()):
            assert _raises(errors.TalosCallError, client.call, call, node=worker) == (
                "%s: UNIMPLEMENTED (%s): %s needs a control plane node and %s is not one; address a control plane; "
                "the machine said: %s" % (worker, call, call, worker, message))
        assert _raises(errors.TalosCallError, client.call, "Bootstrap", node=worker) == (
            "%s: FAILED_PRECONDITION (Bootstrap): Bootstrap needs a control plane node and %s is not one; address a "
            "control plane; the machine said: bootstrap can only be performed on a control plane node" % (worker, worker))


def test_maintenance_mode_refusals_do_not_blame_a_role(talos_lab):
    lab = talos_lab(controlplanes=1, workers=0, extra_maintenance=True)
    cp, fresh = lab.address("cp-1"), lab.address("m-114")
    with tc.TalosClient(dial_only=fresh, maintenance=True, timeout=5) as client:
        assert _raises(errors.TalosCallError, client.call, "Reboot") == (
            "%s: PERMISSION_DENIED (Reboot): a machine in maintenance mode (no config yet) allows only some reads and "
            "applying a config, without a client certificate; apply a config first, then use the talosconfig; the "
            "machine said: not authorized" % fresh)
    with tc.TalosClient(endpoint=fresh, maintenance=True, timeout=5) as client:
        assert _raises(errors.TalosCallError, client.call, "Version", node=cp) == (
            "%s: PERMISSION_DENIED (Version): a machine in maintenance mode answers only for itself; dial its own "
            "address; the machine said: node routing is not supported in maintenance mode" % cp)
    # a configured machine closes the connection of a client without a certificate
    with tc.TalosClient(dial_only=cp, maintenance=True, timeout=5) as client:
        assert _raises(errors.TalosUnavailable, client.call, "Version") == (
            "%s: the machine closed the connection; a machine that has a config does so when no client certificate is "
            "sent (maintenance mode sends none): if it is configured, connect with its cluster's talosconfig" % cp)


# -- Kubernetes -----------------------------------------------------------------------------------

def _copy(kube_lab, tmp_path, edit=None, source=None):
    with open(source or kube_lab.kubeconfig) as f:
        doc = yaml.safe_load(f)
    if edit:
        edit(doc)
    path = tmp_path / ("kubeconfig-%s" % pysecrets.token_hex(3))
    path.write_text(yaml.safe_dump(doc))
    return str(path), doc


def _current(doc):
    ctx = [c for c in doc["contexts"] if c["name"] == doc["current-context"]][0]["context"]
    return doc["current-context"], ctx["user"]


def test_no_kubeconfig_given(kube_lab, monkeypatch, tmp_path):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert _raises(KubeError, KubeClient) == (
        "no kubeconfig given: set the option kubeconfig (a path) or kubeconfig_content, or the environment variable "
        "KUBECONFIG (~/.kube/config does not exist either)")
    # KUBECONFIG alone is enough: the lab's admin kubeconfig
    monkeypatch.setenv("KUBECONFIG", kube_lab.kubeconfig)
    assert KubeClient().raw_get("/version").count('"gitVersion"') == 1


def test_a_kubeconfig_missing_or_unreadable(kube_lab, tmp_path):
    missing = str(tmp_path / "gone" / "kubeconfig")
    assert _raises(KubeError, KubeClient, kubeconfig=missing) == (
        "the kubeconfig %s does not exist; check the option kubeconfig" % missing)
    assert _raises(KubeError, KubeClient, kubeconfig=str(tmp_path)) == (
        "the kubeconfig %s cannot be read (Is a directory); check its permissions and the option kubeconfig" % tmp_path)
    if os.geteuid() != 0:  # root reads a file of mode 0000
        path, _doc = _copy(kube_lab, tmp_path)
        os.chmod(path, 0)
        assert _raises(KubeError, KubeClient, kubeconfig=path) == (
            "the kubeconfig %s cannot be read (Permission denied); check its permissions and the option kubeconfig" % path)


def test_a_context_the_kubeconfig_does_not_have(kube_lab, tmp_path):
    def second_context(doc):
        extra = dict(doc["contexts"][0], name="elsewhere")
        doc["contexts"].append(extra)
    path, doc = _copy(kube_lab, tmp_path, second_context)
    names = ", ".join(c["name"] for c in doc["contexts"])
    assert _raises(KubeError, KubeClient, kubeconfig=path, context="prod") == (
        'the kubeconfig %s has no context "prod"; it has: %s (option kube_context)' % (path, names))
    assert KubeClient(kubeconfig=path, context="elsewhere").raw_get("/version").count('"gitVersion"') == 1


def _free_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def test_an_unreachable_api_server(kube_lab, tmp_path):
    server = "https://127.0.0.1:%d" % _free_port()

    def elsewhere(doc):
        for cluster in doc["clusters"]:
            cluster["cluster"]["server"] = server
    path, doc = _copy(kube_lab, tmp_path, elsewhere)
    kube = KubeClient(kubeconfig=path, timeout=5)
    expected = ('cannot reach the Kubernetes API at %s: connection refused; check that the API server is up and that the '
                'kubeconfig %s, context "%s" names the right address' % (server, path, _current(doc)[0]))
    assert _raises(KubeError, kube.get, "v1", "ConfigMap", "x", "default") == expected
    assert _raises(KubeError, kube.raw_get, "/version") == expected


def test_401_names_the_user_and_never_the_token(kube_lab, kube_namespace, tmp_path):
    source = kube_lab.service_account_kubeconfig(kube_namespace, "expired")
    bogus = base64.urlsafe_b64encode(os.urandom(48)).decode().rstrip("=")

    def bad_token(doc):
        doc["users"][0]["user"]["token"] = bogus
    path, doc = _copy(kube_lab, tmp_path, bad_token, source=source)
    context, user = _current(doc)
    kube = KubeClient(kubeconfig=path)
    text = _raises(KubeError, kube.raw_get, "/version")
    assert text == ('GET /version: 401 Unauthorized: the API server at %s did not accept the credentials of user "%s" '
                    '(kubeconfig %s, context "%s"); the token or client certificate is expired, revoked or another '
                    "cluster's" % (kube_lab.server, user, path, context))
    assert user == "system:serviceaccount:%s:expired" % kube_namespace
    assert bogus not in text


def test_403_says_who_may_not_do_what_where(kube_lab, kube_namespace):
    user = "system:serviceaccount:%s:nobody" % kube_namespace
    kube = KubeClient(kubeconfig=kube_lab.service_account_kubeconfig(kube_namespace, "nobody"))
    assert _raises(KubeError, kube.get, "v1", "ConfigMap", "settings", kube_namespace) == (
        'get ConfigMap %s/settings: 403 Forbidden: configmaps "settings" is forbidden: User "%s" cannot get resource '
        '"configmaps" in API group "" in the namespace "%s"; grant user "%s" this permission (RBAC) or use another '
        "kubeconfig" % (kube_namespace, user, kube_namespace, user))
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": kube_namespace}}
    assert _raises(KubeError, kube.create, obj) == (
        'create ConfigMap %s/settings: 403 Forbidden: configmaps is forbidden: User "%s" cannot create resource '
        '"configmaps" in API group "" in the namespace "%s"; grant user "%s" this permission (RBAC) or use another '
        "kubeconfig" % (kube_namespace, user, kube_namespace, user))


def test_the_kubeconfig_content_is_never_quoted(kube_lab):
    with open(kube_lab.kubeconfig) as f:
        content = f.read()
    text = _raises(KubeError, KubeClient, kubeconfig_content=content, context="prod")
    assert text.startswith('the kubeconfig given as kubeconfig_content has no context "prod"; it has: ')
    for line in content.splitlines():
        value = line.split(":", 1)[-1].strip()
        if len(value) >= 16:
            assert value not in text
