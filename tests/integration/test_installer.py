"""The installer (ADR 0111) against the real kube-apiserver of the lab: apply, inventory, prune,
owner check, rollback, check mode and idempotence seen in the API server's audit log."""

import json
import os
import time

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.installer import inventory, objects, prune, snapshot, stages
from ansible_collections.maesh.ichor.plugins.module_utils.installer.live import Installer
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient, KubeError

from tests import versions
from tests.integration.ansible_env import REPO, ansible_playbook
from tests.lab.cilium import fixtures as cilium_fixtures

pytestmark = pytest.mark.lab

cilium_charts = cilium_fixtures.cilium_charts

DEFAULT_BUNDLE = os.path.join(REPO, "roles", "installer", "files", "bundle")
MARK = {objects.MARK_KEY: objects.MARK_VALUE}


def _write_bundle(path, objects):
    os.makedirs(str(path), exist_ok=True)
    with open(os.path.join(str(path), "bundle.yaml"), "w") as handle:
        yaml.safe_dump_all(objects, handle)
    return [str(path)]


def _sa(name, ns):
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": ns}}


def _cm(name, ns, value="1"):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": {"v": value}}


def _cr(name):
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}


@pytest.fixture
def client(kube_lab):
    c = KubeClient(kubeconfig=kube_lab.kubeconfig)
    yield c
    c.close()


def _run(client, bundle, ns, check=False):
    """One installer run (apply then prune, with one run id), as the role does; returns (apply, prune) results."""
    run_id = snapshot.new_run_id()
    applied = stages.apply_run(Installer(client, bundle, namespace=ns, run_id=run_id), check, True)
    pruned = stages.prune_run(Installer(client, bundle, namespace=ns, run_id=run_id), check, True)
    return applied, pruned


def _exists(client, api_version, kind, name, ns=None):
    return client.get(api_version, kind, name, ns) is not None


def test_rename_prunes_the_old_object_and_keeps_what_it_must(client, kube_lab, kube_namespace, tmp_path):
    ns = kube_namespace
    other = kube_lab.new_namespace("other")
    crd_name = "widgets%s.example.com" % ns.replace("-", "")
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": crd_name},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets%s" % ns.replace("-", ""), "kind": "Widget%s" % ns.replace("-", ""),
                              "singular": "widget%s" % ns.replace("-", "")},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object"}}}]}}
    extra_ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns + "-extra"}}
    v1 = [_sa("old-sa", ns), _sa("unmarked-sa", ns), _sa("elsewhere-sa", other), _cr(ns + "-old-role"), crd,
          extra_ns, _cm("settings", ns)]
    _run(client, _write_bundle(tmp_path / "v1", v1), ns)
    assert client.get("v1", "ServiceAccount", "old-sa", ns)["metadata"]["labels"] == MARK
    # a person removes the mark from one object
    sa = client.get("v1", "ServiceAccount", "unmarked-sa", ns)
    sa["metadata"]["labels"] = {}
    client.replace(sa)
    # v2 renames old-sa and the ClusterRole, and drops everything else
    v2 = [_sa("new-sa", ns), _cr(ns + "-new-role"), _cm("settings", ns)]
    applied, pruned = _run(client, _write_bundle(tmp_path / "v2", v2), ns)
    assert not _exists(client, "v1", "ServiceAccount", "old-sa", ns)
    assert not _exists(client, "rbac.authorization.k8s.io/v1", "ClusterRole", ns + "-old-role")
    assert _exists(client, "v1", "ServiceAccount", "new-sa", ns)
    # kept: no mark, another namespace, a CRD, a Namespace
    assert _exists(client, "v1", "ServiceAccount", "unmarked-sa", ns)
    assert _exists(client, "v1", "ServiceAccount", "elsewhere-sa", other)
    assert _exists(client, "apiextensions.k8s.io/v1", "CustomResourceDefinition", crd_name)
    assert _exists(client, "v1", "Namespace", ns + "-extra")
    assert sorted(pruned["pruned"]) == sorted(["ServiceAccount %s/old-sa" % ns, "ClusterRole %s-old-role" % ns])
    kept = "\n".join(pruned["plan"])
    assert "unmarked-sa: does not carry ichor.maesh.dev/installed-by=ichor-installer" in kept
    assert "elsewhere-sa: in namespace %s, not the installer's %s" % (other, ns) in kept
    assert "CustomResourceDefinition is not a kind the installer prunes" in kept
    assert "Namespace is not a kind the installer prunes" in kept
    # the check-mode plan of v2 showed the same prune set
    inv = client.get("v1", "ConfigMap", inventory.INVENTORY_NAME, ns)
    assert "new-sa" in inv["data"]["objects"] and "old-sa" not in inv["data"]["objects"]
    assert applied["changed"] and pruned["changed"]
    assert client.get("v1", "Secret", snapshot.SNAPSHOT_NAME, ns) is None


def test_check_mode_writes_nothing_and_a_rerun_is_a_no_op(client, kube_lab, kube_namespace, tmp_path):
    ns = kube_namespace
    v1 = _write_bundle(tmp_path / "v1", [_sa("a", ns), _sa("b", ns), _cm("c", ns)])
    _run(client, v1, ns)
    v2 = _write_bundle(tmp_path / "v2", [_sa("a", ns), _cm("c", ns, value="2")])
    mark = kube_lab.audit_mark()
    applied, pruned = _run(client, v2, ns, check=True)
    assert kube_lab.mutating_requests(since=mark) == []
    assert "update ConfigMap %s/c" % ns in applied["plan"]
    assert any(line.startswith("prune ServiceAccount %s/b" % ns) for line in applied["plan"])
    assert any(line.startswith("prune ServiceAccount %s/b" % ns) for line in pruned["plan"])
    assert applied["diff"] and applied["changed"]
    # the real run, then a rerun that writes nothing
    _run(client, v2, ns)
    assert not _exists(client, "v1", "ServiceAccount", "b", ns)
    mark = kube_lab.audit_mark()
    applied, pruned = _run(client, v2, ns)
    assert not applied["changed"] and not pruned["changed"]
    assert kube_lab.mutating_requests(since=mark) == []


def test_first_run_and_unparseable_inventory_prune_only_the_renamed_role(client, kube_lab, kube_namespace, tmp_path):
    ns = kube_namespace
    renamed = prune.RENAMED_OBJECTS[0]
    role = _cr(renamed.ref.name)
    role["metadata"]["labels"] = {"app.kubernetes.io/name": "ichor"}
    client.create(role)
    # objects that look like a previous run's, but there is no inventory
    client.apply(dict(_sa("leftover", ns), metadata={"name": "leftover", "namespace": ns, "labels": MARK}),
                 "someone")
    bundle = _write_bundle(tmp_path / "v1", [_sa("a", ns)])
    applied, pruned = _run(client, bundle, ns)
    assert pruned["pruned"] == ["ClusterRole %s" % renamed.ref.name]
    assert any(line.startswith("NOTICE: ClusterRole ichor-ichor-break-glass-role was renamed") for line in applied["plan"])
    assert _exists(client, "v1", "ServiceAccount", "leftover", ns)
    # now an inventory that cannot be parsed: nothing it lists is pruned, the renamed role still is
    client.create(role)
    inv = client.get("v1", "ConfigMap", inventory.INVENTORY_NAME, ns)
    client.delete("v1", "ConfigMap", inventory.INVENTORY_NAME, ns)
    client.create({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": inventory.INVENTORY_NAME, "namespace": ns}, "data": {"objects": "{not json"}})
    assert "a" in inv["data"]["objects"]
    applied, pruned = _run(client, _write_bundle(tmp_path / "v2", [_sa("b", ns)]), ns)
    assert pruned["pruned"] == ["ClusterRole %s" % renamed.ref.name]
    assert _exists(client, "v1", "ServiceAccount", "a", ns)
    assert any("cannot be parsed" in line for line in applied["plan"])  # the apply stage rewrites it (recorded)


def test_recreated_object_is_kept(client, kube_lab, kube_namespace, tmp_path):
    ns = kube_namespace
    _run(client, _write_bundle(tmp_path / "v1", [_sa("a", ns), _sa("gone", ns)]), ns)
    v2 = _write_bundle(tmp_path / "v2", [_sa("a", ns)])
    stages.apply_run(Installer(client, v2, namespace=ns, run_id="run-1"), False, False)
    # between the checks and the prune a person re-creates the object (new UID, same mark)
    old = client.get("v1", "ServiceAccount", "gone", ns)
    client.delete("v1", "ServiceAccount", "gone", ns)
    client.create(dict(_sa("gone", ns), metadata={"name": "gone", "namespace": ns, "labels": MARK}))
    pruned = stages.prune_run(Installer(client, v2, namespace=ns, run_id="run-1"), False, False)
    live = client.get("v1", "ServiceAccount", "gone", ns)
    assert live is not None and live["metadata"]["uid"] != old["metadata"]["uid"]
    assert pruned["pruned"] == []
    assert {"object": "ServiceAccount %s/gone" % ns, "reason": "re-created since it was checked (new UID)"} in pruned["kept"]


def _wait_until_denied(client, ns, name, timeout=20):
    """A new admission policy takes effect asynchronously: wait until a dry-run DELETE is refused."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            client.delete("v1", "ServiceAccount", name, ns, dry_run=True)
        except KubeError:
            return
        time.sleep(0.3)
    raise AssertionError("the ValidatingAdmissionPolicy did not take effect")


def test_a_failed_delete_restores_the_cluster(client, kube_lab, kube_namespace, tmp_path):
    ns = kube_namespace
    v1 = [_sa("a-first", ns), _sa("z-blocked", ns), _cm("settings", ns, value="before"), _cr(ns + "-role")]
    _run(client, _write_bundle(tmp_path / "v1", v1), ns)
    before = dict((n, client.get("v1", "ServiceAccount", n, ns)) for n in ("a-first", "z-blocked"))
    # a ValidatingAdmissionPolicy denies the DELETE of z-blocked: a real failed delete
    policy = ns + "-deny-delete"
    client.create({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                   "metadata": {"name": policy},
                   "spec": {"failurePolicy": "Fail",
                            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                                    "operations": ["DELETE"],
                                                                    "resources": ["serviceaccounts"]}]},
                            "validations": [{"expression": "oldObject.metadata.name != 'z-blocked'",
                                             "message": "z-blocked may not be deleted"}]}})
    client.create({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                   "metadata": {"name": policy},
                   "spec": {"policyName": policy, "validationActions": ["Deny"],
                            "matchResources": {"namespaceSelector": {"matchLabels": {
                                "kubernetes.io/metadata.name": ns}}}}})
    try:
        _wait_until_denied(client, ns, "z-blocked")
        v2 = _write_bundle(tmp_path / "v2", [_cm("settings", ns, value="after")])
        applied = stages.apply_run(Installer(client, v2, namespace=ns, run_id="run-1"), False, False)
        assert applied["changed"]
        assert client.get("v1", "ConfigMap", "settings", ns)["data"] == {"v": "after"}
        with pytest.raises(stages.RunFailed) as exc:
            stages.prune_run(Installer(client, v2, namespace=ns, run_id="run-1"), False, False)
        message = str(exc.value)
        assert "prune failed" in message and "z-blocked may not be deleted" in message
        assert "restored" in message and "re-created: ServiceAccount %s/a-first" % ns in message
        # as it was: the deleted one is back (new UID), the updated ConfigMap has its old data
        for name in ("a-first", "z-blocked"):
            live = client.get("v1", "ServiceAccount", name, ns)
            assert live is not None and objects.comparable(live) == objects.comparable(before[name])
        assert client.get("v1", "ConfigMap", "settings", ns)["data"] == {"v": "before"}
        assert _exists(client, "rbac.authorization.k8s.io/v1", "ClusterRole", ns + "-role")
        assert client.get("v1", "Secret", snapshot.SNAPSHOT_NAME, ns) is None
    finally:
        client.delete("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", policy)
        client.delete("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", policy)


def test_default_bundle_rbac_holds_delete_on_every_prunable_kind():
    rules = {}
    for root, _dirs, names in os.walk(DEFAULT_BUNDLE):
        for path in names:
            with open(os.path.join(root, path)) as handle:
                for doc in yaml.safe_load_all(handle):
                    # the installer's own: its Role in its namespace, its ClusterRole (the bundle holds others')
                    if doc and doc["kind"] in ("Role", "ClusterRole") and doc["metadata"]["name"] == "ichor-installer" \
                            and doc["metadata"].get("namespace") in (None, "ichor-system"):
                        rules[doc["kind"]] = doc["rules"]
    plural = {"ServiceAccount": "serviceaccounts", "Service": "services", "Deployment": "deployments",
              "Role": "roles", "RoleBinding": "rolebindings", "ClusterRole": "clusterroles",
              "ClusterRoleBinding": "clusterrolebindings",
              "MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
              "ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
              "ValidatingAdmissionPolicy": "validatingadmissionpolicies",
              "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings"}
    cluster_scoped = {"ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration",
                      "ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy",
                      "ValidatingAdmissionPolicyBinding"}
    for group, kind in prune.PRUNABLE_KINDS:
        role = "ClusterRole" if kind in cluster_scoped else "Role"
        assert any(group in r["apiGroups"] and plural[kind] in r["resources"] and "delete" in r["verbs"]
                   for r in rules[role]), "%s lacks delete on %s" % (role, kind)


def test_install_playbook_under_the_installers_own_service_account(kube_lab, tmp_path):
    # first, as an admin, the default bundle (it holds the installer's ServiceAccount and RBAC)
    proc = ansible_playbook("maesh.ichor.install", "-e", "ichor_kubeconfig=%s" % kube_lab.kubeconfig)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the bundle's subdirectories are applied too: the Cilium release's RBAC (20-cilium-release) is in the cluster
    admin = KubeClient(kubeconfig=kube_lab.kubeconfig)
    cilium_release_rbac = os.path.join(DEFAULT_BUNDLE, "20-cilium-release")
    for name in sorted(os.listdir(cilium_release_rbac)):
        with open(os.path.join(cilium_release_rbac, name)) as handle:
            for doc in yaml.safe_load_all(handle):
                if doc:
                    meta = doc["metadata"]
                    assert admin.get(doc["apiVersion"], doc["kind"], meta["name"], meta.get("namespace")) is not None, name
    sa_kubeconfig = kube_lab.service_account_kubeconfig("ichor-system", "ichor-installer",
                                                        path=str(tmp_path / "sa.kubeconfig"))
    extra = tmp_path / "extra"
    _write_bundle(extra, [_sa("ichor-sa-test-a", "ichor-system"), _cr("ichor-sa-test-role")])
    args = ["maesh.ichor.install", "-e", "ichor_kubeconfig=%s" % sa_kubeconfig,
            "-e", '{"ichor_installer_extra_bundles": ["%s"]}' % extra]
    proc = ansible_playbook(*(args + ["--check", "--diff"]))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PLAN (check mode: nothing was written)" in proc.stdout
    assert "create ServiceAccount ichor-system/ichor-sa-test-a" in proc.stdout
    # without the plan callback, the plan is the output of the role's task that prints it
    proc = ansible_playbook(*(args + ["--check"]), env={"ANSIBLE_CALLBACKS_ENABLED": "ansible.builtin.default"})
    assert proc.returncode == 0 and "PLAN (check mode" not in proc.stdout, proc.stdout + proc.stderr
    printed = proc.stdout.split("Print the plan (what the bundle creates, updates, prunes and keeps)]", 1)
    assert len(printed) == 2 and "create ServiceAccount ichor-system/ichor-sa-test-a" in printed[1].split("TASK [")[0]
    proc = ansible_playbook(*args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # drop them again: pruned by the ServiceAccount, and a rerun changes nothing
    _write_bundle(extra, [_sa("ichor-sa-test-b", "ichor-system")])
    proc = ansible_playbook(*args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "pruned ServiceAccount ichor-system/ichor-sa-test-a" in proc.stdout
    assert "pruned ClusterRole ichor-sa-test-role" in proc.stdout
    proc = ansible_playbook(*args)
    assert proc.returncode == 0 and "changed=0" in proc.stdout, proc.stdout


@pytest.mark.floor
def test_install_through_ansible_runner_as_awx_runs_it_leaks_no_credential(kube_lab, tmp_path):
    """AWX's way (tests/integration/awx.py): the kubeconfig credential type injects a 0600 file named by
    ichor_kubeconfig (and KUBECONFIG), the survey's extra bundle as an !unsafe extravar; the plan, the install, a rerun
    that changes nothing, a prune; the runner's artifacts and stdout hold nothing of the kubeconfig's secrets. The
    inventory's own ichor_kubeconfig (here a file that does not exist, which the role would refuse) loses to the
    credential's, as an inventory the maesh.ichor.talos plugin made sets one."""
    from tests.integration.awx import AwxJob, kubeconfig_markers
    job = AwxJob(tmp_path / "runner", "install")
    job.inventory({"all": {"hosts": {"localhost": {"ansible_connection": "local"}}}})
    with open(os.path.join(job.private, "inventory", "hosts.yml"), "w") as handle:
        yaml.safe_dump({"all": {"hosts": {"localhost": {"ansible_connection": "local"}},
                                "vars": {"ichor_kubeconfig": str(tmp_path / "inventory-kubeconfig-absent")}}}, handle)
    with open(kube_lab.kubeconfig) as handle:
        job.credential_of_type("kubeconfig", {"kubeconfig": handle.read()})  # docs/awx/credential_types.yml
    markers = kubeconfig_markers(kube_lab.kubeconfig)
    extra = tmp_path / "extra"
    _write_bundle(extra, [_sa("ichor-awx-test-a", "ichor-system")])
    survey = {"ichor_installer_extra_bundles": [str(extra)]}
    outs = []
    for step, cmdline in (("plan", "--check --diff"), ("install", None), ("rerun", None)):
        rc, out = job.run(survey, cmdline=cmdline, job_id=len(outs) + 1)
        assert rc == 0, (step, out[-4000:])
        outs.append(out)
    assert "PLAN (check mode: nothing was written)" in outs[0] and "create ServiceAccount ichor-system/ichor-awx-test-a" in outs[0]
    admin = KubeClient(kubeconfig=kube_lab.kubeconfig)
    assert admin.get("v1", "ServiceAccount", "ichor-awx-test-a", "ichor-system") is not None
    assert "changed=0" in outs[2], outs[2][-3000:]
    _write_bundle(extra, [_sa("ichor-awx-test-b", "ichor-system")])
    rc, out = job.run(survey, job_id=4)
    assert rc == 0 and "pruned ServiceAccount ichor-system/ichor-awx-test-a" in out, out[-4000:]
    outs.append(out)
    assert job.sweep(markers, outs) == []
    _write_bundle(extra, [])
    assert job.run(survey, job_id=5)[0] == 0  # leaves the cluster as the other tests expect it


# -- issue 12: a snapshot another run left; inventory entries the server no longer serves ------------

KILLED = "20261201T070000Z-00000000dead"


def _playbook_args(kube_lab, ns, extra):
    """The install playbook with the installer's namespace (inventory, snapshot) set to the test's."""
    return ["maesh.ichor.install", "-e", "ichor_kubeconfig=%s" % kube_lab.kubeconfig,
            "-e", json.dumps({"ichor_installer_extra_bundles": [str(extra)], "ichor_installer_namespace": ns})]


def _writes(kube_lab, mark):
    """The run's writes, less the cluster lock's (its Lease, and the namespace that holds it when it is the first)."""
    found = [(e["verb"], e["objectRef"].get("resource"), e["objectRef"].get("name"))
             for e in kube_lab.mutating_requests(since=mark)]
    return [w for w in found if w[1] != "leases" and w != ("create", "namespaces", "ichor-system")]


def test_a_failed_run_after_a_killed_one_restores_nothing_and_the_next_run_replaces_its_snapshot(
        client, kube_lab, kube_namespace, tmp_path):
    ns = kube_namespace
    frozen = dict(_cm("frozen", ns), immutable=True)
    _run(client, _write_bundle(tmp_path / "v1", [_sa("a", ns), _sa("old", ns), frozen, _cm("c", ns, "before")]), ns)
    # run KILLED applies v2 and is killed before its prune: its snapshot (new absent, c before, old) stays
    v2 = [_sa("a", ns), _sa("new", ns), frozen, _cm("c", ns, "after")]
    stages.apply_run(Installer(client, _write_bundle(tmp_path / "v2", v2), namespace=ns, run_id=KILLED), False, False)
    # the next run fails in its dry-run plan: it changes an immutable ConfigMap, which the API server refuses
    extra = tmp_path / "extra"
    _write_bundle(extra, [_sa("a", ns), _sa("new", ns), dict(frozen, data={"v": "changed"}), _cm("c", ns, "after")])
    mark = kube_lab.audit_mark()
    proc = ansible_playbook(*_playbook_args(kube_lab, ns, extra))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "field is immutable" in out and "the installer run failed and the cluster was restored" in out
    assert ("the installer snapshot in the Secret %s/%s is of run %s (3 objects), not of this run" % (
        ns, snapshot.SNAPSHOT_NAME, KILLED)) in proc.stdout
    # the API server's audit log: that run wrote nothing; the rescue restored nothing
    assert _writes(kube_lab, mark) == []
    assert client.get("v1", "ServiceAccount", "new", ns) is not None
    assert client.get("v1", "ConfigMap", "c", ns)["data"] == {"v": "after"}
    secret = client.get("v1", "Secret", snapshot.SNAPSHOT_NAME, ns)
    assert snapshot.from_secret(secret).run_id == KILLED
    # the next successful run names it, makes the prune run KILLED did not, and its own snapshot replaces it
    _write_bundle(extra, v2)
    proc = ansible_playbook(*_playbook_args(kube_lab, ns, extra))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "WARNING: the installer snapshot in the Secret %s/%s is of run %s (3 objects), which did not finish" % (
        ns, snapshot.SNAPSHOT_NAME, KILLED) in proc.stdout
    assert "pruned ServiceAccount %s/old" % ns in proc.stdout
    assert client.get("v1", "Secret", snapshot.SNAPSHOT_NAME, ns) is None
    assert client.get("v1", "ServiceAccount", "new", ns) is not None
    assert client.get("v1", "ConfigMap", "c", ns)["data"] == {"v": "after"}


def _refusing_snapshot_deletes(client, ns, on):
    """An admission policy that refuses to delete the installer's snapshot Secret in ``ns`` (as a failing webhook, or
    an API server going away at that moment, would)."""
    name = "ichor-test-keep-snapshot-%s" % ns
    if not on:
        client.delete("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", name)
        client.delete("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", name)
        return
    client.create({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                   "metadata": {"name": name}, "spec": {
                       "failurePolicy": "Fail",
                       "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                               "resources": ["secrets"], "operations": ["DELETE"]}]},
                       "matchConditions": [{"name": "the-snapshot", "expression": "request.namespace == '%s' && "
                                            "request.name in ['%s', 'probe']" % (ns, snapshot.SNAPSHOT_NAME)}],
                       "validations": [{"expression": "false", "message": "the snapshot is kept (test)"}]}})
    client.create({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                   "metadata": {"name": name}, "spec": {"policyName": name, "validationActions": ["Deny"]}})


def test_a_snapshot_that_cannot_be_dropped_after_the_prune_is_a_warning_not_a_restore(
        client, kube_lab, kube_namespace, tmp_path):
    """Found by the fault campaign's install scenario (a targeted run): the prune deleted what the bundle dropped,
    wrote the inventory, and then failed to drop its snapshot; the rescue restored the pruned objects, which the
    inventory no longer listed, so no later run pruned them. Now the run succeeds with a warning and the next run
    drops the snapshot."""
    ns = kube_namespace
    _run(client, _write_bundle(tmp_path / "a", [_sa("kept", ns), _sa("dropped", ns)]), ns)
    extra = _write_bundle(tmp_path / "b", [_sa("kept", ns)])[0]
    _refusing_snapshot_deletes(client, ns, True)
    try:
        deadline = time.time() + 30  # the policy takes a moment to be enforced: a probe Secret it also guards
        while True:
            client.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "probe", "namespace": ns}})
            try:
                client.delete("v1", "Secret", "probe", ns)
            except KubeError:  # refused: the policy is in force
                break
            assert time.time() < deadline, "the admission policy was never enforced"
            time.sleep(0.3)
        proc = ansible_playbook(*_playbook_args(kube_lab, ns, extra))
    finally:
        _refusing_snapshot_deletes(client, ns, False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "the snapshot in the Secret %s/%s could not be dropped" % (ns, snapshot.SNAPSHOT_NAME) in proc.stdout
    assert client.get("v1", "ServiceAccount", "dropped", ns) is None  # pruned, and not brought back
    refs = inventory.parse(client.get("v1", "ConfigMap", inventory.INVENTORY_NAME, ns))[0]
    assert "dropped" not in [r.name for r in refs]
    proc = ansible_playbook(*_playbook_args(kube_lab, ns, extra))  # the next run drops what was left
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert client.get("v1", "Secret", snapshot.SNAPSHOT_NAME, ns) is None


def _wait(check, what, timeout=60):
    deadline = time.time() + timeout
    while not check():
        if time.time() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.3)


def test_an_inventory_entry_whose_crd_is_gone_is_skipped_with_a_warning(client, kube_lab, kube_namespace, tmp_path):
    ns = kube_namespace
    group = "%s.example.com" % ns.replace("-", "")
    crd_name = "gadgets." + group
    client.create({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                   "metadata": {"name": crd_name},
                   "spec": {"group": group, "scope": "Namespaced",
                            "names": {"plural": "gadgets", "kind": "Gadget", "singular": "gadget"},
                            "versions": [{"name": "v1", "served": True, "storage": True,
                                          "schema": {"openAPIV3Schema": {"type": "object",
                                                                         "x-kubernetes-preserve-unknown-fields": True}}}]}})

    def established():
        crd = client.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd_name)
        return any(c["type"] == "Established" and c["status"] == "True"
                   for c in (crd.get("status") or {}).get("conditions") or [])

    _wait(established, "the CRD to be established")
    gadget = {"apiVersion": group + "/v1", "kind": "Gadget", "metadata": {"name": "g", "namespace": ns},
              "spec": {"size": 1}}
    extra = tmp_path / "extra"
    _write_bundle(extra, [gadget, _sa("keep", ns)])
    args = _playbook_args(kube_lab, ns, extra)
    proc = ansible_playbook(*args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Gadget" in client.get("v1", "ConfigMap", inventory.INVENTORY_NAME, ns)["data"]["objects"]
    # the CRD goes (and with it its custom resources and its group); the next bundle no longer ships the gadget
    client.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd_name)
    _wait(lambda: client.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd_name) is None, "the CRD to go")
    _write_bundle(extra, [_sa("keep", ns)])
    mark = kube_lab.audit_mark()
    # a fresh temporary directory: API discovery from the server, not from a cache an earlier run left
    fresh = tmp_path / "tmp"
    fresh.mkdir()
    proc = ansible_playbook(*args, env={"TMPDIR": str(fresh)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    warning = ("the installer inventory %s/%s lists Gadget %s/g, but the API server no longer serves %s/v1 Gadget; "
               "it is skipped and not pruned" % (ns, inventory.INVENTORY_NAME, ns, group))
    assert "WARNING: " + warning in proc.stdout
    # the run went on: the only write is the inventory, rewritten without the entry (one update)
    assert sorted(_writes(kube_lab, mark)) == [("update", "configmaps", inventory.INVENTORY_NAME)]
    assert "Gadget" not in client.get("v1", "ConfigMap", inventory.INVENTORY_NAME, ns)["data"]["objects"]
    proc = ansible_playbook(*args, env={"TMPDIR": str(fresh)})
    assert proc.returncode == 0 and "changed=0" in proc.stdout and "WARNING" not in proc.stdout, proc.stdout


# -- issue 11 §4: installer_apply's changed, in check mode and in a real run -----------------------------

@pytest.mark.parametrize("scenario, changed", [("nothing to do", False), ("inventory deleted", False),
                                               ("an object changed", True)])
def test_check_mode_and_a_real_run_agree_on_changed(client, kube_lab, kube_namespace, tmp_path, scenario, changed):
    ns = kube_namespace
    v1 = _write_bundle(tmp_path / "v1", [_sa("a", ns), _cm("c", ns)])
    _run(client, v1, ns)
    bundle = v1
    if scenario == "inventory deleted":
        client.delete("v1", "ConfigMap", inventory.INVENTORY_NAME, ns)
    elif scenario == "an object changed":
        bundle = _write_bundle(tmp_path / "v2", [_sa("a", ns), _cm("c", ns, value="2")])
    run_id = snapshot.new_run_id()
    mark = kube_lab.audit_mark()
    checked = stages.apply_run(Installer(client, bundle, namespace=ns, run_id=run_id), True, True)
    assert _writes(kube_lab, mark) == []
    mark = kube_lab.audit_mark()
    real = stages.apply_run(Installer(client, bundle, namespace=ns, run_id=run_id), False, True)
    assert checked["changed"] is real["changed"] is changed
    # changed is whether it wrote, as the audit log has it
    assert bool(_writes(kube_lab, mark)) is changed
    stages.prune_run(Installer(client, bundle, namespace=ns, run_id=run_id), False, True)


# -- the network-policy gate (seed 0103, 1.1a) ----------------------------------------------------

POLICY = ("cilium.io/v2", "CiliumNetworkPolicy", "ichor-system-default-deny", "ichor-system")


def test_network_policies_are_applied_only_where_cilium_runs_and_its_crd_exists_and_never_pruned(
        client, kube_lab, kube_namespace, cilium_charts, tmp_path):
    """The install playbook leaves the policies out without a Cilium agent (and says so), applies them when one
    runs and the real Cilium CRD exists (the server validates them against the CRD's schema), as the installer's
    own ServiceAccount too, and keeps them when Cilium is gone (a CiliumNetworkPolicy is never pruned)."""
    admin = ["maesh.ichor.install", "-e", "ichor_kubeconfig=%s" % kube_lab.kubeconfig]
    proc = ansible_playbook(*(admin + ["--check"]))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "maesh.ichor's network policies are not applied: the CNI is none (no CNI DaemonSet runs)" in proc.stdout
    # Cilium's own CRDs, as its operator installs them
    kube_lab.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager", "cilium-operator",
                     "-f", cilium_charts[versions.CILIUM_MINOR]["crds"])
    labels = {"k8s-app": "cilium"}
    agent = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "cilium", "namespace": kube_namespace},
             "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                 "containers": [{"name": "cilium-agent", "image": "quay.io/cilium/cilium:v" + versions.CILIUM}]}}}}
    client.apply(agent, "lab")
    try:
        mark = kube_lab.audit_mark()
        proc = ansible_playbook(*admin)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "maesh.ichor's network policies are applied: Cilium runs and the CRD" in proc.stdout
        assert "create CiliumNetworkPolicy ichor-system/ichor-system-default-deny" in proc.stdout
        live = client.get(*POLICY)
        assert live["spec"]["endpointSelector"] == {} and live["spec"]["ingress"] == [{}]
        assert any(e["objectRef"].get("resource") == "ciliumnetworkpolicies" for e in kube_lab.mutating_requests(since=mark))
        # the installer's own ServiceAccount may write them (its Role) and read the gate (its ClusterRole)
        client.delete(*POLICY)
        sa = ["maesh.ichor.install", "-e", "ichor_kubeconfig=%s" % kube_lab.service_account_kubeconfig(
            "ichor-system", "ichor-installer", path=str(tmp_path / "sa.kubeconfig"))]
        proc = ansible_playbook(*sa)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert client.get(*POLICY) is not None
        proc = ansible_playbook(*sa)
        assert proc.returncode == 0 and "changed=0" in proc.stdout, proc.stdout
        # Cilium gone: left out of the bundle, and kept in the cluster (never a kind the installer prunes)
        client.delete("apps/v1", "DaemonSet", "cilium", kube_namespace)
        proc = ansible_playbook(*admin)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "maesh.ichor's network policies are not applied: the CNI is none" in proc.stdout
        assert ("keep CiliumNetworkPolicy ichor-system/ichor-system-default-deny: CiliumNetworkPolicy is not a kind "
                "the installer prunes") in proc.stdout
        assert client.get(*POLICY) is not None
    finally:
        if client.get("apps/v1", "DaemonSet", "cilium", kube_namespace) is not None:
            client.delete("apps/v1", "DaemonSet", "cilium", kube_namespace)
        if client.get(*POLICY) is not None:
            client.delete(*POLICY)


# -- two and three installs at once, some killed: nothing lost, one calm run converges ---------------------------------

# A maintainer's flags: ICHOR_INSTALL_SCHEDULES=40 ICHOR_INSTALL_SEED=... run more, or other, schedules.
SCHEDULES = int(os.environ.get("ICHOR_INSTALL_SCHEDULES", "4"))
SCHEDULE_SEED = int(os.environ.get("ICHOR_INSTALL_SEED", "26"))
LOCK_SECONDS = 8  # a killed run's lock expires this soon, so the calm run after it does not wait long


def _pool_state(client, ns, pool):
    """(marked pool objects that exist, pool objects the inventory lists), as the API server has them."""
    names = set("%s %s" % (o["kind"], o["metadata"]["name"]) for o in pool)
    live = set()
    for obj in pool:
        meta = obj["metadata"]
        found = client.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        if found is not None and objects.carries_mark(found):
            live.add("%s %s" % (obj["kind"], meta["name"]))
    refs = inventory.parse(client.get("v1", "ConfigMap", inventory.INVENTORY_NAME, ns))[0] or []
    return live, set("%s %s" % (r.kind, r.name) for r in refs) & names


def _wait_for_the_lock_to_be_free(client):
    from ansible_collections.maesh.ichor.plugins.module_utils.k8s import lock
    deadline = time.time() + 3 * LOCK_SECONDS
    while time.time() < deadline:
        holder, unused_expires, expired = lock.state(client.get(lock.API_VERSION, "Lease", lock.NAME, lock.NAMESPACE),
                                                     time.time())
        if holder is None or expired:
            return
        time.sleep(0.3)
    raise AssertionError("the cluster lock was not given back and did not expire")


def test_installs_at_once_killed_or_calm_lose_nothing_and_one_calm_run_converges(client, kube_lab, kube_namespace,
                                                                                 tmp_path):
    """Seeded schedules of two or three `maesh.ichor.install` runs with different bundles, started close together;
    each run is left alone or killed (SIGKILL, or SIGTERM as AWX's cancel sends) at a random moment. Checked from
    the API server, never from the runs' output: after the schedule every marked object that exists is listed in
    the inventory; a run that failed without being killed was refused by the lock, naming its holder; once the lock
    is free, one calm run with a new bundle leaves exactly that bundle (objects and inventory) and no snapshot."""
    import random
    import signal
    import subprocess
    import sys
    from tests.integration.ansible_env import ansible_env
    ns = kube_namespace
    pool = [_sa("p%d" % i, ns) for i in range(4)] + [_cr("%s-r%d" % (ns, i)) for i in range(2)]
    exe = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    env = ansible_env()

    def start(name, bundle):
        extra = _write_bundle(tmp_path / name, bundle)[0]
        args = _playbook_args(kube_lab, ns, extra) + ["-e", "ichor_installer_lock_duration=%d" % LOCK_SECONDS]
        out = open(str(tmp_path / (name + ".out")), "w+")
        return subprocess.Popen([exe] + args, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                text=True), out

    try:
        for schedule in range(SCHEDULES):
            rng = random.Random("%d:%d" % (SCHEDULE_SEED, schedule))
            runs = []
            for index in range(rng.choice((2, 3))):
                time.sleep(rng.uniform(0, 3))
                proc, out = start("s%d-run%d" % (schedule, index), rng.sample(pool, rng.randint(1, len(pool))))
                kill = rng.choice([None, signal.SIGKILL, signal.SIGTERM])
                runs.append(dict(proc=proc, out=out, kill=kill, at=time.time() + rng.uniform(1.0, 6.0)))
            while any(r["proc"].poll() is None for r in runs):
                for run in runs:
                    if run["kill"] and run["proc"].poll() is None and time.time() >= run["at"]:
                        run["proc"].send_signal(run["kill"])
                        run["killed"] = True
                time.sleep(0.05)
            for run in runs:
                run["out"].seek(0)
                text = run["out"].read()
                run["out"].close()
                if run["proc"].returncode != 0 and not run.get("killed"):
                    assert ("the cluster lock ichor-system/ichor-cluster-lock is held by maesh-ichor-" in text or
                            "does not hold the cluster lock" in text), text[-3000:]
            live, listed = _pool_state(client, ns, pool)
            assert live <= listed, "schedule %d: %s exist and are not in the inventory" % (schedule, live - listed)
            _wait_for_the_lock_to_be_free(client)
            calm = rng.sample(pool, rng.randint(0, len(pool)))
            proc, out = start("s%d-calm" % schedule, calm)
            proc.wait(timeout=300)
            out.seek(0)
            assert proc.returncode == 0, out.read()[-4000:]
            out.close()
            want = set("%s %s" % (o["kind"], o["metadata"]["name"]) for o in calm)
            assert _pool_state(client, ns, pool) == (want, want), "schedule %d" % schedule
            assert client.get("v1", "Secret", snapshot.SNAPSHOT_NAME, ns) is None
    finally:
        _wait_for_the_lock_to_be_free(client)
        proc, out = start("cleanup", [])
        proc.wait(timeout=300)
        out.close()


# -- issue 42 section 2: a killed install does not lock the next run out ---------------------------------------------

@pytest.mark.parametrize("whole_group", [True, False], ids=["its process group", "ansible-playbook alone"])
def test_an_install_killed_between_apply_and_prune_does_not_lock_out_the_next_run_started_at_once(
        client, kube_lab, kube_namespace, tmp_path, whole_group):
    """SIGKILL as the prune task starts (what a cancelled AWX job, an OOM kill or a lost CI runner does): the next
    install, started at once, takes the lock (its holder's playbook is gone), prunes what the killed run left, and a
    third run changes nothing. With a lock that outlives its run (the 1800 s one) the next run was refused."""
    import signal
    import subprocess
    import sys
    from tests.integration.ansible_env import ansible_env
    ns = kube_namespace
    extra = tmp_path / "extra"
    _write_bundle(extra, [_sa("kept", ns), _sa("dropped", ns)])
    assert ansible_playbook(*_playbook_args(kube_lab, ns, extra)).returncode == 0
    _write_bundle(extra, [_sa("kept", ns), _sa("added", ns)])
    exe = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    proc = subprocess.Popen([exe] + _playbook_args(kube_lab, ns, extra), env=ansible_env(), cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "TASK [maesh.ichor.installer : Prune what the last run installed" in line:
            break
    if whole_group:
        os.killpg(proc.pid, signal.SIGKILL)
    else:
        proc.kill()
    proc.wait()
    assert any("Prune what the last run installed" in line for line in seen), "".join(seen)[-3000:]
    assert client.get("v1", "ServiceAccount", "added", ns) is not None  # applied, and killed before its prune
    lease = client.get("coordination.k8s.io/v1", "Lease", "ichor-cluster-lock", "ichor-system")
    assert lease is not None and lease["spec"]["holderIdentity"]  # the killed run's, not given back
    rerun = ansible_playbook(*_playbook_args(kube_lab, ns, extra))
    assert rerun.returncode == 0, rerun.stdout[-4000:]
    assert "taken over by" in rerun.stdout and "whose playbook (process %d on this controller) has ended" % (
        proc.pid) in rerun.stdout, rerun.stdout[-4000:]
    assert "pruned ServiceAccount %s/dropped" % ns in rerun.stdout
    third = ansible_playbook(*_playbook_args(kube_lab, ns, extra))
    assert third.returncode == 0 and "changed=0" in third.stdout, third.stdout[-3000:]
