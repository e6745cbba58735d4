"""talos_facts and the plan callback through real ansible-playbook and ansible-runner runs.

The playbooks run from this test's virtualenv with ``ansible_python_interpreter`` set to
``{{ ansible_playbook_python }}``: the system Python has no grpclib, so these runs also prove
that the documented inventory makes modules run with the controller's own interpreter, and
that AnsiballZ packs module_utils and the generated protos.
"""

import base64
import glob
import os
import shutil
import sys

import pytest
import yaml

from tests.integration.ansible_env import REPO, ansible_env, ansible_playbook, write_inventory

pytestmark = pytest.mark.lab

COMMENT_MARKER = "ICHOR-SECRET-MARKER-5d0e"
GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "facts_plan.txt")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    from tests.lab.fixtures import LabProcess
    lab = LabProcess(str(tmp_path_factory.mktemp("facts-lab")), controlplanes=1, workers=2).start()
    yield lab
    lab.stop()


@pytest.fixture(scope="module")
def inventory(lab, tmp_path_factory):
    work = tmp_path_factory.mktemp("facts-inv")
    # a talosconfig with a comment marker, key and certificate being markers too
    talosconfig = work / "talosconfig"
    talosconfig.write_text("# %s\n" % COMMENT_MARKER + open(lab.talosconfig).read())
    os.chmod(str(talosconfig), 0o600)
    return write_inventory(lab.state(), str(work / "inventory.yml"), talosconfig=str(talosconfig))


def _markers(inventory_path):
    with open(inventory_path) as f:
        path = yaml.safe_load(f)["all"]["vars"]["ichor_talosconfig"]
    with open(path) as f:
        data = yaml.safe_load(f)
    out = [COMMENT_MARKER]
    for ctx in data["contexts"].values():
        for field in ("key", "crt"):
            pem = base64.b64decode(ctx[field]).decode()
            out += [ctx[field][20:60], "".join(pem.splitlines()[1:-1])[10:50]]
    return out


def _plan_block(stdout):
    start = stdout.index("PLAN")
    return stdout[start:].strip()


def _golden(lab):
    text = open(GOLDEN).read().strip()
    for m in lab.machines:
        text = text.replace("{%s}" % m["name"], m["address"])
    return text


@pytest.mark.floor
def test_facts_playbook(lab, inventory):
    proc = ansible_playbook("-i", inventory, "maesh.ichor.facts")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for m in lab.machines:
        assert "%s: Talos %s, %s, running, UUID %s, cluster lab (3 members)" % (
            m["name"], m["version"], m["role"], m["uuid"]) in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_check_mode_plan_matches_golden(lab, inventory):
    proc = ansible_playbook("-i", inventory, "maesh.ichor.facts", "--check", "--diff")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _plan_block(proc.stdout) == _golden(lab)
    assert "changed=0" in proc.stdout


def test_no_key_material_at_vvvv(lab, inventory):
    playbook = os.path.join(REPO, "tests", "integration", "playbooks", "facts_from_content.yml")
    proc = ansible_playbook("-i", inventory, playbook, "-vvvv")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER" in proc.stdout
    out = proc.stdout + proc.stderr
    for marker in _markers(inventory):
        assert marker not in out


def test_bad_input_is_one_line(lab, inventory, tmp_path):
    broken = tmp_path / "inventory.yml"
    data = yaml.safe_load(open(inventory))
    data["all"]["vars"]["ichor_talos_context"] = "nope"
    broken.write_text(yaml.safe_dump(data))
    proc = ansible_playbook("-i", str(broken), "maesh.ichor.facts")
    assert proc.returncode != 0
    assert "has no context 'nope'; it has: lab, lab-reader" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr
    for marker in _markers(inventory):
        assert marker not in proc.stdout + proc.stderr


@pytest.mark.floor
def test_ansible_runner_stdout_events_and_artifacts(lab, inventory, tmp_path):
    import ansible_runner
    private = tmp_path / "runner"
    os.makedirs(str(private / "project"))
    shutil.copy(os.path.join(REPO, "tests", "integration", "playbooks", "facts_from_content.yml"),
                str(private / "project"))
    env = ansible_env()
    envvars = dict((k, env[k]) for k in ("ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_CALLBACKS_ENABLED", "ANSIBLE_LOCAL_TEMP"))
    # the ansible-playbook of this virtualenv, as an execution environment has its own
    envvars["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    result = ansible_runner.run(
        private_data_dir=str(private), playbook="facts_from_content.yml",
        inventory=inventory, envvars=envvars, cmdline="--check", quiet=True)
    stdout = result.stdout.read()
    assert result.rc == 0, stdout
    assert _plan_block(stdout) == _golden(lab)
    events = list(result.events)
    assert any("PLAN (check mode: nothing was written)" in (e.get("stdout") or "") for e in events)
    ok = [e for e in events if e.get("event") == "runner_on_ok" and e["event_data"].get("task") ==
          "Read the machine's Talos facts"]
    assert len(ok) == 3
    assert all(e["event_data"]["res"]["plan"] for e in ok)
    artifacts = ""
    for path in glob.glob(str(private / "artifacts" / "**" / "*"), recursive=True):
        if os.path.isfile(path):
            with open(path, errors="replace") as f:
                artifacts += f.read()
    assert "Talos v1.14.1" in artifacts
    for marker in _markers(inventory):
        assert marker not in artifacts
