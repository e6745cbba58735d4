"""maesh.ichor.cluster_backup against the lab (issue 47, the backup's first slice): a managed cluster (its record and its
secrets bundle Secret on the real API server), cp-1 serving a real etcd's snapshot; check mode plans and writes
nothing; the run writes one archive that the identity opens, whose snapshot etcd's own ``etcdutl snapshot status``
reads as the manifest says, whose bundle and configs are the cluster's, and nothing of which (the bundle's secrets,
the configs' keys) reaches the run's output; retention prunes what the policy lets go and keeps the newest verified
archive."""

import datetime
import glob
import json
import os
import subprocess
import tempfile

import pyrage
import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.ansible_module.runner import Connections
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.config import bundle_secret, documents, secrets
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient
from ansible_collections.maesh.ichor.plugins.module_utils.recovery import archive, backup, retention

from tests.integration.ansible_env import ansible_playbook
from tests.integration.test_guide_commands import _real_snapshot
from tests.integration.test_upgrade import V113_K8S_135, _record
from tests.lab.kube.cluster import binaries

pytestmark = pytest.mark.lab


@pytest.fixture()
def managed(talos_kube_lab, tmp_path):
    """A cluster the collection manages: the record (with its name) and the bundle Secret, cp-1 serving a real
    etcd's snapshot. The Secret is removed afterwards: the API server is the session's."""
    lab = talos_kube_lab(case=V113_K8S_135, controlplanes=1, workers=1, version="v1.13.9")
    kube = KubeClient(kubeconfig=lab.kube.kubeconfig)
    _record(lab, V113_K8S_135)
    cluster_record.update(kube, lambda data: data.update(cluster={"name": "prod", "id": "lab-cluster-id"}))
    cp = [m for m in lab.machines if m["role"] == "controlplane"][0]
    bundle = secrets.from_config(documents.parse(cp["machine_config"]))
    _drop_bundle(kube)
    bundle_secret.bundle_secret(kube, bundle, {"plan": []}, False)
    lab.control.set_faults(cp["name"], etcd_snapshot_file=_real_snapshot(str(tmp_path)))
    identity = pyrage.x25519.Identity.generate()
    try:
        yield lab, kube, bundle, identity
    finally:
        _drop_bundle(kube)


def _drop_bundle(kube):
    if kube.get("v1", "Secret", bundle_secret.BUNDLE_SECRET, cluster_record.NAMESPACE) is not None:
        kube.delete("v1", "Secret", bundle_secret.BUNDLE_SECRET, cluster_record.NAMESPACE)


def _link(fd):
    try:
        return os.readlink("/proc/self/fd/" + fd)
    except OSError:  # the listing's own descriptor, closed since
        return ""


def _params(lab, identity, directory, **extra):
    machines = [{"name": m["name"], "node": m["address"], "role": m["role"]} for m in lab.machines]
    return dict(dict(talosconfig=lab.talosconfig, kubeconfig=lab.kube.kubeconfig, machines=machines, node=None,
                     recipients=[str(identity.to_public())], directory=directory, retention={"keep_last": 7},
                     etcdutl=binaries()["etcdutl"], timeout=30.0, context=None, endpoint=None,
                     talosconfig_content=None, kubeconfig_content=None, kube_context=None), **extra)


def _run(params, check_mode=False, now=None):
    conn = Connections(params)
    try:
        return backup.run(params, conn, check_mode, now=now)
    finally:
        conn.close()


def test_check_mode_plans_and_writes_nothing(managed, tmp_path):
    lab, unused_kube, unused_bundle, identity = managed
    directory = str(tmp_path / "backups")
    lab.control.reset_timeline()
    result = _run(_params(lab, identity, directory), check_mode=True)
    assert result["changed"] is True and result["node"] == "cp-1" and result["pruned"] == []
    assert result["plan"][0].startswith("etcd snapshot of cp-1 (")
    assert "the live config of 2 machines, encrypted to 1 age recipient(s)" in result["plan"][1]
    assert os.listdir(directory) == []
    assert "EtcdSnapshot" not in [w for m, w in lab.control.timeline()]


def test_a_backup_is_one_archive_the_identity_opens_and_etcd_reads(managed, tmp_path, monkeypatch):
    lab, kube, bundle, identity = managed
    directory = str(tmp_path / "backups")
    named = []
    write = archive.write

    def watched(*args):  # while the archive is written, the plaintext snapshot has no name anywhere
        named.extend(glob.glob(os.path.join(tempfile.gettempdir(), "ichor-backup-*")))
        unnamed = [_link(fd) for fd in os.listdir("/proc/self/fd")]
        named.extend(link for link in unnamed if "ichor-backup-" in link and not link.endswith("(deleted)"))
        assert any("ichor-backup-" in link for link in unnamed)  # open, unnamed
        return write(*args)
    monkeypatch.setattr(archive, "write", watched)
    result = _run(_params(lab, identity, directory))
    assert named == []
    name = os.path.basename(result["archive"])
    assert os.listdir(directory) == [name] and os.stat(result["archive"]).st_mode & 0o777 == 0o600
    assert retention.parse_name(name)[0] == "prod"
    seen = {}
    with open(result["archive"], "rb") as source:
        manifest = archive.read(source, [identity], lambda part, reader: seen.update({part: reader.read()}))
    assert sorted(seen) == ["etcd.snapshot", "machines/cp-1.yaml", "machines/worker-1.yaml", "record.json",
                            "secrets.yaml"]
    namespace = kube.get("v1", "Namespace", "kube-system")
    assert manifest["cluster"] == {"name": "prod", "id": "lab-cluster-id", "uid": namespace["metadata"]["uid"]}
    assert manifest["talos"] == "v1.13.9" and manifest["etcd"]["member"] == "cp-1"
    # etcd's own reading of the snapshot the archive holds agrees with the manifest
    snapshot = str(tmp_path / "restored.db")
    with open(snapshot, "wb") as handle:
        handle.write(seen["etcd.snapshot"])
    status = json.loads(subprocess.run([binaries()["etcdutl"], "snapshot", "status", snapshot, "-w", "json"],
                                       capture_output=True, text=True, check=True).stdout)
    assert (manifest["etcd"]["revision"], manifest["etcd"]["hash"], manifest["etcd"]["total_key"]) == (
        status["revision"], status["hash"], status["totalKey"])
    assert secrets.parse(seen["secrets.yaml"].decode()).fingerprint() == bundle.fingerprint()
    configs = dict((m["name"], m["machine_config"]) for m in lab.machines)
    assert seen["machines/worker-1.yaml"].decode() == configs["worker-1"]
    assert json.loads(seen["record.json"])["cluster"]["name"] == "prod"
    assert not [n for n in os.listdir(os.path.dirname(result["archive"])) if n.startswith(".")]


def test_retention_prunes_what_the_policy_lets_go_and_keeps_the_newest_verified(managed, tmp_path):
    lab, unused_kube, unused_bundle, identity = managed
    directory = str(tmp_path / "backups")
    start = datetime.datetime(2026, 12, 1, 3, 0, tzinfo=datetime.timezone.utc)
    names = []
    for day in range(4):
        result = _run(_params(lab, identity, directory, retention={"keep_last": 2}),
                      now=start + datetime.timedelta(days=day))
        names.append(os.path.basename(result["archive"]))
        if day == 0:  # a drill verified the first one
            with open(os.path.join(directory, names[0] + backup.DRILL_SUFFIX), "w") as handle:
                json.dump({"result": "verified"}, handle)
    # the last run kept the 2 newest and the verified first; the second went on the fourth run
    assert sorted(os.listdir(directory)) == sorted([names[0], names[0] + backup.DRILL_SUFFIX, names[2], names[3]])
    assert result["pruned"] == [names[1]] and "pruned %s" % names[1] in result["plan"]


def test_refusals_are_one_line(managed, tmp_path):
    lab, kube, unused_bundle, identity = managed
    directory = str(tmp_path / "backups")
    with pytest.raises(IchorError) as exc:
        _run(_params(lab, identity, directory, recipients=["AGE-SECRET-KEY-1NOTHING"]))
    assert str(exc.value) == ("recipients: number 1 is not an age recipient (age1..., as age-keygen -y prints it)")
    for check_mode in (True, False):  # refused before anything is read or made, the plan included
        with pytest.raises(IchorError) as exc:
            _run(_params(lab, identity, directory, etcdutl="/nonexistent/etcdutl"), check_mode=check_mode)
        assert str(exc.value).startswith("etcdutl was not found (/nonexistent/etcdutl)")
    assert not os.path.exists(directory)
    _drop_bundle(kube)
    with pytest.raises(IchorError) as exc:
        _run(_params(lab, identity, directory))
    assert "holds no bundle: a backup without it cannot rebuild a machine" in str(exc.value)


def test_through_ansible_nothing_secret_reaches_the_output(managed, tmp_path):
    lab, unused_kube, bundle, identity = managed
    directory = str(tmp_path / "backups")
    params = _params(lab, identity, directory)
    playbook = tmp_path / "backup.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [{
        "name": "Back the cluster up", "maesh.ichor.cluster_backup": dict(
            (k, params[k]) for k in ("talosconfig", "kubeconfig", "machines", "recipients", "directory", "etcdutl"))}]}]))
    proc = ansible_playbook("-i", "localhost,", "-c", "local", str(playbook), "-vvvv", "-e",
                            "ansible_python_interpreter={{ ansible_playbook_python }}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "prod-" in proc.stdout and len(os.listdir(directory)) == 1
    data = yaml.safe_load(bundle.to_yaml())
    for marker in (data["cluster"]["secret"], data["trustdinfo"]["token"], data["secrets"]["bootstraptoken"],
                   str(identity)):
        assert marker not in proc.stdout + proc.stderr
