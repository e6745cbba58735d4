"""KubeReader without a cluster: which kubeconfigs it takes (a property over generated cluster and user bodies), a
kept connection the server closed is opened once more (a local HTTP server), and a fuzz of kubeconfigs it takes:
each one is read or refused in one line, never a traceback (tests/integration/test_kube_reader.py holds it to
KubeClient's answers on the lab's real API server)."""

import base64
import random
import socket
import threading

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.k8s import kubeconfig, reader
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.errors import KubeError

# what kubeconfigs carry beyond what the reader speaks (kubectl's own fields): each sends it to KubeClient
OTHER_CLUSTER = ("tls-server-name", "proxy-url", "disable-compression", "certificate-authority-bundle")
OTHER_USER = ("exec", "auth-provider", "username", "password", "as", "as-uid", "as-groups", "as-user-extra")


def _config(cluster, user, path=None, merged=False):
    data = {"clusters": [{"name": "c", "cluster": cluster}], "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}], "current-context": "x"}
    return kubeconfig.Kubeconfig(data, path, kubeconfig.check(data, "kubeconfig test", None), merged=merged)


def test_it_takes_exactly_the_kubeconfigs_whose_every_field_it_speaks():
    rng = random.Random(16)
    for _case in range(400):
        cluster = dict((f, True if f == "insecure-skip-tls-verify" else "x")
                       for f in rng.sample(sorted(reader.CLUSTER_FIELDS - {"server"}), rng.randint(0, 3)))
        cluster["server"] = rng.choice(["https://127.0.0.1:6443", "http://10.0.0.1:8080", "https://kube.example/prefix"])
        user = dict((f, "x") for f in rng.sample(sorted(reader.USER_FIELDS), rng.randint(0, 4)))
        foreign = rng.random() < 0.5
        if foreign:
            (cluster if rng.random() < 0.5 else user)[rng.choice(OTHER_CLUSTER if rng.random() < 0.5 else OTHER_USER)] = {}
        assert reader.covers(_config(cluster, user)) is not foreign, (cluster, user)
    for server in ("", "unix:///run/kube.sock", "127.0.0.1:6443", None):
        assert not reader.covers(_config({"server": server}, {"token": "t"}))
    assert not reader.covers(_config({"server": "https://10.0.0.1", "insecure-skip-tls-verify": "yes"}, {}))


def test_relative_files_of_merged_kubeconfigs_go_to_kubeclient():
    relative = {"server": "https://127.0.0.1:6443", "certificate-authority": "ca.crt"}
    assert reader.covers(_config(relative, {}, path="/etc/kube/config"))
    assert not reader.covers(_config(relative, {}, merged=True))
    assert reader.covers(_config(dict(relative, **{"certificate-authority": "/etc/kube/ca.crt"}), {}, merged=True))


def _server(replies):
    """A loopback HTTP server answering each request from ``replies`` and closing the connection after each, as
    an API server closes an idle kept connection; returns its port."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)

    def serve():
        for body in replies:
            conn, _addr = sock.accept()
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
                len(body), body))
            conn.close()
        sock.close()
    threading.Thread(target=serve, daemon=True).start()
    return sock.getsockname()[1]


def test_a_kept_connection_the_server_closed_is_opened_once_more():
    port = _server([b'{"metadata": {"name": "a"}}', b'{"metadata": {"name": "b"}}'])
    read = reader.KubeReader(_config({"server": "http://127.0.0.1:%d" % port}, {"token": "t"}), timeout=5)
    assert read.get("v1", "Node", "a")["metadata"]["name"] == "a"
    assert read.get("v1", "Node", "b")["metadata"]["name"] == "b"
    read.close()


def test_only_the_core_kinds_it_knows():
    read = reader.KubeReader(_config({"server": "http://127.0.0.1:9"}, {}))
    with pytest.raises(KubeError) as info:
        read.get("apps/v1", "Deployment", "x", "default")
    assert str(info.value) == "KubeReader reads the core kinds ConfigMap, Node, not apps/v1 Deployment"


def test_fuzz_kubeconfigs_it_takes(fuzz, fresh_redaction, tmp_path):
    """Every generated kubeconfig the reader takes is made into a reader or refused in one line (KubeError): bad
    base64, a CA or key that is not PEM, files that do not exist, a key that does not match."""
    run = fuzz("kube-reader", count=300, seconds=3.0)
    pem = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    values = [None, "", "!!not base64!!", base64.b64encode(b"not a pem").decode(), base64.b64encode(pem).decode(),
              base64.b64encode(b"\x00\xff" * 40).decode()]
    files = [None, "", "missing.crt", str(tmp_path), "/dev/null"]
    for index, rng in run.cases():
        cluster = {"server": rng.choice(["https://127.0.0.1:9", "http://127.0.0.1:9"])}
        user = {}
        for body, field in ((cluster, "certificate-authority"), (user, "client-certificate"), (user, "client-key")):
            if rng.random() < 0.5:
                body[field + "-data"] = rng.choice(values)
            if rng.random() < 0.3:
                body[field] = rng.choice(files)
        if rng.random() < 0.3:
            cluster["insecure-skip-tls-verify"] = rng.choice([True, False, "yes"])
        if rng.random() < 0.3:
            user["tokenFile"] = rng.choice(files)
        config = _config(cluster, user, path=str(tmp_path / "kubeconfig"))
        if reader.covers(config):
            run.check(lambda: reader.KubeReader(config, timeout=1), index, (cluster, user))
