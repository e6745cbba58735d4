# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster's secrets bundle, as ``talosctl gen secrets`` writes it.

Generate (cryptography), recover from a control plane's config (what machinery's
``secrets.NewBundleFromConfig`` does), validate, and write with mode 0600. Every secret value is
held in a ``Secret`` (redacted in str, repr and JSON), so a bundle is never printed by accident.

Key types and PEM labels are machinery's: os Ed25519 (``ED25519 PRIVATE KEY``, PKCS#8 inside),
etcd, Kubernetes and aggregator ECDSA P-256 (``EC PRIVATE KEY``, SEC1), service account RSA 4096
(``RSA PRIVATE KEY``, PKCS#1). CA certificates are valid ten years with the subjects O=talos,
O=etcd, O=kubernetes and an empty subject for the aggregator CA.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import datetime
import hashlib
import os
import re
import secrets as pysecrets
import string

from ansible_collections.maesh.ichor.plugins.module_utils.common import files, untrusted
from ansible_collections.maesh.ichor.plugins.module_utils.config import contracts, documents, yamlio
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.common.redact import Secret

try:
    from cryptography import x509
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    HAS_CRYPTOGRAPHY = True
    # what the parsers raise for DER they cannot read: malformed (ValueError), an algorithm or curve they do not
    # know (UnsupportedAlgorithm), an extension twice (DuplicateExtension)
    _UNREADABLE = (ValueError, TypeError, UnsupportedAlgorithm, x509.DuplicateExtension)
except ImportError:  # pragma: no cover - exercised only without cryptography
    HAS_CRYPTOGRAPHY = False

TOKEN = re.compile(r"^[a-z0-9]{6}\.[a-z0-9]{16}$")
CA_NAMES = ("os", "etcd", "k8s", "k8saggregator")
CERT_ORDER = ("etcd", "k8s", "k8saggregator", "k8sserviceaccount", "os")
SUBJECTS = {"os": "talos", "etcd": "etcd", "k8s": "kubernetes", "k8saggregator": None}
# The key types each key may have. The service account key is RSA since Talos 1.7 and ECDSA in clusters made
# before (machinery's UseRSAServiceAccountKey, WithECDSAServiceAccountKey): both sign Kubernetes tokens.
KEY_TYPES = {"os": ("Ed25519",), "etcd": ("ECDSA",), "k8s": ("ECDSA",), "k8saggregator": ("ECDSA",),
             "k8sserviceaccount": ("RSA", "ECDSA")}
CA_VALIDITY = datetime.timedelta(days=3650)


class EncryptionKey:
    """One key kube-apiserver encrypts Secrets in etcd with, as a bundle holds it and a config states it.

    Both are optional in machinery's bundle: clusters made before Talos 1.3 have the aescbc secret only, later ones
    the secretbox secret, and a cluster may hold both. Talos gives kube-apiserver the secretbox key first (it
    encrypts what is written) and the aescbc key after it (it still reads what was written before): the order, the
    providers and the key names of Talos's own encryption configuration (machined's k8stemplates
    APIServerEncryptionConfig), which a render must keep exactly, since a changed, dropped or reordered key makes
    every Secret in etcd unreadable.
    """

    __slots__ = ("attr", "field", "legacy_field", "provider", "name")

    def __init__(self, attr, field, legacy_field, provider, name):
        self.attr = attr  # the Bundle attribute
        self.field = field  # under secrets: in the bundle file
        self.legacy_field = legacy_field  # under cluster: in the v1alpha1 document
        self.provider = provider  # the EncryptionConfiguration provider
        self.name = name  # the provider's key name


ENCRYPTION_KEYS = (
    EncryptionKey("secretbox_secret", "secretboxencryptionsecret", "secretboxEncryptionSecret", "secretbox", "key2"),
    EncryptionKey("aescbc_secret", "aescbcencryptionsecret", "aescbcEncryptionSecret", "aescbc", "key1"),
)
# The order talosctl's secrets.yaml lists them in (machinery's Secrets struct).
_FILE_ORDER = ("aescbcencryptionsecret", "secretboxencryptionsecret")
# A bundle file is about 10 KB; anything far bigger is not one (read no further than this).
MAX_FILE = 1024 * 1024
_MACHINE_TYPE = re.compile(r"^[a-z]{1,32}$")


def _require_crypto():
    if not HAS_CRYPTOGRAPHY:
        raise ConfigError("the python 'cryptography' library is required for secrets bundles (pip install cryptography)")


def b64(text):
    return base64.b64encode(text.encode("ascii")).decode("ascii")


def unb64(value, what):
    try:
        return base64.b64decode(str(value), validate=True).decode("ascii")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise ConfigError("the secrets bundle field %s is not base64 PEM" % what)


def _reveal(value):
    return value.reveal() if isinstance(value, Secret) else value


class Bundle:
    """The secrets bundle. Certificates are PEM text; everything secret is a Secret."""

    def __init__(self, cluster_id, cluster_secret, bootstrap_token, secretbox_secret, trustd_token, certs, aescbc_secret=None):
        self.cluster_id = Secret(_reveal(cluster_id))
        self.cluster_secret = Secret(_reveal(cluster_secret))
        self.bootstrap_token = Secret(_reveal(bootstrap_token))
        # the Secrets encryption keys (ENCRYPTION_KEYS): either may be absent ("" or None), not both (validate())
        self.secretbox_secret = Secret(_reveal(secretbox_secret) or None)
        self.aescbc_secret = Secret(_reveal(aescbc_secret) or None)
        self.trustd_token = Secret(_reveal(trustd_token))
        # certs: name -> {"crt": PEM or None, "key": Secret(PEM)}
        # registry credentials the cluster spec names by authSecretRef (config/registry_auth.py attaches them)
        self.registry_auth = {}
        self.certs = {}
        for name in CERT_ORDER:
            pair = certs.get(name) or {}
            self.certs[name] = {"crt": pair.get("crt"), "key": Secret(_reveal(pair.get("key")))}

    def __repr__(self):
        return "Bundle(<redacted>)"

    __str__ = __repr__

    def crt(self, name):
        return self.certs[name]["crt"]

    def key(self, name):
        return self.certs[name]["key"].reveal()

    def encryption_keys(self):
        """[(EncryptionKey, secret text)] of the keys the bundle holds, in the order kube-apiserver is given them."""
        return [(key, getattr(self, key.attr).reveal()) for key in ENCRYPTION_KEYS if getattr(self, key.attr).reveal()]

    def to_object(self):
        """The bundle as ``talosctl gen secrets`` writes it (base64 PEM), secrets revealed."""
        certs = {}
        for name in CERT_ORDER:
            pair = {}
            if name != "k8sserviceaccount":
                pair["crt"] = b64(self.crt(name))
            pair["key"] = b64(self.key(name))
            certs[name] = pair
        held = dict((key.field, secret) for key, secret in self.encryption_keys())
        return {
            "cluster": {"id": self.cluster_id.reveal(), "secret": self.cluster_secret.reveal()},
            "secrets": dict([("bootstraptoken", self.bootstrap_token.reveal())]
                            + [(field, held[field]) for field in _FILE_ORDER if field in held]),
            "trustdinfo": {"token": self.trustd_token.reveal()},
            "certs": certs,
        }

    def to_yaml(self):
        return yamlio.dump(self.to_object())

    def fingerprint(self):
        """Identify the cluster without revealing anything: the SHA-256 of the Talos CA certificate."""
        return hashlib.sha256((self.crt("os") or "").encode("ascii")).hexdigest()[:16]

    def __eq__(self, other):
        return isinstance(other, Bundle) and self.to_object() == other.to_object()

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = None


def from_object(obj):
    """Bundle from the parsed YAML of a secrets file; one line on any missing field."""
    if not isinstance(obj, dict):
        raise ConfigError("the secrets bundle is not a YAML mapping")

    def need(path):
        value = documents.get_path(obj, path)
        if value in (None, ""):
            raise ConfigError("the secrets bundle has no %s" % path)
        return value

    certs = {}
    for name in CERT_ORDER:
        pair = {"key": unb64(need("certs.%s.key" % name), "certs.%s.key" % name)}
        if name != "k8sserviceaccount":
            pair["crt"] = unb64(need("certs.%s.crt" % name), "certs.%s.crt" % name)
        certs[name] = pair
    held = dict((key.attr, documents.get_path(obj, "secrets." + key.field)) for key in ENCRYPTION_KEYS)
    if all(value in (None, "") for value in held.values()):
        raise ConfigError("the secrets bundle has neither secrets.secretboxencryptionsecret nor secrets.aescbcencryptionsecret")
    held = dict((attr, str(value) if value not in (None, "") else None) for attr, value in held.items())
    return Bundle(
        str(need("cluster.id")), str(need("cluster.secret")), str(need("secrets.bootstraptoken")),
        held["secretbox_secret"], str(need("trustdinfo.token")), certs, held["aescbc_secret"],
    )


def parse(text):
    try:
        obj = yamlio.load_one(text)
    except ConfigError:
        raise ConfigError("the secrets bundle is not valid YAML")
    return from_object(obj)


def load(path):
    """Read and parse a bundle file (not validated: call validate())."""
    try:
        data = untrusted.read_file(path, MAX_FILE)
    except (IOError, OSError) as exc:
        raise ConfigError("cannot read the secrets bundle %s: %s" % (path, exc.strerror or exc))
    try:
        text = untrusted.text(data, MAX_FILE)
    except untrusted.Unreadable as exc:
        if exc.start is not None:
            raise ConfigError("the secrets bundle %s is not text" % path)
        raise ConfigError("the secrets bundle %s %s" % (path, exc.problem))
    try:
        return parse(text)
    except ConfigError as exc:
        raise ConfigError("%s (%s)" % (exc, path))


def write(bundle, path):
    """Write the bundle as a new 0600 file renamed over ``path`` (common.files; a shared directory is refused)."""
    files.write_private(path, bundle.to_yaml().encode("utf-8"))


# ---------------------------------------------------------------------------- generate


def _token(rand=None):
    alphabet = string.ascii_lowercase + string.digits
    choice = (rand or pysecrets.SystemRandom()).choice
    return "%s.%s" % ("".join(choice(alphabet) for i in range(6)), "".join(choice(alphabet) for i in range(16)))


def _random_b64(size=32):
    return base64.b64encode(os.urandom(size)).decode("ascii")


def _key_pem(name, key):
    if name == "os":
        der = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        body = base64.encodebytes(der).decode("ascii").replace("\n", "")
        lines = [body[i:i + 64] for i in range(0, len(body), 64)]
        return "-----BEGIN ED25519 PRIVATE KEY-----\n%s\n-----END ED25519 PRIVATE KEY-----\n" % "\n".join(lines)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()).decode("ascii")


def _new_key(name):
    if name == "os":
        return ed25519.Ed25519PrivateKey.generate()
    if name == "k8sserviceaccount":
        return rsa.generate_private_key(public_exponent=65537, key_size=4096)
    return ec.generate_private_key(ec.SECP256R1())


def _new_ca(name, key, now):
    org = SUBJECTS[name]
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)] if org else [])
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject).issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now).not_valid_after(now + CA_VALIDITY)
        .add_extension(x509.KeyUsage(True, False, False, False, False, True, False, False, False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    algorithm = None if name == "os" else hashes.SHA256()
    cert = builder.sign(key, algorithm)
    return cert.public_bytes(serialization.Encoding.PEM).decode("ascii")


def generate(now=None):
    """A new bundle with fresh CAs, keys, cluster ID and secret, tokens and the secretbox secret (as machinery makes
    one for every contract since Talos 1.3: no aescbc secret)."""
    _require_crypto()
    now = now or datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    certs = {}
    for name in CERT_ORDER:
        key = _new_key(name)
        pair = {"key": _key_pem(name, key)}
        if name in CA_NAMES:
            pair["crt"] = _new_ca(name, key, now)
        certs[name] = pair
    return Bundle(_random_b64(), _random_b64(), _token(), _random_b64(), _token(), certs)


# ---------------------------------------------------------------------------- the operator's talosconfig

ADMIN_VALIDITY = datetime.timedelta(days=365)  # talosctl gen config's client certificate: a year


def admin_talosconfig(bundle, context, endpoints, nodes=(), now=None):
    """A talosconfig (text) for ``context`` with a new ``os:admin`` client certificate signed by the bundle's Talos
    CA, as ``talosctl gen config`` makes one: Ed25519, clientAuth, a year. It is a root credential: write it 0600."""
    _require_crypto()
    now = now or datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    ca_key = _load_key("os", bundle.key("os"))
    ca_cert = x509.load_pem_x509_certificate(bundle.crt("os").encode("ascii"))
    key = ed25519.Ed25519PrivateKey.generate()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "os:admin"),
                                 x509.NameAttribute(NameOID.COMMON_NAME, "admin")]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + ADMIN_VALIDITY)
        .add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, None)
    )
    crt = cert.public_bytes(serialization.Encoding.PEM).decode("ascii")
    doc = {"context": context, "contexts": {context: {
        "endpoints": list(endpoints), "nodes": list(nodes), "ca": b64(bundle.crt("os")), "crt": b64(crt),
        "key": b64(_key_pem("os", key))}}}
    return yamlio.dump(doc)


def client_cert_seconds_left(bundle, crt_pem, now):
    """Seconds until the client certificate ``crt_pem`` (bytes) ends, or None when the bundle's Talos CA did not sign
    it (or it cannot be read)."""
    _require_crypto()
    try:
        cert = x509.load_pem_x509_certificate(crt_pem)
        ca = x509.load_pem_x509_certificate(bundle.crt("os").encode("ascii"))
        public = ca.public_key()
        if isinstance(public, ec.EllipticCurvePublicKey):
            public.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
        else:
            public.verify(cert.signature, cert.tbs_certificate_bytes)
    except Exception:  # pylint: disable=broad-except
        # unreadable, another key type, a bad signature: not this CA's
        return None
    end = cert.not_valid_after_utc if hasattr(cert, "not_valid_after_utc") else cert.not_valid_after.replace(
        tzinfo=datetime.timezone.utc)
    return int((end - now).total_seconds())


# ---------------------------------------------------------------------------- validate


def _load_key(name, pem):
    text = pem
    if name == "os" and "BEGIN ED25519 PRIVATE KEY" in pem:
        text = pem.replace("ED25519 PRIVATE KEY", "PRIVATE KEY")
    try:
        return serialization.load_pem_private_key(text.encode("ascii"), password=None)
    except _UNREADABLE:
        raise ConfigError("the secrets bundle key certs.%s.key is not a valid PEM private key" % name)


def _load_ca(name, pem):
    """(the certificate's public key as DER, its BasicConstraints or None)."""
    try:
        cert = x509.load_pem_x509_certificate((pem or "").encode("ascii"))
        public = _public_raw(cert.public_key())
        try:
            constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
        except x509.ExtensionNotFound:
            constraints = None
    except _UNREADABLE:
        raise ConfigError("the secrets bundle certificate certs.%s.crt is not a valid PEM certificate" % name)
    return public, constraints


def _key_type(key):
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return "Ed25519"
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return "ECDSA"
    if isinstance(key, rsa.RSAPrivateKey):
        return "RSA"
    return type(key).__name__


def _public_raw(public):
    return public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def validate(bundle, contract=None):
    """Check every field of the bundle; one line naming the first problem. Returns the bundle."""
    _require_crypto()
    for attr, what in (("bootstrap_token", "secrets.bootstraptoken"), ("trustd_token", "trustdinfo.token")):
        if not TOKEN.match(getattr(bundle, attr).reveal() or ""):
            raise ConfigError("the secrets bundle field %s is not a token of the form <6>.<16>" % what)
    if not bundle.encryption_keys():
        raise ConfigError("the secrets bundle has neither secrets.secretboxencryptionsecret nor secrets.aescbcencryptionsecret")
    held = [(key.attr, "secrets." + key.field) for key, unused in bundle.encryption_keys()]
    for attr, what in [("cluster_id", "cluster.id"), ("cluster_secret", "cluster.secret")] + held:
        value = getattr(bundle, attr).reveal() or ""
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            try:
                raw = base64.urlsafe_b64decode(value.encode("ascii"))
            except (binascii.Error, ValueError):
                raise ConfigError("the secrets bundle field %s is not base64" % what)
        if len(raw) != 32:
            raise ConfigError("the secrets bundle field %s is not 32 bytes" % what)
    for name in CERT_ORDER:
        key_pem = bundle.key(name)
        if not key_pem:
            raise ConfigError("the secrets bundle has no certs.%s.key" % name)
        key = _load_key(name, key_pem)
        if _key_type(key) not in KEY_TYPES[name]:
            raise ConfigError("the secrets bundle key certs.%s.key is %s, expected %s" % (name, _key_type(key), " or ".join(KEY_TYPES[name])))
        if name == "k8sserviceaccount":
            continue
        public, constraints = _load_ca(name, bundle.crt(name))
        if public != _public_raw(key.public_key()):
            raise ConfigError("the secrets bundle key certs.%s.key does not belong to certs.%s.crt" % (name, name))
        if constraints is None or not constraints.ca:
            raise ConfigError("the secrets bundle certificate certs.%s.crt is not a CA" % name)
    if contract is not None:
        contracts.get(str(contract))
    return bundle


# ---------------------------------------------------------------------------- recover


def from_config(docs):
    """Recover the bundle from a control plane's config (machinery's NewBundleFromConfig). The config is a machine's
    (outside input): every value is checked to be text before it is used, and no message quotes one."""
    legacy = documents.find(docs, documents.LEGACY)
    if legacy is None:
        raise ConfigError("the machine config has no v1alpha1 document, so no secrets can be recovered from it")
    body = legacy.body
    machine_type = documents.get_path(body, "machine.type")
    if machine_type not in ("controlplane", "init"):
        shown = machine_type if isinstance(machine_type, str) and _MACHINE_TYPE.match(machine_type) else "unknown machine"
        raise ConfigError("the machine config is a %s's; only a control plane's config holds the whole secrets bundle" % shown)

    def need(value, what):
        if value in (None, ""):
            raise ConfigError("the control plane config has no %s, so the secrets bundle cannot be recovered" % what)
        if not isinstance(value, str):
            raise ConfigError("the control plane config's %s is not text, so the secrets bundle cannot be recovered" % what)
        return value

    def legacy_pair(path):
        return {"crt": unb64(need(documents.get_path(body, path + ".crt"), path + ".crt"), path + ".crt"),
                "key": unb64(need(documents.get_path(body, path + ".key"), path + ".key"), path + ".key")}

    certs = {"os": legacy_pair("machine.ca"), "etcd": legacy_pair("cluster.etcd.ca")}
    identity = documents.find(docs, "DiscoveryIdentityConfig")
    if identity is not None:
        cluster_id = need(identity.body.get("clusterID"), "DiscoveryIdentityConfig clusterID")
        cluster_secret = need(identity.body.get("clusterSecret"), "DiscoveryIdentityConfig clusterSecret")
    else:
        cluster_id = need(documents.get_path(body, "cluster.id"), "cluster.id")
        cluster_secret = need(documents.get_path(body, "cluster.secret"), "cluster.secret")

    def issuing_ca(kind, legacy_path):
        """A Kubernetes CA: its own document's issuingCA when the config has one, else the v1alpha1 pair."""
        doc = documents.find(docs, kind)
        if doc is None:
            return legacy_pair(legacy_path)
        return {"crt": need(documents.get_path(doc.body, "issuingCA.cert"), kind + " issuingCA.cert"),
                "key": need(documents.get_path(doc.body, "issuingCA.key"), kind + " issuingCA.key")}

    certs["k8s"] = issuing_ca("KubeAPIServerCAConfig", "cluster.ca")
    certs["k8saggregator"] = issuing_ca("KubeAggregatorCAConfig", "cluster.aggregatorCA")
    sa_doc = documents.find(docs, "KubeServiceAccountConfig")
    if sa_doc is not None:
        certs["k8sserviceaccount"] = {"key": need(documents.get_path(sa_doc.body, "issuer.privateKey"), "KubeServiceAccountConfig issuer.privateKey")}
    else:
        path = "cluster.serviceAccount.key"
        certs["k8sserviceaccount"] = {"key": unb64(need(documents.get_path(body, path), path), path)}
    enc_doc = documents.find(docs, "KubeEtcdEncryptionConfig")
    held = _keys_from_encryption(enc_doc.body) if enc_doc is not None else _keys_from_legacy(body, need)
    return Bundle(
        str(cluster_id), str(cluster_secret),
        str(need(documents.get_path(body, "cluster.token"), "cluster.token")),
        held.get("secretbox_secret"),
        str(need(documents.get_path(body, "machine.token"), "machine.token")),
        certs, held.get("aescbc_secret"),
    )


def _keys_from_legacy(body, need):
    """{Bundle attribute: secret} of the encryption secrets a v1alpha1 cluster section states (either may be absent)."""
    held = {}
    for key in ENCRYPTION_KEYS:
        path = "cluster." + key.legacy_field
        if documents.get_path(body, path) not in (None, ""):
            held[key.attr] = need(documents.get_path(body, path), path)
    if not held:
        raise ConfigError("the control plane config has neither cluster.secretboxEncryptionSecret nor cluster.aescbcEncryptionSecret, "
                          "so the secrets bundle cannot be recovered")
    return held


def _items(value):
    """The mappings of a list (none when it is not a list)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _keys_from_encryption(body):
    """{Bundle attribute: secret} of the keys a KubeEtcdEncryptionConfig gives the first block that encrypts secrets
    (as machinery reads it), in the providers and names a bundle renders (ENCRYPTION_KEYS). Anything else it states
    is left to the drift, which blocks on it."""
    blocks = [item for item in _items(documents.get_path(body, "config.resources"))
              if isinstance(item.get("resources"), list) and "secrets" in item["resources"]]
    held = {}
    for provider in _items(blocks[0].get("providers")) if blocks else []:
        for key in ENCRYPTION_KEYS:
            for item in _items(documents.get_path(provider, key.provider + ".keys")):
                if item.get("name") == key.name and item.get("secret") and isinstance(item["secret"], str):
                    held.setdefault(key.attr, item["secret"])
    if not held:
        raise ConfigError("the KubeEtcdEncryptionConfig has neither a secretbox key key2 nor an aescbc key key1 for secrets "
                          "(the keys a secrets bundle holds), so the secrets bundle cannot be recovered")
    return held


def same_cluster(bundle, docs):
    """None when the bundle's Talos CA is the config's; else one line saying it is another cluster's."""
    legacy = documents.find(docs, documents.LEGACY)
    live_ca = documents.get_path(legacy.body, "machine.ca.crt") if legacy is not None else None
    if not live_ca:
        return "the live config has no machine.ca, so the secrets bundle cannot be checked against it"
    try:
        live_pem = unb64(live_ca, "machine.ca.crt")
    except ConfigError:
        return "the live config's machine.ca.crt is not base64 PEM"
    if live_pem.strip() != (bundle.crt("os") or "").strip():
        return "the secrets bundle belongs to another cluster: its Talos CA is not the one in the live config"
    return None
