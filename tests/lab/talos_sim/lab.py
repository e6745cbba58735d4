"""The lab runtime: machines, their gRPC servers on loopback, lifecycle (reboot, reset, ...)."""

import asyncio
import collections
import hashlib
import json
import logging
import os
import tempfile
import time

from grpclib.const import Status
from grpclib.server import Server

from tests import versions

from .. import pki
from . import config as cfg
from . import extensions as simext
from . import files as simfiles
from . import state as st

log = logging.getLogger("talos_sim")

PORT = 50000
ETCD_PEER_PORT = 2380


# Lab addresses. Lab ``index`` (0 <= index < INDEXES) owns the loopback /24 127.(10 + index // 256).(index % 256)
# (second octets 10..209): its machines 1..254 are .1 .. .254 there, as they have always been. A lab of more machines
# continues in further /24s of its own in the part of 127/8 no first /24 uses, 127.210.0.0 - 127.255.255.255
# (46 * 256 = 11776 /24s): EXTRA_BLOCKS of them for each index below EXTENDED_INDEXES, lab index K's extra /24
# number j (1 .. EXTRA_BLOCKS) being number e = K * EXTRA_BLOCKS + j - 1 of that part, 127.(210 + e // 256).(e % 256).
# No /24 belongs to two indexes (first /24s and extra /24s never overlap, and e is unique per (K, j)), so labs of
# different indexes never share an address. Only indexes below EXTENDED_INDEXES may hold more than HOSTS machines;
# the automatic choices (process._next_index, runner.auto_index) pick BIG_INDEXES for those.
HOSTS = 254                    # .1 .. .254 of each /24
INDEXES = 200 * 256            # first /24s: second octets 10 .. 209
EXTRA_FIRST = 210              # extra /24s: second octets 210 .. 255
EXTRA_BLOCKS = 16              # extra /24s per index: a lab holds up to HOSTS * (1 + EXTRA_BLOCKS) = 4318 machines
EXTENDED_INDEXES = (256 - EXTRA_FIRST) * 256 // EXTRA_BLOCKS  # 736: indexes 0 .. 735 may grow beyond one /24
BIG_INDEXES = range(1, 100)    # what a big lab's automatic index is drawn from (small labs' start at 100 / 1000)


def capacity(index):
    """How many machines lab ``index`` numbers: HOSTS, or HOSTS * (1 + EXTRA_BLOCKS) for an index that may grow."""
    return HOSTS * (1 + EXTRA_BLOCKS) if 0 <= int(index) < EXTENDED_INDEXES else HOSTS


def subnet_for_index(index, block=0):
    """Loopback /24 number ``block`` of lab ``index`` (as "127.a.b"): block 0 is 127.(10 + index // 256).(index % 256),
    blocks 1 .. EXTRA_BLOCKS (indexes below EXTENDED_INDEXES only) are in 127.210.0.0 - 127.255.255.255 (see above)."""
    index, block = int(index), int(block)
    if not 0 <= index < INDEXES:
        raise ValueError("lab index out of range: %d" % index)
    if block == 0:
        return "127.%d.%d" % (10 + index // 256, index % 256)
    if not 1 <= block <= EXTRA_BLOCKS or index >= EXTENDED_INDEXES:
        raise ValueError("lab index %d holds at most %d machines%s" % (
            index, capacity(index), "" if index < EXTENDED_INDEXES
            else " (an index below %d holds up to %d)" % (EXTENDED_INDEXES, HOSTS * (1 + EXTRA_BLOCKS))))
    extra = index * EXTRA_BLOCKS + block - 1
    return "127.%d.%d" % (EXTRA_FIRST + extra // 256, extra % 256)


def address_for_index(index, n):
    """Address of machine number ``n`` (1, 2, ...) of lab ``index``: .1 .. .254 of its first /24, then of its
    extra /24s in order (machine 255 is .1 of extra /24 1)."""
    n = int(n)
    if n < 1:
        raise ValueError("machine numbers start at 1: %d" % n)
    block, host = divmod(n - 1, HOSTS)
    return "%s.%d" % (subnet_for_index(index, block), host + 1)


def subnets_for_index(index, machines):
    """The /24s (as "127.a.b") that machines 1 .. ``machines`` of lab ``index`` live on."""
    return [subnet_for_index(index, b) for b in range(max(1, (int(machines) + HOSTS - 1) // HOSTS))]


def limit_streams(limit):
    """Every machine of this process allows ``limit`` concurrent streams per connection (SETTINGS_MAX_CONCURRENT_STREAMS)
    instead of h2's 100, from its first SETTINGS on: a client that opens more is ended with a connection error, as h2
    ends it at 100 (a server may allow fewer than the RFC's recommended floor)."""
    from grpclib import protocol
    from h2.connection import H2Connection
    from h2.settings import SettingCodes, Settings

    class Limited(H2Connection):
        def __init__(self, config=None):
            super().__init__(config=config)
            if not self.config.client_side:
                self.local_settings = Settings(client=False, initial_values={
                    SettingCodes.MAX_CONCURRENT_STREAMS: int(limit),
                    SettingCodes.MAX_HEADER_LIST_SIZE: self.DEFAULT_MAX_HEADER_LIST_SIZE})

    protocol.H2Connection = Limited


class Connections:
    """The lab's established connections to its machines' gRPC servers (TLS done): how many are open now, the most
    open at once since the last reset, and how many were made (control API GET /connections). A client that bounds
    its fan-out should never hold more than its bound, however many machines it reaches; a proxied call is one
    connection, to its endpoint."""

    def __init__(self):
        self.open = 0
        self.peak = 0
        self.total = 0

    def made(self):
        self.open += 1
        self.total += 1
        self.peak = max(self.peak, self.open)

    def lost(self):
        self.open = max(0, self.open - 1)

    def reset(self):
        self.peak = self.open
        self.total = 0

    def to_json(self):
        return {"open": self.open, "peak": self.peak, "total": self.total}


class _TrackingServer(Server):
    """A grpclib Server that can drop its established connections (a machine going down), and counts them in
    ``connections`` (a Connections)."""

    def __init__(self, *args, connections=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._protocols = []
        self._connections = connections

    def _counted(self, proto):
        gauge = self._connections
        made, lost = proto.connection_made, proto.connection_lost
        state = {"open": False}

        def connection_made(transport):
            state["open"] = True
            gauge.made()
            made(transport)

        def connection_lost(exc):
            if state["open"]:
                state["open"] = False
                gauge.lost()
            lost(exc)
        proto.connection_made, proto.connection_lost = connection_made, connection_lost
        return proto

    def _protocol_factory(self):
        proto = super()._protocol_factory()
        if self._connections is not None:
            proto = self._counted(proto)
        alive = []
        for p in self._protocols:
            try:
                transport = p.connection._transport
            except AttributeError:
                transport = None
            if transport is None or not transport.is_closing():
                alive.append(p)
        self._protocols = alive[-200:]
        self._protocols.append(proto)
        return proto

    def abort_connections(self):
        for p in self._protocols:
            conn = getattr(p, "connection", None)
            if conn is not None:
                try:
                    conn._transport.abort()
                except Exception:  # pragma: no cover - best effort
                    pass
        self._protocols = []


class Caller:
    """Who is calling: roles and whether the call came through another node."""

    def __init__(self, roles, proxied=False, via=None):
        self.roles = set(roles)
        self.proxied = proxied
        self.via = via


def _peer_der(stream):
    transport = getattr(stream.peer, "_transport", None)
    if transport is None:
        return None
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    return ssl_object.getpeercert(binary_form=True)


class Node:
    """Runtime of one machine: its gRPC server and lifecycle tasks."""

    def __init__(self, lab, machine):
        self.lab = lab
        self.m = machine
        self.server = None
        self.bound_address = None
        self._ssl_dir = os.path.join(lab.workdir, "machines", machine.name)
        os.makedirs(self._ssl_dir, exist_ok=True)
        self.task = None
        self.peer_server = None

    # --- server ------------------------------------------------------------------------
    def _ssl_context(self):
        m = self.m
        if m.mode == st.MAINTENANCE:
            if m.maintenance_pair is None:
                m.maintenance_pair = pki.maintenance_certificate([m.address])
            return pki.server_ssl_context(m.maintenance_pair, None, self._ssl_dir, "maintenance")
        ca = self.lab.ca_for(m.trusted_cas[0] if m.trusted_cas else None)
        if ca is None:
            log.warning("%s: no key known for the OS CA of its config; serving with an "
                        "untrusted certificate", m.name)
            ca = self.lab.orphan_ca()
        if m.server_pair is None:
            m.server_pair = pki.issue_server(ca, m.hostname, [m.address])
        return pki.server_ssl_context(m.server_pair, m.trusted_cas or [ca.cert_pem],
                                      self._ssl_dir, "server")

    async def start(self):
        if self.server is not None:
            return
        from . import api
        ctx = self._ssl_context()
        server = _TrackingServer([api.Handlers(self)], connections=self.lab.connections)
        try:
            await server.start(self.m.address, PORT, ssl=ctx, reuse_address=True)
        except OSError as exc:
            raise RuntimeError("cannot listen on %s:%d: %s" % (self.m.address, PORT, exc))
        self.server = server
        self.bound_address = self.m.address
        self.m.up = True
        await self._open_peer_port()
        self.lab.elect(self.m)  # a member back while the leader's machine is down: etcd elects a leader again
        log.info("%s up at %s:%d (%s, %s)", self.m.name, self.m.address, PORT, self.m.mode,
                 self.m.version)

    async def _open_peer_port(self):
        """An etcd member answers on its peer port (2380): a listener that accepts and closes,
        so a health probe of the member's peer URL sees it while the machine is up. Each
        connection is counted in the machine's calls as ``etcd-peer-port``."""
        m = self.m
        if not (m.is_controlplane and m.etcd_member_id):
            return

        async def accept(_reader, writer):
            m.calls["etcd-peer-port"] = m.calls.get("etcd-peer-port", 0) + 1
            writer.close()
        try:
            self.peer_server = await asyncio.start_server(accept, m.address, ETCD_PEER_PORT,
                                                          reuse_address=True)
        except OSError as exc:  # pragma: no cover - the port is the machine's own
            log.warning("%s: cannot listen on the etcd peer port: %s", m.name, exc)

    async def stop(self):
        self.m.up = False
        peer, self.peer_server = self.peer_server, None
        if peer is not None:
            peer.close()
        server, self.server = self.server, None
        if server is None:
            return
        server.close()
        server.abort_connections()
        try:
            await asyncio.wait_for(server.wait_closed(), 2)
        except (asyncio.TimeoutError, Exception):  # pragma: no cover
            pass
        log.info("%s down", self.m.name)

    def should_listen(self):
        return (self.m.powered and not self.m.faults.get("unreachable")
                and self.m.busy is None)

    async def sync_listening(self):
        if self.should_listen() and self.server is None:
            await self.start()
        elif not self.should_listen() and self.server is not None and self.m.busy is None:
            await self.stop()

    # --- lifecycle ---------------------------------------------------------------------
    def schedule(self, coro_fn, *args):
        """Run a lifecycle operation after the current reply has gone out."""
        async def runner():
            await asyncio.sleep(0.1)
            try:
                await coro_fn(*args)
            except Exception:
                log.exception("%s: lifecycle operation failed", self.m.name)
        self.task = asyncio.ensure_future(runner())
        return self.task

    async def power_cycle(self, stage, seconds, before_boot=None):
        """Go down (stage ``stage``), stay down ``seconds``, run ``before_boot``, boot."""
        m = self.m
        m.busy = stage
        m.stage = stage
        self.lab.event(m.name, "down:" + stage)
        await self.stop()
        self.lab.elect(m)
        await asyncio.sleep(max(0.0, float(seconds)))
        if before_boot is not None:
            before_boot()
        self._boot_changes()
        m.busy = None
        if m.powered:
            await self.sync_listening()

    def _boot_changes(self):
        m = self.m
        m.boots += 1
        new_addr = m.faults.pop("new_address_on_reboot", None)
        if new_addr:
            if new_addr is True or new_addr == "auto":
                new_addr = self.lab.allocate_address()
            self.lab.move(m, new_addr)
        if m.staged_config is not None and m.mode == st.CONFIGURED:
            data, m.staged_config = m.staged_config, None
            self.lab.set_machine_config(m, data)
        if m.pending_version:
            m.version, m.pending_version = m.pending_version, None
        if m.pending_extensions is not None:  # booted from what the upgrade installed
            m.extensions, m.pending_extensions = m.pending_extensions, None
        if m.try_task is not None:
            m.try_task.cancel()
            m.try_task = None
        m.server_pair = None
        m.maintenance_pair = None
        m.boot_time = time.time()
        self.lab.event(m.name, "boot")
        if m.mode == st.CONFIGURED:
            m.stage = "running"
            self.lab.on_configured_boot(m)
        else:
            m.stage = "maintenance"
        self.lab.changed()

    async def reboot(self, seconds=None, stage="rebooting"):
        if seconds is None:
            key = "upgrade_seconds" if self.m.pending_version else "reboot_seconds"
            seconds = self.m.timing[key]
        await self.power_cycle(stage, seconds)

    async def shutdown(self):
        self.m.powered = False
        self.m.stage = "shutting down"
        await self.stop()
        self.lab.elect(self.m)
        self.m.stage = "stopped"


class Lab:
    """All machines of one lab, served by one asyncio loop."""

    def __init__(self, workdir, index=0, name="lab", ca_algorithm=pki.ED25519, case=None):
        self.workdir = os.path.abspath(workdir)
        os.makedirs(self.workdir, exist_ok=True)
        self.index = index
        self.subnet = subnet_for_index(index)
        self.name = name
        self.context = name
        # case: a fixture case directory (or cfg.Case); configured machines start from its
        # configs and the lab's CA is the case's OS CA, so its talosconfig is accepted
        if case is not None and not isinstance(case, cfg.Case):
            case = cfg.Case(case)
        self.case = case
        if case is not None:
            self.ca = case.ca
            ca_algorithm = case.ca.algorithm
        else:
            self.ca = pki.new_ca(ca_algorithm)
        self.ca_algorithm = ca_algorithm
        self._ca_keys = {}
        self.remember_ca(self.ca)
        self._orphan_ca = None
        self.secrets = cfg.new_cluster_secrets(name, self.ca)
        if case is not None:  # lab.json "cluster" names the case's cluster
            self.secrets["cluster_id"] = case.cluster_id
            self.secrets["cluster_name"] = case.cluster_name or name
        self.machines = []
        self.nodes = {}
        self.clusters = {}
        self.settings = {"kubeconfig_server": "https://127.0.0.1:6443", "kubeconfig_path": ""}
        self.control_url = ""
        self.talosconfig = os.path.join(self.workdir, "talosconfig")
        self.lab_json = os.path.join(self.workdir, "lab.json")
        self._used = set()
        self._index = None  # see _lookup
        self.connections = Connections()
        self._written = 0.0  # lab.json: when it was last written (monotonic), what that cost, a write to come
        self._write_cost = 0.0
        self._write_pending = None
        self.default_timing = {}
        self.default_latency_ms = 0
        # (machine, what, epoch seconds) in the order it happened: calls that reached a machine (by method name:
        # "Pull", "Upgrade", "Reboot", "EtcdForfeitLeadership", ...), "down:<stage>", "boot", and "etcd-leader" on
        # the machine whose etcd member became the leader (bootstrap, a forfeit, an election when the leader's machine
        # went down); the time lets an outside check set a call beside the API server's audit log (adopt's hold)
        self.timeline = collections.deque(maxlen=200000)

    def event(self, machine, what):
        self.timeline.append((machine, what, time.time()))

    # --- CAs ---------------------------------------------------------------------------
    @staticmethod
    def _fp(cert_pem):
        cert = pki.load_cert_pem(cert_pem)
        from cryptography.hazmat.primitives import serialization
        return hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()

    def remember_ca(self, pair):
        self._ca_keys[self._fp(pair.cert_pem)] = pair

    def ca_for(self, cert_pem):
        if cert_pem is None:
            return None
        try:
            return self._ca_keys.get(self._fp(cert_pem))
        except ValueError:
            return None

    def orphan_ca(self):
        if self._orphan_ca is None:
            self._orphan_ca = pki.new_ca(self.ca_algorithm, organization="orphan")
        return self._orphan_ca

    # --- addresses ---------------------------------------------------------------------
    def address(self, n):
        """Machine number ``n``'s address (see ``address_for_index``)."""
        return address_for_index(self.index, n)

    def allocate_address(self):
        """A free address of the lab for a machine that moves: from .101 of its first /24 on, then its extra /24s."""
        for n in range(101, capacity(self.index) + 1):
            a = self.address(n)
            if a not in self._used:
                return a
        raise RuntimeError("no free address left in lab %d's %d addresses" % (self.index, capacity(self.index)))

    def move(self, machine, new_addr):
        self._used.discard(machine.address)
        machine.address = new_addr
        self._used.add(new_addr)
        self._index = None

    def _lookup(self):
        """{name: machine}, {address: machine} (the first machine of an address, as a scan in order finds it): built
        once after each addition or move, so that a call proxied to one of a thousand machines does not scan them."""
        if self._index is None:
            by_name, by_address = {}, {}
            for m in self.machines:
                by_name.setdefault(m.name, m)
                by_address.setdefault(m.address, m)
            self._index = (by_name, by_address)
        return self._index

    def machine(self, name):
        return self._lookup()[0][name]

    def node_at(self, address):
        m = self._lookup()[1].get(address)
        return None if m is None else self.nodes[m.name]

    # --- building ----------------------------------------------------------------------
    def cluster(self, cluster_id, name):
        c = self.clusters.get(cluster_id)
        if c is None:
            c = self.clusters[cluster_id] = st.Cluster(cluster_id, name)
            c.member_runs = lambda member_id: self.member_runs(c, member_id)
            c.on_leader = lambda member_id: self.event(c.etcd_members.get(member_id, "?"), "etcd-leader")
        elif name:
            c.name = name
        return c

    def member_runs(self, c, member_id):
        """Whether etcd member ``member_id`` of ``c`` runs: its machine up, running, not busy, still that member."""
        name = c.etcd_members.get(member_id)
        m = next((x for x in self.machines if x.name == name), None)
        return (m is not None and m.up and m.busy is None and m.stage == "running" and m.mode == st.CONFIGURED
                and m.cluster_id == c.id and m.etcd_member_id == member_id)

    def elect(self, m):
        """After ``m`` went down or came back: when its cluster's leader no longer runs, a running member leads (etcd
        elects one within an election timeout; the lab at once). A member that comes back changes nobody's role."""
        c = self.cluster_of(m)
        if c is not None and c.bootstrapped:
            c.elect()

    def add_machine(self, name, role, version, mode=st.CONFIGURED, address=None,
                    endpoint=None, kubernetes=None, install_image=None, extensions=None):
        """``install_image``: the installer it was installed from (its config's install image becomes it, "none"
        removes it; it runs the extensions the image carries); ``extensions``: names of extensions it runs besides,
        installed some other way."""
        address = address or self.address(len(self.machines) + 1)
        m = st.Machine(name, address, role, version, mode)
        self._used.add(address)
        m.timing.update(self.default_timing)
        if self.default_latency_ms:
            m.faults["latency_ms"] = self.default_latency_ms
        if mode == st.CONFIGURED and self.case is not None:
            # the case file's bytes as they are; the config names the Kubernetes version
            self.set_machine_config(m, self.case.config(role), fast=True)
        elif mode == st.CONFIGURED:
            data = cfg.generate_machine_config(self.secrets, role, name, endpoint or address,
                                               version=version,
                                               kubernetes_version=versions.bare(kubernetes or versions.KUBERNETES))
            self.set_machine_config(m, data, fast=True)
        if install_image is not None:
            if m.config is not None:
                self.set_machine_config(m, cfg.with_install_image(m.config, None if install_image == "none"
                                                                  else install_image))
            m.extensions = simext.carried(install_image)
        if extensions:
            m.extensions = simext.named(extensions) + m.extensions
        self.machines.append(m)
        self.nodes[name] = Node(self, m)
        self._index = None
        return m

    def set_machine_config(self, m, data, fast=False):
        """``fast``: ``data`` is a config the lab made or a fixture case's (cfg.parse_documents)."""
        facts = cfg.ConfigFacts(data, fast=fast)
        pair = facts.ca_pair()
        if pair is not None:
            self.remember_ca(pair)
        m.set_config(data, facts)
        if m.cluster_id:
            self.cluster(m.cluster_id, m.cluster_name)
        return facts

    def bootstrap_all(self):
        """Mark every cluster bootstrapped with all configured control planes as members."""
        for c in self.clusters.values():
            c.bootstrapped = True
        for m in self.machines:
            self.on_configured_boot(m)

    def on_configured_boot(self, m):
        """A configured control plane of a bootstrapped cluster runs etcd (joins if needed)."""
        if not m.is_controlplane or not m.cluster_id:
            return
        c = self.cluster(m.cluster_id, m.cluster_name)
        if c.bootstrapped and m.etcd_member_id not in c.etcd_members:
            c.add_member(m)

    def cluster_of(self, m):
        if not m.cluster_id:
            return None
        return self.clusters.get(m.cluster_id)

    def cluster_machines(self, m):
        """Configured machines of the same cluster (discovery members)."""
        if not m.cluster_id:
            return []
        return [x for x in self.machines
                if x.mode == st.CONFIGURED and x.cluster_id == m.cluster_id]

    # --- running -----------------------------------------------------------------------
    async def start(self):
        for m in self.machines:
            await self.nodes[m.name].sync_listening()
        self.write_talosconfig()
        self.changed()

    async def stop(self):
        self.flush()
        for n in self.nodes.values():
            if n.task is not None:
                n.task.cancel()
            await n.stop()

    def write_talosconfig(self):
        cps = [m for m in self.machines if m.planned_role == "controlplane"]
        first = (cps or self.machines)[0]
        nodes = [m.address for m in self.machines]
        admin = pki.issue_client(self.ca, ["os:admin"])
        reader = pki.issue_client(self.ca, ["os:reader"])
        self.admin_client, self.reader_client = admin, reader
        pki.write_talosconfig(self.talosconfig, {
            self.context: {"endpoints": [first.address], "nodes": nodes, "ca": self.ca,
                           "client": admin},
            self.context + "-reader": {"endpoints": [first.address], "nodes": nodes,
                                       "ca": self.ca, "client": reader},
        }, self.context)
        # the raw CA for tests that build their own certificates
        with open(os.path.join(self.workdir, "ca.crt"), "wb") as fh:
            fh.write(self.ca.cert_pem)
        fd = os.open(os.path.join(self.workdir, "ca.key"),
                     os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(self.ca.key_pem)

    BRIEF = ("name", "address", "role", "mode", "version", "uuid", "hostname", "stage", "up")

    def state(self, full=False, brief=False):
        """The lab JSON; ``brief``: each machine's BRIEF keys and ``kubelet_image`` (its config's kubelet image, ""
        without one) only, no configs, disks or files: what the lab agent reads every round, 280 bytes a machine
        where the whole form is 3 KB."""
        machines = []
        for m in self.machines:
            if brief:
                j = dict((k, getattr(m, k)) for k in self.BRIEF)
                j["kubelet_image"] = (m.facts.kubelet_image if m.facts is not None else "") or ""
                machines.append(j)
                continue
            j = m.to_json()
            j["cni_files"] = sorted(simfiles.cni_files(self, m)) if m.mode == st.CONFIGURED else []
            if not full:
                for k in ("faults", "timing", "pending_version", "staged_config"):
                    j.pop(k, None)
            machines.append(j)
        out = {
            "control": self.control_url,
            "talosconfig": self.talosconfig,
            "context": self.context,
            "ca_algorithm": self.ca_algorithm,
            "cluster": {"name": self.secrets["cluster_name"], "id": self.secrets["cluster_id"]},
            "machines": machines,
        }
        if self.case is not None:
            out["case"] = self.case.directory
        return out

    def changed(self):
        """Rewrite lab.json (atomically). At once unless it was written less than 20 times its last write's cost ago
        (about 10 ms for 5 machines, 1.5 s for 1000, whose lab.json is 3 MB); then once that time is up, with every
        change made meanwhile: writing lab.json takes at most a twentieth of the loop, however often machines change.
        The control API's GET /state is always live."""
        if not self.control_url:
            return
        wait = self._written + 20 * self._write_cost - time.monotonic()
        if wait > 0:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            if loop is not None:
                if self._write_pending is None:
                    self._write_pending = loop.call_later(wait, self._write_lab_json)
                return
        self._write_lab_json()

    def flush(self):
        """Write lab.json now if a write is due (before the lab stops)."""
        if self._write_pending is not None:
            self._write_lab_json()

    def _write_lab_json(self):
        if self._write_pending is not None:
            self._write_pending.cancel()
            self._write_pending = None
        started = time.monotonic()
        fd, tmp = tempfile.mkstemp(dir=self.workdir, prefix=".lab.json.")
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "w") as fh:
            json.dump(self.state(), fh, indent=1)
        os.replace(tmp, self.lab_json)
        self._written = time.monotonic()
        self._write_cost = self._written - started

    # --- control API operations --------------------------------------------------------
    async def set_faults(self, name, faults):
        """Besides those tests/lab/control.py describes: ``pull_seconds`` (ImageService.Pull waits that long before its
        replies) and ``pull_error`` (it then fails as Talos fails a pull: true or a "not found" text NotFound, another
        text Unknown; api._pull_failure). An unhealthy etcd member is ``etcd_errors`` (its EtcdStatus reports them)."""
        m = self.machine(name)
        allowed = {"unreachable", "latency_ms", "fail_call", "fail_code", "fail_message",
                   "fail_count", "new_address_on_reboot", "interrupt_reset", "apply_needs_reboot",
                   "installer_exit_code", "kubeprism_unhealthy", "lose_reply", "etcd_snapshot_file",
                   "installer_seconds", "etcd_db_size", "etcd_no_leader", "etcd_errors", "pull_seconds",
                   "pull_error"}
        unknown = set(faults) - allowed
        if unknown:
            raise ValueError("unknown faults: %s" % ", ".join(sorted(unknown)))
        if not faults:
            m.faults = {}
        else:
            for k, v in faults.items():
                if v in (None, False, 0, ""):
                    m.faults.pop(k, None)
                else:
                    m.faults[k] = v
            if "fail_call" in m.faults and "fail_code" not in m.faults:
                m.faults["fail_code"] = "UNAVAILABLE"
            if "fail_code" in m.faults:
                status_code(m.faults["fail_code"])  # validate
        await self.nodes[name].sync_listening()
        self.changed()
        return dict(m.faults)

    def set_cni_files(self, name, cni_files):
        """What /etc/cni/net.d holds on the machine ({file name: content}); None: what its CNI writes."""
        m = self.machine(name)
        if cni_files is not None:
            if not isinstance(cni_files, dict) or not all(
                    isinstance(k, str) and k and "/" not in k and isinstance(v, str) for k, v in cni_files.items()):
                raise ValueError("cni_files: a mapping of file names to contents, or null")
            cni_files = dict(cni_files)
        m.cni_files = cni_files
        self.changed()
        return sorted(simfiles.cni_files(self, m))

    def set_timing(self, name, timing):
        m = self.machine(name)
        for k, v in timing.items():
            if k not in m.timing:
                raise ValueError("unknown timing: %s" % k)
            m.timing[k] = float(v)
        return dict(m.timing)

    def reboot_unasked(self, name, seconds):
        """The machine goes down on its own and boots ``seconds`` later (what it runs and its config as before a
        reboot); False when it is down or busy with a lifecycle operation already."""
        m = self.machine(name)
        if not m.powered or m.busy is not None:
            return False
        self.nodes[name].schedule(self.nodes[name].power_cycle, "unasked", seconds)
        return True

    async def set_power(self, name, on):
        m = self.machine(name)
        node = self.nodes[name]
        if on and not m.powered:
            m.powered = True
            node._boot_changes()
            await node.sync_listening()
        elif not on and m.powered:
            await node.shutdown()
        self.changed()


def status_code(code):
    """A grpclib Status from a name (``UNAVAILABLE``, ``Unavailable``) or a number."""
    if isinstance(code, Status):
        return code
    if isinstance(code, int) or (isinstance(code, str) and code.isdigit()):
        return Status(int(code))
    name = str(code).upper().replace(" ", "_")
    aliases = {"PERMISSIONDENIED": "PERMISSION_DENIED", "NOTFOUND": "NOT_FOUND",
               "ALREADYEXISTS": "ALREADY_EXISTS", "FAILEDPRECONDITION": "FAILED_PRECONDITION",
               "DEADLINEEXCEEDED": "DEADLINE_EXCEEDED", "INVALIDARGUMENT": "INVALID_ARGUMENT",
               "RESOURCEEXHAUSTED": "RESOURCE_EXHAUSTED", "DATALOSS": "DATA_LOSS",
               "OUTOFRANGE": "OUT_OF_RANGE"}
    name = aliases.get(name, name)
    try:
        return Status[name]
    except KeyError:
        raise ValueError("unknown gRPC status code %r" % (code,))
