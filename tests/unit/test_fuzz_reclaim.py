"""Fuzz what a reclaim reads from outside (issue 26): the foreign talosconfig (reclaim.inspection.load_foreign,
from content and from a file) and the machine's replies its inspection reads (reclaim.inspection:
inspect_configured's disks, volumes, system disk, etcd members and status, and the facts; maintenance_identity;
live.LiveIO.managed's SystemInformation of the managed cluster's members), each followed by what the flow does
with them (refusals, plan, audit, diff in check mode). Every case succeeds or fails with one IchorError line
without key material. The machine is the grpclib server of tests/unit/test_fuzz_machine_replies.py on loopback
TLS; nothing else is dialled (the probes of control planes are a fake). Budget and the maintainer's command:
tests/unit/conftest.py.

Targets: ``foreign-talosconfig`` (load_foreign), ``reclaim-inspection`` (inspect_configured, maintenance_identity,
LiveIO.managed)."""

import base64
import json

import grpclib
import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim import flow, inspection, live
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim.errors import ReclaimError
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, machine, talosconfig
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res
from ansible_collections.maesh.ichor.plugins.module_utils.talos.proto import (
    cosi_resource_pb2, cosi_state_pb2, machine_pb2)
from tests.unit.conftest import mutate_bytes, mutate_tree
# machine_server and talos are the machine server's pytest fixtures, used by name
from tests.unit.test_fuzz_machine_replies import (  # noqa: F401 pylint: disable=unused-import
    SECRETS as REPLY_SECRETS, _resource, _resource_reply, _status, machine_server, talos, valid_replies)

NODE = "10.0.0.7"

# -- the foreign talosconfig -------------------------------------------------------------------------------------

KEY_BODY = "MC4CAQAwBQYDK2VwBCIEIICHORfuzzFOREIGNkeyMATERIAL0vGq7sW2xY9zQ4uT1pLk"
KEY_VALUE = base64.b64encode(("-----BEGIN ED25519 PRIVATE KEY-----\n%s\n-----END ED25519 PRIVATE KEY-----\n"
                              % KEY_BODY).encode()).decode()
CA_VALUE = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nQ0EtY2VydA==\n-----END CERTIFICATE-----\n").decode()
TALOSCONFIG_SECRETS = [KEY_BODY, KEY_VALUE[48:]]


def valid_talosconfig():
    return {"context": "foreign",
            "contexts": {"foreign": {"endpoints": ["10.9.0.1"], "nodes": ["10.9.0.7"], "ca": CA_VALUE,
                                     "crt": CA_VALUE, "key": KEY_VALUE},
                         "other": {"endpoints": ["10.8.0.1"], "ca": CA_VALUE}}}


def _talosconfig_text(tree):
    try:
        return yaml.safe_dump(tree, allow_unicode=True).encode("utf-8", "surrogateescape")
    except (yaml.YAMLError, RecursionError, TypeError, UnicodeError):
        return json.dumps(tree, default=str).encode()


def _foreign(given, context, tmp_path, as_file):
    if as_file:
        path = tmp_path / "foreign"
        path.write_bytes(given if isinstance(given, bytes) else given.encode("utf-8", "surrogateescape"))
        ctx = inspection.load_foreign(path=str(path), context=context)
    else:
        ctx = inspection.load_foreign(content=given, context=context)
    assert isinstance(ctx, talosconfig.Context)
    return ctx


def _foreign_case(rng):
    op = rng.random()
    tree = valid_talosconfig()
    if rng.random() < 0.5:  # one context: the file's own is used without naming it
        del tree["contexts"]["other"]
    base = _talosconfig_text(tree)
    if op < 0.4:
        given = _talosconfig_text(mutate_tree(tree, rng))
    elif op < 0.85:
        given = mutate_bytes(base, rng)
    elif op < 0.93:  # a nested document, below and above what libyaml refuses itself
        depth = rng.choice([40, 200, 900, 5000])
        given = base + b"x: " + b"[" * depth + b"]" * depth + b"\n"
    else:  # past the size limit
        given = base + rng.choice([b"#", b"- x\n", b"a: [1, 2]\n"]) * (talosconfig.MAX_SIZE // 3)
    if rng.random() < 0.3 and isinstance(given, bytes):
        given = given.decode("utf-8", "surrogateescape")  # what a module option can carry
    return given


def test_fuzz_foreign_talosconfig(fuzz, fresh_redaction, tmp_path):
    run = fuzz("foreign-talosconfig")
    contexts = [None, None, "foreign", "other", "nope"]
    for index, rng in run.cases():
        fresh_redaction()
        given, context, as_file = _foreign_case(rng), rng.choice(contexts), rng.random() < 0.5
        run.check(lambda: _foreign(given, context, tmp_path, as_file), index,
                  (given if len(given) < 5000 else given[:5000], context, as_file), TALOSCONFIG_SECRETS)


# Found with --fuzz-seed 12 against the old load_foreign (it read the file as text and gave it to PyYAML's pure loader
# before the guarded one): 42 distinct failures in 300 cases, a file that is not UTF-8 (UnicodeDecodeError, cases 246,
# 249, 262...), a deep document (RecursionError, case 298), a file past the 4 MiB limit read and parsed whole (case 290:
# 162 s); and by hand, a tag that cannot be built (IndexError, AttributeError) and the contexts' names quoted whole.
FOREIGN_FOUND = [
    (b"contexts: {a: {endpoints: [x]}}\n# \xff\n", "is not UTF-8 text (byte 35)"),
    (b"contexts: {a: {}, b: {}}\nx: " + b"[" * 100000 + b"]" * 100000, "is not valid YAML"),
    (b"contexts: {a: {}, b: {}}\nx:\n" + b"".join(b"  " * i + b"- \n" for i in range(1200)), "is not valid YAML"),
    (b"contexts: {a: {}, b: {}}\nx: " + b"[" * 300 + b"]" * 300 + b"\n", "nests deeper than"),
    (b"contexts: {a: {}, b: {}}\nx: !!int ''\n", "is not valid YAML"),
    (b"contexts: {a: {}, b: {}}\nx: !!timestamp x\n", "is not valid YAML"),
    (b"contexts: {a: {endpoints: [x]}}\n" + b"#" * (talosconfig.MAX_SIZE + 1), "is larger than 4194304 bytes"),
    (("contexts: {%s: {}, b: {}}\n" % KEY_VALUE).encode(), "holds several contexts ((a name of 188 characters), b)"),
]


@pytest.mark.parametrize("given, expected", FOREIGN_FOUND, ids=["found-%d" % i for i in range(len(FOREIGN_FOUND))])
@pytest.mark.parametrize("as_file", [False, True], ids=["content", "file"])
def test_foreign_talosconfig_found_by_fuzzing(given, expected, as_file, tmp_path, fresh_redaction):
    fresh_redaction()
    with pytest.raises(ReclaimError) as exc:
        _foreign(given, None, tmp_path, as_file)
    assert expected in exc.value.message and exc.value.message.endswith("; nothing was sent")
    assert "\n" not in exc.value.message and len(exc.value.message) < 500
    assert KEY_BODY not in exc.value.message and KEY_VALUE[48:72] not in exc.value.message


def test_a_huge_foreign_file_is_refused_before_it_is_read_whole(tmp_path):
    """The limit is checked on the bytes read (at most MAX_SIZE + 1 of them), before any decoding or parsing."""
    import time
    path = tmp_path / "foreign"
    path.write_bytes(b"contexts: {a: {endpoints: [x]}}\nx: [" + b"1, " * (4 * talosconfig.MAX_SIZE // 3) + b"]\n")
    began = time.monotonic()
    with pytest.raises(ReclaimError, match="is larger than"):
        inspection.load_foreign(path=str(path))
    assert time.monotonic() - began < 2.0


# -- the machine's replies ---------------------------------------------------------------------------------------

UUID = "4c4c4544-0042-3010-8050-b4c04f4e3332"
SPECS = {
    res.DISKS.type: [{"dev_path": "/dev/sda", "size": 12884901888, "pretty_size": "13 GB", "model": "QEMU",
                      "serial": "s1"}, {"dev_path": "/dev/sdb", "size": 1024, "model": "", "serial": ""}],
    res.VOLUME_STATUSES.type: [{"type": "partition", "location": "/dev/sda6", "parentLocation": "/dev/sda"},
                               {"type": "partition", "location": "/dev/sdb1", "parentLocation": "/dev/sdb",
                                "encryptionProvider": "luks2", "prettySize": "1 GB",
                                "mountSpec": {"targetPath": "/var/mnt/data"}}],
}
VOLUME_IDS = ["EPHEMERAL", "u-data"]


def _list(ref, specs, ids):
    return [cosi_state_pb2.ListResponse(resource=_resource(ref, spec, rid)).SerializeToString()
            for spec, rid in zip(specs, ids)]


def _etcd_members():
    members = [machine_pb2.EtcdMember(id=0x10 + i, hostname="cp-%d" % i, peer_urls=["https://10.0.0.%d:2380" % i],
                                      client_urls=["https://10.0.0.%d:2379" % i]) for i in (1, 2, 3)]
    return machine_pb2.EtcdMemberListResponse(messages=[machine_pb2.EtcdMembers(members=members)])


def _etcd_status():
    return machine_pb2.EtcdStatusResponse(messages=[machine_pb2.EtcdStatus(
        member_status=machine_pb2.EtcdMemberStatus(member_id=0x11, errors=[]))])


def inspection_replies():
    """The machine-replies server's valid replies plus what the inspection reads."""
    replies = valid_replies()
    replies["Get " + res.SYSTEM_INFORMATION.type] = ([cosi_state_pb2.GetResponse(resource=_resource(
        res.SYSTEM_INFORMATION, {"uuid": UUID})).SerializeToString()], None)
    replies["List " + res.DISKS.type] = (_list(res.DISKS, SPECS[res.DISKS.type], ["sda", "sdb"]), None)
    replies["List " + res.VOLUME_STATUSES.type] = (_list(res.VOLUME_STATUSES, SPECS[res.VOLUME_STATUSES.type],
                                                         VOLUME_IDS), None)
    replies["Get " + res.SYSTEM_DISK.type] = ([cosi_state_pb2.GetResponse(resource=_resource(
        res.SYSTEM_DISK, {"devPath": "/dev/sda"})).SerializeToString()], None)
    replies["EtcdMemberList"] = ([_etcd_members().SerializeToString()], None)
    replies["EtcdStatus"] = ([_etcd_status().SerializeToString()], None)
    return replies


VALID = inspection_replies()
WEIRD = ["", "x" * 5000, "\u2028\x1b[31m", "https://", "https://[fd00::1", "https://10.0.0.9:99999", "a:b:c",
         "https://10.0.0.9:2380/path", KEY_VALUE]


def _etcd_reply(data, rng, members):
    if members:
        message = machine_pb2.EtcdMemberListResponse.FromString(data)
        items = message.messages[0].members
        op = rng.random()
        if op < 0.3 and items:
            member = items[rng.randrange(len(items))]
            field = rng.choice(["hostname", "peer_urls", "client_urls"])
            if field == "hostname":
                member.hostname = rng.choice(WEIRD)
            else:
                getattr(member, field)[:] = rng.sample(WEIRD, rng.randint(0, 3))
        elif op < 0.5 and items:
            items[rng.randrange(len(items))].id = rng.choice([0, 0x11, 2 ** 64 - 1])
        elif op < 0.7:
            for i in range(rng.choice([0, 1, 12, 200])):
                items.add(id=1000 + i, hostname="m%d" % i, peer_urls=["https://10.1.%d.%d:2380" % (i // 250, i % 250)])
        else:
            del items[:]
        return message.SerializeToString()
    message = machine_pb2.EtcdStatusResponse.FromString(data)
    status = message.messages[0].member_status
    if rng.random() < 0.5:
        status.errors[:] = rng.sample(WEIRD, rng.randint(1, 3))
    else:
        status.member_id = rng.choice([0, 0x10, 0x12, 2 ** 64 - 1])
    return message.SerializeToString()


def mutate(replies, rng):
    key = rng.choice(sorted(replies))
    messages, status = replies[key]
    if status is not None or not messages or any(m not in VALID[key][0] for m in messages):
        messages, status = list(VALID[key][0]), None
    messages = list(messages)
    op = rng.random()
    if op < 0.15:
        status = _status(rng) if rng.random() < 0.7 else (grpclib.Status.UNIMPLEMENTED, "unknown method")
        messages = messages if rng.random() < 0.3 else []
    elif op < 0.3 and messages:
        index = rng.randrange(len(messages))
        messages[index] = mutate_bytes(messages[index], rng)
    elif op < 0.75 and key.startswith(("Get", "List")) and messages:
        index = rng.randrange(len(messages))
        messages[index] = _resource_reply(messages[index], rng, key.startswith("List"))
    elif op < 0.85 and key in ("EtcdMemberList", "EtcdStatus"):
        messages = [_etcd_reply(messages[0], rng, key == "EtcdMemberList")]
    elif op < 0.9 and key.startswith("List") and messages:
        messages = messages * rng.choice([2, 20])  # the same resources again
    else:
        messages = rng.choice([[], messages * 2, messages + [rng.choice([b"", b"\xff" * 10, b"\x0a\x02\xc3\x28"])]])
    replies[key] = (messages, status)
    return replies


def _probe(host, port):
    """No dial: an answer decided by the address, so that a case is the same on every run."""
    return len(str(host)) % 2 == 0 and int(port) > 0


class _Kube:
    def get(self, api_version, kind, name, namespace=None):
        return {"metadata": {"resourceVersion": "1"}, "data": {cluster_record.KEY: json.dumps(
            {"schema": 1, "cluster": {"id": "managed-id"},
             "machines": [{"uuid": "u-managed", "address": "10.0.0.9", "state": "ready"}]})}}


class _Conn:
    def __init__(self, client):
        self.client = client

    def talos(self):
        return self.client

    def kube(self):
        return _Kube()


class CaseIO:
    """The flow's world for one case: the inspection and the managed cluster read from the fuzzed machine."""

    def __init__(self, client, force):
        self.client = client
        self.force = force
        self.live = live.LiveIO(_Conn(client), NODE, foreign=None, managed_context=None)

    def managed(self):
        """The managed cluster as LiveIO reads it (from the same fuzzed machine), then told apart from the machine
        to reclaim (else every case would be the managed-machine refusal)."""
        managed = self.live.managed()
        _strings(managed, ("name", "id"))
        assert all(isinstance(uuid, str) for uuid in managed["uuids"])
        json.dumps(managed)
        return dict(managed, name="managed", id="managed-id", uuids=[u for u in managed["uuids"] if u != UUID])

    def inspect(self):
        insp = self.client.run(inspection.inspect_configured(self.client, NODE, probe=_probe, force=self.force))
        _check_inspection(insp)
        return insp

    def maintenance(self):
        uuid, stage = self.client.run(machine.maintenance_identity(self.client))
        assert isinstance(uuid, str) and isinstance(stage, str)
        return uuid, stage

    def managed_identity(self):
        raise errors.unreachable(NODE)

    def close(self):
        pass


def _strings(mapping, keys):
    for key in keys:
        assert isinstance(mapping[key], str), (key, mapping[key])


def _check_inspection(insp):
    """What the policy, the plan and the audit take for granted of an inspection."""
    _strings(insp, ("uuid", "hostname", "role", "version", "stage"))
    _strings(insp["cluster"], ("name", "id"))
    for disk in insp["disks"]:
        _strings(disk, ("id", "dev_path", "model", "serial"))
        assert isinstance(disk["size"], (str, int)) and not isinstance(disk["size"], bool)
        assert isinstance(disk["system_disk"], bool)
    for volume in insp["volumes"]:
        _strings(volume, ("id", "type", "location", "parent", "mount", "encryption_provider"))
        assert isinstance(volume["size"], (str, int)) and not isinstance(volume["size"], bool)
        assert isinstance(volume["encrypted"], bool)
    for member in (insp["etcd"] or {}).get("members") or []:
        _strings(member, ("id", "hostname", "peer", "checked_by"))
    for cp in insp.get("control_planes") or []:
        _strings(cp, ("hostname", "address", "checked_by"))
    json.dumps(insp)


def _reclaim(client, force, confirm):
    result = flow.run(flow.Options(NODE, confirm_uuid=confirm, force=force, user="fuzz"), CaseIO(client, force),
                      check_mode=True)
    json.dumps(flow.diff(result))
    assert all(isinstance(line, str) for line in result["plan"] + result["audit"])
    return result


def test_valid_inspection_replies_read(talos):
    result = _reclaim(talos(inspection_replies()), False, None)
    insp = result["inspection"]
    assert insp["uuid"] == UUID and insp["role"] == "controlplane"
    assert [v["id"] for v in insp["volumes"]] == ["u-data"] and insp["volumes"][0]["encrypted"] is True
    assert [d["system_disk"] for d in insp["disks"]] == [True, False]
    assert [m["this_node"] for m in insp["etcd"]["members"]] == [True, False, False]


def test_fuzz_reclaim_inspection(fuzz, fresh_redaction, talos):
    run = fuzz("reclaim-inspection")
    for index, rng in run.cases():
        fresh_redaction()
        replies = inspection_replies()
        if rng.random() < 0.4:  # a worker: etcd is not running there
            replies["EtcdMemberList"] = ([], (grpclib.Status.UNIMPLEMENTED, "etcd is not running"))
        for _round in range(rng.randint(1, 3)):
            replies = mutate(replies, rng)
        client = talos(replies)
        force, confirm = rng.random() < 0.3, rng.choice([None, UUID])
        run.check(lambda: _reclaim(client, force, confirm), index, replies, REPLY_SECRETS + TALOSCONFIG_SECRETS)


def _with(key, messages=None, status=None):
    replies = inspection_replies()
    replies[key] = (messages if messages is not None else replies[key][0], status)
    return replies


def _specs(ref, specs, ids=None):
    ids = ids or ["r%d" % i for i in range(len(specs))]
    meta = [cosi_resource_pb2.Metadata(namespace=ref.namespace, type=ref.type, id=rid) for rid in ids]
    cls = cosi_state_pb2.GetResponse if ref.singleton else cosi_state_pb2.ListResponse
    return [cls(resource=cosi_resource_pb2.Resource(metadata=m, spec=cosi_resource_pb2.Spec(
        yaml_spec=yaml.safe_dump(spec)))).SerializeToString() for m, spec in zip(meta, specs)]


# Found with --fuzz-seed 12 (9 distinct failures in 245 cases, among them 6, 21, 24, 31, 86 and 166: the inspection took
# a spec of another shape for a mapping or its fields for text: AttributeError, TypeError, or an inspection whose
# fields were not text): a disk or volume spec that is a list or
# a text, a field of another type, a system disk spec that is a list, a SystemInformation spec that is a list
# (maintenance_identity, LiveIO.managed), a UUID that is a list (unhashable in the managed cluster's set).
INSPECTION_FOUND = [
    _with("List " + res.DISKS.type, _specs(res.DISKS, [["sda"]])),
    _with("List " + res.DISKS.type, _specs(res.DISKS, ["sda"])),
    _with("List " + res.DISKS.type, _specs(res.DISKS, [{"dev_path": ["/dev/sda"], "size": {"a": 1}, "model": 5}])),
    _with("List " + res.VOLUME_STATUSES.type, _specs(res.VOLUME_STATUSES, [[1]])),
    _with("List " + res.VOLUME_STATUSES.type, _specs(res.VOLUME_STATUSES, [
        {"type": "partition", "location": 1, "mountSpec": "x", "encryptionProvider": {"a": 1}}])),
    _with("Get " + res.SYSTEM_DISK.type, _specs(res.SYSTEM_DISK, [["/dev/sda"]], ["system-disk"])),
    _with("Get " + res.SYSTEM_INFORMATION.type, _specs(res.SYSTEM_INFORMATION, [["u"]], ["systeminformation"])),
    _with("Get " + res.SYSTEM_INFORMATION.type, _specs(res.SYSTEM_INFORMATION, [{"uuid": ["u"]}], ["systeminformation"])),
    _with("Get " + res.MACHINE_STATUS.type, _specs(res.MACHINE_STATUS, ["running"], ["machine"])),
]


@pytest.mark.parametrize("replies", INSPECTION_FOUND, ids=["found-%d" % i for i in range(len(INSPECTION_FOUND))])
def test_inspection_found_by_fuzzing(replies, talos):
    client = talos(replies)
    _reclaim(client, False, None)
    uuid, stage = client.run(machine.maintenance_identity(client))
    assert isinstance(uuid, str) and isinstance(stage, str)


def test_a_machine_value_too_long_to_show_is_not_quoted(talos):
    """Found with --fuzz-seed 5, cases 1706, 2358 and 3056: a UUID of thousands of characters from the machine was quoted
    whole in the refusal (a message of 10074 characters)."""
    from ansible_collections.maesh.ichor.plugins.module_utils.reclaim import policy
    uuid = "4c4c4544-" + "[" * 10000
    text = policy.managed_refusal({"uuid": uuid, "cluster": {"id": "x"}}, {"name": "n" * 5000, "uuids": [uuid]})
    assert text == ('node (10009 characters, not shown) is already an Ichor machine (of cluster "(5000 characters, not '
                    'shown)"); nothing was sent')
    replies = _with("Get " + res.SYSTEM_INFORMATION.type, _specs(res.SYSTEM_INFORMATION, [{"uuid": uuid}],
                                                                 ["systeminformation"]))
    with pytest.raises(ReclaimError) as exc:  # the managed cluster (the same machine here) knows the UUID
        flow.run(flow.Options(NODE, user="fuzz"), _Known(talos(replies)), check_mode=True)
    assert len(exc.value.message) < 500 and "[[[[" not in exc.value.message


class _Known(CaseIO):
    """The managed cluster holds the machine's own UUID."""

    def __init__(self, client):
        super(_Known, self).__init__(client, False)

    def managed(self):
        return dict(self.live.managed(), name="managed", id="managed-id")
