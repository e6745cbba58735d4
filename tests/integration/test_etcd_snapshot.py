"""etcd_snapshot against the simulated machines: machinery's own client (the conformance program) reads the same
call; here the module takes a snapshot of a control plane into a 0600 file (renamed over what was there), refuses a
worker, a reader's talosconfig and a directory others can write, and writes nothing in check mode."""

import hashlib
import json
import os
import stat

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.ansible_module.runner import Connections
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.machine import etcd_snapshot

from tests.integration.ansible_env import ansible_playbook

pytestmark = pytest.mark.lab


def _run(lab, node, path, check=False, context=None):
    params = dict(talosconfig=lab.talosconfig, talosconfig_content=None, context=context, endpoint=None,
                  timeout=30.0, node=node, path=str(path))
    conn = Connections(params)
    try:
        return etcd_snapshot.run(params, conn, check)
    finally:
        conn.close()


def test_a_snapshot_of_a_control_plane_is_a_new_0600_file(talos_cluster, tmp_path):
    cp = [m for m in talos_cluster.machines if m["role"] == "controlplane"][0]
    target = tmp_path / "backups" / "etcd.db"
    target.parent.mkdir(mode=0o700)
    target.write_text("an older file")
    os.chmod(target, 0o644)
    old_inode = os.stat(target).st_ino
    planned = _run(talos_cluster, cp["address"], target, check=True)
    assert planned["changed"] is True and target.read_text() == "an older file"
    result = _run(talos_cluster, cp["address"], target)
    data = target.read_bytes()
    assert result["size"] == len(data) > 64 * 1024  # several chunks
    assert result["sha256"] == hashlib.sha256(data).hexdigest()
    assert json.loads(data.split(b"\n")[0])["kind"] == "maesh-ichor lab etcd snapshot"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600 and os.stat(target).st_ino != old_inode


def test_a_worker_a_shared_directory_and_a_reader_are_refused(talos_cluster, tmp_path):
    worker = [m for m in talos_cluster.machines if m["role"] == "worker"][0]
    cp = [m for m in talos_cluster.machines if m["role"] == "controlplane"][0]
    with pytest.raises(IchorError) as info:
        _run(talos_cluster, worker["address"], tmp_path / "w.db")
    assert info.value.message.startswith("no etcd snapshot taken: ") and not (tmp_path / "w.db").exists()
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(IchorError, match="its directory .* is writable by others"):
        _run(talos_cluster, cp["address"], shared / "s.db", check=True)
    with open(talos_cluster.lab_json) as handle:
        reader = json.load(handle)["context"] + "-reader"  # the lab's talosconfig context with role os:reader
    with pytest.raises(IchorError) as info:
        _run(talos_cluster, cp["address"], tmp_path / "r.db", context=reader)
    assert "PERMISSION_DENIED" in info.value.message and not (tmp_path / "r.db").exists()


@pytest.mark.floor
def test_the_module_through_ansible_playbook(talos_cluster, tmp_path):
    cp = [m for m in talos_cluster.machines if m["role"] == "controlplane"][0]
    path = tmp_path / "snap" / "etcd.db"
    args = {"talosconfig": talos_cluster.talosconfig, "node": cp["address"], "path": str(path)}
    task = {"name": "Snapshot", "maesh.ichor.etcd_snapshot": args}
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [task],
             "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"}}]
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump(play))
    proc = ansible_playbook(str(playbook), "-i", "localhost,", "-c", "local", "--check")
    assert proc.returncode == 0 and not path.exists(), proc.stdout
    proc = ansible_playbook(str(playbook), "-i", "localhost,", "-c", "local")
    assert proc.returncode == 0 and path.exists() and stat.S_IMODE(os.stat(path).st_mode) == 0o600, proc.stdout
