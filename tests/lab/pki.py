"""A Talos-like PKI for the lab.

- OS (Talos API) CA: Ed25519 by default (as ``NewTalosCA``), ECDSA P-256 as an option.
- Server certificates per machine: CN hostname, SANs = addresses + 127.0.0.1 + hostname, 24 h.
- Client certificates: roles are the Subject Organization values, ExtendedKeyUsage = [clientAuth].
- PEM keys: Ed25519 as PKCS#8 under the label ``ED25519 PRIVATE KEY`` (as Talos writes them),
  ECDSA as ``EC PRIVATE KEY`` (SEC1).
- ``write_talosconfig`` writes the talosctl format (base64 of PEM), mode 0600.
- ``maintenance_certificate`` is the per-boot self-signed Ed25519 certificate of maintenance mode.
"""

import base64
import datetime
import ipaddress
import os
import ssl
import tempfile

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ED25519 = "ed25519"
ECDSA = "ecdsa"

ED25519_LABEL = "ED25519 PRIVATE KEY"
MAINTENANCE_CN = "maintenance-service.talos.dev"


def _now():
    return datetime.datetime.now(datetime.timezone.utc)


def generate_key(algorithm=ED25519):
    if algorithm == ED25519:
        return ed25519.Ed25519PrivateKey.generate()
    if algorithm == ECDSA:
        return ec.generate_private_key(ec.SECP256R1())
    raise ValueError("unknown key algorithm %r" % (algorithm,))


def key_algorithm(key):
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return ED25519
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return ECDSA
    raise ValueError("unsupported key type %r" % (type(key),))


def _hash_for(key):
    # Ed25519 signs without a separate hash; ECDSA with SHA-256 (as Go does for P-256).
    return None if isinstance(key, ed25519.Ed25519PrivateKey) else hashes.SHA256()


def key_to_pem(key):
    """PEM of a private key, labelled as Talos does."""
    if isinstance(key, ed25519.Ed25519PrivateKey):
        der = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
        b64 = base64.encodebytes(der).decode().replace("\n", "")
        lines = [b64[i:i + 64] for i in range(0, len(b64), 64)]
        return ("-----BEGIN %s-----\n%s\n-----END %s-----\n"
                % (ED25519_LABEL, "\n".join(lines), ED25519_LABEL)).encode()
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return key.private_bytes(serialization.Encoding.PEM,
                                 serialization.PrivateFormat.TraditionalOpenSSL,
                                 serialization.NoEncryption())
    raise ValueError("unsupported key type %r" % (type(key),))


def standard_key_pem(key_pem):
    """The same key, relabelled so OpenSSL / ``ssl`` / ``cryptography`` load it."""
    if isinstance(key_pem, str):
        key_pem = key_pem.encode()
    return key_pem.replace(b"ED25519 PRIVATE KEY", b"PRIVATE KEY")


def load_key_pem(key_pem):
    return serialization.load_pem_private_key(standard_key_pem(key_pem), password=None)


def cert_to_pem(cert):
    return cert.public_bytes(serialization.Encoding.PEM)


class KeyPair:
    """A certificate and its private key."""

    def __init__(self, cert, key):
        self.cert = cert
        self.key = key

    @property
    def cert_pem(self):
        return cert_to_pem(self.cert)

    @property
    def key_pem(self):
        return key_to_pem(self.key)

    @property
    def algorithm(self):
        return key_algorithm(self.key)

    def write(self, directory, stem):
        """Write <stem>.crt and <stem>.key (the key with a standard label, loadable by ssl)."""
        crt = os.path.join(directory, stem + ".crt")
        key = os.path.join(directory, stem + ".key")
        with open(crt, "wb") as fh:
            fh.write(self.cert_pem)
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(standard_key_pem(self.key_pem))
        return crt, key


def _builder(subject, issuer, public_key, not_after, not_before=None):
    not_before = not_before or (_now() - datetime.timedelta(minutes=5))
    return (x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after))


def new_ca(algorithm=ED25519, organization="talos", years=10):
    """A self-signed CA like Talos' OS CA (Subject O=talos)."""
    key = generate_key(algorithm)
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization)])
    builder = (_builder(name, name, key.public_key(), _now() + datetime.timedelta(days=365 * years))
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                            key_encipherment=False, data_encipherment=False,
                                            key_agreement=False, key_cert_sign=True, crl_sign=True,
                                            encipher_only=False, decipher_only=False), critical=True)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                     ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                              critical=False))
    return KeyPair(builder.sign(key, _hash_for(key)), key)


def _leaf_usage(key):
    # Ed25519 keys sign; ECDSA keys sign (ECDHE) too: digitalSignature is what Go sets for both.
    return x509.KeyUsage(digital_signature=True, content_commitment=False,
                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                         key_cert_sign=False, crl_sign=False, encipher_only=False,
                         decipher_only=False)


def issue_server(ca, hostname, addresses, hours=24, extra_sans=()):
    """A server certificate for a machine, signed by ``ca`` with the CA's algorithm."""
    key = generate_key(ca.algorithm)
    ips, dns = [], []
    for a in list(addresses) + ["127.0.0.1"] + list(extra_sans):
        try:
            ip = ipaddress.ip_address(a)
            if ip not in ips:
                ips.append(ip)
        except ValueError:
            if a not in dns:
                dns.append(a)
    if hostname and hostname not in dns:
        dns.insert(0, hostname)
    sans = [x509.DNSName(d) for d in dns] + [x509.IPAddress(i) for i in ips]
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostname or "talos")])
    builder = (_builder(subject, ca.cert.subject, key.public_key(),
                        _now() + datetime.timedelta(hours=hours))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(_leaf_usage(key), critical=True)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                              critical=False)
               .add_extension(x509.SubjectAlternativeName(sans), critical=False)
               .add_extension(_authority_key_id(ca), critical=False))
    return KeyPair(builder.sign(ca.key, _hash_for(ca.key)), key)


def _authority_key_id(ca):
    """The issuer's own SubjectKeyIdentifier when it has one (a Talos-made CA computes it from the whole
    SubjectPublicKeyInfo, not as pki does): OpenSSL chains a leaf only when its AKI equals the CA's SKI."""
    try:
        ski = ca.cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
        return x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski)
    except x509.ExtensionNotFound:
        return x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key())


def issue_client(ca, roles=("os:admin",), common_name="", hours=24 * 365,
                 ext_key_usage=None, algorithm=None):
    """A client certificate; roles are the Subject Organization values.

    ``ext_key_usage`` defaults to exactly [clientAuth] (what apid requires); pass a list of
    ExtendedKeyUsageOID values to build a wrong one for tests.
    """
    key = generate_key(algorithm or ca.algorithm)
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, r) for r in roles]
    if common_name:
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    subject = x509.Name(attrs)
    if ext_key_usage is None:
        ext_key_usage = [ExtendedKeyUsageOID.CLIENT_AUTH]
    builder = (_builder(subject, ca.cert.subject, key.public_key(),
                        _now() + datetime.timedelta(hours=hours))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(_leaf_usage(key), critical=True)
               .add_extension(_authority_key_id(ca), critical=False))
    if ext_key_usage:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(ext_key_usage)), critical=False)
    return KeyPair(builder.sign(ca.key, _hash_for(ca.key)), key)


def maintenance_certificate(addresses=()):
    """Per-boot self-signed Ed25519 certificate of the maintenance service."""
    key = ed25519.Ed25519PrivateKey.generate()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, MAINTENANCE_CN)])
    sans = [x509.DNSName(MAINTENANCE_CN)]
    for a in addresses:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(a)))
        except ValueError:
            sans.append(x509.DNSName(a))
    builder = (_builder(name, name, key.public_key(), _now() + datetime.timedelta(hours=24))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(_leaf_usage(key), critical=True)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                              critical=False)
               .add_extension(x509.SubjectAlternativeName(sans), critical=False))
    return KeyPair(builder.sign(key, None), key)


def roles_of(cert):
    """Subject Organization values of a certificate."""
    return [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]


def ext_key_usage_of(cert):
    try:
        return list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    except x509.ExtensionNotFound:
        return []


def load_cert_pem(data):
    if isinstance(data, str):
        data = data.encode()
    return x509.load_pem_x509_certificate(data)


def b64(data):
    if isinstance(data, str):
        data = data.encode()
    return base64.b64encode(data).decode()


def talosconfig_context(endpoints, nodes, ca_pem, crt_pem, key_pem):
    return {
        "endpoints": list(endpoints),
        "nodes": list(nodes),
        "ca": b64(ca_pem),
        "crt": b64(crt_pem),
        "key": b64(key_pem),
    }


def write_talosconfig(path, contexts, current):
    """Write a talosconfig (talosctl format), mode 0600.

    ``contexts`` maps a context name either to a ready dict (endpoints, nodes, ca, crt, key as
    base64) or to a dict with ``endpoints``, ``nodes``, ``ca`` (PEM or KeyPair), ``client``
    (KeyPair).
    """
    out = {"context": current, "contexts": {}}
    for name, ctx in contexts.items():
        if "client" in ctx:
            ca = ctx["ca"]
            ca_pem = ca.cert_pem if isinstance(ca, KeyPair) else ca
            ctx = talosconfig_context(ctx["endpoints"], ctx["nodes"], ca_pem,
                                      ctx["client"].cert_pem, ctx["client"].key_pem)
        out["contexts"][name] = dict(ctx)
    text = yaml.safe_dump(out, default_flow_style=False, sort_keys=False)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".talosconfig.")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    os.chmod(path, 0o600)
    return path


# --- ssl helpers ---------------------------------------------------------------------------

def _load_chain(ctx, pair, directory, stem):
    tmpdir = None
    if directory is None:
        tmpdir = tempfile.mkdtemp(prefix="lab-pki-")
        directory = tmpdir
    crt, key = pair.write(directory, stem)
    try:
        ctx.load_cert_chain(crt, key)
    finally:
        if tmpdir:
            os.unlink(crt)
            os.unlink(key)
            os.rmdir(tmpdir)


def server_ssl_context(pair, client_cas=None, directory=None, stem="server"):
    """Server-side context; ``client_cas`` (PEM bytes list) -> CERT_REQUIRED, else CERT_NONE."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_alpn_protocols(["h2"])
    _load_chain(ctx, pair, directory, stem)
    if client_cas:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(cadata=b"".join(
            c if isinstance(c, bytes) else c.encode() for c in client_cas).decode())
    else:
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def client_ssl_context(ca_pem=None, client=None, directory=None, check_hostname=True):
    """Client-side context (ALPN h2). ``ca_pem`` None -> no verification (talosctl --insecure)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_alpn_protocols(["h2"])
    if ca_pem:
        ctx.load_verify_locations(cadata=ca_pem.decode() if isinstance(ca_pem, bytes) else ca_pem)
        ctx.check_hostname = check_hostname
        ctx.verify_mode = ssl.CERT_REQUIRED
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if client is not None:
        _load_chain(ctx, client, directory, "client")
    return ctx
