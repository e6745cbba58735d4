"""maesh.ichor.status against the lab: a cluster maesh.ichor.init made (3 control planes and a worker, the collection's
Cilium), read as it is (nothing to report, exit 0, the same in check mode, no write in the audit log), then each
condition injected alone and taken back: the finding names the machine, path or object, with its severity, and
nothing else is reported. The conditions: class A, B and C drift, holds (from their own start), a pending machine,
a Node, a Talos machine and a record entry the record does not know or that does not answer, the bundle's and the
Cilium release's objects, an unhealthy etcd member (also one that is no machine of the inventory), no etcd leader, a
database near its quota (etcd's default, and the one a control plane's config sets), and credentials that end soon
(the talosconfig's and a kubeconfig's file certificate, a CA)."""

import base64
import copy
import datetime
import os
import random
import re
import stat
import time

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.cilium import record as helm_record
from ansible_collections.maesh.ichor.plugins.module_utils.config import secrets
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record, lock
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient
from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine, talosconfig
from ansible_collections.maesh.ichor.plugins.module_utils.talos.client import TalosClient

from tests.helm_record import encode as encoded_record
from tests.integration import test_init
from tests.integration.ansible_env import REPO, ansible_playbook

pytestmark = pytest.mark.lab

cilium_charts = test_init.cilium_charts
cilium_lab = test_init.cilium_lab
init_cleanup = test_init.init_cleanup


USER = "ichor-status"  # the run's own client certificate: its requests are told apart in the audit log
WRITES = ("ApplyConfiguration", "Reboot", "Reset", "Upgrade", "Bootstrap", "EtcdRemoveMemberByID", "EtcdLeaveCluster")


def _status(ctx, *extra, acknowledging=False, reads=True):
    """One run: (the process, its finding lines, the report). It writes nothing: no write in the API server's audit
    log, no writing call on any machine; an acknowledgement writes the cluster record and its lock, nothing else. A
    run refused before it reads (``reads=False``) reads nothing either."""
    lab, inv, tmp_path, kube_lab = ctx
    report = tmp_path / "status.md"
    if report.exists():
        report.unlink()
    mark = kube_lab.audit_mark()
    calls = dict((m["name"], lab.control.calls(m["name"])) for m in lab.machines)
    proc = ansible_playbook("-i", inv, "maesh.ichor.status", "-e", "ichor_status_report=%s" % report, *extra)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    kube_lab.audit_barrier()
    writes = [(e["verb"], e["objectRef"]["resource"], e["objectRef"].get("name")) for e in
              kube_lab.mutating_requests(since=mark, user=USER)]
    if acknowledging:
        assert set(writes) == {("update", "configmaps", "ichor-cluster"), ("create", "leases", "ichor-cluster-lock"),
                               ("delete", "leases", "ichor-cluster-lock")}, writes
    else:
        assert writes == []
    read = [e for e in kube_lab.audit_events(since=mark) if e["user"]["username"] == USER]
    assert bool(read) == reads, "the run read nothing" if reads else read
    for m in lab.machines:
        after = lab.control.calls(m["name"])
        assert [c for c in WRITES if after.get(c, 0) != calls[m["name"]].get(c, 0)] == [], m["name"]
    lines = [line.strip().strip('",') for line in proc.stdout.splitlines()]
    found = [line for line in lines if line.startswith(("critical: ", "warning: ", "info: "))]
    return proc, sorted(set(found)), report.read_text() if report.exists() else None


def _token(proc):
    """The acknowledgement token a run printed."""
    (token,) = set(re.findall(r"ichor_status_acknowledge=([0-9a-f]{16})", proc.stdout))
    return token


def _expect(ctx, rc, *wanted):
    """The run's exit code and its findings: exactly ``wanted`` (each a line's start), each in the report too."""
    proc, found, report = _status(ctx)
    assert (proc.returncode != 0) == (rc != 0), proc.stdout[-6000:]
    assert len(found) == len(wanted) and all(any(f.startswith(w) for f in found) for w in wanted), (found, wanted)
    for line in found:
        assert line.split(": ", 2)[-1].split(";")[0].replace("|", "\\|")[:60] in report, (line, report)
    return found


class Env:
    """What a condition changes: the lab, the API server (as its admin), the Talos API (init's talosconfig), and the
    inventory and kubeconfig the status runs read."""

    def __init__(self, lab, kube, talos, keep, inv=None, kube_lab=None):
        self.lab, self.kube, self.talos, self.keep, self.inv, self.kube_lab = lab, kube, talos, keep, inv, kube_lab
        self.worker = [m for m in lab.machines if m["role"] == "worker"][0]
        self.cps = [m for m in lab.machines if m["role"] == "controlplane"]


def _stamp(days_ago):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - days_ago * 86400))


def _edit(env, node, change):
    """The machine's live config changed by hand (``change(docs)``, docs[0] the v1alpha1 one): the undo puts back
    what it was."""
    before = env.talos.run(machine.get_resource(env.talos, machine.res.MACHINE_CONFIG, node))["spec"]
    docs = list(yaml.safe_load_all(before))
    change(docs)
    machine.apply_config(env.talos, node, yaml.safe_dump_all(docs))
    return lambda: machine.apply_config(env.talos, node, before)


def _faults(env, names, **faults):
    """Faults on the named machines; the undo clears those faults only (another condition's stay)."""
    for name in names:
        env.lab.control.set_faults(name, **faults)
    return lambda: [env.lab.control.set_faults(name, **dict((k, None) for k in faults)) for name in names]


def _record_entry(env, name, entry):
    """The record's entry of machine ``name`` replaced by ``entry`` (None: removed); the undo puts it back."""
    kept = copy.deepcopy((cluster_record.read(env.kube).get("nodes") or {}).get(name))

    def put(value):
        def mutate(data):
            if value is None:
                data["nodes"].pop(name, None)
            else:
                data["nodes"][name] = value
        cluster_record.update(env.kube, mutate)
    put(entry)
    return lambda: put(kept)


# Each condition: inject it, return (the findings it makes, each a line's start; whether one is critical; undo).
def drifted(env, value="262144"):
    """A sysctl set by hand on the worker (class A drift)."""
    undo = _edit(env, env.worker["address"],
                 lambda docs: docs[0]["machine"].setdefault("sysctls", {}).update({"vm.max_map_count": value}))
    return (["critical: machines %s: class A drift: remove v1alpha1:machine.sysctls.vm.max_map_count" %
             env.worker["name"]], True, undo)


def drifted_b(env):
    """Flannel's document put back by hand on a control plane, where the collection's Cilium replaced it (class B:
    Ichor-owned, needs consent; only a control plane's config states the CNI)."""
    undo = _edit(env, env.lab.address("cp-1"), lambda docs: docs.append(
        {"apiVersion": "v1alpha1", "kind": "KubeFlannelCNIConfig", "backendType": "vxlan", "backendPort": 4789}))
    return (["critical: machines cp-1: class B drift: remove KubeFlannelCNIConfig:",
             "critical: machines cp-1: class B drift: remove KubeFlannelCNIConfig:backendPort",
             "critical: machines cp-1: class B drift: remove KubeFlannelCNIConfig:backendType"], True, undo)


def drifted_c(env):
    """An environment variable set by hand on the worker (class C: no spec field covers it)."""
    undo = _edit(env, env.worker["address"],
                 lambda docs: docs[0]["machine"].setdefault("env", {}).update({"GRPC_GO_LOG_SEVERITY_LEVEL": "info"}))
    return (["critical: machines %s: class C drift: remove v1alpha1:machine.env.GRPC_GO_LOG_SEVERITY_LEVEL" %
             env.worker["name"]], True, undo)


def held(env, days=1, adopted=60):
    """A machine a later adopt run holds: a warning while its own hold is recent (the first adoption was ``adopted``
    days ago), critical once held longer than ichor_status_hold_days."""
    cluster_record.update(env.kube, lambda d: d.update(held={"cp-2": "class B needs consent"},
                                                       heldSince={"cp-2": _stamp(days)},
                                                       adoption=dict(d.get("adoption") or {}, at=_stamp(adopted))))
    line = "machines cp-2: held (class B needs consent); for %.1f days" % days
    return (["critical: " + line + ", longer than" if days > 14 else "warning: " + line], days > 14,
            lambda: cluster_record.update(env.kube, lambda d: (d.pop("held"), d.pop("heldSince"), d.pop("adoption"))))


def held_before_starts(env):
    """A hold an earlier adopt recorded, without its start: counted from the adoption, as the finding says."""
    adopted = _stamp(3)
    cluster_record.update(env.kube, lambda d: d.update(held={"cp-2": "class B needs consent"},
                                                       adoption=dict(d.get("adoption") or {}, at=adopted)))
    return (["warning: machines cp-2: held (class B needs consent); for 3.0 days (counted from the adoption at %s: the "
             "cluster record keeps no start for this hold)" % adopted], False,
            lambda: cluster_record.update(env.kube, lambda d: (d.pop("held"), d.pop("adoption"))))


def pending(env):
    """A machine reclaim registered that has not joined."""
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 3 * 86400))
    cluster_record.update(env.kube, lambda d: d.update(machines=[{"uuid": "u-pending", "address": "127.0.0.99",
                                                                  "state": "pending", "source": "reclaim", "at": at}]))
    return (["info: machines 127.0.0.99: pending (registered by reclaim, 3.0 days ago)"], False,
            lambda: cluster_record.update(env.kube, lambda d: d.pop("machines")))


def stranger(env):
    """A Node the record does not know."""
    env.kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "stranger-1"}})
    return (["warning: machines stranger-1: a Node the cluster runs that the cluster record does not"], False,
            lambda: env.kube.delete("v1", "Node", "stranger-1"))


RBAC = "rbac.authorization.k8s.io/v1"


def bundle_object_deleted(env):
    """An object of the collection's bundle deleted (judged by server-side apply dry runs, not writes)."""
    binding = env.kube.get(RBAC, "RoleBinding", "ichor-installer", "ichor-system")
    env.kube.delete(RBAC, "RoleBinding", "ichor-installer", "ichor-system")
    for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
        binding["metadata"].pop(key, None)
    return (["warning: installer RoleBinding ichor-system/ichor-installer: missing: deleted out of band"], False,
            lambda: env.kube.create(binding))


def bundle_object_changed(env):
    """A Role of the bundle changed by hand."""
    def verbs(value):
        role = env.kube.get(RBAC, "Role", "ichor-installer", "ichor-system")
        role["rules"][0]["verbs"] = value
        env.kube.replace(role)
    verbs(["get", "create", "delete", "update"])
    return (["warning: installer Role ichor-system/ichor-installer: changed out of band at rules[0].verbs; "], False,
            lambda: verbs(["get", "create", "delete"]))


def daemonset_edited(env):
    """The Cilium DaemonSet edited by hand: the diff gate of the deployed revision names it."""
    def annotate(value):
        daemonset = env.kube.get("apps/v1", "DaemonSet", "cilium", "kube-system")
        annotations = daemonset["spec"]["template"]["metadata"].setdefault("annotations", {})
        if value is None:
            del annotations["edited-by"]
        else:
            annotations["edited-by"] = value
        env.kube.replace(daemonset)
    annotate("hand")
    return (["warning: cilium DaemonSet kube-system/cilium: differs from what revision "], False,
            lambda: annotate(None))


def orphan(env):
    """An object the foreign release made, kept by the takeover (the record lists it): owned by no release."""
    leftover = env.kube.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "cilium-leftover", "namespace": "kube-system", "annotations": {
            "meta.helm.sh/release-name": "cilium", "meta.helm.sh/release-namespace": "kube-system"}}})
    cluster_record.update(env.kube, lambda d: d["cilium"].update(orphans=[{
        "object": "ConfigMap kube-system/cilium-leftover", "apiVersion": "v1", "uid": leftover["metadata"]["uid"],
        "release": "kube-system/cilium"}]))
    return (["warning: cilium ConfigMap kube-system/cilium-leftover: owned by no release: the Cilium release "
             "kube-system/cilium made it"], False,
            lambda: env.kube.delete("v1", "ConfigMap", "cilium-leftover", "kube-system"))


def release_failed(env):
    """The collection's Cilium release failed (its newest record says so, in its label and its release, as Helm
    writes it)."""
    def label(value):
        (newest,) = [s for s in env.kube.list("v1", "Secret", "ichor-system", label_selector="owner=helm,name=cilium")
                     if s["metadata"]["labels"]["status"] != "superseded"]
        newest["metadata"]["labels"]["status"] = value
        release = helm_record.decode(newest["data"]["release"])
        release["info"]["status"] = value
        newest["data"]["release"] = encoded_record(release)
        env.kube.replace(newest)
        return helm_record.Record(newest).revision
    revision = label("failed")
    return (["critical: cilium ichor-system/cilium: Helm release revision %s is failed" % revision], True,
            lambda: label("deployed"))


def credential_ending(env):
    """The talosconfig the run uses replaced by one whose client certificate ends in 10 days."""
    path = env.keep / "talosconfig"
    before = path.read_text()
    minted = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0) - (
        secrets.ADMIN_VALIDITY - datetime.timedelta(days=10))
    cps = [m["address"] for m in env.lab.machines if m["role"] == "controlplane"]
    path.write_text(secrets.admin_talosconfig(secrets.load(str(env.keep / "secrets.yaml")), "lab", cps, now=minted))
    return (["critical: credentials talosconfig client certificate: expires in "], True,
            lambda: path.write_text(before))


def _cert_pem(cert):
    from cryptography.hazmat.primitives import serialization
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key):
    from cryptography.hazmat.primitives import serialization
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _issued(days, issuer=None, issuer_key=None, common_name="ichor-lab-aggregator", orgs=()):
    """(cert PEM, key PEM) of an ECDSA P-256 certificate that ends in ``days`` days: a CA of its own, or a client
    certificate ``issuer`` signs."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs] +
                        [x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    builder = (x509.CertificateBuilder().subject_name(subject)
               .issuer_name(issuer.subject if issuer is not None else subject).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=days)))
    if issuer is None:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                          key_encipherment=False, data_encipherment=False, key_agreement=False, encipher_only=False,
                          decipher_only=False), critical=True)
    else:
        builder = builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True).add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    return _cert_pem(builder.sign(issuer_key or key, hashes.SHA256())), _key_pem(key)


def ca_ending(env):
    """The cluster's aggregator CA replaced on every control plane (workers hold none) by one that ends in 10 days: the
    same on all, so no drift, and the CA is what is found."""
    crt, key = _issued(10)

    def change(docs):
        typed = [d for d in docs if d.get("kind") == "KubeAggregatorCAConfig"]
        if typed:
            typed[0]["issuingCA"] = {"cert": crt.decode(), "key": key.decode()}
        else:
            docs[0]["cluster"]["aggregatorCA"] = {"crt": base64.b64encode(crt).decode(),
                                                  "key": base64.b64encode(key).decode()}
    undos = [_edit(env, m["address"], change) for m in env.cps]
    return (["critical: credentials aggregator CA: expires in "], True, lambda: [undo() for undo in reversed(undos)])


def kubeconfig_file_ending(env):
    """The kubeconfig the run uses names its client certificate by a file (``client-certificate``, relative to the
    kubeconfig) that ends in 10 days."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    lab = env.kube_lab
    with open(lab.ca_file, "rb") as handle:
        ca = x509.load_pem_x509_certificate(handle.read())
    with open(os.path.join(lab.workdir, "pki", "ca.key"), "rb") as handle:
        ca_key = serialization.load_pem_private_key(handle.read(), password=None)
    crt, key = _issued(10, ca, ca_key, USER, orgs=("system:masters",))
    path = env.keep / "status.kubeconfig"
    before = path.read_text()
    certs = env.keep / "status-certs"
    certs.mkdir(mode=0o700, exist_ok=True)
    (certs / "client.crt").write_bytes(crt)
    (certs / "client.key").write_bytes(key)
    os.chmod(str(certs / "client.key"), 0o600)
    data = yaml.safe_load(before)
    user = data["users"][0]["user"]
    user.pop("client-certificate-data")
    user.pop("client-key-data")
    user.update({"client-certificate": "status-certs/client.crt", "client-key": "status-certs/client.key"})
    path.write_text(yaml.safe_dump(data))
    return (["critical: credentials kubeconfig client certificate: expires in "], True,
            lambda: path.write_text(before))


def unhealthy_member(env):
    """An etcd member that reports an alarm (as etcd words one)."""
    undo = _faults(env, ["cp-2"], etcd_errors=["memberID:2 alarm:NOSPACE "])
    return (["critical: etcd cp-2: etcd member reports errors: memberID:2 alarm:NOSPACE"], True, undo)


def no_leader(env):
    """No etcd member knows a leader (each reports leader 0, and etcd's own no-leader error)."""
    undo = _faults(env, [m["name"] for m in env.cps], etcd_no_leader=True)
    return (["critical: etcd etcd: no leader: none of the 3 member(s) that answered"], True, undo)


def database_near_quota(env):
    """A member's database at 85 % of etcd's default quota (2 GiB: the config sets none)."""
    undo = _faults(env, ["cp-2"], etcd_db_size=int(2048 * 0.85 * 1048576))
    return (["critical: etcd cp-2: database 1740.8 MiB of its 2048 MiB quota (etcd's default)"], True, undo)


def database_near_configured_quota(env):
    """A control plane's config sets etcd's quota to 100 MiB (by hand: class C drift), and its 90 MiB database is
    over 80 % of it, though far below etcd's default."""
    undo_config = _edit(env, env.lab.address("cp-1"), lambda docs: docs[0]["cluster"].setdefault("etcd", {}).setdefault(
        "extraArgs", {}).update({"quota-backend-bytes": str(100 * 1048576)}))
    undo_size = _faults(env, ["cp-1"], etcd_db_size=90 * 1048576)
    return (["critical: etcd cp-1: database 90.0 MiB of its 100 MiB quota (quota-backend-bytes of cp-1's config)",
             "critical: machines cp-1: class C drift: remove v1alpha1:cluster.etcd.extraArgs.quota-backend-bytes"],
            True, lambda: (undo_size(), undo_config()))


def stale_record_entry(env):
    """The record names a machine that no longer answers (gone, its entry left behind)."""
    gone = env.lab.address("worker-1").rsplit(".", 1)[0] + ".99"
    undo = _record_entry(env, "worker-9", {"uuid": "u-gone", "node": gone, "role": "worker"})
    return (["warning: machines worker-9: the cluster record names it, and it does not answer"], False, undo)


def stranger_machine(env):
    """A Talos machine of the inventory that answers and that the record does not know (never adopted)."""
    undo = _record_entry(env, "cp-2", None)
    return (["warning: machines cp-2: answers at %s and the cluster record does not know it" % env.lab.address("cp-2")],
            False, undo)


def stranger_member(env):
    """An etcd member that is no machine of the inventory nor the record (a control plane joined by hand), and that
    reports an alarm: found, and its health judged all the same (through a control plane)."""
    before = open(env.inv).read()
    data = yaml.safe_load(before)
    data["all"]["children"]["controlplane"]["hosts"].pop("cp-3")
    with open(env.inv, "w") as handle:
        yaml.safe_dump(data, handle)
    undo_entry = _record_entry(env, "cp-3", None)
    undo_fault = _faults(env, ["cp-3"], etcd_errors=["memberID:3 alarm:CORRUPT "])

    def undo():
        undo_fault()
        undo_entry()
        with open(env.inv, "w") as handle:
            handle.write(before)
    # named as etcd and its Node name it: by the machine's hostname
    address = env.lab.address("cp-3")
    (member,) = [m for m in env.talos.call("EtcdMemberList", node=env.lab.address("cp-1")).messages[0].members
                 if "%s:" % address in m.peer_urls[0]]
    return (["warning: etcd %s: an etcd member at %s that is no machine read here" % (member.hostname, address),
             "critical: etcd %s: etcd member reports errors: memberID:3 alarm:CORRUPT" % member.hostname,
             "warning: machines %s: a Node the cluster runs that the cluster record does not know" % member.hostname],
            True, undo)


CONDITIONS = (drifted, drifted_b, drifted_c, held, pending, stranger, bundle_object_deleted, bundle_object_changed,
              daemonset_edited, orphan, release_failed, credential_ending, ca_ending, kubeconfig_file_ending,
              unhealthy_member, no_leader, database_near_quota, database_near_configured_quota, stale_record_entry,
              stranger_machine, stranger_member)


# A condition another one hides, when both are drawn: the diff gate judges the deployed revision, so while the
# newest one is failed the DaemonSet edited by hand is not compared (the failed release is the finding).
MASKED = {daemonset_edited: (release_failed,)}


@pytest.fixture
def managed(talos_kube_lab, kube_lab, cilium_lab, cilium_charts, tmp_path, init_cleanup):
    """A cluster init made, and the inventory status reads it with (init's talosconfig and kubeconfig)."""
    lab = talos_kube_lab(controlplanes=3, workers=1, mode="maintenance", bootstrapped=False, version=release.TALOS)
    inv, keep = test_init._inventory(lab, tmp_path, **test_init._cilium(cilium_lab, kube_lab, cilium_charts))
    made = test_init._init(inv)
    assert made.returncode == 0, made.stdout[-8000:]
    data = yaml.safe_load(open(inv))
    kubeconfig = kube_lab.client_kubeconfig(str(keep / "status.kubeconfig"), USER)
    data["all"]["vars"].update(ichor_talosconfig=str(keep / "talosconfig"), ichor_kubeconfig=kubeconfig)
    with open(inv, "w") as handle:
        yaml.safe_dump(data, handle)
    return lab, inv, keep


def _talos(keep):
    return TalosClient(context=talosconfig.load(path=str(keep / "talosconfig")))


def test_a_clean_cluster_has_nothing_to_report_and_each_condition_is_found_alone(managed, kube_lab, tmp_path):
    lab, inv, keep = managed
    ctx = (lab, inv, tmp_path, kube_lab)
    kube = KubeClient(kubeconfig=kube_lab.kubeconfig)
    proc, found, report = _status(ctx)
    assert proc.returncode == 0 and found == [], proc.stdout[-6000:]
    assert "status: nothing to report (0 critical, 0 warning, 0 info)" in proc.stdout
    assert "Position: up to date" in report and "| cp-1 |" in report
    assert stat.S_IMODE(os.stat(str(tmp_path / "status.md")).st_mode) == 0o600
    checked, found_checked, report_checked = _status(ctx, "--check")
    assert checked.returncode == 0 and found_checked == [] and "nothing to report" in report_checked

    # a changed machine config: a sysctl set by hand on worker-1 (class A: a machine spec field covers it)
    worker = [m for m in lab.machines if m["role"] == "worker"][0]
    talos = _talos(keep)
    env = Env(lab, kube, talos, keep, inv, kube_lab)
    (wanted,), unused_critical, undo = drifted(env)
    (line,) = _expect(ctx, 1, wanted)
    acknowledged = line.replace("critical", "warning", 1) + " (acknowledged)"

    # what the run found, and the token that acknowledges exactly that, printed beside it (in check mode the same)
    seen, found, unused_report = _status(ctx, "--check")
    assert found == [line] and "acknowledge: to record the 1 class A or B drift path(s)" in seen.stdout
    token = _token(seen)
    # true acknowledges only in check mode (the plan of it); outside it, it is refused before anything is read
    planned, found, unused_report = _status(ctx, "-e", "ichor_status_acknowledge=true", "--check")
    assert planned.returncode != 0 and found == [line], found
    assert "acknowledge: would record 1 drift path(s) as known in the cluster record" in planned.stdout
    assert _token(planned) == token
    blind, unused_found, unused_report = _status(ctx, "-e", "ichor_status_acknowledge=true", reads=False)
    assert blind.returncode != 0 and "ichor_status_acknowledge=true would record whatever this run finds" in \
        blind.stdout, blind.stdout[-3000:]
    bad, unused_found, unused_report = _status(ctx, "-e", "ichor_status_acknowledge=nonsense", reads=False)
    assert bad.returncode != 0 and "ichor_status_acknowledge is neither false nor a token" in bad.stdout
    # a relative report path would land beside the collection's playbook: refused before anything is read
    relative, unused_found, unused_report = _status(ctx, "-e", "ichor_status_report=status-here.md", reads=False)
    assert relative.returncode != 0 and "ichor_status_report status-here.md is a relative path" in relative.stdout
    assert not (cluster_record.read(kube).get("status") or {}).get("acknowledged")
    # the value changed since the token was printed: refused, nothing recorded
    undo()
    unused_wanted, unused_critical, undo = drifted(env, value="524288")
    changed, unused_found, unused_report = _status(ctx, "-e", "ichor_status_acknowledge=%s" % token)
    assert changed.returncode != 0 and "ichor_status_acknowledge=%s is not what this run finds" % token in \
        changed.stdout, changed.stdout[-3000:]
    assert not (cluster_record.read(kube).get("status") or {}).get("acknowledged")
    undo()
    unused_wanted, unused_critical, undo = drifted(env)
    # the check run of the acknowledgement says what it would record, and writes nothing; the run records it, and
    # it is a warning from then on
    planned, found, unused_report = _status(ctx, "-e", "ichor_status_acknowledge=%s" % token, "--check")
    assert planned.returncode != 0 and found == [line] and "acknowledge: would record 1 drift path(s)" in planned.stdout
    done, found, unused_report = _status(ctx, "-e", "ichor_status_acknowledge=%s" % token, acknowledging=True)
    assert done.returncode == 0 and found == [acknowledged], found
    record = cluster_record.read(kube).data["status"]
    assert len(record["acknowledged"]) == 1 and record["by"] and record["token"] == token
    assert "262144" not in str(record)
    _expect(ctx, 0, acknowledged)
    # a new value at the acknowledged path is not what was acknowledged: critical again, until it is put back
    undo()
    unused_wanted, unused_critical, undo = drifted(env, value="524288")
    _expect(ctx, 1, line)
    undo()
    unused_wanted, unused_critical, undo = drifted(env)
    _expect(ctx, 0, acknowledged)
    # a path found later is critical still
    undo_more = _edit(env, worker["address"], lambda docs: docs[0]["machine"]["sysctls"].update(
        {"net.core.somaxconn": "4096"}))
    proc, found, unused_report = _status(ctx)
    assert proc.returncode != 0 and found == sorted([acknowledged, "critical: machines %s: class A drift: remove "
                                                     "v1alpha1:machine.sysctls.net.core.somaxconn" % worker["name"]])
    # another run holds the cluster lock: the acknowledgement is refused, naming it, and nothing is recorded
    lock.acquire(kube, "maesh-ichor-other-run", duration=120)
    refused, unused_found, unused_report = _status(ctx, "-e", "ichor_status_acknowledge=%s" % _token(proc))
    assert refused.returncode != 0 and "is held by maesh-ichor-other-run" in refused.stdout, refused.stdout[-3000:]
    assert cluster_record.read(kube).data["status"] == record
    lock.release(kube, "maesh-ichor-other-run")
    undo_more()
    undo()
    # no drift left: the run prints the token that empties the list; acknowledged, the same drift would be critical
    # once more
    left, found, unused_report = _status(ctx)
    assert left.returncode == 0 and found == [] and "acknowledge: no class A or B drift is left" in left.stdout
    emptied, found, unused_report = _status(ctx, "-e", "ichor_status_acknowledge=%s" % _token(left),
                                            acknowledging=True)
    assert emptied.returncode == 0 and found == [] and cluster_record.read(kube).data["status"]["acknowledged"] == []
    _expect(ctx, 0)

    # each condition alone: found with its severity, and nothing else (a condition not quite taken back would be
    # found with the next one); all taken back, nothing to report
    for condition in CONDITIONS + (lambda e: held(e, days=20), held_before_starts):
        wanted, critical, undo = condition(env)
        _expect(ctx, 1 if critical else 0, *wanted)
        undo()
    _expect(ctx, 0)

    # the certificate's days, as the run counts them (its condition above matched the line's start)
    unused_wanted, unused_critical, undo = credential_ending(env)
    proc, found, unused_report = _status(ctx)
    undo()
    assert proc.returncode != 0 and len(found) == 1, found
    assert re.match(r"critical: credentials talosconfig client certificate: expires in (9\.9|10\.0) days", found[0]), found

    # etcd lost a member: cp-3 is no member any more
    cps = [m["address"] for m in lab.machines if m["role"] == "controlplane"]
    members = talos.call("EtcdMemberList", node=cps[0]).messages[0].members
    (third,) = [m for m in members if "%s:" % lab.address("cp-3") in m.peer_urls[0]]
    talos.call("EtcdRemoveMemberByID", machine.talos_client.request_type("EtcdRemoveMemberByID")(member_id=third.id),
               node=cps[0])
    _expect(ctx, 1, "critical: etcd cp-3: a control plane that is no etcd member")
    talos.close()


def test_each_condition_combined_with_two_others_in_a_seeded_order_is_found(managed, kube_lab, tmp_path):
    """The conditions shuffled from a seed (``ICHOR_STATUS_SEED``) and taken three at a time (the last three wrap
    around to the first), so that each is combined with two others, injected in that order: the run finds exactly
    theirs, fails when one is critical, and is clean once they are undone. ``ICHOR_STATUS_ROUNDS`` shuffles (1 by
    default) is a maintainer's longer run."""
    lab, inv, keep = managed
    ctx = (lab, inv, tmp_path, kube_lab)
    rng = random.Random(int(os.environ.get("ICHOR_STATUS_SEED", "30")))
    talos = _talos(keep)
    env = Env(lab, KubeClient(kubeconfig=kube_lab.kubeconfig), talos, keep, inv, kube_lab)
    for unused_round in range(int(os.environ.get("ICHOR_STATUS_ROUNDS", "1"))):
        order = rng.sample(CONDITIONS, len(CONDITIONS))
        for start in range(0, len(order), 3):
            drawn = (order + order)[start:start + 3]
            injected = [condition(env) for condition in drawn]
            wanted = [line for condition, (lines, unused_critical, unused_undo) in zip(drawn, injected)
                      if not set(MASKED.get(condition, ())) & set(drawn) for line in lines]
            _expect(ctx, 1 if any(c for unused_lines, c, unused_undo in injected) else 0, *wanted)
            for unused_lines, unused_critical, undo in reversed(injected):
                undo()
    _expect(ctx, 0)
    talos.close()


@pytest.mark.floor
def test_as_an_awx_schedule_runs_it_the_job_fails_when_a_person_is_needed_and_leaks_no_secret(managed, kube_lab,
                                                                                              tmp_path):
    """The job template of docs/awx/job_templates.yml through ansible-runner, the managed-cluster credential injected:
    a clean cluster's job succeeds with the status as its artifact; a condition that needs a person fails the job (what
    AWX's failure notification fires on), naming it; no credential in anything the jobs left."""
    from tests.integration.awx import AwxJob, kubeconfig_markers
    from tests.integration.test_reclaim import marked_talosconfig
    lab, inv, keep = managed
    job = AwxJob(tmp_path / "runner", "status")
    job.inventory(yaml.safe_load(open(inv)))
    marked = str(tmp_path / "marked-talosconfig")
    data = yaml.safe_load(open(inv))["all"]["vars"]
    markers = marked_talosconfig(lab, marked, source=data["ichor_talosconfig"]) + \
        kubeconfig_markers(data["ichor_kubeconfig"])
    with open(marked) as talos, open(data["ichor_kubeconfig"]) as kube:
        job.credential_of_type("managed_cluster", {"talosconfig": talos.read(), "kubeconfig": kube.read(),
                                                   "cluster": "lab"})
    template = yaml.safe_load(open(os.path.join(REPO, "docs", "awx", "job_templates.yml")))["status_schedule"]
    survey = dict((q["variable"], q["default"]) for q in template["survey_spec"]["spec"])
    rc, clean = job.run(survey, job_id=1)
    assert rc == 0 and "status: nothing to report" in clean, clean[-4000:]
    status = job.artifacts()["ichor_status"]
    assert status["needs_person"] is False and status["findings"] == [] and len(status["machines"]) == 4, status

    talos = _talos(keep)
    (wanted,), unused_critical, undo = drifted(Env(lab, KubeClient(kubeconfig=kube_lab.kubeconfig), talos, keep))
    rc, failed = job.run(survey, job_id=2)
    assert rc != 0 and wanted in failed, failed[-4000:]
    assert job.artifacts()["ichor_status"]["needs_person"] is True
    undo()
    talos.close()
    assert job.sweep(markers, [clean, failed]) == []
