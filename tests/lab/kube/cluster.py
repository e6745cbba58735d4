"""A real Kubernetes control plane on loopback for the lab: etcd, kube-apiserver, kube-controller-manager.

Everything listens on 127.0.0.1 only (free ports picked at start). Certificates are generated
at start; RBAC is on (``--authorization-mode=Node,RBAC``); the audit log records every request
at Metadata level as JSON lines; ServiceAccount tokens come from the TokenRequest API; the
controller manager runs only the namespace, garbage-collector, service-account-token,
clusterrole-aggregation and disruption controllers (namespaces finish deleting, owner references
cascade, PodDisruptionBudgets are computed, nothing fights the lab agent over workload status).

    lab = KubeLab.start()               # builds nothing: binaries() finds them (build.sh)
    lab.kubeconfig, lab.server, lab.version
    mark = lab.audit_mark()
    ...
    lab.mutating_requests(since=mark)   # create/update/patch/delete/deletecollection, not dry-run
    lab.stop()
"""

import base64
import collections
import datetime
import ipaddress
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD_SH = os.path.join(HERE, "build.sh")

KUBE_VERSION = "v1.36.3"
ETCD_VERSION = "v3.6.16"
HELM_VERSION = "v3.21.4"

BINARIES = ("kube-apiserver", "kube-controller-manager", "kubectl", "etcd", "etcdutl", "helm")
# namespace: namespaces finish deleting; garbagecollector: owner references cascade;
# serviceaccount-token: the token controller; clusterrole-aggregation: fills the aggregated
# ClusterRoles admin/edit/view (empty without it); disruption: computes PodDisruptionBudgets'
# status, which the Eviction API judges by (a drain). No workload controller: the lab agent
# owns workload status.
CONTROLLERS = "namespace,garbagecollector,serviceaccount-token,clusterrole-aggregation,disruption"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
SERVICE_CIDR = "10.96.0.0/12"
SERVICE_IP = "10.96.0.1"

MUTATING_VERBS = frozenset(("create", "update", "patch", "delete", "deletecollection"))
# Users of the lab's own control plane: their writes are left out of mutating_requests()
# unless include_system=True.
SYSTEM_USERS = ("system:apiserver", "system:kube-controller-manager", "system:kube-scheduler")
SYSTEM_USER_PREFIXES = ("system:serviceaccount:kube-system:", "system:node:")

ADMIN_USER = "lab-admin"

AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
# the cluster lock with what each write made of it: who held it when (the fault campaign's lock invariant)
- level: RequestResponse
  namespaces: ["ichor-system"]
  resources:
  - group: coordination.k8s.io
    resources: ["leases"]
# the cluster record's writes with what they made of it: which machines adopt held when (the campaign's hold
# invariant); the record holds versions, modes and holds, no credential. A create names no object in its request,
# so the ConfigMaps created in ichor-system are all audited so (a few: the record, the installer's inventory)
- level: RequestResponse
  namespaces: ["ichor-system"]
  verbs: ["update", "patch", "delete"]
  resources:
  - group: ""
    resources: ["configmaps"]
    resourceNames: ["ichor-cluster"]
- level: RequestResponse
  namespaces: ["ichor-system"]
  verbs: ["create"]
  resources:
  - group: ""
    resources: ["configmaps"]
- level: Metadata
"""


class KubeLabError(RuntimeError):
    pass


# --- binaries ------------------------------------------------------------------------------

def binaries(build=True, names=BINARIES, stream=None):
    """{name: path} of the lab's binaries, built by build.sh when missing or stale.

    With build=False only checks (KubeLabError when one is missing). Raises KubeLabError with
    build.sh's output when the build fails (no Go, no module proxy, compile error).
    """
    cmd = ["bash", BUILD_SH] + ([] if build else ["--check"]) + list(names)
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE,
                                universal_newlines=True)
        err_tail = collections.deque(maxlen=60)
        for line in proc.stderr:  # build progress: echoed to stream, tail kept for errors
            err_tail.append(line)
            if stream is not None:
                stream.write(line)
                stream.flush()
        proc.wait()
        out.seek(0)
        stdout = out.read()
    if proc.returncode != 0:
        raise KubeLabError("%s failed (exit %d):\n%s%s" % (
            " ".join(cmd), proc.returncode, stdout, "".join(err_tail)))
    found = {}
    for line in stdout.splitlines():
        name, sep, path = line.partition("=")
        if sep and name in BINARIES:
            found[name] = path
    missing = [n for n in names if n not in found]
    if missing:
        raise KubeLabError("build.sh printed no path for %s:\n%s" % (missing, stdout))
    return found


# --- PKI -----------------------------------------------------------------------------------

def _now():
    return datetime.datetime.now(datetime.timezone.utc)


def _ec_key():
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert_pem(cert):
    return cert.public_bytes(serialization.Encoding.PEM)


def _name(cn, orgs=()):
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


class _CA:
    @classmethod
    def load(cls, cert_path, key_path):
        """The lab's CA from its files (a lab another process started)."""
        ca = cls.__new__(cls)
        with open(cert_path, "rb") as f:
            ca.cert = x509.load_pem_x509_certificate(f.read())
        with open(key_path, "rb") as f:
            ca.key = serialization.load_pem_private_key(f.read(), password=None)
        return ca

    def __init__(self, cn="ichor-lab-kubernetes-ca"):
        self.key = _ec_key()
        now = _now()
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(_name(cn)).issuer_name(_name(cn))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=3650))  # Talos' Kubernetes CA: 10 years
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()),
                           critical=False)
            .sign(self.key, hashes.SHA256()))

    def issue(self, cn, orgs=(), server_names=(), server_ips=(), client=False):
        key = _ec_key()
        now = _now()
        usages = []
        if server_names or server_ips:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        if client:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn, orgs)).issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=365))  # Talos' admin kubeconfig: 1 year
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=True,
                                         key_cert_sign=False, crl_sign=False,
                                         content_commitment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                self.key.public_key()), critical=False))
        sans = [x509.DNSName(n) for n in server_names]
        sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in server_ips]
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return _cert_pem(builder.sign(self.key, hashes.SHA256())), _key_pem(key)


def _write(path, data, mode=0o600):
    if isinstance(data, str):
        data = data.encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, mode)
    return path


def _b64(data):
    return base64.b64encode(data if isinstance(data, bytes) else data.encode()).decode()


def write_kubeconfig(path, server, ca_pem, user, cert_pem=None, key_pem=None, token=None,
                     namespace=None, cluster="ichor-lab"):
    """A kubeconfig (mode 0600) with one context, named after the user."""
    creds = {}
    if token is not None:
        creds["token"] = token
    if cert_pem is not None:
        creds["client-certificate-data"] = _b64(cert_pem)
        creds["client-key-data"] = _b64(key_pem)
    context = {"cluster": cluster, "user": user}
    if namespace:
        context["namespace"] = namespace
    doc = {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": cluster, "cluster": {
            "server": server, "certificate-authority-data": _b64(ca_pem)}}],
        "users": [{"name": user, "user": creds}],
        "contexts": [{"name": user, "context": context}],
        "current-context": user,
    }
    return _write(path, yaml.safe_dump(doc, default_flow_style=False))


# --- processes -----------------------------------------------------------------------------

def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent():
    # The control plane must not outlive a killed pytest: SIGKILL when the parent dies.
    try:
        import ctypes  # pylint: disable=import-outside-toplevel
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    os.setsid()


class _Proc:
    def __init__(self, name, argv, log_path, env=None):
        self.name = name
        self.argv = argv
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.popen = subprocess.Popen(  # pylint: disable=subprocess-popen-preexec-fn
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=env, preexec_fn=_die_with_parent, close_fds=True)

    def alive(self):
        return self.popen.poll() is None

    def tail(self, lines=40):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 65536))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout=15.0):
        if self.popen.poll() is not None:
            return
        try:
            self.popen.send_signal(signal.SIGTERM)
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(10)
        except ProcessLookupError:
            pass


# --- audit ---------------------------------------------------------------------------------

def _query(event):
    uri = event.get("requestURI") or ""
    return urllib.parse.parse_qs(urllib.parse.urlsplit(uri).query)


def is_dry_run(event):
    """True when the audited request carried dryRun=All."""
    return "All" in _query(event).get("dryRun", [])


def field_manager(event):
    values = _query(event).get("fieldManager")
    return values[0] if values else None


def event_user(event):
    return (event.get("user") or {}).get("username", "")


def is_system_user(username):
    return username in SYSTEM_USERS or username.startswith(SYSTEM_USER_PREFIXES)


def _parse_time(value):
    # RFC 3339 with microseconds and Z, as the audit log writes it
    return datetime.datetime.strptime(value.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z")


# --- the lab -------------------------------------------------------------------------------

class KubeLab:
    """etcd + kube-apiserver + kube-controller-manager on loopback, owned by this process.

    ``KubeLab.start(workdir=None)`` starts and waits for ``/readyz``; ``KubeLab.attach(kube_json)``
    uses one started elsewhere (``python -m tests.lab.kube up``) without owning it.
    """

    def __init__(self, workdir, bins, owned=True):
        self.workdir = os.path.abspath(workdir)
        self.bins = dict(bins)
        self.owned = owned
        self.procs = []
        self.server = None
        self.kubeconfig = os.path.join(self.workdir, "admin.kubeconfig")
        self.ca_file = os.path.join(self.workdir, "pki", "ca.crt")
        self.audit_log = os.path.join(self.workdir, "audit.log")
        self.version = None
        self.etcd_url = None
        self._remove_workdir = False
        self._api = None
        self._ssl = None
        self._audit_scanned = 0

    # -- start / stop -----------------------------------------------------------------------

    @classmethod
    def start(cls, workdir=None, bins=None, controllers=True, timeout=None, build=True):
        """Start a lab. workdir defaults to a new temp dir, removed again by stop()."""
        made = workdir is None
        if made:
            workdir = tempfile.mkdtemp(prefix="ichor-kube-lab-")
        else:
            os.makedirs(workdir, exist_ok=True)
        bins = bins or binaries(build=build)
        timeout = float(timeout or os.environ.get("ICHOR_KUBE_LAB_TIMEOUT", 240))
        last = None
        for attempt in range(3):
            lab = cls(workdir, bins)
            lab._remove_workdir = made
            try:
                lab._start(controllers, timeout, attempt)
                return lab
            except KubeLabError as e:
                last = e
                lab._stop_processes()
                if "address already in use" not in str(e):
                    break
            except BaseException:
                lab._stop_processes()
                if made:
                    shutil.rmtree(workdir, ignore_errors=True)
                raise
        if made:
            shutil.rmtree(workdir, ignore_errors=True)
        raise last

    def _start(self, controllers, timeout, attempt):
        pki = os.path.join(self.workdir, "pki")
        os.makedirs(pki, exist_ok=True)
        etcd_port, peer_port, api_port = _free_port(), _free_port(), _free_port()
        self.server = "https://127.0.0.1:%d" % api_port
        self.etcd_url = "http://127.0.0.1:%d" % etcd_port
        deadline = time.monotonic() + timeout

        # PKI: a CA, the API server's serving cert, an admin client (system:masters), the
        # controller manager's client, and the ServiceAccount token signing key.
        ca = _CA()
        _write(self.ca_file, _cert_pem(ca.cert), 0o644)
        _write(os.path.join(pki, "ca.key"), _key_pem(ca.key))
        crt, key = ca.issue("kube-apiserver", server_ips=("127.0.0.1", SERVICE_IP),
                            server_names=("localhost", "kubernetes", "kubernetes.default",
                                          "kubernetes.default.svc",
                                          "kubernetes.default.svc.cluster.local"))
        _write(os.path.join(pki, "apiserver.crt"), crt, 0o644)
        _write(os.path.join(pki, "apiserver.key"), key)
        self._admin_cert = ca.issue(ADMIN_USER, orgs=("system:masters",), client=True)
        _write(os.path.join(pki, "admin.crt"), self._admin_cert[0], 0o644)
        _write(os.path.join(pki, "admin.key"), self._admin_cert[1])
        sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        _write(os.path.join(pki, "sa.key"), _key_pem(sa_key))
        _write(os.path.join(pki, "sa.pub"), sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo), 0o644)
        ca_pem = _cert_pem(ca.cert)
        write_kubeconfig(self.kubeconfig, self.server, ca_pem, ADMIN_USER, *self._admin_cert)
        kcm_cert = ca.issue("system:kube-controller-manager", client=True)
        kcm_kubeconfig = write_kubeconfig(os.path.join(self.workdir, "controller-manager.kubeconfig"),
                                          self.server, ca_pem, "system:kube-controller-manager",
                                          *kcm_cert)
        policy = _write(os.path.join(self.workdir, "audit-policy.yaml"), AUDIT_POLICY, 0o644)
        if os.path.exists(self.audit_log):  # a failed earlier attempt, or a reused workdir
            os.unlink(self.audit_log)
        logs = os.path.join(self.workdir, "logs")
        os.makedirs(logs, exist_ok=True)

        # etcd
        data = os.path.join(self.workdir, "etcd-data-%d" % attempt)
        etcd = self._spawn("etcd", [
            self.bins["etcd"], "--name", "lab", "--data-dir", data,
            "--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url,
            "--listen-peer-urls", "http://127.0.0.1:%d" % peer_port,
            "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % peer_port,
            "--initial-cluster", "lab=http://127.0.0.1:%d" % peer_port,
            "--initial-cluster-state", "new", "--log-level", "warn",
            "--unsafe-no-fsync", "--snapshot-count", "10000",
        ], os.path.join(logs, "etcd.log"))
        self._wait(etcd, deadline, self._etcd_healthy, "etcd /health")

        # kube-apiserver
        api = self._spawn("kube-apiserver", [
            self.bins["kube-apiserver"],
            "--etcd-servers", self.etcd_url,
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--secure-port", str(api_port),
            "--tls-cert-file", os.path.join(pki, "apiserver.crt"),
            "--tls-private-key-file", os.path.join(pki, "apiserver.key"),
            "--client-ca-file", self.ca_file,
            "--authorization-mode", "Node,RBAC",
            "--anonymous-auth=false",
            "--service-account-issuer", SERVICE_ACCOUNT_ISSUER,
            "--service-account-key-file", os.path.join(pki, "sa.pub"),
            "--service-account-signing-key-file", os.path.join(pki, "sa.key"),
            "--service-cluster-ip-range", SERVICE_CIDR,
            # Endpoints may not hold loopback addresses: no reconciler for the kubernetes
            # Service (nothing in the lab dials it).
            "--endpoint-reconciler-type", "none",
            "--audit-policy-file", policy,
            "--audit-log-path", self.audit_log,
            "--audit-log-format", "json",
            "--audit-log-mode", "blocking",
            "--allow-privileged=true",
            "--profiling=false",
            "--cert-dir", os.path.join(self.workdir, "apiserver-certs"),
        ], os.path.join(logs, "kube-apiserver.log"))
        self._ssl = ssl.create_default_context(cafile=self.ca_file)
        self._ssl.load_cert_chain(os.path.join(pki, "admin.crt"), os.path.join(pki, "admin.key"))
        self._wait(api, deadline, self._apiserver_ready, "kube-apiserver /readyz")
        self.version = json.loads(self._get("/version"))["gitVersion"]

        if controllers:
            self._spawn("kube-controller-manager", [
                self.bins["kube-controller-manager"],
                "--kubeconfig", kcm_kubeconfig,
                "--authentication-kubeconfig", kcm_kubeconfig,
                "--authorization-kubeconfig", kcm_kubeconfig,
                "--controllers", CONTROLLERS,
                "--use-service-account-credentials=true",
                "--root-ca-file", self.ca_file,
                "--service-account-private-key-file", os.path.join(pki, "sa.key"),
                "--leader-elect=false",
                "--secure-port", "0",
                "--profiling=false",
            ], os.path.join(logs, "kube-controller-manager.log"))
            # It has no health endpoint without a secure port: it is up once the aggregation
            # controller has filled ClusterRole view (bound by tests before anything else).
            self._wait(self.procs[-1], deadline, self._aggregated,
                       "kube-controller-manager (ClusterRole view aggregated)")

    def _spawn(self, name, argv, log_path):
        proc = _Proc(name, argv, log_path)
        self.procs.append(proc)
        return proc

    def _wait(self, proc, deadline, probe, what):
        while True:
            if not proc.alive():
                raise KubeLabError("%s exited with %s before %s was ok; last lines of %s:\n%s" % (
                    proc.name, proc.popen.returncode, what, proc.log_path, proc.tail()))
            if probe():
                return
            if time.monotonic() > deadline:
                raise KubeLabError("%s not ok in time; last lines of %s:\n%s" % (
                    what, proc.log_path, proc.tail()))
            time.sleep(0.25)

    def _etcd_healthy(self):
        try:
            with urllib.request.urlopen(self.etcd_url + "/health", timeout=2) as r:
                return json.loads(r.read().decode()).get("health") == "true"
        except (OSError, ValueError):
            return False

    def _apiserver_ready(self):
        try:
            return self._get("/readyz", timeout=3) == "ok"
        except (OSError, ValueError, urllib.error.HTTPError):
            return False

    def _aggregated(self):
        try:
            role = json.loads(self._get("/apis/rbac.authorization.k8s.io/v1/clusterroles/view"))
        except (OSError, ValueError, urllib.error.HTTPError):
            return False
        return bool(role.get("rules"))

    def _get(self, path, timeout=10):
        with urllib.request.urlopen(self.server + path, timeout=timeout, context=self._ssl) as r:
            return r.read().decode()

    def _check_alive(self):
        for proc in self.procs:
            if not proc.alive():
                raise KubeLabError("%s exited with %s; last lines of %s:\n%s" % (
                    proc.name, proc.popen.returncode, proc.log_path, proc.tail()))

    def check(self):
        """Raise KubeLabError (with the log tail) when a lab process has died."""
        self._check_alive()

    def restart_apiserver(self, down_s=0.0, timeout=60.0):
        """Stop kube-apiserver (SIGTERM, as a rolling restart of a control plane does), leave it down ``down_s``
        seconds, start it again with the same flags on the same port (etcd keeps every object; the audit log goes on
        in the same file); returns once /readyz answers."""
        old = next(proc for proc in self.procs if proc.name == "kube-apiserver")
        old.stop()
        time.sleep(max(0.0, down_s))
        new = _Proc(old.name, old.argv, old.log_path)
        self.procs[self.procs.index(old)] = new
        self._wait(new, time.monotonic() + timeout, self._apiserver_ready, "kube-apiserver /readyz")

    def _stop_processes(self):
        for proc in reversed(self.procs):
            proc.stop()

    def stop(self):
        if not self.owned:
            return
        self._stop_processes()
        self.procs = []
        if self._remove_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def describe(self):
        """What python -m tests.lab.kube up writes to kube.json."""
        return {
            "server": self.server,
            "kubeconfig": self.kubeconfig,
            "ca_file": self.ca_file,
            "version": self.version,
            "audit_log": self.audit_log,
            "helm": self.bins.get("helm"),
            "kubectl": self.bins.get("kubectl"),
            "pids": {p.name: p.popen.pid for p in self.procs},
        }

    @classmethod
    def attach(cls, kube_json):
        """A KubeLab for a lab started by another process (from its kube.json); stop() is a no-op."""
        with open(kube_json, encoding="utf-8") as f:
            desc = json.load(f)
        lab = cls(os.path.dirname(os.path.abspath(kube_json)),
                  {"helm": desc.get("helm"), "kubectl": desc.get("kubectl")}, owned=False)
        lab.server = desc["server"]
        lab.kubeconfig = desc["kubeconfig"]
        lab.audit_log = desc["audit_log"]
        lab.version = desc["version"]
        lab.ca_file = desc.get("ca_file", lab.ca_file)
        pki = os.path.join(lab.workdir, "pki")
        lab._ssl = ssl.create_default_context(cafile=lab.ca_file)
        lab._ssl.load_cert_chain(os.path.join(pki, "admin.crt"), os.path.join(pki, "admin.key"))
        return lab

    # -- clients ----------------------------------------------------------------------------

    def client_kubeconfig(self, path, user, orgs=("system:masters",)):
        """A kubeconfig with a client certificate the lab's CA signs for ``user`` (in ``orgs``): a caller whose
        requests the audit log tells apart from the lab's own."""
        pki = os.path.join(self.workdir, "pki")
        ca = _CA.load(self.ca_file, os.path.join(pki, "ca.key"))
        cert, key = ca.issue(user, orgs=orgs, client=True)
        return write_kubeconfig(path, self.server, _cert_pem(ca.cert), user, cert, key)

    def api_client(self, kubeconfig=None):
        """A kubernetes.client.ApiClient for the admin (or the given) kubeconfig."""
        from kubernetes import config  # pylint: disable=import-outside-toplevel
        return config.new_client_from_config(config_file=kubeconfig or self.kubeconfig)

    @property
    def api(self):
        """A cached admin ApiClient."""
        if self._api is None:
            self._api = self.api_client()
        return self._api

    def _run(self, name, args, check, env=None, timeout=300, input_text=None):
        path = self.bins.get(name)
        if not path:
            raise KubeLabError("no %s binary known to this lab" % name)
        cmd = [path] + [str(a) for a in args]
        proc = subprocess.run(cmd, env=env, input=input_text, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout,
                              check=False)
        if check and proc.returncode != 0:
            raise KubeLabError("%s failed (exit %d):\nstdout:\n%s\nstderr:\n%s" % (
                " ".join(cmd), proc.returncode, proc.stdout, proc.stderr))
        return proc

    def helm_env(self, kubeconfig=None):
        """Environment for helm: this lab's kubeconfig, helm's homes inside the workdir."""
        home = os.path.join(self.workdir, "helm")
        env = dict(os.environ)
        env.update({
            "KUBECONFIG": kubeconfig or self.kubeconfig,
            "HELM_CACHE_HOME": os.path.join(home, "cache"),
            "HELM_CONFIG_HOME": os.path.join(home, "config"),
            "HELM_DATA_HOME": os.path.join(home, "data"),
        })
        return env

    def helm(self, *args, check=True, kubeconfig=None, timeout=300, input_text=None):
        """Run the lab's helm with the admin (or given) kubeconfig; a CompletedProcess (text)."""
        return self._run("helm", args, check, env=self.helm_env(kubeconfig), timeout=timeout,
                         input_text=input_text)

    def kubectl(self, *args, check=True, kubeconfig=None, timeout=300, input_text=None):
        """Run the lab's kubectl with the admin (or given) kubeconfig; a CompletedProcess (text)."""
        env = dict(os.environ)
        env["KUBECONFIG"] = kubeconfig or self.kubeconfig
        return self._run("kubectl", args, check, env=env, timeout=timeout, input_text=input_text)

    # -- namespaces and service accounts ----------------------------------------------------

    def new_namespace(self, prefix="t", labels=None):
        """Create a fresh namespace <prefix>-<8 hex> and return its name."""
        from kubernetes import client  # pylint: disable=import-outside-toplevel
        prefix = "".join(c if c.isalnum() else "-" for c in prefix.lower()).strip("-")[:50] or "t"
        name = "%s-%s" % (prefix, uuid.uuid4().hex[:8])
        meta = client.V1ObjectMeta(name=name, labels=dict({"ichor-lab/test": "true"},
                                                          **(labels or {})))
        client.CoreV1Api(self.api).create_namespace(client.V1Namespace(metadata=meta))
        return name

    def delete_namespace(self, name, wait=False, timeout=60):
        from kubernetes import client  # pylint: disable=import-outside-toplevel
        from kubernetes.client.rest import ApiException  # pylint: disable=import-outside-toplevel
        core = client.CoreV1Api(self.api)
        try:
            core.delete_namespace(name)
        except ApiException as e:
            if e.status != 404:
                raise
        if not wait:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                core.read_namespace(name)
            except ApiException as e:
                if e.status == 404:
                    return
                raise
            time.sleep(0.2)
        raise KubeLabError("namespace %s still there after %ss" % (name, timeout))

    def service_account_token(self, namespace, name, expiration_seconds=86400, audiences=None):
        """A token for the ServiceAccount from the TokenRequest API."""
        from kubernetes import client  # pylint: disable=import-outside-toplevel
        spec = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(
            audiences=audiences or [], expiration_seconds=expiration_seconds))
        resp = client.CoreV1Api(self.api).create_namespaced_service_account_token(
            name, namespace, spec)
        return resp.status.token

    def service_account_kubeconfig(self, namespace, name, rbac=None, path=None):
        """Create ServiceAccount namespace/name (if missing), grant rbac, return a kubeconfig path.

        rbac:
          None             no binding at all
          "edit"           a RoleBinding in namespace to that ClusterRole (any name)
          [rule, ...]      a Role <name> with these rules + RoleBinding, in namespace
          {"rules": [...], "cluster_rules": [...], "cluster_roles": ["view", ...],
           "namespace_roles": ["edit", ...]}
                           rules: Role+RoleBinding in namespace; cluster_rules: ClusterRole
                           + ClusterRoleBinding <namespace>-<name>; cluster_roles: existing
                           ClusterRoles bound cluster-wide; namespace_roles: existing
                           ClusterRoles bound in namespace
        Rules are dicts as in YAML (apiGroups, resources, verbs, resourceNames).
        The token comes from the TokenRequest API (24 h).
        """
        from kubernetes import client  # pylint: disable=import-outside-toplevel
        from kubernetes.client.rest import ApiException  # pylint: disable=import-outside-toplevel
        core = client.CoreV1Api(self.api)
        try:
            core.create_namespaced_service_account(namespace, client.V1ServiceAccount(
                metadata=client.V1ObjectMeta(name=name)))
        except ApiException as e:
            if e.status != 409:
                raise
        if rbac is not None:
            self.grant(namespace, name, rbac)
        token = self.service_account_token(namespace, name)
        path = path or os.path.join(self.workdir, "sa-%s-%s-%s.kubeconfig" % (
            namespace, name, uuid.uuid4().hex[:6]))
        with open(self.ca_file, "rb") as f:
            ca_pem = f.read()
        user = "system:serviceaccount:%s:%s" % (namespace, name)
        return write_kubeconfig(path, self.server, ca_pem, user, token=token, namespace=namespace)

    def grant(self, namespace, name, rbac):
        """Bind ServiceAccount namespace/name as described by rbac (see service_account_kubeconfig)."""
        if isinstance(rbac, str):
            rbac = {"namespace_roles": [rbac]}
        elif isinstance(rbac, (list, tuple)):
            rbac = {"rules": list(rbac)}
        subject = {"kind": "ServiceAccount", "name": name, "namespace": namespace}
        docs = []
        if rbac.get("rules"):
            docs.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                         "metadata": {"name": name, "namespace": namespace},
                         "rules": rbac["rules"]})
            docs.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                         "metadata": {"name": name, "namespace": namespace},
                         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                     "name": name},
                         "subjects": [subject]})
        cluster_name = "%s-%s" % (namespace, name)
        if rbac.get("cluster_rules"):
            docs.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                         "metadata": {"name": cluster_name}, "rules": rbac["cluster_rules"]})
            docs.append({"apiVersion": "rbac.authorization.k8s.io/v1",
                         "kind": "ClusterRoleBinding", "metadata": {"name": cluster_name},
                         "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                     "kind": "ClusterRole", "name": cluster_name},
                         "subjects": [subject]})
        for role in rbac.get("cluster_roles", ()):
            docs.append({"apiVersion": "rbac.authorization.k8s.io/v1",
                         "kind": "ClusterRoleBinding",
                         "metadata": {"name": "%s-%s" % (cluster_name, role)},
                         "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                     "kind": "ClusterRole", "name": role},
                         "subjects": [subject]})
        for role in rbac.get("namespace_roles", ()):
            docs.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                         "metadata": {"name": "%s-%s" % (name, role), "namespace": namespace},
                         "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                     "kind": "ClusterRole", "name": role},
                         "subjects": [subject]})
        self.apply_objects(docs)
        self._wait_bindings_effective(namespace, name, docs)

    def _wait_bindings_effective(self, namespace, name, docs, timeout=15.0):
        # The RBAC authorizer works from an informer cache: a binding takes a moment to count.
        # Ask SubjectAccessReview about one rule of each bound role until all are allowed.
        from kubernetes import client  # pylint: disable=import-outside-toplevel
        rbac_api = client.RbacAuthorizationV1Api(self.api)
        checks = []
        for doc in docs:
            if not doc["kind"].endswith("Binding"):
                continue
            ref = doc["roleRef"]
            inline = [d for d in docs if d["kind"] == ref["kind"]
                      and d["metadata"]["name"] == ref["name"]]
            if inline:
                rules = inline[0].get("rules") or []
            elif ref["kind"] == "ClusterRole":
                rules = [r.to_dict() for r in
                         (rbac_api.read_cluster_role(ref["name"]).rules or [])]
                rules = [{"apiGroups": r.get("api_groups"), "resources": r.get("resources"),
                          "verbs": r.get("verbs"), "resourceNames": r.get("resource_names")}
                         for r in rules]
            else:
                continue
            rule = next((r for r in rules if r.get("resources") and r.get("verbs")), None)
            if rule is None:
                continue
            scope = doc["metadata"].get("namespace")
            checks.append(client.V1ResourceAttributes(
                namespace=scope, verb=rule["verbs"][0], group=(rule.get("apiGroups") or [""])[0],
                resource=rule["resources"][0].split("/")[0],
                subresource=(rule["resources"][0].split("/") + [None])[1],
                name=(rule.get("resourceNames") or [None])[0]))
        user = "system:serviceaccount:%s:%s" % (namespace, name)
        groups = ["system:serviceaccounts", "system:serviceaccounts:%s" % namespace,
                  "system:authenticated"]
        auth = client.AuthorizationV1Api(self.api)
        deadline = time.monotonic() + timeout
        for attrs in checks:
            while True:
                review = auth.create_subject_access_review(client.V1SubjectAccessReview(
                    spec=client.V1SubjectAccessReviewSpec(user=user, groups=groups,
                                                          resource_attributes=attrs)))
                if review.status.allowed:
                    break
                if time.monotonic() > deadline:
                    raise KubeLabError("RBAC for %s not effective after %ss (%s)" % (
                        user, timeout, attrs))
                time.sleep(0.1)

    def apply_objects(self, docs):
        """Create each object (dicts); one that exists is replaced."""
        from kubernetes import dynamic  # pylint: disable=import-outside-toplevel
        from kubernetes.client.rest import ApiException  # pylint: disable=import-outside-toplevel
        dyn = dynamic.DynamicClient(self.api)
        for doc in docs:
            res = dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
            ns = doc["metadata"].get("namespace")
            try:
                res.create(body=doc, namespace=ns)
            except ApiException as e:
                if e.status != 409:
                    raise
                res.patch(body=doc, name=doc["metadata"]["name"], namespace=ns,
                          content_type="application/merge-patch+json")

    # -- audit ------------------------------------------------------------------------------

    def audit_barrier(self, timeout=10.0):
        """Wait until every request answered before this call is in the audit log.

        Sends a uniquely named GET and waits for its audit line (the API server writes an
        event after the response, so a test that reads the log right after a request could
        miss it otherwise). Returns the byte offset just past that line.
        """
        marker = "ichor-audit-barrier-%s" % uuid.uuid4().hex
        start = self._audit_scanned  # the marker's line can only come after this offset
        try:
            self._get("/api/v1/namespaces/default/configmaps/%s" % marker)
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise
        deadline = time.monotonic() + timeout
        needle = marker.encode()
        while True:
            for end, event in self._read_audit(start, needle):
                if (event.get("objectRef") or {}).get("name") == marker:
                    time.sleep(0.05)
                    self._audit_scanned = end
                    return end
            if time.monotonic() > deadline:
                raise KubeLabError("audit barrier %s not in %s after %ss" % (
                    marker, self.audit_log, timeout))
            time.sleep(0.05)

    def audit_mark(self):
        """A position in the audit log (pass as since= to audit_events / mutating_requests)."""
        return self.audit_barrier()

    def _read_audit(self, offset, needle=None):
        try:
            with open(self.audit_log, "rb") as f:
                f.seek(offset)
                data = f.read()
        except FileNotFoundError:
            return
        pos = offset
        for raw in data.split(b"\n")[:-1]:  # only complete lines
            pos += len(raw) + 1
            if not raw.strip() or (needle is not None and needle not in raw):
                continue
            try:
                yield pos, json.loads(raw.decode("utf-8"))
            except ValueError:
                continue

    def audit_events(self, since=None):
        """Parsed audit events (dicts), oldest first, after a barrier.

        since: None (all), an int from audit_mark() (events after that position), or a time
        (datetime, or float epoch seconds) compared with requestReceivedTimestamp.
        """
        end = self.audit_barrier()
        offset = since if isinstance(since, int) and not isinstance(since, bool) else 0
        after = None
        if isinstance(since, float):
            after = datetime.datetime.fromtimestamp(since, datetime.timezone.utc)
        elif isinstance(since, datetime.datetime):
            after = since if since.tzinfo else since.replace(tzinfo=datetime.timezone.utc)
        events = []
        for pos, event in self._read_audit(offset):
            if pos > end:
                break
            if after is not None:
                ts = event.get("requestReceivedTimestamp")
                if not ts or _parse_time(ts) < after:
                    continue
            if ((event.get("objectRef") or {}).get("name") or "").startswith(
                    "ichor-audit-barrier-"):
                continue
            events.append(event)
        return events

    def mutating_requests(self, since=None, include_system=False, user=None, namespace=None):
        """Audit events of writes (create/update/patch/delete/deletecollection) not dry-run.

        Leaves out the lab's own control plane (API server, controller manager and its
        controllers' ServiceAccounts) unless include_system; user (a name, or a callable on the
        name) and namespace narrow it further. Failed requests are included (check
        event["responseStatus"]["code"]).
        """
        out = []
        for event in self.audit_events(since):
            if event.get("verb") not in MUTATING_VERBS or is_dry_run(event):
                continue
            name = event_user(event)
            if not include_system and is_system_user(name):
                continue
            if user is not None and not (user(name) if callable(user) else name == user):
                continue
            if namespace is not None and (event.get("objectRef") or {}).get(
                    "namespace") != namespace:
                continue
            out.append(event)
        return out
