"""The one-line errors of the Talos and Kubernetes clients, built without a lab: every case asserts the
exact text. Secrets registered here are random, so they cannot collide with other tests' texts (the
registry is process-wide)."""

import base64
import os
import random
import secrets as pysecrets

import pytest
import urllib3
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.common import redact
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import client as kc
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import kubeconfig, lock
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as tc
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors
from ansible_collections.maesh.ichor.plugins.module_utils.talos.proto import machine_pb2


def _b64_secret():
    return base64.b64encode(os.urandom(32)).decode()  # 44 characters, as a secretbox secret


def _token():
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    return "%s.%s" % ("".join(pysecrets.choice(alphabet) for _index in range(6)),
                      "".join(pysecrets.choice(alphabet) for _index in range(16)))


def _pem(label="EC PRIVATE KEY", size=96):
    body = base64.b64encode(os.urandom(size)).decode()
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    return "-----BEGIN %s-----\n%s\n-----END %s-----\n" % (label, "\n".join(lines), label)


# -- redaction ------------------------------------------------------------------------------------

def test_a_secret_registers_its_value_and_its_forms():
    pem = _pem()
    redact.Secret(pem)
    body = [line for line in pem.splitlines() if not line.startswith("-----")]
    as_config = base64.b64encode(pem.encode()).decode()  # how a machine config holds a key
    text = "a: %s b: %s c: %s" % (body[0], as_config, body[1][:40] + "tail")
    assert redact.redact_text(text) == "a: <redacted> b: <redacted> c: %s" % (body[1][:40] + "tail")
    # a value shorter than the heuristics catch, registered: replaced; unregistered: kept
    short = "s3cr3t-" + pysecrets.token_hex(4)
    assert redact.redact_text("x %s y" % short) == "x %s y" % short
    redact.Secret(short.encode())
    assert redact.redact_text("x %s y" % short) == "x <redacted> y"


def test_what_looks_like_key_material_goes_without_registration():
    secretbox = _b64_secret()
    text = "secret %s token %s image ghcr.io/siderolabs/installer:v1.14.1 digest sha256:%s" % (
        secretbox, _token(), "ab" * 32)
    assert redact.redact_text(text) == ("secret <redacted> token <redacted> image ghcr.io/siderolabs/installer:v1.14.1 "
                                        "digest sha256:%s" % ("ab" * 32))


def test_a_lock_holder_to_type_back_is_not_taken_for_key_material():
    # the refusal asks the operator to type the holder's id back: a name=value pair is two words, not one base64 run
    holder = lock.new_holder()
    text = "break its lock with -e ichor_lock_break=%s" % holder
    assert redact.redact_text(text) == text
    padded = base64.b64encode(b"\x8f" * 32).decode()  # 32 random-looking bytes: 44 characters ending in '='
    assert redact.redact_text("token=" + padded) == "token=<redacted>"


def test_excerpt_is_one_line_and_cut():
    assert redact.excerpt("a\n\tb  c", 300) == "a b c"
    assert redact.excerpt("word " * 100, 20) == "word word word word [cut]"


def test_an_expected_error_is_redacted():
    value = _b64_secret()
    redact.Secret(value)
    assert IchorError("x %s" % value).message == "x <redacted>"


def test_every_random_secretbox_secret_is_redacted_unannounced():
    """32 random bytes in base64, as a secretbox secret: about one draw in 1500 has no digit, and was shown."""
    rng = random.Random(14)
    assert redact.redact_text("secret: oBLJqzE/efFEsJgMTJpBgWLYfYofh/vKAQmf+gDfagI=") == "secret: <redacted>"
    for _draw in range(5000):
        value = base64.b64encode(bytes(rng.getrandbits(8) for _byte in range(32))).decode()
        assert value not in redact.redact_text("secretboxEncryptionSecret: %s" % value), value
    # words and paths stay
    kept = "see /var/lib/kubelet/pki/kubelet-client-current.pem and SomeLongCamelCaseIdentifierWithoutAnyDigits"
    assert redact.redact_text(kept) == kept


# -- Talos ----------------------------------------------------------------------------------------

def test_the_machines_message_is_kept_redacted():
    secretbox, token = _b64_secret(), _token()
    redact.Secret(token)
    said = "unknown keys found during decoding:\nsecretboxEncryptionSecret: %s\nclusterToken: %s\n" % (secretbox, token)
    err = errors.call_error("10.5.0.3", "INVALID_ARGUMENT", said, call="ApplyConfiguration")
    assert str(err) == ("10.5.0.3: INVALID_ARGUMENT (ApplyConfiguration): the machine refused the request as invalid; "
                        "the machine said: unknown keys found during decoding: secretboxEncryptionSecret: <redacted> "
                        "clusterToken: <redacted>")
    assert err.code == "INVALID_ARGUMENT" and err.said.startswith("unknown keys found")


def test_a_long_message_is_cut_at_the_limit():
    assert errors.MESSAGE_LIMIT == 300
    err = errors.call_error("10.5.0.3", "FAILED_PRECONDITION", "no " * 200, call="Upgrade")
    assert str(err) == ("10.5.0.3: FAILED_PRECONDITION (Upgrade): the machine is not in a state that allows this call; "
                        "the machine said: " + ("no " * 100).strip() + " [cut]")


def test_without_a_message_the_logs_are_all_there_is():
    assert str(errors.call_error("10.5.0.3", "UNKNOWN")) == "10.5.0.3: UNKNOWN: the machine gave no reason; see its logs"
    assert str(errors.call_error("10.5.0.3", "INTERNAL", "boom")) == (
        "10.5.0.3: INTERNAL: the call failed on the machine; the machine said: boom")


@pytest.mark.parametrize("call,said", [
    ("EtcdMemberList", "member list is only available on control plane nodes"),
    ("EtcdStatus", "etcd status is only available on control plane nodes"),
    ("Kubeconfig", "kubeconfig is only available on control plane nodes"),
])
def test_a_control_plane_call_on_a_worker(call, said):
    assert str(errors.call_error("10.5.0.4", "UNIMPLEMENTED", said, call=call)) == (
        "10.5.0.4: UNIMPLEMENTED (%s): %s needs a control plane node and 10.5.0.4 is not one; address a control plane; "
        "the machine said: %s" % (call, call, said))


def test_bootstrap_on_a_worker():
    err = errors.call_error("10.5.0.4", "FAILED_PRECONDITION", "bootstrap can only be performed on a control plane node",
                            call="Bootstrap")
    assert str(err) == ("10.5.0.4: FAILED_PRECONDITION (Bootstrap): Bootstrap needs a control plane node and 10.5.0.4 is "
                        "not one; address a control plane; the machine said: bootstrap can only be performed on a "
                        "control plane node")


def test_a_refusal_in_maintenance_mode_is_not_about_a_role():
    assert str(errors.call_error("10.5.0.9", "PERMISSION_DENIED", "not authorized", call="Reboot", maintenance=True)) == (
        "10.5.0.9: PERMISSION_DENIED (Reboot): a machine in maintenance mode (no config yet) allows only some reads and "
        "applying a config, without a client certificate; apply a config first, then use the talosconfig; "
        "the machine said: not authorized")
    assert str(errors.call_error("10.5.0.9", "PERMISSION_DENIED", "node routing is not supported in maintenance mode",
                                 call="Version", maintenance=True)) == (
        "10.5.0.9: PERMISSION_DENIED (Version): a machine in maintenance mode answers only for itself; dial its own "
        "address; the machine said: node routing is not supported in maintenance mode")
    assert str(errors.call_error("10.5.0.9", "UNAUTHENTICATED", "no client certificate", call="Version",
                                 maintenance=True)) == (
        "10.5.0.9: UNAUTHENTICATED (Version): the machine asks for a client certificate, so it is not in maintenance "
        "mode (it has a config); connect with its cluster's talosconfig; the machine said: no client certificate")
    assert str(errors.tls_error("10.5.0.9", "TLSV13_ALERT_CERTIFICATE_REQUIRED", maintenance=True)) == (
        "10.5.0.9: TLS: the machine asks for a client certificate, so it is not in maintenance mode (it has a config); "
        "connect with its cluster's talosconfig")


def test_a_closed_connection_in_maintenance_mode():
    assert str(errors.closed("10.5.0.9", maintenance=True)) == (
        "10.5.0.9: the machine closed the connection; a machine that has a config does so when no client certificate "
        "is sent (maintenance mode sends none): if it is configured, connect with its cluster's talosconfig")
    assert str(errors.closed("10.5.0.9")) == (
        "10.5.0.9: the connection was closed during the call; check that the address is right and the machine is up "
        "(port 50000)")


def test_a_refusal_with_a_certificate_names_the_role():
    assert str(errors.call_error("10.5.0.3", "PERMISSION_DENIED", "not authorized", call="Get")) == (
        "10.5.0.3: PERMISSION_DENIED (Get): the talosconfig's certificate lacks the role this call needs (os:admin for "
        "writes); the machine said: not authorized")


def test_an_unconfigured_machine_says_so():
    assert str(errors.call_error("10.5.0.9", "UNIMPLEMENTED", "API is not implemented in maintenance mode",
                                 call="Version")) == (
        "10.5.0.9: UNIMPLEMENTED (Version): the machine is in maintenance mode (not configured yet); use maintenance "
        "mode or apply a config first; the machine said: API is not implemented in maintenance mode")


def test_a_nodes_error_in_a_reply_keeps_the_status_message():
    reply = machine_pb2.EtcdMemberListResponse(messages=[machine_pb2.EtcdMembers(metadata={
        "hostname": "10.5.0.4",
        "error": "rpc error: code = Unimplemented desc = member list is only available on control plane nodes",
        "status": {"code": 12, "message": "member list is only available on control plane nodes"}})])
    with pytest.raises(errors.TalosCallError) as exc:
        tc.TalosClient.first(reply, "10.5.0.4", call="EtcdMemberList")
    assert str(exc.value) == (
        "10.5.0.4: UNIMPLEMENTED (EtcdMemberList): EtcdMemberList needs a control plane node and 10.5.0.4 is not one; "
        "address a control plane; the machine said: member list is only available on control plane nodes")
    # only the Go text: its "rpc error: code = ... desc =" prefix goes
    reply.messages[0].metadata.status.message = ""
    with pytest.raises(errors.TalosCallError) as exc:
        tc.TalosClient.first(reply, "10.5.0.4")
    assert str(exc.value).endswith("the machine said: member list is only available on control plane nodes")


def test_the_secrets_of_a_config_we_sent_are_registered():
    token, key, auth = _token(), _b64_secret(), _b64_secret()
    config = yaml.safe_dump_all([
        {"version": "v1alpha1", "machine": {"type": "worker", "token": token, "ca": {"crt": "Y3J0", "key": ""},
                                            "registries": {"config": {"r.example": {"auth": {"auth": auth}}}}},
         "cluster": {"clusterName": "c1-production-east"}},
        {"apiVersion": "v1alpha1", "kind": "KubeServiceAccountConfig", "issuer": {"privateKey": key}},
    ]).encode()
    tc.register_config_secrets(config)
    tc.register_config_secrets(b"not: [yaml")
    text = "%s %s %s c1-production-east" % (token[:6] + "X" + token[7:], key, auth)
    assert redact.redact_text(text) == "%s <redacted> <redacted> c1-production-east" % (token[:6] + "X" + token[7:])


# -- Kubernetes -----------------------------------------------------------------------------------

def _kubeconfig(path, contexts=("admin@lab",), current="admin@lab", server="https://127.0.0.1:6443"):
    doc = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "lab", "cluster": {"server": server}}],
        "users": [{"name": "admin", "user": {"token": _token()}}],
        "contexts": [{"name": name, "context": {"cluster": "lab", "user": "admin"}} for name in contexts],
    }
    if current:
        doc["current-context"] = current
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _kube_error(**kwargs):
    with pytest.raises(kc.KubeError) as exc:
        kc.KubeClient(**kwargs)
    return str(exc.value)


def test_no_kubeconfig_given(monkeypatch, tmp_path):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert _kube_error() == ("no kubeconfig given: set the option kubeconfig (a path) or kubeconfig_content, or the "
                             "environment variable KUBECONFIG (~/.kube/config does not exist either)")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "gone"))
    assert _kube_error() == ("no kubeconfig: the options kubeconfig and kubeconfig_content are not set and the file "
                             "KUBECONFIG names (%s) does not exist" % (tmp_path / "gone"))


def test_a_kubeconfig_that_cannot_be_read(tmp_path):
    assert _kube_error(kubeconfig=str(tmp_path / "nope")) == (
        "the kubeconfig %s does not exist; check the option kubeconfig" % (tmp_path / "nope"))
    assert _kube_error(kubeconfig=str(tmp_path)) == (
        "the kubeconfig %s cannot be read (Is a directory); check its permissions and the option kubeconfig" % tmp_path)
    bad = tmp_path / "bad"
    bad.write_text("contexts: [unclosed\n")
    assert _kube_error(kubeconfig=str(bad)) == "the kubeconfig %s is not valid YAML; check the option kubeconfig" % bad
    assert _kube_error(kubeconfig_content="contexts: [unclosed\n") == "the option kubeconfig_content is not valid YAML"


def test_a_kubeconfig_without_the_context(tmp_path):
    path = _kubeconfig(tmp_path / "kc", contexts=("admin@lab", "admin@other"))
    assert _kube_error(kubeconfig=path, context="admin@prod") == (
        'the kubeconfig %s has no context "admin@prod"; it has: admin@lab, admin@other (option kube_context)' % path)
    path = _kubeconfig(tmp_path / "kc2", current=None)
    assert _kube_error(kubeconfig=path) == (
        "the kubeconfig %s sets no current-context; choose one with the option kube_context: admin@lab" % path)
    empty = tmp_path / "empty"
    empty.write_text("apiVersion: v1\nkind: Config\n")
    assert _kube_error(kubeconfig=str(empty)) == "the kubeconfig %s holds no contexts" % empty
    content = yaml.safe_load(open(path).read())
    content["contexts"][0]["context"]["cluster"] = "elsewhere"
    assert _kube_error(kubeconfig_content=yaml.safe_dump(content), context="admin@lab") == (
        'the kubeconfig given as kubeconfig_content: context "admin@lab" names cluster "elsewhere", which it does not define')


class _Exc(Exception):
    def __init__(self, status, reason, body=None):
        super(_Exc, self).__init__(status)
        self.status, self.reason, self.body = status, reason, body


def _source():
    source = kubeconfig.Source("kubeconfig /k/admin", context="sa@lab", user="system:serviceaccount:ns1:deployer")
    source.server = "https://10.5.0.10:6443"
    return source


def test_api_errors_name_the_user_and_what_was_refused():
    forbidden = ('{"kind":"Status","message":"configmaps \\"x\\" is forbidden: User \\"system:serviceaccount:ns1:deployer\\" '
                 'cannot get resource \\"configmaps\\" in API group \\"\\" in the namespace \\"ns1\\"","code":403}')
    assert str(kc.api_error(_Exc(403, "Forbidden", forbidden), "get ConfigMap ns1/x", _source())) == (
        'get ConfigMap ns1/x: 403 Forbidden: configmaps "x" is forbidden: User "system:serviceaccount:ns1:deployer" '
        'cannot get resource "configmaps" in API group "" in the namespace "ns1"; grant user '
        '"system:serviceaccount:ns1:deployer" this permission (RBAC) or use another kubeconfig')
    assert str(kc.api_error(_Exc(401, "Unauthorized", '{"message":"Unauthorized"}'), "discovery", _source())) == (
        'discovery: 401 Unauthorized: the API server at https://10.5.0.10:6443 did not accept the credentials of user '
        '"system:serviceaccount:ns1:deployer" (kubeconfig /k/admin, context "sa@lab"); the token or client certificate '
        "is expired, revoked or another cluster's")
    error = kc.api_error(_Exc(409, "Conflict", '{"message":"the object has been modified"}'), "update ConfigMap a/b")
    assert isinstance(error, kc.Conflict) and str(error) == "update ConfigMap a/b: 409 Conflict: the object has been modified"


@pytest.mark.parametrize("reason,text", [
    (urllib3.exceptions.NewConnectionError(None, "Failed to establish a new connection: [Errno 111] Connection refused"),
     "connection refused"),
    (urllib3.exceptions.SSLError("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"),
     "its TLS certificate is not signed by the kubeconfig's certificate-authority"),
    (urllib3.exceptions.ConnectTimeoutError(None, "timed out"), "no answer in time"),
])
def test_an_unreachable_server(reason, text):
    exc = urllib3.exceptions.MaxRetryError(None, "/version", reason)
    assert kc._connection_reason(exc) == text  # pylint: disable=protected-access


def test_a_server_url_loses_its_userinfo():
    assert kubeconfig.without_userinfo("https://u:p@10.0.0.1:6443/x") == "https://10.0.0.1:6443/x"
    assert kubeconfig.without_userinfo("https://10.0.0.1:6443") == "https://10.0.0.1:6443"


def test_the_kubeconfig_users_credentials_are_registered(tmp_path):
    token = "plain-" + pysecrets.token_hex(8)  # nothing a heuristic would catch
    path = _kubeconfig(tmp_path / "kc")
    doc = yaml.safe_load(open(path).read())
    doc["users"][0]["user"]["token"] = token
    (tmp_path / "kc").write_text(yaml.safe_dump(doc))
    kube = kc.KubeClient(kubeconfig=path)  # no request is made
    assert kube.source.user == "admin" and kube.source.server == "https://127.0.0.1:6443"
    assert redact.redact_text("bearer %s" % token) == "bearer <redacted>"
