"""Plausible Talos machine configs for the lab, and reading the fields the simulator needs."""

import base64
import difflib
import json
import os
import re
import secrets as _secrets
import string

import yaml

from tests import versions

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
                            install_disk="/dev/sda", kubernetes_version=versions.bare(versions.KUBERNETES)):
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
    return dump_documents(docs, fast=True)


# libyaml's emitter and parser, when PyYAML has them: a lab of a thousand machines generates and reads a thousand
# configs as it starts (pure-Python PyYAML: about 13 ms a machine, most of its start time). Only for configs the lab
# makes or a fixture case holds: for these documents libyaml's output is byte for byte the pure emitter's (checked by
# tests/integration/test_lab_scale.py), and what a client applies is still read by the pure parser, whose error
# messages the simulator returns as Talos would return its own.
_FAST_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def dump_documents(docs, fast=False):
    """``fast``: with libyaml (see _FAST_DUMPER)."""
    dumper = _FAST_DUMPER if fast else yaml.SafeDumper
    return "---\n".join(yaml.dump(d, Dumper=dumper, default_flow_style=False, sort_keys=False)
                        for d in docs).encode()


def parse_documents(data, fast=False):
    """Parse a multi-document config; raise ConfigError on bad YAML or non-mapping documents. ``fast``: with libyaml
    (configs the lab made or a fixture case holds; see _FAST_LOADER)."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError("failed to decode config: %s" % exc)
    try:
        docs = [d for d in yaml.load_all(data, Loader=_FAST_LOADER if fast else yaml.SafeLoader) if d is not None]
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
            _check_v1alpha1_keys(d)
        elif "kind" in d:
            key = (d.get("kind"), d.get("name") or "")
        else:
            raise ConfigError("missing kind")
        if key in seen:
            raise ConfigError("duplicate document: %s %s" % key)
        seen.add(key)
    return docs


def with_install_image(data, image):
    """The config with another install image (``machine.install.image`` or ``UnattendedInstallConfig``
    ``installer.image``), the rest byte for byte: the line stating it rewritten, or removed when ``image`` is None.
    ValueError when the config states none."""
    old = ConfigFacts(data).install_image
    if not old:
        raise ValueError("the machine config states no install image to replace")
    pattern = re.compile(r"^([ \t]*image:[ \t]*)" + re.escape(old) + r"([ \t]*(?:#.*)?)(\n|\Z)", re.M)
    text = data.decode("utf-8")
    if image is None:
        out = pattern.sub("", text)
    else:
        out = pattern.sub(lambda match: match.group(1) + image + match.group(2) + match.group(3), text)
    if out == text:
        raise ValueError("the machine config's install image %r is not on a line of its own" % old)
    return out.encode("utf-8")


V1ALPHA1_KEYS = ("version", "debug", "persist", "machine", "cluster")


def _check_v1alpha1_keys(doc):
    """Talos decodes strictly and quotes what it did not know (values included), as machinery's
    xyaml.CheckUnknownKeys does: ``unknown keys found during decoding:\n<yaml>``. The simulator
    checks the v1alpha1 document's top level only."""
    unknown = dict((k, v) for k, v in doc.items() if k not in V1ALPHA1_KEYS)
    if unknown:
        raise ConfigError("unknown keys found during decoding:\n" + yaml.safe_dump(
            unknown, default_flow_style=False, sort_keys=False, indent=4, width=1000))


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

    def __init__(self, data, fast=False):
        """``fast``: parse with libyaml (a config the lab made or a fixture case holds; see parse_documents)."""
        self.raw = data if isinstance(data, bytes) else data.encode()
        self.docs = parse_documents(self.raw, fast=fast)
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
        # v1.14-contract configs carry these in typed documents; the legacy field wins when set
        self.endpoint = _get(v1, "cluster", "controlPlane", "endpoint")
        for d in _typed(self.docs, "KubeClusterConfig"):
            self.endpoint = self.endpoint or d.get("endpoint")
        self.install_image = _get(v1, "machine", "install", "image")
        for d in _typed(self.docs, "UnattendedInstallConfig"):
            self.install_image = self.install_image or _get(d, "installer", "image")
        self.kubelet_image = _get(v1, "machine", "kubelet", "image")
        for d in _typed(self.docs, "KubeletConfig"):
            self.kubelet_image = self.kubelet_image or d.get("image")
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


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CASES_DIR = os.path.join(REPO, "tests", "fixtures", "configs")
CASE_FILES = ("secrets.yaml", "controlplane.conf", "worker.conf")


def find_case_dir(path):
    """A fixture case directory: ``path`` as given, else under the checkout, else under
    tests/fixtures/configs (so ``v1.13/v1.13.9/k8s-older`` works from anywhere)."""
    for candidate in (path, os.path.join(REPO, path), os.path.join(CASES_DIR, path)):
        if all(os.path.isfile(os.path.join(candidate, f)) for f in CASE_FILES):
            return os.path.abspath(candidate)
    raise ConfigError("not a config fixture case (needs %s): %s" % (", ".join(CASE_FILES), path))


class Case:
    """A real Talos-generated fixture case: its OS CA (from the secrets bundle) and the
    controlplane / worker config bytes, served exactly as in the files."""

    def __init__(self, path):
        self.directory = find_case_dir(path)
        with open(os.path.join(self.directory, "secrets.yaml")) as fh:
            bundle = yaml.safe_load(fh)
        os_ca = _get(bundle, "certs", "os") or {}
        if not (os_ca.get("crt") and os_ca.get("key")):
            raise ConfigError("%s: secrets.yaml has no certs.os crt/key" % self.directory)
        # the key PEM is PKCS8 under Talos' "ED25519 PRIVATE KEY" label: pki relabels it
        self.ca = pki.KeyPair(pki.load_cert_pem(_b64decode(os_ca["crt"])),
                              pki.load_key_pem(_b64decode(os_ca["key"])))
        if _public_der(self.ca.cert.public_key()) != _public_der(self.ca.key.public_key()):
            raise ConfigError("%s: certs.os key does not match its certificate" % self.directory)
        self.configs = {}
        for role in ("controlplane", "worker"):
            with open(os.path.join(self.directory, role + ".conf"), "rb") as fh:
                self.configs[role] = fh.read()
        self.options = {}
        if os.path.isfile(os.path.join(self.directory, "case.json")):
            with open(os.path.join(self.directory, "case.json")) as fh:
                self.options = json.load(fh)
        facts = ConfigFacts(self.configs["controlplane"])
        self.cluster_id = facts.cluster_id or _get(bundle, "cluster", "id")
        self.cluster_name = facts.cluster_name or self.options.get("cluster_name")

    def config(self, role):
        return self.configs["controlplane" if role == "controlplane" else "worker"]


def _public_der(public_key):
    from cryptography.hazmat.primitives import serialization
    return public_key.public_bytes(serialization.Encoding.DER,
                                   serialization.PublicFormat.SubjectPublicKeyInfo)


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

# typed documents holding the same settings: (kind, key or None for the whole document)
_TYPED_PATHS = {("machine", "install"): ("UnattendedInstallConfig", None),
                ("cluster", "id"): ("DiscoveryIdentityConfig", "clusterID"),
                ("cluster", "secret"): ("DiscoveryIdentityConfig", "clusterSecret")}


def _reboot_value(docs, path):
    """The setting at a legacy ``path``, or its typed form when the legacy field is absent."""
    value = _get(v1alpha1_of(docs) or {}, *path)
    if value is None and path in _TYPED_PATHS:
        kind, key = _TYPED_PATHS[path]
        for d in _typed(docs, kind):
            value = d.get(key) if key else {k: v for k, v in d.items()
                                            if k not in ("apiVersion", "kind")}
    return value


def needs_reboot(old_data, new_data):
    """Reason a change can't apply immediately (1.12/1.13 rules, approximated), or None."""
    try:
        old = parse_documents(old_data)
    except ConfigError:
        old = []
    new = parse_documents(new_data)
    for path in _REBOOT_PATHS:
        if _reboot_value(old, path) != _reboot_value(new, path):
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
