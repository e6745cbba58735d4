"""The Talos gRPC API of a simulated machine: routing, auth and the RPC implementations."""

import asyncio
import io
import json
import logging
import tarfile
import time
import uuid as _uuid

import yaml
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from grpclib import const
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from .. import pki
from . import config as cfg
from . import extensions as simext
from . import files as fs
from . import protos as P
from . import resources as R
from . import state as st
from .lab import Caller, status_code, _peer_der

log = logging.getLogger("talos_sim")

ADMIN = frozenset({"os:admin"})
OPERATOR = frozenset({"os:admin", "os:operator"})
READER = frozenset({"os:admin", "os:operator", "os:reader"})
ETCD_READ = READER | {"os:etcd:backup"}
ETCD_BACKUP = OPERATOR | {"os:etcd:backup"}

KNOWN_ROLES = {"os:admin", "os:operator", "os:reader", "os:etcd:backup", "os:impersonator",
               "os:image:verifier", "os:meta:writer"}

NOT_AUTHORIZED = "not authorized"
MAINTENANCE_UNIMPLEMENTED = "API is not implemented in maintenance mode"

MS = "/machine.MachineService/"
IS = "/machine.ImageService/"
LS = "/machine.LifecycleService/"
SS = "/storage.StorageService/"
COSI = "/cosi.resource.State/"

U = const.Cardinality.UNARY_UNARY
S = const.Cardinality.UNARY_STREAM

# path -> (cardinality, request type getter, reply type getter, roles, maintenance policy)
# maintenance policy: "apply" = allowed in maintenance for every version,
#                     "read112" = allowed in 1.12 maintenance (and as reader in 1.13+),
#                     "reader" = allowed in 1.13+ maintenance only,
#                     None = admin/operator-only or not served in maintenance.


def _methods():
    m, c, s, e = P.machine(), P.common(), P.storage(), P.empty()
    img, lc = P.image(), P.lifecycle()
    cs = P.cosi_state()
    return {
        MS + "ApplyConfiguration": (U, m.ApplyConfigurationRequest, m.ApplyConfigurationResponse,
                                    ADMIN, "apply"),
        MS + "Bootstrap": (U, m.BootstrapRequest, m.BootstrapResponse, ADMIN, None),
        MS + "EtcdMemberList": (U, m.EtcdMemberListRequest, m.EtcdMemberListResponse,
                                ETCD_READ, None),
        MS + "EtcdRemoveMemberByID": (U, m.EtcdRemoveMemberByIDRequest,
                                      m.EtcdRemoveMemberByIDResponse, ADMIN, None),
        MS + "EtcdLeaveCluster": (U, m.EtcdLeaveClusterRequest, m.EtcdLeaveClusterResponse,
                                  ADMIN, None),
        MS + "EtcdForfeitLeadership": (U, m.EtcdForfeitLeadershipRequest,
                                       m.EtcdForfeitLeadershipResponse, ADMIN, None),
        MS + "EtcdStatus": (U, e.Empty, m.EtcdStatusResponse, ETCD_READ, None),
        MS + "EtcdSnapshot": (S, m.EtcdSnapshotRequest, c.Data, ETCD_BACKUP, None),
        MS + "Hostname": (U, e.Empty, m.HostnameResponse, READER, "reader"),
        MS + "Kubeconfig": (S, e.Empty, c.Data, ADMIN, None),
        MS + "List": (S, m.ListRequest, m.FileInfo, READER, None),
        MS + "Reboot": (U, m.RebootRequest, m.RebootResponse, OPERATOR, None),
        MS + "Reset": (U, m.ResetRequest, m.ResetResponse, ADMIN, None),
        MS + "ServiceList": (U, e.Empty, m.ServiceListResponse, READER, "reader"),
        MS + "Shutdown": (U, m.ShutdownRequest, m.ShutdownResponse, OPERATOR, None),
        MS + "Upgrade": (U, m.UpgradeRequest, m.UpgradeResponse, ADMIN, None),
        MS + "Version": (U, e.Empty, m.VersionResponse, READER, "reader"),
        IS + "Pull": (S, img.ImageServicePullRequest, img.ImageServicePullResponse, ADMIN, None),
        IS + "List": (S, img.ImageServiceListRequest, img.ImageServiceListResponse, READER,
                      "reader"),
        LS + "Upgrade": (S, lc.LifecycleServiceUpgradeRequest, lc.LifecycleServiceUpgradeResponse,
                         ADMIN, None),
        SS + "Disks": (U, e.Empty, s.DisksResponse, READER, "read112"),
        SS + "BlockDeviceWipe": (U, s.BlockDeviceWipeRequest, s.BlockDeviceWipeResponse, ADMIN,
                                 "apply"),
        COSI + "Get": (U, cs.GetRequest, cs.GetResponse, READER, "read112"),
        COSI + "List": (S, cs.ListRequest, cs.ListResponse, READER, "read112"),
    }


_METHODS = None


def methods():
    global _METHODS
    if _METHODS is None:
        _METHODS = _methods()
    return _METHODS


def err(code, message):
    return GRPCError(code, message)


class Handlers:
    """grpclib handler object of one machine: every path goes through ``Node``-level routing."""

    def __init__(self, node):
        self.node = node

    def __mapping__(self):
        out = {}
        for path, (card, req, resp, _roles, _mp) in methods().items():
            out[path] = const.Handler(self._make(path), card, req, resp)
        return out

    def _make(self, path):
        async def handler(stream):
            await handle(self.node, path, stream)
        return handler


# --- routing ------------------------------------------------------------------------------

def _endpoint_caller(node, stream):
    """Authenticate the caller at the endpoint (apid)."""
    m = node.m
    if m.mode == st.MAINTENANCE:
        return Caller({"os:reader"})
    der = _peer_der(stream)
    if der is None:
        raise err(Status.UNAUTHENTICATED, "no client certificate")
    cert = x509.load_der_x509_certificate(der)
    eku = pki.ext_key_usage_of(cert)
    if eku != [ExtendedKeyUsageOID.CLIENT_AUTH]:
        raise err(Status.PERMISSION_DENIED, NOT_AUTHORIZED)
    roles = {r for r in pki.roles_of(cert) if r in KNOWN_ROLES}
    return Caller(roles)


def count_call(node, path):
    """Count a call that reached ``node``'s machine (``GET /machines/<name>/calls``): dialled, or proxied to it."""
    name = path.rsplit("/", 1)[1]
    node.m.calls[name] = node.m.calls.get(name, 0) + 1


async def handle(node, path, stream):
    request = await stream.recv_message()
    count_call(node, path)
    md = stream.metadata
    caller = _endpoint_caller(node, stream)
    lat = node.m.faults.get("latency_ms")
    if lat:
        await asyncio.sleep(float(lat) / 1000.0)
    if md.get("nodes"):
        raw = md.getall("nodes", []) if hasattr(md, "getall") else [md["nodes"]]
        addrs = [a.strip() for v in raw for a in v.split(",") if a.strip()]
        reply = await fan_out(node, path, request, caller, addrs)
        await stream.send_message(reply)
        return
    targets = md.getall("node", []) if hasattr(md, "getall") else (
        [md["node"]] if "node" in md else [])
    target = node
    if targets:
        if len(targets) > 1:
            raise err(Status.INVALID_ARGUMENT, "only one \"node\" metadata value is allowed")
        addr = targets[0].strip()
        if addr.startswith("[") and addr.endswith("]"):
            addr = addr[1:-1]
        if node.m.mode == st.MAINTENANCE:
            if addr not in (node.m.address, "127.0.0.1", "localhost"):
                raise err(Status.UNIMPLEMENTED if node.m.minor < (1, 13)
                          else Status.PERMISSION_DENIED,
                          "node routing is not supported in maintenance mode")
        elif addr not in (node.m.address,):
            # apid checks the method's roles before it proxies
            _authorize_roles(path, caller)
            target = node.lab.node_at(addr)
            if target is None or not target.m.up:
                raise err(Status.UNAVAILABLE,
                          "connection error: desc = \"transport: Error while dialing: dial tcp "
                          "%s:50000: connect: connection refused\"" % addr)
            caller = Caller(caller.roles, proxied=True, via=node.m.name)
            count_call(target, path)
            if target.m.mode == st.MAINTENANCE:
                caller = Caller({"os:reader"}, proxied=True, via=node.m.name)
            tlat = target.m.faults.get("latency_ms")
            if tlat:
                await asyncio.sleep(float(tlat) / 1000.0)
    result = await execute(target, path, request, caller)
    if hasattr(result, "__aiter__"):
        async for msg in result:
            await stream.send_message(msg)
    elif isinstance(result, list):
        for msg in result:
            await stream.send_message(msg)
    else:
        await stream.send_message(result)


async def fan_out(node, path, request, caller, addrs):
    """Deprecated ``nodes`` fan-out (unary MachineService/StorageService calls only): one
    element per node with metadata.hostname = the node as given; a failed node yields an
    element with only metadata (error, status) and the call still succeeds."""
    card, _req, resp_t, _roles, _mp = methods()[path]
    if card != U or path.startswith(COSI):
        raise err(Status.INVALID_ARGUMENT,
                  "fan-out to several nodes (metadata \"nodes\") is not supported for %s by "
                  "the lab simulator; send one call per node with metadata \"node\"" % path)
    if node.m.mode == st.MAINTENANCE:
        raise err(Status.PERMISSION_DENIED, "node routing is not supported in maintenance mode")
    _authorize_roles(path, caller)
    rpc_status = P.module("rpc_status_pb2")
    out = resp_t()
    for addr in addrs:
        target = node if addr == node.m.address else node.lab.node_at(addr)
        try:
            if target is None or not target.m.up:
                raise err(Status.UNAVAILABLE,
                          "connection error: desc = \"transport: Error while dialing: dial tcp "
                          "%s:50000: connect: connection refused\"" % addr)
            tcaller = caller
            if target.m.mode == st.MAINTENANCE:
                tcaller = Caller({"os:reader"}, proxied=True, via=node.m.name)
            if target is not node:
                count_call(target, path)
            if target is not node and target.m.faults.get("latency_ms"):
                await asyncio.sleep(float(target.m.faults["latency_ms"]) / 1000.0)
            reply = await execute(target, path, request, tcaller)
            for msg in reply.messages:
                item = out.messages.add()
                item.CopyFrom(msg)
                item.metadata.hostname = addr
        except GRPCError as exc:
            item = out.messages.add()
            text = "rpc error: code = %s desc = %s" % (_go_code(exc.status), exc.message or "")
            item.metadata.hostname = addr
            item.metadata.error = text
            item.metadata.status.CopyFrom(rpc_status.Status(code=exc.status.value,
                                                            message=exc.message or ""))
    return out


def _go_code(status):
    return "".join(p.capitalize() for p in status.name.split("_")).replace("Ok", "OK")


def _authorize_roles(path, caller):
    need = methods()[path][3]
    if not (caller.roles & need):
        raise err(Status.PERMISSION_DENIED, NOT_AUTHORIZED)


def _fail_matches(fault, path):
    if not fault:
        return False
    fault = str(fault)
    return fault in (path, path.lstrip("/"), path.rsplit("/", 1)[1]) or (
        path.endswith("/" + fault.rsplit("/", maxsplit=1)[-1]) and fault.lstrip("/") in path)


async def execute(node, path, request, caller):
    m = node.m
    if not m.up:
        raise err(Status.UNAVAILABLE, "connection error: machine %s is down" % m.address)
    m.requests[path] = request.SerializeToString()  # GET /machines/<name>/requests
    node.lab.event(m.name, path.rsplit("/", 1)[1])  # GET /timeline: the machine that serves it, in order
    f = m.faults
    if f.get("fail_call") and _fail_matches(f["fail_call"], path):
        count = f.get("fail_count")
        if count is not None:
            count = int(count) - 1
            if count <= 0:
                for k in ("fail_call", "fail_code", "fail_message", "fail_count"):
                    f.pop(k, None)
            else:
                f["fail_count"] = count
        raise err(status_code(f.get("fail_code", "UNAVAILABLE")),
                  f.get("fail_message") or "injected fault: %s" % path)
    _card, _req, _resp, roles, mpolicy = methods()[path]
    if m.mode == st.MAINTENANCE:
        if m.minor < (1, 13):
            if mpolicy not in ("apply", "read112"):
                raise err(Status.UNIMPLEMENTED, MAINTENANCE_UNIMPLEMENTED)
        else:
            if mpolicy is None:
                if caller.roles & roles:
                    raise err(Status.UNIMPLEMENTED, MAINTENANCE_UNIMPLEMENTED)
                raise err(Status.PERMISSION_DENIED, NOT_AUTHORIZED)
    elif not (caller.roles & roles):
        raise err(Status.PERMISSION_DENIED, NOT_AUTHORIZED)
    impl = IMPLS[path]
    result = await impl(node, request, caller)
    if f.get("lose_reply") and _fail_matches(f["lose_reply"], path):
        # done on the machine, and its reply lost on the way back (once): the caller sees a timeout
        f.pop("lose_reply")
        raise err(Status.DEADLINE_EXCEEDED, "context deadline exceeded")
    return result


# --- helpers ------------------------------------------------------------------------------

def _ts(t=None):
    from google.protobuf import timestamp_pb2
    ts = timestamp_pb2.Timestamp()
    ts.FromNanoseconds(int((t or time.time()) * 1e9))
    return ts


def _check_cp(m, api_name):
    # machined's checkControlplane: "member list", "etcd status", "etcd leave", "etcd remove member", "kubeconfig"
    if not m.is_controlplane:
        raise err(Status.UNIMPLEMENTED, "%s is only available on control plane nodes" % api_name)


def _actor():
    return str(_uuid.uuid4())


def _busy(m):
    if m.busy:
        raise err(Status.UNAVAILABLE, "machine is %s" % m.busy)


# --- MachineService -----------------------------------------------------------------------

async def version(node, req, caller):
    mp = P.machine()
    m = node.m
    v = mp.Version()
    v.version.tag = m.version
    v.version.sha = hashlib_hex(m.version)[:8]
    v.version.built = ""
    v.version.go_version = "go1.25.5"
    v.version.os = "linux"
    v.version.arch = "amd64"
    v.platform.name = "metal"
    v.platform.mode = "metal"
    v.features.rbac = True
    return mp.VersionResponse(messages=[v])


def hashlib_hex(s):
    import hashlib
    return hashlib.sha1(s.encode()).hexdigest()


async def hostname(node, req, caller):
    mp = P.machine()
    return mp.HostnameResponse(messages=[mp.Hostname(hostname=node.m.hostname)])


def _services(node):
    m = node.m
    mp = P.machine()
    if m.mode == st.MAINTENANCE:
        ids = ["apid", "machined", "udevd"] if m.minor >= (1, 13) else ["machined", "udevd"]
    else:
        ids = ["apid", "auditd", "containerd", "cri", "dashboard", "kubelet", "machined",
               "syslogd", "udevd"]
        if m.is_controlplane:
            ids += ["etcd", "trustd"]
    out = []
    c = node.lab.cluster_of(m)
    for sid in sorted(ids):
        state, healthy, msg = "Running", True, ""
        if sid == "etcd":
            if c is None or m.etcd_member_id not in c.etcd_members:
                state, healthy = "Preparing", False
                msg = "Waiting for etcd to be bootstrapped" if (c is None or not c.bootstrapped) \
                    else "etcd is not a member of the cluster"
        info = mp.ServiceInfo(id=sid, state=state)
        info.health.unknown = False
        info.health.healthy = healthy
        info.health.last_message = msg
        info.health.last_change.CopyFrom(_ts(m.boot_time))
        ev = info.events.events.add()
        ev.msg = "Health check successful" if healthy else msg or "Starting"
        ev.state = state
        ev.ts.CopyFrom(_ts(m.boot_time))
        out.append(info)
    return out


async def service_list(node, req, caller):
    mp = P.machine()
    return mp.ServiceListResponse(messages=[mp.ServiceList(services=_services(node))])


def _etcd_cluster(node, api_name, local=True):
    m = node.m
    _check_cp(m, api_name)
    c = node.lab.cluster_of(m)
    if c is None or not c.bootstrapped:
        raise err(Status.UNAVAILABLE, "etcd is not running: cluster is not bootstrapped")
    if local and m.etcd_member_id not in c.etcd_members:
        raise err(Status.UNAVAILABLE, "etcd is not running on this node")
    return c


async def etcd_member_list(node, req, caller):
    mp = P.machine()
    c = _etcd_cluster(node, "member list", local=req.query_local)
    members = []
    for mid, name in sorted(c.etcd_members.items(), key=lambda kv: kv[1]):
        hostname, address = c.member_info.get(mid, (name, ""))
        members.append(mp.EtcdMember(
            id=mid, hostname=hostname, peer_urls=["https://%s:2380" % address],
            client_urls=["https://%s:2379" % address], is_learner=False))
    return mp.EtcdMemberListResponse(messages=[mp.EtcdMembers(
        members=members, legacy_members=[x.hostname for x in members])])


async def etcd_status(node, req, caller):
    """etcd's maintenance Status as Talos relays it. Faults: ``etcd_db_size`` (bytes: the member's database),
    ``etcd_no_leader`` (the member knows no leader: leader 0, and etcd adds its no-leader error, as its Status does),
    ``etcd_errors`` (more errors, e.g. an alarm as etcd words it: "memberID:<id> alarm:NOSPACE ")."""
    mp = P.machine()
    c = _etcd_cluster(node, "etcd status")
    f = node.m.faults
    size = int(f.get("etcd_db_size") or 20 * 1024 * 1024)
    leader = 0 if f.get("etcd_no_leader") else c.leader
    errors = ["etcdserver: no leader"] if not leader else []
    extra = f.get("etcd_errors") or []
    errors += [extra] if isinstance(extra, str) else [str(e) for e in extra]
    s = mp.EtcdMemberStatus(protocol_version="3.6.0", db_size=size,
                            db_size_in_use=min(size, 12 * 1024 * 1024), leader=leader,
                            raft_index=c.raft_index, raft_term=c.raft_term,
                            raft_applied_index=c.raft_index, member_id=node.m.etcd_member_id,
                            is_learner=False, storage_version="3.6.0", errors=errors)
    return mp.EtcdStatusResponse(messages=[mp.EtcdStatus(member_status=s)])


# A real snapshot is the member's bbolt database; the lab's is a stand-in of the same use: a header naming the
# cluster's etcd state at this moment, padded so that it spans several chunks, as a database of some size does.
SNAPSHOT_CHUNK = 32 * 1024
SNAPSHOT_SIZE = 96 * 1024 + 123


def etcd_snapshot_bytes(c, m):
    header = json.dumps({"kind": "maesh-ichor lab etcd snapshot", "member": m.etcd_member_id,
                         "members": sorted(c.etcd_members.values()), "raft_index": c.raft_index,
                         "raft_term": c.raft_term}, sort_keys=True).encode()
    body = (header + b"\n") * (SNAPSHOT_SIZE // (len(header) + 1) + 1)
    return body[:SNAPSHOT_SIZE]


async def etcd_snapshot(node, req, caller):
    c = P.common()
    cluster = _etcd_cluster(node, "etcd snapshot")
    source = node.m.faults.get("etcd_snapshot_file")
    if source is None:
        data = etcd_snapshot_bytes(cluster, node.m)
        return [c.Data(bytes=data[i:i + SNAPSHOT_CHUNK]) for i in range(0, len(data), SNAPSHOT_CHUNK)]

    async def streamed():  # read as it is sent, as apid relays etcd's own stream: never held whole
        with open(source, "rb") as handle:
            while True:
                chunk = handle.read(SNAPSHOT_CHUNK)
                if not chunk:
                    return
                yield c.Data(bytes=chunk)
    return streamed()


async def etcd_leave_cluster(node, req, caller):
    mp = P.machine()
    c = _etcd_cluster(node, "etcd leave")
    _leave_etcd(node.lab, node.m, c)
    node.lab.changed()
    return mp.EtcdLeaveClusterResponse(messages=[mp.EtcdLeaveCluster()])


def _leave_etcd(lab, m, c):
    if m.etcd_member_id in c.etcd_members:
        if len(c.etcd_members) == 1:
            raise err(Status.UNKNOWN, "failed to leave cluster: etcdserver: re-configuration "
                      "failed due to not enough started members")
        c.remove_member(m.etcd_member_id)
    m.etcd_member_id = 0


async def etcd_forfeit_leadership(node, req, caller):
    """Talos v1.14.1's EtcdForfeitLeadership (etcd.Client.ForfeitLeadership): refused on a worker; with one member
    "cannot forfeit leadership, only one member"; "" when this member does not lead (nothing done); else etcd's
    MoveLeader to the first other member in member id order (as etcd lists them) whose machine runs, and the reply
    names it by its etcd member name, which Talos makes the machine's hostname (not its id). Talos's own errors come
    wrapped in plain Go errors: gRPC code Unknown. A member that knows no leader (``etcd_no_leader``) fails as etcd's
    require-leader context fails the member list."""
    mp = P.machine()
    c = _etcd_cluster(node, "etcd forfeit leadership")
    if node.m.faults.get("etcd_no_leader"):
        raise err(Status.UNKNOWN, "failed to forfeit leadership: failed to list etcd members: etcdserver: no leader")
    if len(c.etcd_members) == 1:
        raise err(Status.UNKNOWN, "failed to forfeit leadership: cannot forfeit leadership, only one member")
    me = node.m.etcd_member_id
    if c.leader != me:
        return mp.EtcdForfeitLeadershipResponse(messages=[mp.EtcdForfeitLeadership(member="")])
    targets = [mid for mid in sorted(c.etcd_members) if mid != me and node.lab.member_runs(c, mid)]
    if not targets:
        # raft gives up a transfer to a member that does not answer; etcd then times out
        raise err(Status.UNKNOWN, "failed to forfeit leadership: etcdserver: leader transfer timeout")
    log.info("%s: moving leadership from %s to %s", node.m.name, c.etcd_members[me], c.etcd_members[targets[0]])
    c.set_leader(targets[0])
    node.lab.changed()
    name = c.member_info.get(targets[0], (c.etcd_members[targets[0]], ""))[0]
    return mp.EtcdForfeitLeadershipResponse(messages=[mp.EtcdForfeitLeadership(member=name)])


async def etcd_remove_member(node, req, caller):
    mp = P.machine()
    c = _etcd_cluster(node, "etcd remove member", local=False)
    if req.member_id not in c.etcd_members:
        raise err(Status.NOT_FOUND, "etcdserver: member not found")
    name = c.etcd_members[req.member_id]
    c.remove_member(req.member_id)
    x = node.lab.machine(name)
    if x.etcd_member_id == req.member_id:
        x.etcd_member_id = 0
    node.lab.changed()
    return mp.EtcdRemoveMemberByIDResponse(messages=[mp.EtcdRemoveMemberByID()])


async def bootstrap(node, req, caller):
    mp = P.machine()
    m = node.m
    if not m.is_controlplane:  # Talos refuses it so, not through checkControlplane
        raise err(Status.FAILED_PRECONDITION, "bootstrap can only be performed on a control plane node")
    c = node.lab.cluster_of(m)
    if c is None:
        raise err(Status.FAILED_PRECONDITION, "cluster ID is not set in the machine config")
    if c.bootstrapped or m.etcd_member_id in c.etcd_members:
        raise err(Status.ALREADY_EXISTS, "etcd data directory is not empty")
    c.bootstrapped = True
    c.add_member(m)
    for x in node.lab.machines:
        if x is not m and x.up:
            node.lab.on_configured_boot(x)
    node.lab.changed()
    return mp.BootstrapResponse(messages=[mp.Bootstrap()])


def _kubeconfig_bytes(lab, m):
    path = lab.settings.get("kubeconfig_path")
    if path:
        with open(path, "rb") as fh:
            text = fh.read()
    else:
        c = lab.cluster_of(m)
        if c.k8s_ca is None:
            c.k8s_ca = pki.new_ca(pki.ECDSA, organization="kubernetes")
        client = pki.issue_client(c.k8s_ca, ["system:masters"], common_name="admin",
                                  hours=24 * 365)
        name = m.cluster_name or "talos"
        user = "admin@%s" % name
        doc = {
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": name, "cluster": {
                "server": lab.settings.get("kubeconfig_server") or "https://127.0.0.1:6443",
                "certificate-authority-data": pki.b64(c.k8s_ca.cert_pem)}}],
            "users": [{"name": user, "user": {
                "client-certificate-data": pki.b64(client.cert_pem),
                "client-key-data": pki.b64(client.key_pem)}}],
            "contexts": [{"context": {"cluster": name, "namespace": "default", "user": user},
                          "name": user}],
            "current-context": user,
        }
        text = yaml.safe_dump(doc, default_flow_style=False, sort_keys=False).encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("kubeconfig")
        info.size = len(text)
        info.mode = 0o600
        info.mtime = int(time.time())
        tar.addfile(info, io.BytesIO(text))
    return buf.getvalue()


async def kubeconfig(node, req, caller):
    c = P.common()
    _check_cp(node.m, "kubeconfig")
    data = _kubeconfig_bytes(node.lab, node.m)
    chunk = 1024
    return [c.Data(bytes=data[i:i + chunk]) for i in range(0, len(data), chunk)]


async def reboot(node, req, caller):
    mp = P.machine()
    _busy(node.m)
    actor = _actor()
    node.schedule(node.reboot)
    return mp.RebootResponse(messages=[mp.Reboot(actor_id=actor)])


async def shutdown(node, req, caller):
    mp = P.machine()
    _busy(node.m)
    actor = _actor()
    node.schedule(node.shutdown)
    return mp.ShutdownResponse(messages=[mp.Shutdown(actor_id=actor)])


async def reset(node, req, caller):
    mp = P.machine()
    m = node.m
    _busy(m)
    vols = {v["label"]: v for v in m.volumes}
    labels = []
    if req.system_partitions_to_wipe:
        if req.mode == mp.ResetRequest.USER_DISKS:
            raise err(Status.UNKNOWN, "reset failed: invalid input, wipe mode USER_DISKS doesn't "
                      "support SystemPartitionsToWipe parameter")
        for spec in req.system_partitions_to_wipe:
            if spec.label not in vols:
                raise err(Status.UNKNOWN, "failed to get volume status with label \"%s\": resource "
                          "VolumeStatuses.block.talos.dev(runtime/%s@undefined) doesn't exist"
                          % (spec.label, spec.label))
            if spec.wipe:
                labels.append(spec.label)
    for d in req.user_disks_to_wipe:
        disk = next((x for x in m.disks if x["dev_path"] == d), None)
        if disk is None:
            raise err(Status.UNKNOWN, "reset user disk failed: device %s wasn't found" % d)
        if disk["system_disk"]:
            raise err(Status.UNKNOWN, "reset user disk failed: device %s is the system disk" % d)
    wipe_all = (req.mode != mp.ResetRequest.USER_DISKS and not req.system_partitions_to_wipe)
    to_maintenance = wipe_all or ("STATE" in labels and "EPHEMERAL" in labels)
    graceful = req.graceful
    c = node.lab.cluster_of(m)
    actor = _actor()
    if graceful and m.is_controlplane and c is not None and m.etcd_member_id in c.etcd_members:
        if len(c.etcd_members) == 1:
            # as Talos: the RPC is accepted, the reset sequence then fails leaving etcd and the
            # machine keeps running (use graceful=false for the last control plane)
            log.warning("%s: reset failed: leave etcd: the only etcd member can't leave the "
                        "cluster", m.name)
            return mp.ResetResponse(messages=[mp.Reset(actor_id=actor)])
        _leave_etcd(node.lab, m, c)
    interrupted = bool(m.faults.pop("interrupt_reset", None))
    node.schedule(_do_reset, node, list(labels), list(req.user_disks_to_wipe), wipe_all,
                  to_maintenance, req.reboot, interrupted)
    node.lab.changed()
    return mp.ResetResponse(messages=[mp.Reset(actor_id=actor)])


async def _do_reset(node, labels, user_disks, wipe_all, to_maintenance, reboot_after,
                    interrupted):
    m = node.m
    lab = node.lab

    def wipe():
        if interrupted:
            log.info("%s: reset interrupted before the wipe", m.name)
            return
        # a non-graceful reset does not touch etcd membership: the member stays listed (dead)
        # until someone calls EtcdRemoveMemberByID; the wiped node's etcd data is gone
        if wipe_all or "EPHEMERAL" in labels:
            m.etcd_member_id = 0
        if user_disks:
            m.volumes = [v for v in m.volumes if v["disk"] not in user_disks]
        if to_maintenance:
            m.mode = st.MAINTENANCE
            m.config = None
            m.facts = None
            m.staged_config = None
            m.trusted_cas = []
            m.cluster_id = None
            m.cluster_name = None
            m.etcd_member_id = 0
            m.node_id = st.new_node_id()
            sysdisk = next((d["dev_path"] for d in m.disks if d["system_disk"]), None)
            if wipe_all:
                # the system disk is wiped; user volumes on other disks stay unless listed
                m.volumes = [v for v in m.volumes if v["disk"] != sysdisk]
            else:
                m.volumes = [v for v in m.volumes if v["label"] not in labels]
            m.installed = not wipe_all
            m.hostname = st.default_hostname(m.uuid)

    if not reboot_after and not interrupted:
        m.busy = "resetting"
        m.stage = "resetting"
        await node.stop()
        lab.elect(m)
        await asyncio.sleep(float(m.timing["reboot_seconds"]))
        wipe()
        m.busy = None
        m.powered = False
        m.stage = "stopped"
        lab.changed()
        return
    await node.power_cycle("resetting", m.timing["reboot_seconds"], before_boot=wipe)


async def apply_configuration(node, req, caller):
    mp = P.machine()
    m = node.m
    Mode = mp.ApplyConfigurationRequest
    try:
        facts = cfg.ConfigFacts(req.data)
    except cfg.ConfigError as exc:
        raise err(Status.INVALID_ARGUMENT, str(exc))
    if m.mode == st.MAINTENANCE:
        return await _apply_maintenance(node, req, facts)
    _busy(m)
    if facts.v1 is None:
        raise err(Status.INVALID_ARGUMENT, "the applied machine configuration doesn't contain "
                  "v1alpha1 config, did you mean to patch the machine config instead?")
    if facts.machine_type != m.role:
        raise err(Status.INVALID_ARGUMENT, "1 error occurred:\n\t* machine type can't be "
                  "changed from %s to %s\n\n" % (m.role, facts.machine_type))
    v114 = m.minor >= (1, 14)
    mode = req.mode
    mode_name = Mode.Mode.Name(mode)
    details = "Applied configuration with a reboot"
    mode_err = ""
    reason = None if v114 else cfg.needs_reboot(m.config, req.data)
    if m.faults.get("apply_needs_reboot") and not reason:
        # a change this Talos cannot apply immediately (fault): AUTO reboots, NO_REBOOT is refused
        reason = "this config change can't be applied in immediate mode\ndiff: lab fault apply_needs_reboot"
    if mode == Mode.REBOOT and v114:
        raise err(Status.UNIMPLEMENTED, "apply configuration in REBOOT mode is not supported, "
                  "use AUTO or NO_REBOOT")
    if mode in (Mode.TRY, Mode.NO_REBOOT):
        if reason:
            raise err(Status.INVALID_ARGUMENT, reason)
        details = "Applied configuration without a reboot"
    elif mode == Mode.STAGED:
        details = "Staged configuration to be applied after the next reboot"
    elif mode == Mode.AUTO:
        if reason:
            mode = Mode.REBOOT
            details = "Applied configuration with a reboot"
            mode_err = ": " + reason
        else:
            mode = Mode.NO_REBOOT
            details = "Applied configuration without a reboot"
        mode_name = "%s(%s)" % (mode_name, Mode.Mode.Name(mode))
    if req.dry_run:
        text = "Dry run summary:\n%s (skipped in dry-run).\nConfig diff:\n\n%s" % (
            details, cfg.diff_text(m.config, req.data))
        return mp.ApplyConfigurationResponse(messages=[mp.ApplyConfiguration(
            mode=mode, mode_details=text)])
    log.info("%s: apply config request: mode %s", m.name, mode_name.lower())
    lab = node.lab
    if mode == Mode.TRY:
        timeout = 60.0
        if req.HasField("try_mode_timeout"):
            timeout = req.try_mode_timeout.ToTimedelta().total_seconds()
        details += ("\nThe config is applied in 'try' mode and will be automatically reverted "
                    "back in %s" % _go_duration(timeout))
        previous = m.config
        if m.try_task is not None:
            m.try_task.cancel()
        _apply_now(lab, m, req.data)

        async def rollback():
            await asyncio.sleep(timeout)
            log.info("%s: try mode timeout, rolling back the config", m.name)
            m.try_task = None
            _apply_now(lab, m, previous)
        m.try_task = asyncio.ensure_future(rollback())
    else:
        if m.try_task is not None:
            m.try_task.cancel()
            m.try_task = None
        if mode == Mode.NO_REBOOT:
            _apply_now(lab, m, req.data)
            m.staged_config = None
        elif mode == Mode.STAGED:
            m.staged_config = req.data
        elif mode == Mode.REBOOT:
            m.staged_config = req.data
            node.schedule(node.reboot)
    lab.changed()
    return mp.ApplyConfigurationResponse(messages=[mp.ApplyConfiguration(
        mode=mode, mode_details=details + mode_err)])


def _go_duration(seconds):
    seconds = float(seconds)
    if seconds == int(seconds):
        s = int(seconds)
        h, rem = divmod(s, 3600)
        mi, sec = divmod(rem, 60)
        out = ""
        if h:
            out += "%dh" % h
        if h or mi:
            out += "%dm" % mi
        return out + "%ds" % sec
    return "%gs" % seconds


def _apply_now(lab, m, data):
    old_host = m.hostname
    lab.set_machine_config(m, data)
    if m.hostname != old_host:
        m.server_pair = None  # next boot reissues the cert; SANs keep working on the IP
    lab.on_configured_boot(m)


async def _apply_maintenance(node, req, facts):
    mp = P.machine()
    m = node.m
    Mode = mp.ApplyConfigurationRequest
    if req.mode not in (Mode.AUTO, Mode.REBOOT, Mode.TRY):
        raise err(Status.INVALID_ARGUMENT,
                  "apply configuration in %s mode is not supported in maintenance mode"
                  % Mode.Mode.Name(req.mode).lower().replace("_", "-"))
    if facts.v1 is None:
        raise err(Status.INVALID_ARGUMENT, "the applied machine configuration doesn't contain "
                  "v1alpha1 config")
    if not facts.ca_crt_pem:
        raise err(Status.INVALID_ARGUMENT, "1 error occurred:\n\t* machine.ca is required\n\n")
    if req.dry_run:
        return mp.ApplyConfigurationResponse(messages=[mp.ApplyConfiguration(
            mode=Mode.REBOOT, mode_details="Dry run summary:\nNode is running in maintenance "
            "mode and does not have a config yet.")])
    _busy(m)
    data = req.data
    lab = node.lab

    def install():
        m.mode = st.CONFIGURED
        if not m.installed:
            m.volumes = st.default_volumes()
            m.installed = True
        else:
            have = {v["id"] for v in m.volumes}
            m.volumes = [v for v in st.default_volumes() if v["id"] not in have] + m.volumes
        lab.set_machine_config(m, data)

    async def run():
        m.busy = "installing"
        m.stage = "installing"
        lab.changed()
        await asyncio.sleep(float(m.timing.get("install_seconds", 0.5)))
        await node.power_cycle("rebooting", m.timing["reboot_seconds"], before_boot=install)

    node.schedule(run)
    return mp.ApplyConfigurationResponse(messages=[mp.ApplyConfiguration(
        mode=Mode.REBOOT, mode_details="Applied configuration with a reboot")])


async def upgrade_legacy(node, req, caller):
    mp = P.machine()
    m = node.m
    _busy(m)
    new = st.version_from_image(req.image)
    if not req.image:
        raise err(Status.INVALID_ARGUMENT, "upgrade image is required")
    actor = _actor()
    if new:
        m.pending_version = new
        m.pending_extensions = simext.carried(req.image)  # what the installer image carries, from the next boot
    if not req.stage:
        node.schedule(node.reboot, m.timing["upgrade_seconds"], "upgrading")
    return mp.UpgradeResponse(messages=[mp.Upgrade(ack="Upgrade request received",
                                                   actor_id=actor)])


def _need_113(node, service):
    if node.m.minor < (1, 13):
        raise err(Status.UNIMPLEMENTED, "unknown service %s" % service)


def _enum_name(enum, value):
    try:
        return enum.Name(value)
    except ValueError:
        return str(value)  # Go's String() of an unknown enum value


def _containerd_store(m, instance):
    """The image store a ContainerdInstance selects, refused as Talos's ctrhelper refuses it:
    InvalidArgument for an unknown driver, an unset or unknown namespace, CRI namespace on the
    containerd driver. Only the system namespace of the containerd driver is Talos's own instance."""
    c = P.common()
    driver, namespace = instance.driver, instance.namespace
    if driver == c.CONTAINERD:
        address = "system" if namespace == c.NS_SYSTEM else "cri"
    elif driver == c.CRI:
        address = "cri"
    else:
        raise err(Status.INVALID_ARGUMENT, "invalid containerd driver %s" % _enum_name(c.ContainerDriver, driver))
    names = {c.NS_CRI: "k8s.io", c.NS_SYSTEM: "system", c.NS_TALOSCONTAINERS: "taloscontainers"}
    if namespace not in names:
        raise err(Status.INVALID_ARGUMENT, "invalid containerd namespace %s"
                  % _enum_name(c.ContainerdNamespace, namespace))
    if driver == c.CONTAINERD and namespace == c.NS_CRI:
        raise err(Status.INVALID_ARGUMENT, "cannot use CRI namespace with containerd driver")
    return m.images.setdefault((address, names[namespace]), {})


def _go_status(exc):
    """A status error as Go's %v prints it (Talos wraps the helper's error so)."""
    return "rpc error: code = %s desc = %s" % (_go_code(exc.status), exc.message or "")


def _pull_failure(fault, ref):
    """The status of a pull the fault ``pull_error`` fails, as Talos's ImageService.Pull returns containerd's error: a
    missing image (containerd's ErrNotFound) as NotFound "error pulling image: ...", any other failure (a registry
    that does not answer, refused credentials) unwrapped, so gRPC code Unknown. ``true``: the image is not found; a
    text: containerd's message, NotFound when it says "not found"."""
    if fault is True or str(fault).lower() in ("true", "1", "not found", "notfound"):
        quoted = _go_quote(ref)
        return err(Status.NOT_FOUND, "error pulling image: failed to pull image %s: failed to resolve reference %s: "
                   "%s: not found" % (quoted, quoted, ref))
    text = str(fault)
    if "not found" in text.lower():
        return err(Status.NOT_FOUND, text)
    return err(Status.UNKNOWN, text)


async def image_pull(node, req, caller):
    """Faults: ``pull_seconds`` (the pull takes that long before its replies: a registry far away, a large image),
    ``pull_error`` (the pull fails after that wait, see _pull_failure; nothing is stored)."""
    img = P.image()
    _need_113(node, "machine.ImageService")
    store = _containerd_store(node.m, req.containerd)
    if not req.image_ref:
        raise err(Status.INVALID_ARGUMENT, "image reference is required")
    name, tag, digest = st.docker_ref(req.image_ref)
    f = node.m.faults
    await asyncio.sleep(float(f.get("pull_seconds") or 0))
    if f.get("pull_error"):
        raise _pull_failure(f["pull_error"], "%s:%s" % (name, tag) if tag else "%s@%s" % (name, digest))
    version = st.version_from_image(req.image_ref)
    if digest is None:
        digest = "sha256:" + hashlib_hex256("%s:%s" % (name, tag))
    elif version is None:
        # pinned by digest alone: the image is the one an earlier pull of a tag stored, if any
        version = store.get(digest)
    # Talos's aliases (image/aliases.go): the digest, the canonical reference, name@digest
    for alias in (digest, "%s:%s" % (name, tag) if tag else "%s@%s" % (name, digest), "%s@%s" % (name, digest)):
        store[alias] = version
    out = []
    for i, layer in enumerate(("sha256:%064x" % 1, "sha256:%064x" % 2)):
        p = img.ImageServicePullResponse()
        p.pull_progress.layer_id = layer
        p.pull_progress.progress.status = img.ImageServicePullLayerProgress.DOWNLOAD_COMPLETE
        p.pull_progress.progress.total = 1024 * (i + 1)
        p.pull_progress.progress.offset = 1024 * (i + 1)
        out.append(p)
    # the name Talos reports: the reference pinned by digest
    out.append(img.ImageServicePullResponse(name="%s@%s" % (name, digest)))
    return out


def hashlib_hex256(s):
    import hashlib
    return hashlib.sha256(s.encode()).hexdigest()


async def image_list(node, req, caller):
    img = P.image()
    _need_113(node, "machine.ImageService")
    store = _containerd_store(node.m, req.containerd)
    return [img.ImageServiceListResponse(name=name) for name in sorted(store)]


# The installer's last lines when the fault installer_exit_code makes it fail.
INSTALLER_FAILURE = ("validating install disk", "error: failed to install bootloader: write /boot/EFI: no space left "
                     "on device")


async def lifecycle_upgrade(node, req, caller):
    lc = P.lifecycle()
    m = node.m
    _need_113(node, "machine.LifecycleService")
    _busy(m)
    image = req.source.image_name
    if not image:
        raise err(Status.INVALID_ARGUMENT, "installer image name is required")
    # as Talos: the installer container runs from the image store the request selects, by exact name
    # (an error there is wrapped as Internal "upgrade failed: ...")
    try:
        store = _containerd_store(m, req.containerd)
    except GRPCError as exc:
        raise err(Status.INTERNAL, "upgrade failed: %s" % _go_status(exc))
    if image not in store:
        raise err(Status.INTERNAL, "upgrade failed: installer image %s not found in containerd store: image %s: "
                  "not found" % (_go_quote(image), _go_quote(image)))
    new = store[image]
    exit_code = int(m.faults.get("installer_exit_code") or 0)
    lines = ("validating install disk", "installing Talos %s to the system disk" % (new or image),
             "upgrade staged, reboot to apply") if not exit_code else INSTALLER_FAILURE

    async def gen():
        for line in lines:
            yield lc.LifecycleServiceUpgradeResponse(
                progress=lc.LifecycleServiceInstallProgress(message=line))
            await asyncio.sleep(0.01)
        # a real installer writes the disk for tens of seconds: a test can stretch it to act meanwhile
        await asyncio.sleep(float(m.faults.get("installer_seconds") or 0))
        if new and not exit_code:
            m.pending_version = new
            # the installer image's extensions replace the machine's from the next boot; the machine config is left as
            # it was (Talos reads machine.install.image only when it installs)
            m.pending_extensions = simext.carried(image)
        node.lab.changed()
        node.lab.event(m.name, "installer-done")  # GET /timeline: how long the machine's own install took
        # a failed installer is an exit code, not an error status ("Server SHOULD NOT respond with error")
        yield lc.LifecycleServiceUpgradeResponse(
            progress=lc.LifecycleServiceInstallProgress(exit_code=exit_code))
    return gen()


def _go_quote(text):
    return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"')


# --- StorageService -----------------------------------------------------------------------

async def disks(node, req, caller):
    s = P.storage()
    out = []
    for d in node.m.disks:
        out.append(s.Disk(size=d["size"], model=d["model"], device_name=d["dev_path"],
                          name=d["name"], serial=d["serial"], wwid=d["wwid"],
                          type=s.Disk.HDD if d["rotational"] else s.Disk.SSD,
                          bus_path=d["bus_path"],
                          system_disk=d["system_disk"] and node.m.installed,
                          subsystem="/sys/class/block", readonly=d["readonly"]))
    return s.DisksResponse(messages=[s.Disks(disks=out)])


async def block_device_wipe(node, req, caller):
    s = P.storage()
    for dev in req.devices:
        dev_path = dev.device if dev.device.startswith("/dev/") else "/dev/" + dev.device
        if not any(d["dev_path"] == dev_path for d in node.m.disks) and not any(
                v["partition"] == dev_path for v in node.m.volumes):
            raise err(Status.NOT_FOUND, "blockdevice \"%s\" not found" % dev.device)
        if any(v["partition"] == dev_path or v["disk"] == dev_path for v in node.m.volumes
               if v["id"] in st.SYSTEM_VOLUMES or node.m.mode == st.CONFIGURED):
            raise err(Status.FAILED_PRECONDITION, "blockdevice \"%s\" is in use" % dev.device)
    return s.BlockDeviceWipeResponse(messages=[s.BlockDeviceWipe()])


# --- List (talosctl ls) -------------------------------------------------------------------

async def list_files(node, req, caller):
    m = P.machine()
    try:
        entries = fs.listing(node.lab, node.m, req.root, recurse=req.recurse,
                             recursion_depth=req.recursion_depth, types=tuple(req.types))
    except KeyError as exc:
        raise err(Status.UNKNOWN, exc.args[0])
    now = int(node.m.boot_time)
    return [m.FileInfo(name=name, relative_name=rel, is_dir=is_dir, size=size, modified=now,
                       mode=(fs.MODE_DIR | 0o755) if is_dir else 0o644)
            for name, rel, is_dir, size in entries]


# --- COSI ---------------------------------------------------------------------------------

def _tracker(lab):
    t = getattr(lab, "_resource_tracker", None)
    if t is None:
        t = lab._resource_tracker = R.VersionTracker()
    return t


def _check_type(rtype, namespace, caller):
    if rtype not in R.TYPES:
        raise err(Status.NOT_FOUND, "resource type \"%s\" is not registered" % rtype)
    ns, sensitive = R.TYPES[rtype]
    if sensitive and "os:admin" not in caller.roles:
        raise err(Status.PERMISSION_DENIED, NOT_AUTHORIZED)
    return namespace or ns


async def cosi_get(node, req, caller):
    cs = P.cosi_state()
    ns = _check_type(req.type, req.namespace, caller)
    for r in R.build(node.lab, node.m, req.type):
        if r.type == req.type and r.namespace == ns and r.id == req.id:
            return cs.GetResponse(resource=R.to_proto(node.m, r, _tracker(node.lab)))
    raise err(Status.NOT_FOUND, "resource %s(%s/%s@undefined) doesn't exist"
              % (req.type, ns, req.id))


async def cosi_list(node, req, caller):
    import re
    cs = P.cosi_state()
    ns = _check_type(req.type, req.namespace, caller)
    rx = None
    if req.HasField("options") and req.options.HasField("id_query") and \
            req.options.id_query.regexp:
        rx = re.compile(req.options.id_query.regexp)
    out = []
    for r in sorted(R.build(node.lab, node.m, req.type), key=lambda r: r.id):
        if r.type != req.type or r.namespace != ns:
            continue
        if rx is not None and not rx.search(r.id):
            continue
        out.append(cs.ListResponse(resource=R.to_proto(node.m, r, _tracker(node.lab))))
    return out


IMPLS = {
    MS + "ApplyConfiguration": apply_configuration,
    MS + "Bootstrap": bootstrap,
    MS + "EtcdMemberList": etcd_member_list,
    MS + "EtcdRemoveMemberByID": etcd_remove_member,
    MS + "EtcdLeaveCluster": etcd_leave_cluster,
    MS + "EtcdForfeitLeadership": etcd_forfeit_leadership,
    MS + "EtcdStatus": etcd_status,
    MS + "Hostname": hostname,
    MS + "Kubeconfig": kubeconfig,
    MS + "EtcdSnapshot": etcd_snapshot,
    MS + "List": list_files,
    MS + "Reboot": reboot,
    MS + "Reset": reset,
    MS + "ServiceList": service_list,
    MS + "Shutdown": shutdown,
    MS + "Upgrade": upgrade_legacy,
    MS + "Version": version,
    IS + "Pull": image_pull,
    IS + "List": image_list,
    LS + "Upgrade": lifecycle_upgrade,
    SS + "Disks": disks,
    SS + "BlockDeviceWipe": block_device_wipe,
    COSI + "Get": cosi_get,
    COSI + "List": cosi_list,
}
