"""Fuzz what the client makes of a machine's replies (issue 12): a machine that answers with mutated protobuf
(undecodable bytes, strings that are not UTF-8, messages missing or repeated), COSI resources of unexpected
shapes, metadata errors and gRPC statuses with codes no one knows, and a Kubeconfig archive that is not one.
Every read (talos_facts' facts, a resource, the machine config, a dry-run apply, the kubeconfig) succeeds or
fails with one TalosError line without key material. The machine is a gRPC server of another stack (grpclib on
h2) on loopback TLS, so the replies go through the client's real call path, HTTP/2 included. Budget and the
maintainer's command: tests/unit/conftest.py.

Target: ``machine-replies`` (talos.client's replies and resource_dict, talos.machine's facts, config and apply,
talos.kubeconfig's archive, config.talos_side through the facts). Reclaim's reads of the same server:
tests/unit/test_fuzz_reclaim.py."""

import base64
import io
import json
import logging
import tarfile

import grpclib
import pytest
import yaml
from grpclib.const import Cardinality, Handler
from grpclib.server import Server

from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as talos_client
from ansible_collections.maesh.ichor.plugins.module_utils.talos import kubeconfig as talos_kubeconfig
from ansible_collections.maesh.ichor.plugins.module_utils.machine import facts as machine_facts
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, machine
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res
from ansible_collections.maesh.ichor.plugins.module_utils.talos.proto import (
    common_pb2, cosi_resource_pb2, cosi_state_pb2, machine_pb2, spec_config_pb2)
from tests.lab import pki
from tests.unit.conftest import mutate_bytes, mutate_tree
from tests.unit.loop_thread import LoopThread

KEY_BODY = "MC4CAQAwBQYDK2VwBCIEIICHORfuzzREPLYkeyMATERIAL0vGq7sW2xY9zQ4uT1pLk8"
KEY_PEM = "-----BEGIN ED25519 PRIVATE KEY-----\n%s\n-----END ED25519 PRIVATE KEY-----\n" % KEY_BODY
KEY_B64 = base64.b64encode(KEY_PEM.encode()).decode()
SECRETS = [KEY_BODY, KEY_B64[48:]]
CONFIG = ("version: v1alpha1\nmachine:\n  type: controlplane\n  token: abcdef.0123456789abcdef\n  ca:\n    crt: Q0E=\n"
          "    key: %s\ncluster:\n  clusterName: prod\n" % KEY_B64)


class Raw:
    """A reply as bytes on the wire, whatever they are."""

    def __init__(self, data=b""):
        self.data = data

    def SerializeToString(self):  # noqa: N802 - protobuf's name
        return self.data

    @classmethod
    def FromString(cls, data):  # noqa: N802 - protobuf's name
        return cls(data)


class Code:
    """A gRPC status code as a number (grpclib.Status knows only the standard ones)."""

    def __init__(self, value):
        self.value = value


def _resource(ref, spec, rid=None):
    meta = cosi_resource_pb2.Metadata(namespace=ref.namespace, type=ref.type, id=rid or ref.singleton or "r1",
                                      version="3", phase="running")
    return cosi_resource_pb2.Resource(metadata=meta, spec=cosi_resource_pb2.Spec(yaml_spec=yaml.safe_dump(spec)))


SPECS = {
    res.SYSTEM_INFORMATION.type: {"uuid": "5d3f-uuid", "manufacturer": "x"},
    res.HOSTNAME_STATUS.type: {"hostname": "cp-1", "domainname": ""},
    res.MACHINE_STATUS.type: {"stage": "running", "status": {"ready": True, "unmetConditions": []}},
    res.IDENTITY.type: {"nodeId": "n1"},
    res.CLUSTER_INFO.type: {"clusterId": "c1", "clusterName": "prod"},
    res.MACHINE_TYPE.type: "controlplane",  # the bare type, as Talos's YAML form of MachineTypeSpec
}
REFS = [res.SYSTEM_INFORMATION, res.HOSTNAME_STATUS, res.MACHINE_STATUS, res.IDENTITY, res.CLUSTER_INFO,
        res.MACHINE_TYPE]
MEMBERS = [{"hostname": "cp-1", "addresses": ["10.0.0.11"], "machineType": "controlplane", "operatingSystem": "Talos"},
           {"hostname": "w-1", "addresses": ["10.0.0.21", "fd00::21"], "machineType": "worker"}]


def _kubeconfig_archive():
    data = b"apiVersion: v1\nkind: Config\nusers: [{name: admin, user: {client-key-data: %s}}]\n" % KEY_B64.encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        info = tarfile.TarInfo("kubeconfig")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


def valid_replies():
    """key -> (list of serialized messages, status or None); keys are call names, Get/List add the resource type."""
    replies = {}
    for ref in REFS:
        replies["Get " + ref.type] = [cosi_state_pb2.GetResponse(resource=_resource(ref, SPECS[ref.type]))]
    config = spec_config_pb2.MachineConfigSpec(yaml_marshalled=CONFIG.encode())
    replies["Get " + res.MACHINE_CONFIG.type] = [cosi_state_pb2.GetResponse(resource=cosi_resource_pb2.Resource(
        metadata=cosi_resource_pb2.Metadata(namespace="config", type=res.MACHINE_CONFIG.type, id="v1alpha1", version="9"),
        spec=cosi_resource_pb2.Spec(proto_spec=config.SerializeToString())))]
    replies["List " + res.MEMBERS.type] = [cosi_state_pb2.ListResponse(resource=_resource(res.MEMBERS, m, "n%d" % i))
                                           for i, m in enumerate(MEMBERS, 1)]
    replies["Version"] = [machine_pb2.VersionResponse(messages=[machine_pb2.Version(
        metadata=common_pb2.Metadata(hostname="cp-1"), version=machine_pb2.VersionInfo(tag="v1.14.5", arch="amd64"),
        platform=machine_pb2.PlatformInfo(name="metal"))])]
    replies["ApplyConfiguration"] = [machine_pb2.ApplyConfigurationResponse(messages=[machine_pb2.ApplyConfiguration(
        metadata=common_pb2.Metadata(hostname="cp-1"), mode=machine_pb2.ApplyConfigurationRequest.REBOOT)])]
    replies["FileList"] = [machine_pb2.FileInfo(name="/etc/cni/net.d", relative_name=".", is_dir=True, mode=(1 << 31) | 0o755),
                           machine_pb2.FileInfo(name="/etc/cni/net.d/10-flannel.conflist", relative_name="10-flannel.conflist",
                                                size=120, mode=0o644)]
    archive = _kubeconfig_archive()
    replies["Kubeconfig"] = [common_pb2.Data(bytes=archive[i:i + 512]) for i in range(0, len(archive), 512)]
    return dict((key, ([m.SerializeToString() for m in messages], None)) for key, messages in replies.items())


STREAMS = [call for call, spec in talos_client._CALLS.items() if spec[3] == talos_client.STREAM]


VALID = valid_replies()


class Machine:
    """Answers each call the client makes with the replies of the case."""

    def __init__(self):
        self.replies = valid_replies()

    def __mapping__(self):  # noqa: N802 - grpclib's name
        handlers = {}
        for call, (path, request_ref, _reply, cardinality) in talos_client._CALLS.items():
            kind = Cardinality.UNARY_UNARY if cardinality == talos_client.UNARY else Cardinality.UNARY_STREAM
            handlers[path] = Handler(self._handler(call), kind, talos_client._type(request_ref), Raw)
        return handlers

    def _handler(self, call):
        async def handle(stream):
            request = await stream.recv_message()
            key = "%s %s" % (call, request.type) if call in ("Get", "List") else call
            messages, status = self.replies.get(key, ([], (grpclib.Status.NOT_FOUND, "no such resource")))
            if call not in STREAMS:
                messages = messages[:1]  # a unary reply is one message (grpclib refuses to send a second)
            for data in messages:
                await stream.send_message(Raw(data))
            if status is not None:
                await stream.send_trailing_metadata(status=status[0], status_message=status[1])
            elif not messages and call not in STREAMS:
                await stream.send_trailing_metadata(status=grpclib.Status.UNKNOWN, status_message="")
        return handle


# -- mutations of one reply ---------------------------------------------------------------------------------------

STATUS_MESSAGES = ["", "x", "rpc error: code = Unknown desc = boom", "\x00\x1b[31m\u2028", "a" * 100000,
                   "config refused: key: " + KEY_B64, "bad:\n" + KEY_PEM]


def _status(rng):
    code = rng.choice([Code(rng.choice([17, 99, 1000, 2 ** 31 - 1, -1])), rng.choice(list(grpclib.Status)[1:])])
    return code, rng.choice(STATUS_MESSAGES)


def _resource_reply(data, rng, streamed):
    """A Get/List reply whose resource has a mutated spec, metadata or proto_spec."""
    cls = cosi_state_pb2.ListResponse if streamed else cosi_state_pb2.GetResponse
    message = cls.FromString(data)
    resource = message.resource
    op = rng.random()
    if op < 0.5 and resource.spec.yaml_spec:
        spec = mutate_tree(yaml.safe_load(resource.spec.yaml_spec), rng)
        try:
            resource.spec.yaml_spec = yaml.safe_dump(spec, allow_unicode=True) if rng.random() < 0.8 else str(spec)
        except (yaml.YAMLError, RecursionError, TypeError, ValueError):
            resource.spec.yaml_spec = mutate_bytes(resource.spec.yaml_spec.encode(), rng).decode("utf-8", "replace")
    elif op < 0.65:
        resource.spec.yaml_spec = mutate_bytes(resource.spec.yaml_spec.encode(), rng).decode("utf-8", "replace")
    elif op < 0.8:
        config = spec_config_pb2.MachineConfigSpec(yaml_marshalled=mutate_bytes(CONFIG.encode(), rng))
        resource.spec.proto_spec = config.SerializeToString() if rng.random() < 0.5 else mutate_bytes(
            config.SerializeToString(), rng)
    elif op < 0.9:
        setattr(resource.metadata, rng.choice(["id", "type", "version", "phase"]), rng.choice(["", "x" * 100000, "\u2028"]))
    else:
        message.ClearField("resource")
    return message.SerializeToString()


def _metadata_error(data, rng, cls):
    message = cls.FromString(data)
    item = message.messages[0] if message.messages else message.messages.add()
    item.metadata.error = rng.choice(STATUS_MESSAGES)
    item.metadata.status.code = rng.choice([0, 5, 14, 17, 99, 2 ** 31 - 1, -1])
    item.metadata.status.message = rng.choice(STATUS_MESSAGES)
    if rng.random() < 0.3:
        item.metadata.hostname = rng.choice(["", "h" * 5000, KEY_B64])
    return message.SerializeToString()


def mutate(replies, rng):
    key = rng.choice(sorted(replies))
    messages, status = replies[key]
    messages = list(messages)
    if status is not None or not messages or any(m not in VALID[key][0] for m in messages):
        messages, status = list(VALID[key][0]), None  # mutate a valid reply again
    op = rng.random()
    if op < 0.2:
        status = _status(rng)
        messages = messages if rng.random() < 0.3 else []
    elif op < 0.45 and messages:
        index = rng.randrange(len(messages))
        messages[index] = mutate_bytes(messages[index], rng)
    elif op < 0.7 and key.startswith(("Get", "List")) and messages:
        index = rng.randrange(len(messages))
        messages[index] = _resource_reply(messages[index], rng, key.startswith("List"))
    elif op < 0.8 and key in ("Version", "ApplyConfiguration"):
        cls = machine_pb2.VersionResponse if key == "Version" else machine_pb2.ApplyConfigurationResponse
        messages = [_metadata_error(messages[0], rng, cls)]
    elif op < 0.9:  # messages missing, repeated or extra
        messages = rng.choice([[], messages * 2, messages + [rng.choice([b"", b"\xff" * 10, b"\x0a\x02\xc3\x28"])]])
    elif key == "Kubeconfig":
        archive = mutate_bytes(_kubeconfig_archive(), rng)
        messages = [common_pb2.Data(bytes=archive).SerializeToString()]
    else:
        messages = [rng.choice([b"\x0a" + b"\xff" * 9, b"\x08" + b"\xff" * 20, b"\x0a\x7f"])]  # undecodable
    replies[key] = (messages, status)
    return replies


# -- the reads ---------------------------------------------------------------------------------------------------

def _facts(client):
    result = machine_facts.facts_result(client, node=None)
    facts = result["ansible_facts"]["talos"]
    for field in ("version", "uuid", "hostname", "role", "stage", "node_id"):
        assert isinstance(facts[field], str), field
    assert isinstance(facts["ready"], bool)
    assert all(isinstance(v, str) for v in facts["cluster"].values())
    for member in facts["members"]:
        assert all(isinstance(member[k], str) for k in ("id", "hostname", "machine_type"))
        assert all(isinstance(a, str) for a in member["addresses"])
    assert all(isinstance(name, str) for name in facts["cni_configs"])
    assert facts["config"] is None or json.loads(json.dumps(facts["config"])) == facts["config"]  # plain data
    assert isinstance(facts["config_unread"], str)
    return result


def _machine_config(client):
    item = client.run(machine.get_resource(client, res.MACHINE_CONFIG))
    assert item is None or isinstance(item["spec"], str)
    return item


def _kubeconfig(client):
    return talos_kubeconfig.kubeconfig_bytes(client.call("Kubeconfig"))


READS = (_facts, _machine_config, lambda client: machine.apply_needs_reboot(client, None, "version: v1alpha1\n"),
         _kubeconfig)


@pytest.fixture(scope="module")
def machine_server():
    """(the Machine, its address): one server on loopback for the module's tests, on a loop of its own thread."""
    logging.getLogger("grpclib.server").setLevel(logging.CRITICAL)  # the machine's own protocol errors are the point
    server_machine = Machine()
    context = pki.server_ssl_context(pki.maintenance_certificate(["127.0.0.1"]))

    async def started():
        server = Server([server_machine])  # grpclib binds it to the loop running here
        await server.start("127.0.0.1", 0, ssl=context)
        return server

    running = LoopThread(started)
    port = running.server._server.sockets[0].getsockname()[1]  # pylint: disable=protected-access
    yield server_machine, "127.0.0.1:%d" % port
    running.stop()


@pytest.fixture
def talos(machine_server):
    server_machine, address = machine_server
    client = talos_client.TalosClient(endpoint=address, maintenance=True, timeout=5.0)

    def connect(replies):
        server_machine.replies = replies
        return client

    yield connect
    client.close()


def test_valid_replies_read(talos):
    client = talos(valid_replies())
    facts = _facts(client)["ansible_facts"]["talos"]
    assert facts["cni_configs"] == ["10-flannel.conflist"]
    assert facts["config"]["cni"]["name"] == "flannel" and facts["config_unread"] == ""
    assert facts["hostname"] == "cp-1" and facts["role"] == "controlplane" and facts["ready"] is True
    assert [m["machine_type"] for m in facts["members"]] == ["controlplane", "worker"]
    assert _machine_config(client)["spec"] == CONFIG
    assert machine.apply_needs_reboot(client, None, "version: v1alpha1\n") is True
    assert b"client-key-data" in _kubeconfig(client)


def test_fuzz_machine_replies(fuzz, fresh_redaction, talos):
    run = fuzz("machine-replies")
    for index, rng in run.cases():
        fresh_redaction()
        replies = valid_replies()
        for _round in range(rng.randint(1, 3)):
            replies = mutate(replies, rng)
        client = talos(replies)
        read = rng.choice(READS)
        run.check(lambda: read(client), index, (getattr(read, "__name__", "apply"), replies), SECRETS)


def _with(key, messages=None, status=None):
    replies = valid_replies()
    replies[key] = (messages if messages is not None else replies[key][0], status)
    return replies


def _get(ref, yaml_spec=None, proto_spec=None, rtype=None):
    spec = cosi_resource_pb2.Spec(yaml_spec=yaml_spec or "", proto_spec=proto_spec or b"")
    meta = cosi_resource_pb2.Metadata(namespace=ref.namespace, type=rtype or ref.type, id=ref.singleton or "r1")
    return [cosi_state_pb2.GetResponse(resource=cosi_resource_pb2.Resource(metadata=meta, spec=spec)).SerializeToString()]


def _version_error(code, hostname="cp-1"):
    return [machine_pb2.VersionResponse(messages=[machine_pb2.Version(metadata=common_pb2.Metadata(
        hostname=hostname, error="boom", status={"code": code, "message": "boom"}))]).SerializeToString()]


def _archive(build):
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        build(archive)
    return [common_pb2.Data(bytes=out.getvalue()).SerializeToString()]


def _directory_named_kubeconfig(archive):
    info = tarfile.TarInfo("kubeconfig")
    info.type = tarfile.DIRTYPE
    archive.addfile(info)


MACHINE_CONFIG = "Get " + res.MACHINE_CONFIG.type
# Found with --fuzz-seed 12 (the old client raised DecodeError, ValueError, UnicodeDecodeError, YAML errors,
# RecursionError, AttributeError or tarfile errors, or returned facts that were not text): cases 1, 17, 21 and 145
# (undecodable replies), 117, 134, 236 and 444 (a status code gRPC does not define), 501 and 1320 (a machine config
# that is no MachineConfigSpec, or not UTF-8), 749, 1286, 1304 and 1405 (a spec that is not YAML or too deep), 420,
# 499, 979 and 1152 (a Kubeconfig reply that is no archive), 512 (a hostname of 5000 characters quoted), 533
# (members' spec a text); the others are their kin.
FOUND = [
    (_with("List " + res.MEMBERS.type, [b"\x0a\xff"]), _facts, "its reply to List cannot be decoded"),
    (_with("Version", [b"\x0a\x7f"]), _facts, "its reply to Version cannot be decoded"),
    (_with("Kubeconfig", [b"\x0a\xff\xff"]), _kubeconfig, "its reply to Kubeconfig cannot be decoded"),
    (_with("Version", _version_error(99)), _facts, "cp-1: UNKNOWN"),
    (_with("Version", _version_error(-1)), _facts, "cp-1: UNKNOWN"),
    (_with("Version", _version_error(2 ** 31 - 1)), _facts, "cp-1: UNKNOWN"),
    (_with("Version", _version_error(14, "h" * 5000)), _facts, "node: UNAVAILABLE"),
    (_with(MACHINE_CONFIG, _get(res.MACHINE_CONFIG, proto_spec=b"\x0a\xff")), _machine_config, "cannot be decoded"),
    (_with(MACHINE_CONFIG, _get(res.MACHINE_CONFIG, proto_spec=spec_config_pb2.MachineConfigSpec(
        yaml_marshalled=b"version: \xff").SerializeToString())), _machine_config, "is not UTF-8 text (byte 10)"),
    (_with("Get " + res.HOSTNAME_STATUS.type, _get(res.HOSTNAME_STATUS, "a: b: c")), _facts, "is not YAML"),
    (_with("Get " + res.HOSTNAME_STATUS.type, _get(res.HOSTNAME_STATUS, "a: \x1f")), _facts, "is not YAML"),
    (_with("Get " + res.HOSTNAME_STATUS.type, _get(res.HOSTNAME_STATUS, "[" * 5000)), _facts, "is not YAML"),
    (_with("Get " + res.HOSTNAME_STATUS.type, _get(res.HOSTNAME_STATUS, "a: !!int ''")), _facts, "is not YAML"),
    (_with("Kubeconfig", []), _kubeconfig, "the Kubeconfig reply is not a gzipped tar archive"),
    (_with("Kubeconfig", [common_pb2.Data(bytes=_kubeconfig_archive()[:100]).SerializeToString()]), _kubeconfig,
     "the Kubeconfig reply is not a gzipped tar archive"),
    (_with("Kubeconfig", _archive(_directory_named_kubeconfig)), _kubeconfig, "the Kubeconfig reply holds no kubeconfig"),
]


@pytest.mark.parametrize("replies, read, expected", FOUND, ids=["found-%d" % i for i in range(len(FOUND))])
def test_found_by_fuzzing(replies, read, expected, talos):
    client = talos(replies)
    with pytest.raises(errors.TalosError) as exc:
        read(client)
    assert expected in exc.value.message
    assert len(exc.value.message) < 500


@pytest.mark.parametrize("key, messages", [
    ("List " + res.MEMBERS.type, [cosi_state_pb2.ListResponse(resource=_resource(res.MEMBERS, "cp-1")).SerializeToString()]),
    ("List " + res.MEMBERS.type, [cosi_state_pb2.ListResponse(resource=_resource(res.MEMBERS, {
        "hostname": ["cp-1"], "addresses": "10.0.0.1", "machineType": 3})).SerializeToString()]),
    ("Get " + res.HOSTNAME_STATUS.type, _get(res.HOSTNAME_STATUS, "hostname: {a: 1}\n")),
    ("Get " + res.MACHINE_STATUS.type, _get(res.MACHINE_STATUS, "stage: [1]\nstatus: ready\n")),
    ("Get " + res.CLUSTER_INFO.type, _get(res.CLUSTER_INFO, "clusterName: 5\n")),
], ids=["members-text", "member-types", "hostname-mapping", "status-text", "cluster-name-number"])
def test_facts_of_unexpected_shapes_are_text(key, messages, talos):
    """Found with --fuzz-seed 12, cases 20, 64, 203, 533, 863 and 1388: a spec of another shape gave a traceback or
    facts that were not text (talos_facts returns them to playbooks)."""
    _facts(talos(_with(key, messages)))


def test_ready_is_true_only_when_the_machine_says_true(talos):
    replies = _with("Get " + res.MACHINE_STATUS.type, _get(res.MACHINE_STATUS, "status: {ready: 'false'}\n"))
    assert _facts(talos(replies))["ansible_facts"]["talos"]["ready"] is False


def test_machine_config_is_read_as_asked_whatever_type_the_reply_names(talos):
    """Found with --fuzz-seed 12, case 931: a reply naming another type made the config's spec None."""
    client = talos(_with(MACHINE_CONFIG, _get(res.MACHINE_CONFIG, proto_spec=spec_config_pb2.MachineConfigSpec(
        yaml_marshalled=CONFIG.encode()).SerializeToString(), rtype="Other.talos.dev")))
    assert _machine_config(client)["spec"] == CONFIG
