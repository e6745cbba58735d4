"""No registry password in any output, diff, record or artifact (issue 45's proof).

A lab cluster started from a real config case (the simulated machines, the real API server, the lab agent), at contract
v1.14 (the credentials as a ``RegistryAuthConfig`` document) and at v1.13 (the legacy
``machine.registries.config.<host>.auth``). A Secret ``ghcr-pull`` in ichor-system holds a password that is a marker
only this run knows; the cluster record names the Secret (names only). Through real ansible-playbook runs of
maesh.ichor.talos_machine_config on worker-1, with the case's spec plus ``registries: [{host: ghcr.io, authSecretRef:
{name: ghcr-pull}}]`` and the cluster's kubeconfig:

1. ``--check --diff`` plans the class A add of the ghcr.io credentials, masked, and touches nothing; the real run
   applies them (the machine's live config, read through the lab's control API, holds the marker in the contract's
   form); a rerun is ``changed=0``;
2. the Secret's password changed to a second marker: ``--check --diff`` shows one class A change, of the password
   path, masked; the real run (as AWX runs it, through ansible-runner, -vvv) applies it: the machine holds the second
   marker and no longer the first;
3. the spec without the authSecretRef: refused as class C with the hint naming authSecretRef, in check mode as in the
   real run, nothing applied;
4. every stdout and stderr (-vvv at least once), the runner's private data dir (artifacts included), the runs'
   TMPDIR and HOME (``~/.ansible``), ANSIBLE_LOCAL_TEMP, every file written under /tmp meanwhile, and every ConfigMap
   and Secret of the cluster (the record ichor-cluster among them) are read for both markers, as text and in their
   base64 forms (at each of the three alignments a base64 stream can hold them in): none may hold one, but the
   Secret itself, the machine's config (the lab's state) and the API server's own files.
"""

import base64
import json
import os
import time
import uuid

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.config import documents, drift
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient

from tests import config_cases
from tests.integration import sweep
from tests.integration.ansible_env import REPO, ansible_env, ansible_playbook

pytestmark = pytest.mark.lab

CONFIGS = os.path.join(REPO, "tests", "fixtures", "configs")
CASES = {"v1.14": (os.path.join(CONFIGS, "v1.14", "v1.14.1", "basic"), release.TALOS),
         "v1.13": (os.path.join(CONFIGS, "v1.13", "v1.13.9", "basic"), "v1.13.9")}
SECRET = "ghcr-pull"
NAMESPACE = "ichor-system"
HOST = "ghcr.io"
USERNAME = "robot"
MACHINE = "worker-1"


def _marker():
    """A password only this run has (no prefix other text shares)."""
    return "Zq" + uuid.uuid4().hex + "Xv"


def _forms(marker):
    """The marker as text, and the runs of base64 characters that encode it wherever it sits in a base64 stream
    (the three alignments): those characters depend on the marker's bytes alone."""
    raw = marker.encode()
    found = [marker]
    for pad in range(3):
        encoded = base64.b64encode(b"\0" * pad + raw + b"\0\0").decode()
        start = -(-pad * 8 // 6)  # the first character made of the marker's bits only
        end = (pad + len(raw)) * 8 // 6
        found.append(encoded[start:end])
    return found


def _secret(kube, password):
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET, "namespace": NAMESPACE}, "type": "Opaque",
            "data": {"username": base64.b64encode(USERNAME.encode()).decode(),
                     "password": base64.b64encode(password.encode()).decode()}}
    held = kube.get("v1", "Secret", SECRET, NAMESPACE)
    if held is None:
        kube.create(body)
    else:
        body["metadata"]["resourceVersion"] = held["metadata"]["resourceVersion"]
        kube.replace(body)


def _namespace(kube):
    if kube.get("v1", "Namespace", NAMESPACE) is None:
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})


def _held_password(lab, contract):
    """The ghcr.io password the machine's live config holds (the lab's state), or None."""
    docs = documents.parse(lab.machine(MACHINE)["machine_config"])
    if contract == "v1.14":
        found = [d for d in docs if d.kind == "RegistryAuthConfig" and d.name == HOST]
        return found[0].body.get("password") if found else None
    legacy = documents.find(docs, documents.LEGACY).body
    auth = (((legacy.get("machine") or {}).get("registries") or {}).get("config") or {}).get(HOST, {}).get("auth") or {}
    return auth.get("password")


class Runs:
    """The plays: ansible-playbook with a TMPDIR and a HOME of their own, every output kept for the sweep."""

    def __init__(self, lab, tmp_path):
        self.lab = lab
        self.tmp_path = tmp_path
        self.tmp = tmp_path / "tmp"
        self.home = tmp_path / "home"
        self.tmp.mkdir()
        self.home.mkdir()
        self.env = {"TMPDIR": str(self.tmp), "HOME": str(self.home)}
        self.outputs = []
        self.count = 0

    def task(self, cluster, machine):
        return {"name": "registry credentials", "maesh.ichor.talos_machine_config": {
            "talosconfig": self.lab.talosconfig, "kubeconfig": self.lab.kube.kubeconfig, "node": self.lab.address(MACHINE),
            "secrets": self.secrets, "cluster": cluster, "machine": machine, "wait_timeout": 60},
            "register": "r0", "ignore_errors": True}

    def playbook(self, task):
        self.count += 1
        out = self.tmp_path / ("results-%d.json" % self.count)
        path = self.tmp_path / ("play-%d.yml" % self.count)
        path.write_text(yaml.safe_dump([{
            "hosts": "localhost", "connection": "local", "gather_facts": False,
            "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"},
            "tasks": [task, {"name": "dump", "ansible.builtin.copy": {"content": "{{ r0 | to_json }}", "dest": str(out)},
                             "check_mode": False, "diff": False, "changed_when": False}]}], sort_keys=False))
        return str(path), out

    def run(self, task, *args):
        """(proc, the task's registered result)."""
        play, out = self.playbook(task)
        proc = ansible_playbook("-i", "localhost,", play, *args, env=self.env, timeout=600)
        self.outputs.append(proc.stdout + proc.stderr)
        assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout[-6000:] + proc.stderr[-6000:]
        assert out.exists(), proc.stdout[-6000:] + proc.stderr[-6000:]
        return proc, json.loads(out.read_text())

    def run_as_awx(self, task, cmdline):
        """The play as AWX runs a job: ansible-runner in a private data dir (swept later)."""
        from tests.integration.awx import AwxJob
        play, out = self.playbook(task)
        self.job = AwxJob(self.tmp_path / "runner", "registry", project_playbook=play)
        self.job.inventory({"all": {"hosts": {"localhost": {"ansible_connection": "local"}}}})
        self.job.envvars.update(self.env)
        rc, stdout = self.job.run(cmdline=cmdline)
        self.outputs.append(stdout)
        assert "Traceback" not in stdout, stdout[-6000:]
        assert out.exists(), stdout[-6000:]
        return rc, stdout, json.loads(out.read_text())


def _in_cluster(kube, markers):
    """[(kind namespace/name, marker head)] for every ConfigMap and Secret of the cluster holding a marker, the Secret
    the spec names aside."""
    found = []
    for kind in ("ConfigMap", "Secret"):
        for obj in kube.list("v1", kind):
            meta = obj["metadata"]
            if kind == "Secret" and (meta.get("namespace"), meta["name"]) == (NAMESPACE, SECRET):
                continue
            text = json.dumps(obj)
            found += [("%s %s/%s" % (kind, meta.get("namespace"), meta["name"]), m[:8]) for m in markers if m in text]
    return found


@pytest.mark.parametrize("contract", sorted(CASES, reverse=True))
def test_no_registry_password_in_any_output_diff_record_or_artifact(talos_kube_lab, tmp_path, contract):
    case_dir, talos = CASES[contract]
    began = time.time() - 1
    lab = talos_kube_lab(case=case_dir, controlplanes=1, workers=1, version=talos)
    kube = KubeClient(kubeconfig=lab.kube.kubeconfig)
    first, second = _marker(), _marker()
    markers = _forms(first) + _forms(second)

    with open(os.path.join(case_dir, "case.json")) as handle:
        plain, machine_spec = config_cases.spec_of_case(json.load(handle))
    machine = dict(machine_spec, role="worker")
    assert contract == plain["versionContract"] and not plain["registries"]
    spec = dict(plain, registries=[{"host": HOST, "authSecretRef": {"name": SECRET}}])

    _namespace(kube)
    _secret(kube, first)
    # the cluster record names the Secret (names only), as adopt writes it
    cluster_record.update(kube, lambda data: data.update(
        talos=talos, contract=contract, cluster=cluster_record.stored_spec(spec), adoption={"adopted": True}))
    runs = Runs(lab, tmp_path)
    runs.secrets = os.path.join(case_dir, "secrets.yaml")
    node = lab.address(MACHINE)
    try:
        before = lab.machine(MACHINE)["machine_config"]
        assert _held_password(lab, contract) is None
        applies = lab.control.calls(MACHINE).get("ApplyConfiguration", 0)

        # 1. check mode: the class A add of the ghcr.io credentials, masked; nothing applied
        proc, res = runs.run(runs.task(spec, machine), "--check", "--diff", "-vvv")
        assert res["changed"] and not res.get("failed") and res["contract"] == contract, res
        assert res["apply_mode"] == "no_reboot", res
        added = ["RegistryAuthConfig/%s:%s" % (HOST, field) for field in ("", "password", "username")]
        assert [(d["path"], d["change"]) for d in res["drift"]["A"]] == [(path, "add") for path in added], res["drift"]
        assert res["drift"]["counts"] == {"A": 3, "B": 0, "C": 0}, res["drift"]
        assert [d["rendered"] for d in res["drift"]["A"]] == ["present", "<redacted>", USERNAME], res["drift"]
        assert res["plan"] == ["%s: class A (representable): add %s" % (node, path) for path in added] + [
            "%s: apply without a reboot" % node], res["plan"]
        assert "password: <redacted>" in res["diff"]["after"] and "password:" not in res["diff"]["before"], res["diff"]
        if contract == "v1.14":
            assert "kind: RegistryAuthConfig\nname: %s\n" % HOST in res["diff"]["after"], res["diff"]["after"]
        assert lab.machine(MACHINE)["machine_config"] == before

        # ... applied for real: the machine holds the marker in the contract's form, read back with zero drift
        proc, res = runs.run(runs.task(spec, machine), "--diff")
        assert res["changed"] and res["verified"] and not res.get("failed"), res
        assert _held_password(lab, contract) == first
        assert lab.control.calls(MACHINE).get("ApplyConfiguration", 0) > applies

        # ... and a rerun changes nothing
        proc, res = runs.run(runs.task(spec, machine), "--diff")
        assert not res["changed"] and res["drift"]["zero"] and "diff" not in res, res
        assert "changed=0" in proc.stdout.split("PLAY RECAP")[-1], proc.stdout[-2000:]

        # 2. the Secret holds a new password: one class A change, of the password path, masked
        _secret(kube, second)
        proc, res = runs.run(runs.task(spec, machine), "--check", "--diff")
        assert res["changed"] and not res.get("failed"), res
        assert res["drift"]["A"] == [{"path": "RegistryAuthConfig/%s:password" % HOST, "change": "change", "class": "A",
                                      "hint": "spec.registries[].authSecretRef (the credentials of its Secret)",
                                      "rendered": "<redacted>", "live": "<redacted>"}], res["drift"]
        assert res["drift"]["counts"] == {"A": 1, "B": 0, "C": 0}, res["drift"]
        assert res["plan"] == ["%s: class A (representable): change RegistryAuthConfig/%s:password" % (node, HOST),
                               "%s: apply without a reboot" % node], res["plan"]
        assert "<redacted>" in res["diff"]["before"] and "<redacted>" in res["diff"]["after"], res["diff"]
        assert _held_password(lab, contract) == first

        # ... applied through ansible-runner (-vvv, --diff), as AWX runs the job
        rc, out, res = runs.run_as_awx(runs.task(spec, machine), "--diff -vvv")
        assert rc == 0 and res["changed"] and res["verified"] and not res.get("failed"), (rc, res, out[-4000:])
        assert _held_password(lab, contract) == second
        config = lab.machine(MACHINE)["machine_config"]
        assert second in config and first not in config

        # 3. the spec without the reference: the credentials the machine holds are class C, with the hint; refused in
        # check mode as in the real run, nothing applied
        held = lab.machine(MACHINE)["machine_config"]
        applies = lab.control.calls(MACHINE).get("ApplyConfiguration", 0)
        refused = []
        for args in (("--check", "--diff", "-vvv"), ("--diff",)):
            proc, res = runs.run(runs.task(plain, machine), *args)
            refused.append(res)
            assert res.get("failed") and not res["changed"], res
            assert res["msg"].startswith("%s: " % node) and "class C" in res["msg"] and "authSecretRef" in res["msg"], res
            assert "\n" not in res["msg"]
            assert res["drift"]["counts"]["C"] > 0 and res["drift"]["counts"]["A"] == 0, res["drift"]
            assert [group["hint"] for group in res["drift"]["hints"]] == [drift.HINT_REGISTRY_AUTH], res["drift"]["hints"]
            assert res["plan"][-1] == "%s: blocked by %d class C path(s); nothing is applied" % (
                node, res["drift"]["counts"]["C"]), res["plan"]
        assert refused[0]["msg"] == refused[1]["msg"] and refused[0]["drift"] == refused[1]["drift"]
        assert lab.machine(MACHINE)["machine_config"] == held
        assert lab.control.calls(MACHINE).get("ApplyConfiguration", 0) == applies

        # 4. the sweep: outputs, the runner's private data dir (its artifacts), TMPDIR, HOME, ANSIBLE_LOCAL_TEMP, /tmp,
        # the cluster's ConfigMaps and Secrets (the record among them)
        assert [(i, m[:8]) for i, out in enumerate(runs.outputs) for m in markers if m in out] == []
        assert runs.job.sweep(markers) == []
        assert cluster_record.read(kube).get("cluster")["registries"] == spec["registries"]
        assert _in_cluster(kube, markers) == []
        # the lab's own files (the machine's config is its state; the API server's etcd holds the Secret)
        skip = {lab.workdir, lab.kube.workdir}
        roots = [str(runs.tmp), str(runs.home), ansible_env()["ANSIBLE_LOCAL_TEMP"], str(tmp_path), "/tmp"]
        assert sweep.holding(roots, markers, began, skip) == []
        # ... and the sweep finds what is there: the Secret's base64 and the API server's etcd hold the markers
        stored = kube.get("v1", "Secret", SECRET, NAMESPACE)["data"]["password"]
        assert any(form in stored for form in _forms(second)[1:]), stored
        assert any(form in base64.b64encode(("%s:%s" % (USERNAME, first)).encode()).decode() for form in _forms(first)[1:])
        assert sweep.holding([lab.kube.workdir], _forms(second)[:1], began, set()), "the sweep finds no marker in etcd"
    finally:
        kube.delete("v1", "Secret", SECRET, NAMESPACE)
        if kube.get("v1", "ConfigMap", cluster_record.NAME, cluster_record.NAMESPACE) is not None:
            kube.delete("v1", "ConfigMap", cluster_record.NAME, cluster_record.NAMESPACE)
