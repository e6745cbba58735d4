"""Key material never reaches a file system (issue 42 section 1).

A kubeconfig that carries its client key inline (``client-key-data``, as Talos's kubeconfig call and most installers
hand out) was written by the kubernetes client to a temporary file removed only at interpreter exit, which Ansible's
forked workers never reach; the Talos client's certificate and helm's kubeconfig went through temporary files too.
Here every playbook runs on a cluster init made, with a kubeconfig and a talosconfig whose keys are this test's own,
calm and killed (SIGKILL of the process group, and of ansible-playbook alone), through ansible-playbook and through
ansible-runner as AWX runs it; then the temp dir, the home (``~/.ansible``), Ansible's local temp, the runner's
private data dir and every file of /tmp written meanwhile are read for slices of those keys, in their base64 and
PEM forms: none may hold one."""

import base64
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.common import release

from tests.integration import sweep
from tests.integration import test_init
from tests.integration.ansible_env import REPO, ansible_env
from tests.lab.cilium import fixtures as cilium_fixtures

pytestmark = pytest.mark.lab

cilium_charts = cilium_fixtures.cilium_charts
cilium_lab = cilium_fixtures.cilium_lab
init_cleanup = test_init.init_cleanup


def _key_slices(b64):
    """Slices of a base64-encoded PEM key that only this key has (past the PEM header and the ASN.1 prefix every key
    of its kind shares): of the base64 and of the PEM's own base64 body."""
    pem = base64.b64decode(b64).decode()
    body = "".join(line for line in pem.splitlines() if not line.startswith("-----"))
    return [b64[-56:-12], body[-32:-2]]


def _markers(kubeconfig, talosconfig):
    with open(kubeconfig) as handle:
        kube = yaml.safe_load(handle)
    with open(talosconfig) as handle:
        talos = yaml.safe_load(handle)
    found = []
    for user in kube["users"]:
        found += _key_slices(user["user"]["client-key-data"])
    for context in talos["contexts"].values():
        found += _key_slices(context["key"])
    return found


class Runs:
    """ansible-playbook runs with a temp dir and a home of their own (what they leave is theirs)."""

    def __init__(self, tmp_path, inventory):
        self.tmp = tmp_path / "tmp"
        self.home = tmp_path / "home"
        self.tmp.mkdir()
        self.home.mkdir()
        self.inventory = inventory
        self.env = ansible_env({"TMPDIR": str(self.tmp), "HOME": str(self.home)})

    def argv(self, playbook, *extra):
        exe = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
        return [exe, "-i", self.inventory, "maesh.ichor." + playbook] + list(extra)

    def calm(self, playbook, *extra):
        proc = subprocess.run(self.argv(playbook, *extra), env=self.env, cwd=REPO, capture_output=True, text=True,
                              timeout=900, check=False)
        assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout[-4000:] + proc.stderr[-4000:]
        return proc

    def killed(self, playbook, seen, whole_group, *extra):
        """The run SIGKILLed (its process group, or ansible-playbook alone) as soon as ``seen`` shows in its
        output: what a cancelled AWX job, an OOM kill or a lost CI runner does."""
        proc = subprocess.Popen(self.argv(playbook, *extra), env=self.env, cwd=REPO, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        out = []
        deadline = time.time() + 600
        for line in proc.stdout:
            out.append(line)
            if seen in line or time.time() > deadline:
                break
        time.sleep(0.5)  # inside the task: its key files are open
        if whole_group:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
        proc.wait()
        time.sleep(2)  # the orphaned workers of a playbook killed alone end on their own
        assert seen in "".join(out), "".join(out)[-4000:]
        return "".join(out)


def test_no_run_calm_or_killed_through_ansible_playbook_or_runner_leaves_a_key_on_disk(
        talos_kube_lab, kube_lab, cilium_lab, cilium_charts, tmp_path, init_cleanup):
    from tests.integration.awx import AwxJob
    began = time.time() - 1
    lab = talos_kube_lab(controlplanes=1, workers=1, mode="maintenance", bootstrapped=False, version=release.TALOS)
    inv, keep = test_init._inventory(lab, tmp_path, **test_init._cilium(cilium_lab, kube_lab, cilium_charts))
    runs = Runs(tmp_path, inv)
    made = runs.calm("init")
    assert made.returncode == 0, made.stdout[-8000:]
    # the runs that follow use a kubeconfig of their own (a key only this test has) and init's talosconfig
    kubeconfig = kube_lab.client_kubeconfig(str(keep / "run.kubeconfig"), "ichor-key-material")
    data = yaml.safe_load(open(inv))
    data["all"]["vars"].update(ichor_talosconfig=str(keep / "talosconfig"), ichor_kubeconfig=kubeconfig)
    with open(inv, "w") as handle:
        yaml.safe_dump(data, handle)
    markers = _markers(kubeconfig, str(keep / "talosconfig")) + _markers(str(keep / "kubeconfig"), str(keep / "talosconfig"))

    outs = [made.stdout]
    for playbook, extra in (("status", ()), ("install", ()), ("upgrade", ("--check", "--diff")),
                            ("adopt", ("--check", "--diff")), ("facts", ())):
        proc = runs.calm(playbook, *extra)
        assert proc.returncode in (0, 2), (playbook, proc.stdout[-4000:])
        outs.append(proc.stdout + proc.stderr)
    outs.append(runs.killed("install", "TASK [maesh.ichor.installer : Take the cluster lock", True))
    outs.append(runs.killed("status", "TASK [maesh.ichor.status : Read the cluster once", False))
    outs.append(runs.killed("upgrade", "TASK [maesh.ichor.upgrade : See that no other run holds the cluster lock", True,
                            "--check"))

    job = AwxJob(tmp_path / "runner", "status")
    job.inventory(yaml.safe_load(open(inv)))
    job.credential_of_type("managed_cluster", {"kubeconfig": open(kubeconfig).read(), "cluster": "lab",
                                               "talosconfig": open(str(keep / "talosconfig")).read()})
    rc, out = job.run()
    assert rc in (0, 2), out[-4000:]
    outs.append(out)

    assert [(i, m) for i, out in enumerate(outs) for m in markers if m in out] == []
    assert job.sweep(markers) == []
    # the operator's own files (init's), the labs' own (their PKI, the simulator's state) and AWX's injected credentials
    skip = {str(keep), os.path.dirname(kube_lab.kubeconfig), lab.workdir} | set(job.injected)
    roots = [str(runs.tmp), str(runs.home), ansible_env()["ANSIBLE_LOCAL_TEMP"], str(tmp_path / "runner"), "/tmp"]
    assert sweep.holding(roots, markers, began, skip) == []
