"""Every module returns ``diff`` only in diff mode (issue 11, section 4), through real ansible-playbook runs against
the lab (simulated Talos machines from a real config case, the real API server, the lab agent).

One playbook runs every module of plugins/modules once, each task on a lab object it can act on:
* in check mode without --diff and in a real run without --diff, no result has a ``diff`` key;
* in check mode with --diff, a result has ``diff`` exactly when the module's DOCUMENTATION says it supports diff
  mode (``attributes.diff_mode.support`` is not ``none``).
A task may fail (the real run of some refuses); what is judged is the result the module returned against the lab,
never an argument or import error. A new module without a task here fails ``test_every_module_has_a_task``.
"""

import ast
import json
import os

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient
from ansible_collections.maesh.ichor.plugins.module_utils.status.findings import acknowledgement_token

from tests.integration.ansible_env import REPO, ansible_playbook
from tests.lab.cilium import fixtures as cilium_fixtures
from tests.lab.cilium.charts import cache_dir as cilium_chart_cache

pytestmark = pytest.mark.lab

cilium_charts = cilium_fixtures.cilium_charts

MODULES_DIR = os.path.join(REPO, "plugins", "modules")
CASE = os.path.join(REPO, "tests", "fixtures", "configs", "v1.13", "v1.13.9", "k8s-older")  # contract v1.13, K8s 1.35.4
# a module failing like this did not run against the lab
NOT_RUN = ("Unsupported parameters", "missing required arguments", "is not a valid", "MODULE FAILURE",
           "unexpected error", "couldn't resolve module", "Traceback")


def _documentation(name):
    """The module's DOCUMENTATION, read without importing it."""
    with open(os.path.join(MODULES_DIR, name + ".py")) as handle:
        tree = ast.parse(handle.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "DOCUMENTATION":
            return yaml.safe_load(node.value.value)
    raise AssertionError("%s has no DOCUMENTATION" % name)


def _modules():
    return sorted(f[:-3] for f in os.listdir(MODULES_DIR) if f.endswith(".py") and not f.startswith("_"))


def _supports_diff(name):
    return _documentation(name)["attributes"]["diff_mode"]["support"] != "none"


def _tasks(lab, tmp_path, namespace):
    """[(module, arguments)]: one task per module, in an order a real run can follow."""
    machines = [{"name": m["name"], "node": m["address"], "role": m["role"]}
                for m in lab.machines if m["name"] in ("cp-1", "worker-1")]
    bundle_dir = tmp_path / "bundle"
    bundle_dir.mkdir()
    (bundle_dir / "bundle.yaml").write_text(yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "diff-sa", "namespace": namespace}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "diff-cm", "namespace": namespace},
         "data": {"v": "1"}}]))
    installer = {"bundle": [str(bundle_dir)], "namespace": namespace}
    cluster = {"name": "k8s-older", "endpoint": "https://k8s-older.example.com:6443", "kubernetesVersion": "1.35.4",
               "talosVersion": release.TALOS, "versionContract": release.CONTRACT,
               "cni": {"preset": "unmanaged", "unmanaged": {"talosCNI": "default"}}}
    cp = lab.address("cp-1")
    return [
        ("talos_facts", {"node": cp}),
        ("release_check", {"machines": machines}),
        ("talos_upgrade", {"node": cp, "hostname": "cp-1", "role": "controlplane", "wait_timeout": 60}),
        ("config_upgrade", {"machines": machines, "wait_timeout": 60}),
        ("kubernetes_upgrade", {"machines": machines, "wait_timeout": 60}),
        ("cluster_record", {"update": {"talos": release.TALOS}}),
        ("installer_apply", installer),
        ("installer_prune", dict(installer, run_id="{{ r6.run_id }}")),
        ("installer_restore", {"namespace": namespace, "run_id": "{{ r6.run_id }}"}),
        ("talos_secrets", {"path": str(tmp_path / "new-secrets.yaml")}),
        ("talos_machine_config", {"node": lab.address("spare-mc"), "maintenance": True, "secrets": CASE + "/secrets.yaml",
                                  "cluster": cluster, "machine": {"role": "worker", "hostname": "spare-mc"},
                                  "wait_timeout": 60}),
        ("talos_reset", {"node": lab.address("spare"), "cluster_name": "k8s-older",
                         "foreign_talosconfig": lab.talosconfig, "foreign_context": "lab", "wait_timeout": 30}),
        # no Cilium runs in this lab: refused with its plan (and an empty gate in diff mode)
        ("cilium_takeover", {"chart": os.path.join(cilium_chart_cache(), "cilium-%s.tgz" % release.CILIUM),
                             "helm": lab.kube.bins["helm"] if hasattr(lab, "kube") else "helm"}),
        ("cilium_release", {"chart": os.path.join(cilium_chart_cache(), "cilium-%s.tgz" % release.CILIUM),
                            "helm": lab.kube.bins["helm"] if hasattr(lab, "kube") else "helm"}),
        ("cluster_facts", {}),
        # the record the test writes names no machine: nothing drifts, so nothing is acknowledged (and no lock taken);
        # the token of no drift at all: what this run finds
        ("cluster_status", {"machines": machines, "acknowledge": acknowledgement_token([])}),
        # no CNI DaemonSet runs in this lab while the configs select flannel: refused with its plan, writing nothing
        ("adopt_plan", {"machines": machines, "recover_from": "cp-1"}),
        ("cluster_lock", {"duration": 60}),
        # planned and dry-run in check mode; the real run does not hold the lock under this holder: refused, unwritten
        ("adopt_write", {"machines": machines, "recover_from": "cp-1", "cni_unmanaged": True, "holder": "diff-mode"}),
        # no adoption recorded in this lab: refused
        ("adopt_release", {"name": "cp-1", "holder": "diff-mode"}),
        ("etcd_snapshot", {"node": cp, "path": str(tmp_path / "etcd" / "snapshot.db")}),
        # the lab is bootstrapped: etcd's members are read and nothing is sent
        ("talos_bootstrap", {"node": cp, "wait_timeout": 30}),
        ("talos_kubeconfig", {"node": cp, "path": str(tmp_path / "kube" / "kubeconfig"), "wait_timeout": 30}),
        # cp-1 carries the case's bundle: a machine of this cluster, read over the authenticated API
        ("init_plan", {"cluster": {"name": "k8s-older"}, "secrets": CASE + "/secrets.yaml",
                       "machines": [{"name": "cp-1", "node": cp, "role": "controlplane"}]}),
        ("init_record", {"secrets": CASE + "/secrets.yaml", "cluster": dict(cluster, cni={"preset": "cilium"}),
                         "machines": [{"name": "cp-1", "node": cp, "role": "controlplane",
                                       "uuid": lab.machines[0].get("uuid") or "x"}]}),
        # last, so that the tasks above keep their register names (r6 is installer_apply's)
        ("talos_rollout", {"machines": machines, "wait_timeout": 60}),
        # a recipient of no one's key: the lab's cluster has no bundle Secret here, so the real run refuses
        ("cluster_backup", {"machines": machines, "directory": str(tmp_path / "backups"),
                            "recipients": ["age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"]}),
    ]


def _playbook(lab, tmp_path, tasks, out):
    registered = []
    for index, (module, args) in enumerate(tasks):
        registered.append({"name": module, "maesh.ichor." + module: args, "register": "r%d" % index,
                           "ignore_errors": True})
    registered.append({"name": "dump", "ansible.builtin.copy": {
        "content": "{{ [%s] | to_json }}" % ", ".join("r%d" % i for i in range(len(tasks))), "dest": str(out)},
        "check_mode": False, "diff": False})
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump([{
        "hosts": "localhost", "connection": "local", "gather_facts": False,
        "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"},
        "module_defaults": {"group/maesh.ichor.talos": {"talosconfig": lab.talosconfig},
                            "group/maesh.ichor.k8s": {"kubeconfig": lab.kube.kubeconfig}},
        "tasks": registered}], sort_keys=False))
    return str(path)


def _run(lab, tmp_path, tasks, *args):
    """The playbook with ``args``; {module: its registered result}."""
    out = tmp_path / "results.json"
    if out.exists():
        out.unlink()
    proc = ansible_playbook("-i", "localhost,", _playbook(lab, tmp_path, tasks, out), *args, timeout=900)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert out.exists(), proc.stdout[-5000:] + proc.stderr[-5000:]
    results = dict(zip([module for module, _args in tasks], json.loads(out.read_text())))
    for module, result in results.items():
        said = result.get("msg", "")
        assert not result.get("skipped") and not any(text in said for text in NOT_RUN), (module, result)
        assert "plan" in result or "ansible_facts" in result or result.get("failed"), (module, result)
    return results


@pytest.mark.floor
def test_every_module_has_a_task(tmp_path):
    class Lab:
        machines = [{"name": "cp-1", "address": "x", "role": "controlplane"}]
        talosconfig = "x"

        def address(self, name):
            return name
    (tmp_path / "ns").mkdir()
    assert sorted(module for module, _args in _tasks(Lab(), tmp_path / "ns", "ns")) == _modules()


@pytest.mark.floor
def test_diff_only_in_diff_mode(talos_kube_lab, cilium_charts, tmp_path):
    lab = talos_kube_lab(case=CASE, controlplanes=1, workers=1, version=release.TALOS, additions=[
        {"name": "spare", "role": "worker", "version": release.TALOS, "mode": "maintenance"},
        {"name": "spare-mc", "role": "worker", "version": release.TALOS, "mode": "maintenance"}])
    namespace = lab.kube.new_namespace("diff-mode")
    cluster_record.update(KubeClient(kubeconfig=lab.kube.kubeconfig), lambda data: data.update(talos=release.TALOS))
    try:
        tasks = _tasks(lab, tmp_path, namespace)
        untouched = dict((m["name"], m["machine_config"]) for m in lab.machines)

        checked = _run(lab, tmp_path, tasks, "--check")
        assert dict((m, "diff" in r) for m, r in checked.items()) == dict((m, False) for m in checked), checked

        shown = _run(lab, tmp_path, tasks, "--check", "--diff")
        # kubernetes_upgrade waits for the config step (shown below once it is done)
        assert shown["kubernetes_upgrade"]["msg"] == ("the config of cp-1, worker-1 is not yet in the v1.14 form: run the "
                                                      "config step first"), shown["kubernetes_upgrade"]
        expected = dict((module, _supports_diff(module)) for module in shown if module != "kubernetes_upgrade")
        assert dict((m, "diff" in r) for m, r in shown.items() if m in expected) == expected, shown
        # the lab was worth showing: something to change for the modules whose diff is the change itself
        assert shown["config_upgrade"]["changed"] and shown["talos_machine_config"]["apply_mode"] == "maintenance", shown
        assert dict((m["name"], m["machine_config"]) for m in lab.machines) == untouched

        config_step = [task for task in tasks if task[0] == "config_upgrade"]
        kubernetes_step = [task for task in tasks if task[0] == "kubernetes_upgrade"]
        done = _run(lab, tmp_path, config_step)["config_upgrade"]
        assert done["changed"] and not done.get("failed") and "diff" not in done, done
        shown = _run(lab, tmp_path, kubernetes_step, "--check", "--diff")["kubernetes_upgrade"]
        assert shown["changed"] and shown["diff"] and _supports_diff("kubernetes_upgrade"), shown

        real = _run(lab, tmp_path, tasks)
        assert dict((m, "diff" in r) for m, r in real.items()) == dict((m, False) for m in real), real
        assert real["kubernetes_upgrade"]["changed"] and real["talos_machine_config"]["changed"], real
    finally:
        lab.kube.delete_namespace(namespace)
        kube = KubeClient(kubeconfig=lab.kube.kubeconfig)
        # what the tasks leave in ichor-system: init_record's bundle Secret, cluster_lock's Lease
        for api_version, kind, name in (("v1", "Secret", "ichor-secrets-bundle"),
                                        ("coordination.k8s.io/v1", "Lease", "ichor-cluster-lock")):
            if kube.get(api_version, kind, name, "ichor-system") is not None:
                kube.delete(api_version, kind, name, "ichor-system")
