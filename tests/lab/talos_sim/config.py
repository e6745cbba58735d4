"""Plausible Talos machine configs for the lab, and reading the fields the simulator needs."""

import base64
import difflib
import os
import secrets as _secrets
import string

import yaml

from .. import pki

_ALNUM = string.ascii_lowercase + string.digits


def _token(n):
    return "".join(_secrets.choice(_ALNUM) for _i in range(n))


def new_cluster_secrets(name="lab", ca=None):
    """Cluster-wide secrets (a small subset of a Talos secrets bundle)."""
    return {
        "cluster_name": name,
        "cluster_id": base64.urlsafe_b64encode(os.urandom(32)).decode(),
        "cluster_secret": base64.standard_b64encode(os.urandom(32)).decode(),
        "bootstrap_token": "%s.%s" % (_token(6), _token(16)),
        "trustd_token": "%s.%s" % (_token(6), _token(16)),
        "secretbox": base64.standard_b64encode(os.urandom(32)).decode(),
        "os_ca": ca,
    }


class ConfigError(ValueError):
    pass


def generate_machine_config(secrets, role, hostname, endpoint_address, version="v1.14.1",
                            install_disk="/dev/sda", kubernetes_version="1.36.6"):
    """A plausible multi-document Talos machine config (legacy v1alpha1 + a typed document)."""
    ca = secrets["os_ca"]
    machine_type = "controlplane" if role == "controlplane" else "worker"
    key = pki.b64(ca.key_pem) if machine_type == "controlplane" else ""
    v1 = {
        "version": "v1alpha1",
        "debug": False,
        "persist": True,
        "machine": {
            "type": machine_type,
            "token": secrets["trustd_token"],
            "ca": {"crt": pki.b64(ca.cert_pem), "key": key},
            "certSANs": [],
            "kubelet": {"image": "ghcr.io/siderolabs/kubelet:v%s" % kubernetes_version,
                        "defaultRuntimeSeccompProfileEnabled": True,
                        "disableManifestsDirectory": True},
            "network": {"hostname": hostname},
            "install": {"disk": install_disk,
                        "image": "ghcr.io/siderolabs/installer:%s" % version,
                        "wipe": False},
            "features": {"rbac": True, "stableHostname": True, "apidCheckExtKeyUsage": True,
                         "diskQuotaSupport": True,
                         "kubePrism": {"enabled": True, "port": 7445},
                         "hostDNS": {"enabled": True, "forwardKubeDNSToHost": True}},
            "nodeLabels": {"node.kubernetes.io/exclude-from-external-load-balancers": ""}
            if machine_type == "controlplane" else {},
        },
        "cluster": {
            "id": secrets["cluster_id"],
            "secret": secrets["cluster_secret"],
            "controlPlane": {"endpoint": "https://%s:6443" % endpoint_address},
            "clusterName": secrets["cluster_name"],
            "network": {"dnsDomain": "cluster.local", "podSubnets": ["10.244.0.0/16"],
                        "serviceSubnets": ["10.96.0.0/12"]},
            "token": secrets["bootstrap_token"],
            "discovery": {"enabled": True,
                          "registries": {"kubernetes": {"disabled": True},
                                         "service": {}}},
        },
    }
    if machine_type == "controlplane":
        v1["cluster"]["secretboxEncryptionSecret"] = secrets["secretbox"]
        v1["cluster"]["apiServer"] = {
            "image": "registry.k8s.io/kube-apiserver:v%s" % kubernetes_version,
            "certSANs": [endpoint_address]}
        v1["cluster"]["etcd"] = {"image": "gcr.io/etcd-development/etcd:v3.6.7"}
    docs = [v1, {"apiVersion": "v1alpha1", "kind": "UserVolumeConfig", "name": "data",
                 "provisioning": {"diskSelector": {"match": "disk.dev_path == '/dev/sdb'"},
                                  "minSize": "1GiB"}},
            {"apiVersion": "v1alpha1", "kind": "UserVolumeConfig", "name": "secret",
             "provisioning": {"diskSelector": {"match": "disk.dev_path == '/dev/sdb'"},
                              "minSize": "1GiB"},
             "encryption": {"provider": "luks2",
                            "keys": [{"slot": 0, "tpm": {}}]}}]
    return dump_documents(docs)


def dump_documents(docs):
    return "---\n".join(yaml.safe_dump(d, default_flow_style=False, sort_keys=False)
                        for d in docs).encode()


def parse_documents(data):
    """Parse a multi-document config; raise ConfigError on bad YAML or non-mapping documents."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError("failed to decode config: %s" % exc)
    try:
        docs = [d for d in yaml.safe_load_all(data) if d is not None]
    except yaml.YAMLError as exc:
        raise ConfigError("failed to parse config: %s" % exc)
    if not docs:
        raise ConfigError("config is empty")
    seen = set()
    for d in docs:
        if not isinstance(d, dict):
            raise ConfigError("failed to parse config: document is not a mapping")
        if "version" in d and "kind" not in d:
            key = ("v1alpha1", "")
        elif "kind" in d:
            key = (d.get("kind"), d.get("name") or "")
        else:
            raise ConfigError("missing kind")
        if key in seen:
            raise ConfigError("duplicate document: %s %s" % key)
        seen.add(key)
    return docs


def v1alpha1_of(docs):
    for d in docs:
        if d.get("version") == "v1alpha1" and "kind" not in d:
            return d
    return None


def _get(d, *path):
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d


def _typed(docs, kind):
    return [d for d in docs if d.get("kind") == kind]


class ConfigFacts:
    """What the simulator reads from a machine config."""

    def __init__(self, data):
        self.raw = data if isinstance(data, bytes) else data.encode()
        self.docs = parse_documents(self.raw)
        self.v1 = v1alpha1_of(self.docs)
        v1 = self.v1 or {}
        self.machine_type = _get(v1, "machine", "type") or "worker"
        if self.machine_type == "init":
            self.machine_type = "controlplane"
        self.cluster_name = _get(v1, "cluster", "clusterName")
        self.cluster_id = _get(v1, "cluster", "id")
        for d in _typed(self.docs, "KubeClusterConfig"):
            self.cluster_name = self.cluster_name or d.get("clusterName") or d.get("name")
        for d in _typed(self.docs, "DiscoveryIdentityConfig"):
            self.cluster_id = self.cluster_id or d.get("clusterID")
        self.hostname = _get(v1, "machine", "network", "hostname")
        for d in _typed(self.docs, "HostnameConfig"):
            self.hostname = d.get("hostname") or self.hostname
        self.endpoint = _get(v1, "cluster", "controlPlane", "endpoint")
        self.install_image = _get(v1, "machine", "install", "image")
        self.ca_crt_pem = None
        self.ca_key_pem = None
        crt = _get(v1, "machine", "ca", "crt")
        key = _get(v1, "machine", "ca", "key")
        if crt:
            self.ca_crt_pem = _b64decode(crt)
        if key:
            self.ca_key_pem = _b64decode(key)
        self.accepted_cas = []
        for item in _get(v1, "machine", "acceptedCAs") or []:
            if isinstance(item, dict) and item.get("crt"):
                self.accepted_cas.append(_b64decode(item["crt"]))
        for d in _typed(self.docs, "TrustedRootsConfig"):
            pass  # not used for the API

    def ca_pair(self):
        """KeyPair of the OS CA when both crt and key are present, else None."""
        if self.ca_crt_pem and self.ca_key_pem:
            try:
                return pki.KeyPair(pki.load_cert_pem(self.ca_crt_pem),
                                   pki.load_key_pem(self.ca_key_pem))
            except ValueError:
                return None
        return None


def _b64decode(value):
    try:
        return base64.b64decode(value, validate=False)
    except (ValueError, TypeError) as exc:
        raise ConfigError("invalid base64 in config: %s" % exc)


# fields whose change needs a reboot on 1.12/1.13 (others apply immediately)
_REBOOT_PATHS = [("machine", "type"), ("machine", "install"), ("machine", "disks"),
                 ("machine", "systemDiskEncryption"), ("machine", "kernel"),
                 ("machine", "ca"), ("machine", "token"), ("cluster", "id"),
                 ("cluster", "secret")]


def needs_reboot(old_data, new_data):
    """Reason a change can't apply immediately (1.12/1.13 rules, approximated), or None."""
    try:
        old = v1alpha1_of(parse_documents(old_data)) or {}
    except ConfigError:
        old = {}
    new = v1alpha1_of(parse_documents(new_data)) or {}
    for path in _REBOOT_PATHS:
        if _get(old, *path) != _get(new, *path):
            return "this config change can't be applied in immediate mode\ndiff: field %s changed" % (
                ".".join(path),)
    return None


def diff_text(old_data, new_data):
    """Text diff of the documents (for dry-run mode_details)."""
    old = (old_data or b"").decode("utf-8", "replace")
    new = new_data.decode("utf-8", "replace")
    if old == new:
        return "No changes."
    lines = difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                 fromfile="current", tofile="new")
    text = "".join(lines)
    return text or "No changes."
