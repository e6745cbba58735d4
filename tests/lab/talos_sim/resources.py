"""COSI resources of a simulated machine (proto_spec via the spec messages, yaml_spec with Go names)."""

import functools
import hashlib
import ipaddress
import json
import time

import yaml

from . import extensions as ext
from . import protos as P
from . import state as st

# type -> (default namespace, sensitive)
TYPES = {
    "MachineConfigs.config.talos.dev": ("config", True),
    "Members.cluster.talos.dev": ("cluster", False),
    "Infos.cluster.talos.dev": ("cluster", False),
    "Identities.cluster.talos.dev": ("cluster", False),
    "MachineStatuses.runtime.talos.dev": ("runtime", False),
    "SystemInformations.hardware.talos.dev": ("hardware", False),
    "HostnameStatuses.net.talos.dev": ("network", False),
    "DiscoveredVolumes.block.talos.dev": ("runtime", False),
    "VolumeStatuses.block.talos.dev": ("runtime", False),
    "Disks.block.talos.dev": ("runtime", False),
    "SystemDisks.block.talos.dev": ("runtime", False),
    "Versions.runtime.talos.dev": ("runtime", False),
    "ExtensionStatuses.runtime.talos.dev": ("runtime", False),
    "KubePrismStatuses.kubernetes.talos.dev": ("k8s", False),
    "Nodenames.kubernetes.talos.dev": ("k8s", False),
    "MachineTypes.config.talos.dev": ("config", False),
    "ResourceDefinitions.meta.cosi.dev": ("meta", False),
}

_STAGES = {
    "unknown": 0, "booting": 1, "installing": 2, "maintenance": 3, "running": 4,
    "rebooting": 5, "shutting down": 6, "resetting": 7, "upgrading": 8,
}


def _pretty(size):
    """go-humanize Bytes (SI): 10 GiB -> "11 GB", 5 GiB -> "5.4 GB"."""
    import math
    if size < 10:
        return "%d B" % size
    suffixes = ["B", "kB", "MB", "GB", "TB", "PB", "EB"]
    e = int(math.floor(math.log(size) / math.log(1000)))
    val = math.floor(size / (1000 ** e) * 10 + 0.5) / 10
    return ("%.0f %s" if val >= 10 else "%.1f %s") % (val, suffixes[e])


def _yaml(d):
    # every Get and List builds the machine's resources anew (a fresh snapshot); the YAML of the same spec is the
    # same text, so it is dumped once: with a hundred machines the dumps were most of a Get's time
    return _dumped(json.dumps(d))


@functools.lru_cache(maxsize=4096)
def _dumped(text):
    return yaml.safe_dump(json.loads(text), default_flow_style=False, sort_keys=False)


@functools.lru_cache(maxsize=256)
def _config_yaml(config):
    return yaml.safe_dump(config.decode("utf-8", "replace"), default_style="|")


class Resource:
    def __init__(self, rtype, rid, owner, proto_spec, yaml_spec, namespace=None, labels=None):
        self.type = rtype
        self.namespace = namespace or TYPES[rtype][0]
        self.id = rid
        self.owner = owner
        self.proto_spec = proto_spec
        self.yaml_spec = yaml_spec
        self.labels = labels or {}


def _partitions(m):
    """(id, spec dict) of discovered volumes: disks and their partitions."""
    out = []
    for d in m.disks:
        name = d["name"]
        out.append((name, {"dev_path": d["dev_path"], "type": "disk",
                           "device_path": "/sys/devices" + d["bus_path"] + "/block/" + name,
                           "size": d["size"], "pretty_size": _pretty(d["size"]),
                           "sector_size": 512, "io_size": 512, "name": "gpt" if (
                               d["system_disk"] and m.installed) or any(
                               v["disk"] == d["dev_path"] for v in m.volumes) else "",
                           "uuid": "", "label": ""}))
    if m.installed:
        sysparts = [("1", "EFI", "vfat", 100 * 1024 * 1024), ("2", "BIOS", "", 1024 * 1024),
                    ("3", "BOOT", "xfs", 1000 * 1024 * 1024)]
        for idx, label, fs, size in sysparts:
            out.append(("sda" + idx, {"dev_path": "/dev/sda" + idx, "type": "partition",
                                      "parent": "sda", "parent_dev_path": "/dev/sda",
                                      "size": size, "pretty_size": _pretty(size),
                                      "name": fs, "partition_label": label,
                                      "partition_index": int(idx)}))
    for v in m.volumes:
        part = v["partition"].rsplit("/", 1)[1]
        disk = v["disk"].rsplit("/", 1)[1]
        out.append((part, {"dev_path": v["partition"], "type": "partition", "parent": disk,
                           "parent_dev_path": v["disk"], "size": v["size"],
                           "pretty_size": _pretty(v["size"]),
                           "name": "luks" if v["encrypted"] else (
                               "" if v["filesystem"] == "none" else v["filesystem"]),
                           "partition_label": v["label"],
                           "partition_index": int(part[len(disk):] or 0),
                           "uuid": _uuid(m.uuid, v["id"])}))
    return out


# Go yaml tags of block.DiscoveredVolumeSpec (machinery v1.14): order, omitempty, integers
_DV_ORDER = ["dev_path", "type", "device_path", "parent", "parent_dev_path", "size",
             "pretty_size", "sector_size", "io_size", "name", "uuid", "label", "block_size",
             "filesystem_block_size", "probed_size", "partition_uuid", "partition_type",
             "partition_label", "partition_index", "offset"]
_DV_OMITEMPTY = {"parent", "parent_dev_path", "sector_size", "io_size", "uuid", "label",
                 "block_size", "filesystem_block_size", "probed_size", "partition_uuid",
                 "partition_type", "partition_label", "partition_index"}
_DV_INT = {"size", "sector_size", "io_size", "block_size", "filesystem_block_size",
           "probed_size", "partition_index", "offset"}


def _uuid(seed, name):
    h = hashlib.sha1(("%s/%s" % (seed, name)).encode()).hexdigest()
    return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:32])


def _netip(addr):
    common = P.common()
    return common.NetIP(ip=ipaddress.ip_address(addr).packed)


# --- ResourceDefinitions (cosi meta); the spec message is not in our protos, so it is encoded
# by hand: cosi.resource.meta.ResourceDefinitionSpec {resource_type=1, display_type=2,
# default_namespace=3, aliases=4 (rep), all_aliases=5 (rep), print_columns=6, sensitivity=7}

def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _pb_str(field, value):
    data = value.encode()
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _singular(name):
    if name.endswith("ies"):
        return name[:-3] + "y"
    if name.endswith("uses") or name.endswith("sses"):
        return name[:-2]
    if name.endswith("s"):
        return name[:-1]
    return name


def _definition(rtype, namespace, sensitive):
    name, suffix = rtype.split(".", 1)
    display = _singular(name)
    aliases = [display.lower()]
    upper = "".join(ch for ch in name if ch.isupper())
    if len(upper) > 1:
        aliases.append(upper.lower())
        if not upper.endswith("S"):
            aliases.append(upper.lower() + "s")
    all_aliases = [name.lower()]
    parts = suffix.split(".")
    for i in range(1, len(parts)):
        all_aliases.append(".".join([name.lower()] + parts[:i]))
    all_aliases += aliases
    pb = _pb_str(1, rtype) + _pb_str(2, display) + _pb_str(3, namespace)
    for a in aliases:
        pb += _pb_str(4, a)
    for a in all_aliases:
        pb += _pb_str(5, a)
    if sensitive:
        pb += _varint(7 << 3 | 0) + _varint(1)
    y = {"type": rtype, "displayType": display, "defaultNamespace": namespace,
         "aliases": aliases, "allAliases": all_aliases, "printColumns": []}
    if sensitive:
        y["sensitivity"] = "sensitive"
    return Resource("ResourceDefinitions.meta.cosi.dev", rtype.lower(), "", pb, _yaml(y),
                    namespace="meta")


@functools.lru_cache(maxsize=256)
def _kubeprism_port(config):
    """KubePrism's port as the machine config sets it (typed KubePrismConfig, else
    machine.features.kubePrism), or None when it is off (neither: off, as in Talos)."""
    try:
        docs = [d for d in yaml.safe_load_all((config or b"").decode("utf-8", "replace")) if isinstance(d, dict)]
    except yaml.YAMLError:
        return None
    return _kubeprism_port_of(docs)


def _kubeprism_port_of(docs):
    for d in docs:
        if d.get("kind") == "KubePrismConfig":
            return int(d.get("port") or 7445)
    for d in docs:
        if "kind" not in d and isinstance(d.get("machine"), dict):
            prism = ((d["machine"].get("features") or {}).get("kubePrism"))
            if isinstance(prism, dict):
                return int(prism.get("port") or 7445) if prism.get("enabled") else None
    return None


@functools.lru_cache(maxsize=256)
def _discovery_enabled(config):
    """Whether the machine config turns cluster discovery on, as Talos reads it: the legacy
    cluster.discovery.enabled, else a registry document of the typed form (DiscoveryServiceConfig,
    KubernetesDiscoveryConfig) next to DiscoveryIdentityConfig. A config that says neither stays on, as
    the simulator always had it. Off, Talos keeps no members (``talosctl get members`` lists none)."""
    try:
        docs = [d for d in yaml.safe_load_all((config or b"").decode("utf-8", "replace")) if isinstance(d, dict)]
    except yaml.YAMLError:
        return True
    return _discovery_enabled_of(docs)


def _discovery_enabled_of(docs):
    for d in docs:
        if "kind" not in d and isinstance(d.get("cluster"), dict) and isinstance(d["cluster"].get("discovery"), dict):
            return d["cluster"]["discovery"].get("enabled") is True
    kinds = set(d.get("kind") for d in docs)
    if "DiscoveryIdentityConfig" in kinds:
        return bool(kinds & {"DiscoveryServiceConfig", "KubernetesDiscoveryConfig"})
    return True


def _config_docs(m):
    """The documents of the machine's config as the lab parsed them when it was set (m.facts), or None when the
    facts are not of that config (the readings above then parse it, cached per config text: a lab of a thousand
    machines has a thousand configs, which would thrash their caches)."""
    facts = m.facts
    if facts is not None and m.config is not None and facts.raw == m.config:
        return [d for d in facts.docs if isinstance(d, dict)]
    return None


def kubeprism_port(m):
    docs = _config_docs(m)
    return _kubeprism_port(m.config) if docs is None else _kubeprism_port_of(docs)


def discovery_enabled(m):
    docs = _config_docs(m)
    return _discovery_enabled(m.config) if docs is None else _discovery_enabled_of(docs)


@functools.lru_cache(maxsize=8192)
def _member(node_id, address, hostname, role, version):
    """The Members resource of one member (the same on every machine that lists it: built once, not once per machine
    that lists it, a million times for a thousand machines listing a thousand members each)."""
    cluster, enums = P.spec("cluster"), P.spec("enums")
    mt = enums.TYPE_CONTROL_PLANE if role == "controlplane" else enums.TYPE_WORKER
    os_name = "Talos (%s)" % version
    spec = cluster.MemberSpec(node_id=node_id, addresses=[_netip(address)], hostname=hostname, machine_type=mt,
                              operating_system=os_name)
    y = {"nodeId": node_id, "addresses": [address], "hostname": hostname, "machineType": role,
         "operatingSystem": os_name}
    if role == "controlplane":
        spec.control_plane.api_server_port = 6443
        y["controlPlane"] = {"port": 6443}
    return Resource("Members.cluster.talos.dev", node_id, "cluster.MemberController", spec.SerializeToString(),
                    _yaml(y))


def build(lab, m, rtype=None):
    """All resources of machine ``m`` (a fresh snapshot), or with ``rtype`` those of that type only: a Get or List
    builds what it reads, not every resource of the machine (a thousand Members on each machine of a thousand)."""
    def want(kind):
        return rtype is None or rtype == kind
    block = P.spec("block")
    cluster = P.spec("cluster")
    runtime = P.spec("runtime")
    hardware = P.spec("hardware")
    network = P.spec("network")
    enums = P.spec("enums")
    rc = P.spec("config")
    configured = m.mode == st.CONFIGURED
    out = [_definition(t, ns, sens) for t, (ns, sens) in TYPES.items()] \
        if want("ResourceDefinitions.meta.cosi.dev") else []

    if configured and m.config is not None and want("MachineConfigs.config.talos.dev"):
        # Talos marshals this spec to YAML as one string: yaml_spec is a YAML string scalar
        out.append(Resource("MachineConfigs.config.talos.dev", "v1alpha1", "",
                            rc.MachineConfigSpec(yaml_marshalled=m.config).SerializeToString(),
                            _config_yaml(m.config)))

    if configured and m.cluster_id and want("Infos.cluster.talos.dev"):
        out.append(Resource("Infos.cluster.talos.dev", "current", "cluster.InfoController",
                            cluster.InfoSpec(cluster_id=m.cluster_id,
                                             cluster_name=m.cluster_name or ""
                                             ).SerializeToString(),
                            _yaml({"clusterId": m.cluster_id,
                                   "clusterName": m.cluster_name or ""})))
    if configured and m.cluster_id and want("Members.cluster.talos.dev") and discovery_enabled(m):
        out.extend(_member(x.node_id, x.address, x.hostname, x.role, x.version) for x in lab.cluster_machines(m))
    if configured and want("MachineTypes.config.talos.dev"):
        # the machine's own type (``talosctl get machinetype``), discovery or not
        machine_type = rc.CONTROL_PLANE if m.role == "controlplane" else rc.WORKER
        out.append(Resource("MachineTypes.config.talos.dev", "machine-type", "config.MachineTypeController",
                            rc.MachineTypeSpec(machine_type=machine_type).SerializeToString(),
                            yaml.safe_dump(m.role)))
    if configured and want("Identities.cluster.talos.dev"):
        out.append(Resource("Identities.cluster.talos.dev", "local",
                            "cluster.NodeIdentityController",
                            cluster.IdentitySpec(node_id=m.node_id).SerializeToString(),
                            _yaml({"nodeId": m.node_id})))
    if configured and want("Nodenames.kubernetes.talos.dev"):
        # Talos's NodenameController: the kubelet registers its Node under the hostname, lowercased (the FQDN only
        # with machine.kubelet.registerWithFQDN, which the lab's configs do not set)
        nodename = m.hostname.lower()
        out.append(Resource("Nodenames.kubernetes.talos.dev", "nodename", "k8s.NodenameController",
                            P.spec("k8s").NodenameSpec(nodename=nodename, hostname_version="1").SerializeToString(),
                            _yaml({"nodename": nodename, "hostnameVersion": "1", "skipNodeRegistration": False})))
    if configured and want("KubePrismStatuses.kubernetes.talos.dev"):
        port = kubeprism_port(m)
        if port:  # Talos's KubePrism controller writes it only while the balancer runs
            host = "localhost:%d" % port
            healthy = not m.faults.get("kubeprism_unhealthy")
            out.append(Resource("KubePrismStatuses.kubernetes.talos.dev", "k8s-loadbalancer",
                                "k8s.KubePrismController",
                                P.spec("k8s").KubePrismStatusesSpec(host=host, healthy=healthy).SerializeToString(),
                                _yaml({"host": host, "healthy": healthy})))

    if want("MachineStatuses.runtime.talos.dev"):
        _machine_status(m, runtime, out)
    if want("SystemInformations.hardware.talos.dev"):
        _system_information(m, hardware, out)
    if want("HostnameStatuses.net.talos.dev"):
        out.append(Resource("HostnameStatuses.net.talos.dev", "hostname",
                            "network.HostnameStatusController",
                            network.HostnameStatusSpec(hostname=m.hostname).SerializeToString(),
                            _yaml({"hostname": m.hostname, "domainname": ""})))
    if want("Versions.runtime.talos.dev"):
        out.append(Resource("Versions.runtime.talos.dev", "version", "runtime.VersionController",
                            runtime.VersionSpec(version=m.version, name="Talos").SerializeToString(),
                            _yaml({"version": m.version, "name": "Talos"})))
    if want("ExtensionStatuses.runtime.talos.dev"):
        out.extend(_extension_statuses(m))
    if want("Disks.block.talos.dev"):
        _disks(m, block, out)
    if m.installed and want("SystemDisks.block.talos.dev"):
        sd = next((d for d in m.disks if d["system_disk"]), None)
        if sd is not None:
            out.append(Resource("SystemDisks.block.talos.dev", "system-disk",
                                "block.SystemDiskController",
                                block.SystemDiskSpec(disk_id=sd["name"],
                                                     dev_path=sd["dev_path"]).SerializeToString(),
                                _yaml({"diskID": sd["name"], "devPath": sd["dev_path"]})))
    if want("DiscoveredVolumes.block.talos.dev"):
        for pid, d in _partitions(m):
            spec = block.DiscoveredVolumeSpec(**dict(d.items()))
            y = {k: d.get(k, "" if k not in _DV_INT else 0) for k in _DV_ORDER}
            y = {k: v for k, v in y.items() if v or k not in _DV_OMITEMPTY}
            out.append(Resource("DiscoveredVolumes.block.talos.dev", pid, "block.DiscoveryController",
                                spec.SerializeToString(), _yaml(y)))
    if configured and want("VolumeStatuses.block.talos.dev"):
        _volume_statuses(m, block, enums, out)
    return out


def _machine_status(m, runtime, out):
    stage = m.stage if m.stage in _STAGES else "running"
    ready = stage in ("running", "maintenance")
    ms = runtime.MachineStatusSpec(stage=_STAGES[stage])
    ms.status.ready = ready
    out.append(Resource("MachineStatuses.runtime.talos.dev", "machine",
                        "runtime.MachineStatusController", ms.SerializeToString(),
                        _yaml({"stage": stage, "status": {"ready": ready,
                                                          "unmetConditions": []}})))


def _system_information(m, hardware, out):
    # a letter first: hex digits alone can read as a number in YAML (901641009E21 is a float to Go's yaml), and the
    # real client then finds the YAML spec and the proto spec disagreeing
    serial = "QM" + hashlib.sha1(m.uuid.encode()).hexdigest()[:10].upper()
    out.append(Resource("SystemInformations.hardware.talos.dev", "systeminformation",
                        "hardware.SystemInfoController",
                        hardware.SystemInformationSpec(
                            manufacturer="QEMU", product_name="Standard PC (Q35 + ICH9, 2009)",
                            version="pc-q35-9.2", serial_number=serial, uuid=m.uuid,
                            wake_up_type="Power Switch").SerializeToString(),
                        _yaml({"manufacturer": "QEMU",
                               "productName": "Standard PC (Q35 + ICH9, 2009)",
                               "version": "pc-q35-9.2", "serialnumber": serial,
                               "uuid": m.uuid, "wakeUpType": "Power Switch"})))


def _disks(m, block, out):
    for d in m.disks:
        spec = block.DiskSpec(size=d["size"], io_size=512, sector_size=512,
                              readonly=d["readonly"], model=d["model"], serial=d["serial"],
                              wwid=d["wwid"], bus_path=d["bus_path"], sub_system="/sys/class/block",
                              transport=d["transport"], rotational=d["rotational"],
                              dev_path=d["dev_path"], pretty_size=_pretty(d["size"]),
                              symlinks=["/dev/disk/by-id/ata-QEMU_HARDDISK_" + d["serial"]])
        y = {"dev_path": d["dev_path"], "size": d["size"], "pretty_size": _pretty(d["size"]),
             "io_size": 512, "sector_size": 512, "readonly": d["readonly"], "cdrom": False,
             "model": d["model"], "serial": d["serial"], "wwid": d["wwid"],
             "bus_path": d["bus_path"], "sub_system": "/sys/class/block",
             "transport": d["transport"], "rotational": d["rotational"],
             "symlinks": list(spec.symlinks)}
        out.append(Resource("Disks.block.talos.dev", d["name"], "block.DisksController",
                            spec.SerializeToString(), _yaml(y)))


def _volume_statuses(m, block, enums, out):
    fs_enum = {"xfs": enums.FILESYSTEM_TYPE_XFS, "none": enums.FILESYSTEM_TYPE_NONE,
               "vfat": enums.FILESYSTEM_TYPE_VFAT, "ext4": enums.FILESYSTEM_TYPE_EXT4}
    for v in m.volumes:
        mount_loc = ("/dev/mapper/luks2-" + v["id"]) if v["encrypted"] else v["partition"]
        spec = block.VolumeStatusSpec(
            phase=enums.VOLUME_PHASE_READY, location=v["partition"],
            parent_location=v["disk"], uuid=_uuid(m.uuid, v["id"]),
            partition_uuid=_uuid(m.uuid, "p-" + v["id"]),
            partition_index=int(v["partition"][len(v["disk"]):] or 0),
            size=v["size"], pretty_size=_pretty(v["size"]),
            filesystem=fs_enum.get(v["filesystem"], 0), mount_location=mount_loc,
            encryption_provider=(enums.ENCRYPTION_PROVIDER_LUKS2 if v["encrypted"]
                                 else enums.ENCRYPTION_PROVIDER_NONE),
            type=enums.VOLUME_TYPE_PARTITION)
        if v["mount"]:
            spec.mount_spec.target_path = v["mount"]
        y = {"phase": "ready", "type": "partition", "location": v["partition"],
             "mountLocation": mount_loc,
             "partitionIndex": int(v["partition"][len(v["disk"]):] or 0),
             "parentLocation": v["disk"], "uuid": _uuid(m.uuid, v["id"]),
             "partitionUUID": _uuid(m.uuid, "p-" + v["id"]), "size": v["size"],
             "prettySize": _pretty(v["size"])}
        if v["filesystem"] != "none":
            y["filesystem"] = v["filesystem"]
        if v["encrypted"]:
            y["encryptionProvider"] = "luks2"
        if v["mount"]:
            y["mountSpec"] = {"targetPath": v["mount"], "selinuxLabel": "",
                              "projectQuotaSupport": False}
        out.append(Resource("VolumeStatuses.block.talos.dev", v["id"],
                            "block.VolumeManagerController", spec.SerializeToString(),
                            _yaml(y)))


def _extension_statuses(m):
    """Talos's ExtensionStatusController: one resource per system extension the machine booted with, ids "0", "1", ...
    in load order; spec extensions.Layer."""
    pb = P.spec("extensions")
    out = []
    for index, e in enumerate(m.extensions):
        y = ext.layer_yaml(index, e)
        meta = y["metadata"]
        spec = pb.Layer(image=y["image"], metadata=pb.Metadata(
            name=meta["name"], version=meta["version"], author=meta["author"], description=meta["description"],
            compatibility=pb.Compatibility(talos=pb.Constraint(version=meta["compatibility"]["talos"]["version"])),
            extra_info=meta.get("extraInfo", "")))
        out.append(Resource("ExtensionStatuses.runtime.talos.dev", str(index), "runtime.ExtensionStatusController",
                            spec.SerializeToString(), _yaml(y)))
    return out


class VersionTracker:
    """Metadata.version / created / updated per resource, bumped when the spec changes."""

    def __init__(self):
        self._seen = {}

    def meta(self, m, r):
        key = (m.uuid, m.boots if r.type == "MachineStatuses.runtime.talos.dev" else 0,
               r.namespace, r.type, r.id)
        key = (m.uuid, r.namespace, r.type, r.id)
        digest = hashlib.sha1(r.proto_spec + r.yaml_spec.encode()).hexdigest()
        now = time.time()
        cur = self._seen.get(key)
        if cur is None:
            cur = {"digest": digest, "version": 1, "created": now, "updated": now}
            self._seen[key] = cur
        elif cur["digest"] != digest:
            cur.update(digest=digest, version=cur["version"] + 1, updated=now)
        return cur


def to_proto(m, r, tracker):
    res = P.cosi_resource()
    info = tracker.meta(m, r)
    out = res.Resource()
    md = out.metadata
    md.namespace = r.namespace
    md.type = r.type
    md.id = r.id
    md.version = str(info["version"])
    md.owner = r.owner
    md.phase = "running"
    md.created.FromNanoseconds(int(info["created"] * 1e9))
    md.updated.FromNanoseconds(int(info["updated"] * 1e9))
    for k, v in r.labels.items():
        md.labels[k] = v
    out.spec.proto_spec = r.proto_spec
    out.spec.yaml_spec = r.yaml_spec
    return out
