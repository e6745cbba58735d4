"""talos_secrets and talos_machine_config through real ansible-playbook runs against the simulated lab.

* talos_secrets recovers the lab cluster's bundle from its control plane (read-only), writes it 0600,
  keeps it on a second run, says what it would do in check mode and writes nothing then;
* talos_machine_config applies a rendered config to a machine in maintenance mode (it installs, reboots
  into it under the bundle's CA and is read back with zero drift); a rerun of that task is changed: false
  and sends nothing through the maintenance API; then to the same machine once it is configured (a
  sysctl: class A, no reboot), and in check mode leaves the machine untouched;
* a refusal (class C, class B without consent, a reboot with allow_reboot: false) fails in check mode
  exactly as in the real run (same message, plan and drift), and nothing is applied;
* bad input (another cluster's bundle, a corrupt bundle file, a contract out of range) fails with one
  line and applies nothing.
"""

import json
import os
import stat

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.config import secrets
from tests.integration.ansible_env import ansible_playbook

pytestmark = pytest.mark.lab


def _playbook(tmp_path, tasks, name="play.yml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump([{"hosts": "localhost", "connection": "local", "gather_facts": False,
                                     "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"},
                                     "tasks": tasks}], sort_keys=False))
    return str(path)


def _run(tmp_path, tasks, *args):
    """Run tasks (each registering r<i>); returns (proc, [registered results])."""
    out = tmp_path / "results.json"
    if out.exists():
        out.unlink()
    registered = []
    for index, task in enumerate(tasks):
        task = dict(task)
        task["register"] = "r%d" % index
        task["ignore_errors"] = True
        registered.append(task)
    registered.append({"name": "dump", "ansible.builtin.copy": {
        "content": "{{ [%s] | to_json }}" % ", ".join("r%d" % i for i in range(len(tasks))), "dest": str(out)},
        "check_mode": False, "diff": False})
    proc = ansible_playbook("-i", "localhost,", _playbook(tmp_path, registered), *args)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert out.exists(), proc.stdout + proc.stderr
    return proc, json.loads(out.read_text())


def _conn(lab):
    return {"talosconfig": lab.talosconfig}


def _cluster(version_contract="v1.14", **extra):
    spec = {"name": "lab", "endpoint": "https://10.5.0.2:6443", "kubernetesVersion": "1.37.0", "talosVersion": "v1.14.1",
            "versionContract": version_contract, "cni": {"preset": "unmanaged", "unmanaged": {"talosCNI": "default"}}}
    spec.update(extra)
    return spec


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    from tests.lab.fixtures import LabProcess
    lab = LabProcess(str(tmp_path_factory.mktemp("mc-lab")), controlplanes=1, workers=1, additions=[
        {"name": "fresh", "role": "worker", "version": "v1.14.1", "mode": "maintenance"},
        {"name": "fresh-cp", "role": "controlplane", "version": "v1.13.9", "mode": "maintenance"}]).start()
    yield lab
    lab.stop()


@pytest.fixture(scope="module")
def bundle_path(lab, tmp_path_factory):
    """A fresh bundle whose Talos CA is the lab's, so the lab's talosconfig is trusted by what it configures.

    (The simulator's own configs hold only the Talos CA, not a whole bundle, so nothing is recovered from them.)
    """
    path = tmp_path_factory.mktemp("mc-bundle") / "secrets.yaml"
    obj = secrets.generate().to_object()
    key = lab.ca_key_pem
    key = key.decode() if isinstance(key, bytes) else key
    crt = lab.ca_pem
    crt = crt.decode() if isinstance(crt, bytes) else crt
    if "ED25519" not in key:
        key = key.replace(" PRIVATE KEY-----", " ED25519 PRIVATE KEY-----")
    obj["certs"]["os"] = {"crt": secrets.b64(crt), "key": secrets.b64(key)}
    bundle = secrets.validate(secrets.from_object(obj))
    secrets.write(bundle, str(path))
    return str(path)


def _mc(lab, bundle_path, node, cluster, machine, **extra):
    args = dict(_conn(lab), node=node, secrets=bundle_path, cluster=cluster, machine=machine, wait_timeout=30)
    args.update(extra)
    return {"maesh.ichor.talos_machine_config": args}


def test_apply_maintenance_then_configured_and_check_mode(lab, bundle_path, tmp_path):
    addr = lab.address("fresh")
    machine = {"role": "worker", "hostname": "fresh-1", "install": {"disk": "/dev/vda"}}
    before = lab.machine("fresh")
    assert before["mode"] == "maintenance"

    # check mode on a maintenance machine: a plan, nothing applied
    proc, res = _run(tmp_path, [_mc(lab, bundle_path, addr, _cluster(), machine, maintenance=True)], "--check", "--diff")
    assert res[0]["changed"] and res[0]["apply_mode"] == "maintenance" and not res[0].get("failed"), res[0]
    assert lab.machine("fresh")["mode"] == "maintenance"
    assert "PRIVATE KEY" not in proc.stdout

    # apply in maintenance: installs, reboots into the config, read back with zero drift
    proc, res = _run(tmp_path, [_mc(lab, bundle_path, addr, _cluster(), machine, maintenance=True)])
    assert not res[0].get("failed"), res[0]
    assert res[0]["verified"] and res[0]["drift"]["zero"]
    after = lab.machine("fresh")
    assert after["mode"] == "configured" and after["hostname"] == "fresh-1"
    configured = after["machine_config"]

    # a rerun of the same task (maintenance: true): the machine answers under the talosconfig with its config, so the
    # drift decides; nothing goes through the maintenance API again, in check mode or not
    applies = lab.control.calls("fresh").get("ApplyConfiguration", 0)
    for args in (("--check", "--diff"), ()):
        proc, res = _run(tmp_path, [_mc(lab, bundle_path, addr, _cluster(), machine, maintenance=True)], *args)
        assert not res[0].get("failed") and not res[0]["changed"], res[0]
        assert res[0]["apply_mode"] == "none" and res[0]["drift"]["zero"] and "diff" not in res[0], res[0]
        assert res[0]["plan"][0].startswith("%s: maintenance: true, but the machine is configured" % addr), res[0]["plan"]
    assert lab.control.calls("fresh").get("ApplyConfiguration", 0) == applies
    assert lab.machine("fresh")["machine_config"] == configured

    # configured: same spec is zero drift, nothing applied
    proc, res = _run(tmp_path, [_mc(lab, bundle_path, addr, _cluster(), machine)])
    assert not res[0]["changed"] and res[0]["drift"]["zero"], res[0]

    # check mode with a change: plan + masked diff, machine untouched
    changed = _cluster(sysctls={"vm.max_map_count": "262144"})
    proc, res = _run(tmp_path, [_mc(lab, bundle_path, addr, changed, machine)], "--check", "--diff")
    assert res[0]["changed"] and res[0]["apply_mode"] == "no_reboot", res[0]
    assert [d["path"] for d in res[0]["drift"]["A"]] == ["SysctlConfig:", "SysctlConfig:params.vm.max_map_count"]
    assert res[0]["diff"]["after"].count("<redacted>") >= 3 and "PRIVATE KEY" not in json.dumps(res[0])
    assert lab.machine("fresh")["machine_config"] == configured

    # apply the class A change: no reboot, read back with zero drift
    proc, res = _run(tmp_path, [_mc(lab, bundle_path, addr, changed, machine)])
    assert res[0]["changed"] and res[0]["verified"] and res[0]["apply_mode"] == "no_reboot", res[0]
    assert "vm.max_map_count" in lab.machine("fresh")["machine_config"]

    # a control plane at contract v1.13 (legacy form) from maintenance, for the recovery test below
    cp = lab.address("fresh-cp")
    proc, res = _run(tmp_path, [_mc(lab, bundle_path, cp, _cluster("v1.13", talosVersion="v1.13.9", kubernetesVersion="1.36.3"),
                                    {"role": "controlplane"}, maintenance=True)])
    assert not res[0].get("failed") and res[0]["verified"], res[0]
    assert lab.machine("fresh-cp")["mode"] == "configured"


def _fails_alike(lab, name, tmp_path, task, dry_runs=0):
    """The task in check mode and in a real run (both with --diff): the same failure, one line, nothing applied."""
    before = lab.machine(name)["machine_config"]
    applies = lab.control.calls(name).get("ApplyConfiguration", 0)
    proc, checked = _run(tmp_path, [task], "--check", "--diff")
    proc, real = _run(tmp_path, [task], "--diff")
    checked, real = checked[0], real[0]
    assert checked.get("failed") and real.get("failed"), (checked, real)
    assert checked["msg"] == real["msg"] and "\n" not in real["msg"], (checked["msg"], real["msg"])
    assert checked["plan"] == real["plan"] and checked["drift"] == real["drift"], (checked, real)
    assert not checked["changed"] and not real["changed"] and checked["apply_mode"] == real["apply_mode"]
    assert lab.machine(name)["machine_config"] == before
    # nothing but the dry runs that ask whether the change reboots (one a run)
    assert lab.control.calls(name).get("ApplyConfiguration", 0) - applies == dry_runs
    return real


def test_class_b_needs_consent(lab, bundle_path, tmp_path):
    """fresh-cp (v1.13, legacy form, flannel, kube-proxy on) moved to the managed Cilium preset: class B."""
    cp = lab.address("fresh-cp")
    managed = _cluster("v1.13", talosVersion="v1.13.9", kubernetesVersion="1.36.3", cni={"preset": "cilium", "kubeProxy": "replaced"})
    res = _fails_alike(lab, "fresh-cp", tmp_path, _mc(lab, bundle_path, cp, managed, {"role": "controlplane"}))
    assert res["msg"] == "%s: 2 class B (Ichor-owned) change(s) need consent (accept_class_b: true); nothing applied" % cp
    assert sorted(d["path"] for d in res["drift"]["B"]) == ["v1alpha1:cluster.network.cni.name", "v1alpha1:cluster.proxy.disabled"]
    assert res["plan"][-1] == "%s: class B (Ichor-owned) changes need accept_class_b: true" % cp
    proc, res = _run(tmp_path, [_mc(lab, bundle_path, cp, managed, {"role": "controlplane"}, accept_class_b=True)])
    assert res[0]["changed"] and res[0]["verified"] and res[0]["apply_mode"] == "no_reboot", res[0]
    assert "name: none" in lab.machine("fresh-cp")["machine_config"]


def test_class_c_fails_in_check_mode_as_in_a_real_run(lab, bundle_path, tmp_path):
    addr = lab.address("worker-1")
    spec = _cluster()
    spec.pop("versionContract")
    res = _fails_alike(lab, "worker-1", tmp_path, _mc(lab, bundle_path, addr, spec, {"role": "worker"}))
    assert sorted(res["probe"]) == ["v1.12", "v1.13", "v1.14"]
    count = res["drift"]["counts"]["C"]
    assert count > 0  # the lab's own config is not a talosctl one
    assert res["msg"].startswith("%s: %d class C path(s) cannot be represented; nothing applied (" % (addr, count)), res["msg"]
    assert res["plan"][-1] == "%s: blocked by %d class C path(s); nothing is applied" % (addr, count)
    assert "diff" in res and "PRIVATE KEY" not in json.dumps(res)


def test_a_reboot_that_is_not_allowed_fails_in_check_mode_as_in_a_real_run(lab, bundle_path, tmp_path):
    """fresh (configured by the first test) with a change Talos can apply only with a reboot, and allow_reboot: false."""
    addr = lab.address("fresh")
    machine = {"role": "worker", "hostname": "fresh-1", "install": {"disk": "/dev/vda"}}
    spec = _cluster(sysctls={"vm.max_map_count": "262144", "net.core.somaxconn": "4096"})
    lab.control.set_faults("fresh", apply_needs_reboot=True)
    try:
        res = _fails_alike(lab, "fresh", tmp_path, _mc(lab, bundle_path, addr, spec, machine, allow_reboot=False),
                           dry_runs=2)
    finally:
        lab.control.clear_faults("fresh")
    refusal = "%s: the change needs a reboot and allow_reboot is false; nothing applied" % addr
    assert res["msg"] == refusal and res["plan"][-1] == refusal and res["apply_mode"] == "reboot"


def test_bad_input_one_line_nothing_applied(lab, bundle_path, tmp_path):
    addr = lab.address("worker-1")
    before = lab.machine("worker-1")["machine_config"]
    other = tmp_path / "other.yaml"
    secrets.write(secrets.generate(), str(other))
    corrupt = tmp_path / "corrupt.yaml"
    corrupt.write_text("cluster: {id: [\n")
    tasks = [
        _mc(lab, str(other), addr, _cluster(), {"role": "worker"}),
        _mc(lab, str(corrupt), addr, _cluster(), {"role": "worker"}),
        _mc(lab, bundle_path, addr, _cluster(version_contract="v1.11"), {"role": "worker"}),
        _mc(lab, bundle_path, addr, _cluster(version_contract="v1.15"), {"role": "worker"}),
    ]
    proc, res = _run(tmp_path, tasks)
    messages = [r.get("msg", "") for r in res]
    assert all(r.get("failed") for r in res), res
    assert all(m and "\n" not in m for m in messages), messages
    assert "another cluster" in messages[0]
    assert "not valid YAML" in messages[1]
    assert "older than the oldest supported (v1.12)" in messages[2]
    assert "newer than the newest supported (v1.14)" in messages[3]
    assert lab.machine("worker-1")["machine_config"] == before


def test_secrets_recover_keep_and_check_mode(lab, bundle_path, tmp_path):
    path = tmp_path / "bundle" / "secrets.yaml"
    cp = lab.address("fresh-cp")  # configured by test_apply_maintenance_then_configured_and_check_mode
    task = {"maesh.ichor.talos_secrets": dict(_conn(lab), path=str(path), source="recover", node=cp)}
    proc, res = _run(tmp_path, [task], "--check")
    assert not res[0].get("failed"), res[0]
    assert res[0]["changed"] and res[0]["action"] == "recovered" and not path.exists()
    assert "would recover" in res[0]["plan"][0]
    proc, res = _run(tmp_path, [task, task])
    assert proc.returncode == 0, proc.stdout
    assert [r["changed"] for r in res] == [True, False]
    assert [r["action"] for r in res] == ["recovered", "kept"]
    assert stat.S_IMODE(os.stat(str(path)).st_mode) == 0o600
    bundle = secrets.validate(secrets.load(str(path)))
    assert bundle == secrets.load(bundle_path)
    for value in (bundle.trustd_token.reveal(), bundle.cluster_secret.reveal()):
        assert value not in proc.stdout + proc.stderr
    # generate: a new file; a corrupt file is never overwritten
    new = tmp_path / "new.yaml"
    corrupt = tmp_path / "corrupt.yaml"
    corrupt.write_text("certs: [broken\n")
    proc, res = _run(tmp_path, [{"maesh.ichor.talos_secrets": {"path": str(new)}},
                                {"maesh.ichor.talos_secrets": {"path": str(corrupt)}}])
    assert res[0]["action"] == "generated" and secrets.validate(secrets.load(str(new)))
    assert res[1]["failed"] and "\n" not in res[1]["msg"] and corrupt.read_text() == "certs: [broken\n"
