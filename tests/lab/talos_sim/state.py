"""State model of simulated Talos machines (no I/O here)."""

import hashlib
import os
import random
import re
import string
import time
import uuid as _uuid

GiB = 1024 ** 3

_B62 = string.digits + string.ascii_uppercase + string.ascii_lowercase

CONFIGURED = "configured"
MAINTENANCE = "maintenance"


def new_node_id():
    """A Talos-like node identity (base62 of 32 random bytes)."""
    n = int.from_bytes(os.urandom(32), "big")
    out = []
    while n:
        n, r = divmod(n, 62)
        out.append(_B62[r])
    return "".join(reversed(out)) or "0"


def new_member_id():
    return random.getrandbits(63) | 1


def parse_version(tag):
    m = re.match(r"^v?(\d+)\.(\d+)\.(\d+)", tag or "")
    if not m:
        raise ValueError("not a Talos version: %r" % (tag,))
    return tuple(int(x) for x in m.groups())


def version_from_image(image):
    """``ghcr.io/siderolabs/installer:v1.14.1`` -> ``v1.14.1`` (None if the tag is no version)."""
    ref = image.split("@", 1)[0]
    last = ref.rsplit("/", 1)[-1]
    if ":" not in last:
        return None
    tag = last.rsplit(":", 1)[1]
    try:
        parse_version(tag)
    except ValueError:
        return None
    return tag if tag.startswith("v") else "v" + tag


def docker_ref(ref):
    """(name, tag, digest) of an image reference as containerd stores it (reference.ParseDockerRef):
    docker.io/library/ for a bare name, ``latest`` when neither tag nor digest, the tag dropped when a
    digest pins it. The simulator's own reading, kept apart from the collection's parser."""
    name, _at, digest = ref.partition("@")
    first, slash, _rest = name.partition("/")
    last = name.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else None
    if tag is not None:
        name = name[:len(name) - len(tag) - 1]
    if not slash:
        name = "docker.io/library/" + name
    elif not (first == "localhost" or "." in first or ":" in first or first.lower() != first):
        name = "docker.io/" + name
    if digest:
        tag = None
    elif tag is None:
        tag = "latest"
    return name, tag, digest or None


def default_hostname(uuid):
    """Talos' default hostname style when the config sets none: talos-xxx-yyy."""
    h = hashlib.sha256(uuid.encode()).hexdigest()
    return "talos-%s-%s" % (h[:3], h[3:6])


def default_disks(name):
    digest = hashlib.sha1(name.encode()).hexdigest()
    return [
        {"dev_path": "/dev/sda", "name": "sda", "size": 10 * GiB, "model": "QEMU HARDDISK",
         "serial": "QM%s" % digest[:8].upper(), "wwid": "t10.ATA     QEMU HARDDISK   QM%s" % digest[:8],
         "system_disk": True, "transport": "sata", "rotational": True, "readonly": False,
         "bus_path": "/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0", "uuid": ""},
        {"dev_path": "/dev/sdb", "name": "sdb", "size": 20 * GiB, "model": "QEMU HARDDISK",
         "serial": "QM%s" % digest[8:16].upper(), "wwid": "t10.ATA     QEMU HARDDISK   QM%s" % digest[8:16],
         "system_disk": False, "transport": "sata", "rotational": True, "readonly": False,
         "bus_path": "/pci0000:00/0000:00:1f.2/ata2/host1/target1:0:0/1:0:0:0", "uuid": ""},
    ]


def default_volumes():
    """Volumes of an installed, configured machine."""
    return [
        {"id": "META", "label": "META", "disk": "/dev/sda", "partition": "/dev/sda4",
         "size": 1024 * 1024, "filesystem": "none", "mount": "", "encrypted": False},
        {"id": "STATE", "label": "STATE", "disk": "/dev/sda", "partition": "/dev/sda5",
         "size": 100 * 1024 * 1024, "filesystem": "xfs", "mount": "/system/state",
         "encrypted": False},
        {"id": "EPHEMERAL", "label": "EPHEMERAL", "disk": "/dev/sda", "partition": "/dev/sda6",
         "size": 9 * GiB, "filesystem": "xfs", "mount": "/var", "encrypted": False},
        {"id": "u-data", "label": "u-data", "disk": "/dev/sdb", "partition": "/dev/sdb1",
         "size": 10 * GiB, "filesystem": "xfs", "mount": "/var/mnt/data", "encrypted": False},
        {"id": "u-secret", "label": "u-secret", "disk": "/dev/sdb", "partition": "/dev/sdb2",
         "size": 5 * GiB, "filesystem": "xfs", "mount": "/var/mnt/secret", "encrypted": True},
    ]


SYSTEM_VOLUMES = ("META", "STATE", "EPHEMERAL")


class Cluster:
    """Cluster-wide state shared by the machines with the same cluster id."""

    def __init__(self, cluster_id, name):
        self.id = cluster_id
        self.name = name
        self.bootstrapped = False
        self.etcd_members = {}  # member id -> machine name
        self.member_info = {}   # member id -> (hostname, address) when it joined
        self.raft_index = 1000
        self.raft_term = 2
        self.leader = 0
        self.k8s_ca = None  # KeyPair, made on first kubeconfig request
        # set by the lab: whether a member's machine runs (up, not busy, running), and who to tell of a new leader
        self.member_runs = lambda member_id: True
        self.on_leader = lambda member_id: None

    def set_leader(self, member_id, term=True):
        """``member_id`` leads from now on (a new raft term); the lab records it."""
        if member_id == self.leader:
            return
        self.leader = member_id
        if term:
            self.raft_term += 1
        if member_id:
            self.on_leader(member_id)

    def elect(self, fallback=False):
        """etcd's election once the leader's machine no longer runs: the first member (in member id order, as etcd
        lists them) whose machine runs leads. When none runs the leader stays (nothing could elect another), or with
        ``fallback`` (the leader left etcd) the first member left leads. Returns whether the leader changed."""
        if self.leader in self.etcd_members and self.member_runs(self.leader):
            return False
        before = self.leader
        ids = sorted(self.etcd_members)
        running = [mid for mid in ids if mid != self.leader and self.member_runs(mid)]
        if running:
            self.set_leader(running[0])
        elif fallback or self.leader not in self.etcd_members:
            self.set_leader(ids[0] if ids else 0)
        return self.leader != before

    def add_member(self, machine):
        mid = new_member_id()
        self.etcd_members[mid] = machine.name
        self.member_info[mid] = (machine.hostname, machine.address)
        machine.etcd_member_id = mid
        if not self.leader or self.leader not in self.etcd_members:
            self.set_leader(mid, term=False)
        self.raft_term += 1
        self.raft_index += 10
        return mid

    def remove_member(self, member_id):
        self.etcd_members.pop(member_id, None)
        if self.leader == member_id:
            self.elect(fallback=True)
        self.raft_index += 5


class Machine:
    """One simulated Talos machine."""

    def __init__(self, name, address, role, version, mode=CONFIGURED, uuid=None):
        parse_version(version)
        self.name = name
        self.address = address
        self.planned_role = role
        self.version = version
        self.uuid = uuid or str(_uuid.uuid4())
        self.mode = mode
        self.stage = "running" if mode == CONFIGURED else "maintenance"
        self.up = False          # answering on the network
        self.powered = True      # False after a Reset with reboot=false (or a Shutdown)
        self.config = None       # bytes, exactly as applied
        self.facts = None        # config.ConfigFacts
        self.staged_config = None
        self.pending_version = None
        self.extensions = []     # system extensions it booted with (talos_sim.extensions), in load order
        self.pending_extensions = None  # those the installed upgrade carries, from the next boot
        self.node_id = new_node_id()
        self.etcd_member_id = 0
        self.disks = default_disks(name)
        self.volumes = default_volumes() if mode == CONFIGURED else []
        self.installed = mode == CONFIGURED
        # Talos's own name for it, not the lab's (inventories name it ``name``): a config that sets no hostname leaves
        # Talos's default, talos-xxx-yyy, and the kubelet registers its Node under it
        self.hostname = default_hostname(self.uuid)
        self.cluster_id = None
        self.cluster_name = None
        self.trusted_cas = []    # PEM bytes: machine.ca + acceptedCAs
        self.server_pair = None  # configured-mode server KeyPair
        self.maintenance_pair = None
        self.faults = {}
        self.timing = {"reboot_seconds": 1.0, "upgrade_seconds": 1.5, "install_seconds": 0.5}
        self.boot_time = time.time()
        self.boots = 1
        self.busy = None         # name of a running lifecycle operation
        self.try_task = None
        self.previous_config = None
        self.images = {}         # (containerd address, namespace) -> {image name: Talos version or None}
        self.calls = {}          # method name -> calls that reached this machine (control API)
        self.requests = {}       # method path -> the last request it received, serialized (control API)

    # --- derived -----------------------------------------------------------------------
    @property
    def version_tuple(self):
        return parse_version(self.version)

    @property
    def minor(self):
        return self.version_tuple[:2]

    @property
    def role(self):
        if self.mode == CONFIGURED and self.facts is not None:
            return self.facts.machine_type
        return self.planned_role

    @property
    def is_controlplane(self):
        return self.mode == CONFIGURED and self.role == "controlplane"

    def set_config(self, data, facts):
        self.config = data
        self.facts = facts
        self.hostname = facts.hostname or default_hostname(self.uuid)
        self.cluster_name = facts.cluster_name
        self.cluster_id = facts.cluster_id
        cas = []
        if facts.ca_crt_pem:
            cas.append(facts.ca_crt_pem)
        cas.extend(facts.accepted_cas)
        self.trusted_cas = cas

    def to_json(self):
        return {
            "name": self.name,
            "address": self.address,
            "role": self.role,
            "mode": self.mode,
            "version": self.version,
            "uuid": self.uuid,
            "hostname": self.hostname,
            "stage": self.stage,
            "node_id": self.node_id,
            "cluster_name": self.cluster_name or "",
            "cluster_id": self.cluster_id or "",
            "etcd_member_id": self.etcd_member_id if self.is_controlplane else 0,
            "up": self.up,
            "disks": [{"dev_path": d["dev_path"], "size": d["size"], "model": d["model"],
                       "serial": d["serial"], "system_disk": d["system_disk"]}
                      for d in self.disks],
            "volumes": [{"id": v["id"], "encrypted": v["encrypted"]} for v in self.volumes],
            "machine_config": (self.config or b"").decode("utf-8", "replace"),
            "faults": dict(self.faults),
            "timing": dict(self.timing),
            "pending_version": self.pending_version or "",
            "extensions": [{"name": e["name"], "version": e["version"]} for e in self.extensions],
            "staged_config": self.staged_config is not None,
        }
