"""The installer bundle's RBAC for running the Cilium chart with helm (issue 13): generated from the chart, equal to
what is committed, enough for the takeover with every feature the generator renders, and exactly enough: the lab's
API server (RBAC on) refuses helm when one rule of the chart's hubble-generate-certs Role is missing from the caller
(the escalation check of seed 0103's amendments)."""

import copy

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.cilium import takeover
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import values as values_mod
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError

from tests.integration.test_cilium_takeover import Conn, _params
from tests.lab.cilium import fixtures, rbac, rbac_fixtures
from tests.lab.cilium.fixtures import TALOS_VALUES, merged
from tests.lab.kube.cluster import binaries

pytestmark = pytest.mark.lab

cilium_charts = fixtures.cilium_charts
cilium_lab = fixtures.cilium_lab
cilium_caller = rbac_fixtures.cilium_caller

# the most the generator renders: hubble relay and UI, the certificates made by the cron job (its Role is the one
# that failed on hardware)
MOST = merged(TALOS_VALUES, {"hubble": {"enabled": True, "relay": {"enabled": True}, "ui": {"enabled": True},
                                        "tls": {"auto": {"method": "cronJob"}}}})
HUBBLE_CERT_NAMES = ["cilium-ca", "hubble-metrics-server-certs", "hubble-relay-client-certs",
                     "hubble-relay-server-certs", "hubble-server-certs", "hubble-ui-client-certs"]


@pytest.fixture(scope="module")
def helm():
    return binaries(names=("helm",))["helm"]


def test_the_committed_bundle_is_what_the_chart_needs(helm, cilium_charts):
    generated = rbac.generate(helm, cilium_charts)
    assert generated == rbac.committed(), "run python -m tests.lab.cilium.rbac and commit %s" % rbac.OUT


def test_a_rule_a_chart_bump_adds_changes_the_bundle(helm, cilium_charts):
    entries = rbac.chart_entries(cilium_charts)
    renders = {}
    for entry in entries:
        renders.update(rbac.render(helm, entry["chart"], entry["version"]))
    bumped = copy.deepcopy(renders)
    first = sorted(bumped)[0]
    bumped[first].append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                          "metadata": {"name": "cilium-new", "namespace": "kube-system"},
                          "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["watch"]}]})
    before, after = rbac.files(entries, renders), rbac.files(entries, bumped)
    assert [n for n in sorted(before) if before[n] != after[n]] == ["34-role-kube-system.yaml"]
    assert "the chart's Role cilium-new" in after["34-role-kube-system.yaml"]
    atoms = rbac.collect(bumped)[0]
    assert ("", "secrets", None, "watch") in atoms["kube-system"]
    # a kind the generator does not know stops it, rather than leaving helm without rights on it
    bumped[first].append({"apiVersion": "example.io/v1", "kind": "Gadget", "metadata": {"name": "x"}})
    with pytest.raises(rbac.RbacError, match="renders a Gadget"):
        rbac.collect(bumped)


def test_rules_hold_exactly_the_atoms():
    atoms = {("", "secrets", None, "get"), ("", "secrets", "a", "get"), ("", "secrets", "a", "update"),
             ("", "configmaps", None, "get"), ("apps", "daemonsets", None, "*"), ("apps", "daemonsets", None, "list"),
             ("<url>", "/healthz", None, "get")}
    assert rbac.rules(atoms) == [
        {"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["get"]},
        {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["*"]},
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a"], "verbs": ["update"]},
        {"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]


def _takeover(kube_lab, cilium_charts, kubeconfig, check=False):
    params = dict(_params(kube_lab, cilium_charts, kubeconfig=kubeconfig, accept_cilium_diff=True), wait=True,
                  wait_timeout=60.0)
    return takeover.run(params, Conn(kubeconfig), check)


def _helm_takeover(kube_lab, cilium_charts, lab, values, kubeconfig):
    """helm as the takeover runs it, as the given caller."""
    return kube_lab.helm("upgrade", "--install", "cilium", cilium_charts["1.20"]["chart"], "--namespace", "ichor-system",
                         "--create-namespace", "--take-ownership", "-f", lab.file("values.json", values),
                         kubeconfig=kubeconfig, check=False)


def test_the_api_server_refuses_helm_without_a_hubble_generate_certs_rule_and_the_whole_bundle_takes_over(
        cilium_lab, cilium_charts, kube_lab, cilium_caller):
    lab = cilium_lab(nodes=2)
    lab.helm_install("1.20", MOST)
    lab.wait_ready()
    (foreign,) = lab.records()
    planned = _takeover(kube_lab, cilium_charts, cilium_caller().kubeconfig, check=True)
    # the caller without the rule the chart's Role hubble-generate-certs grants on the certificate Secrets
    dropped = {"apiGroups": [""], "resources": ["secrets"], "resourceNames": HUBBLE_CERT_NAMES, "verbs": ["update"]}
    lacking = cilium_caller(without=[("kube-system", dropped)])
    proc = _helm_takeover(kube_lab, cilium_charts, lab, planned["values"], lacking.kubeconfig)
    assert proc.returncode != 0
    assert 'roles.rbac.authorization.k8s.io "hubble-generate-certs" is forbidden' in proc.stderr, proc.stderr
    assert "attempting to grant RBAC permissions not currently held" in proc.stderr, proc.stderr
    assert 'user "%s"' % lacking.user in proc.stderr, proc.stderr
    with pytest.raises(IchorError):
        _takeover(kube_lab, cilium_charts, lacking.kubeconfig)
    assert [s.metadata.uid for s in lab.records()] == [foreign.metadata.uid]  # the foreign record untouched
    # with the bundle's rules, all of them, the same takeover goes through (helm's failed record is superseded)
    caller = cilium_caller()
    result = _takeover(kube_lab, cilium_charts, caller.kubeconfig)
    assert result["changed"] is True
    assert lab.records("ichor-system")[-1].metadata.labels["status"] == "deployed"
    assert lab.records() == [] and result["backups"][0]["uid"] == foreign.metadata.uid
    role = lab.kube.kubectl("get", "role", "-n", "kube-system", "hubble-generate-certs", "-o",
                            "jsonpath={.metadata.annotations.meta\\.helm\\.sh/release-namespace}").stdout
    assert role == "ichor-system"


def test_a_fresh_install_creates_every_chart_role_under_the_bundles_rbac_with_take_ownership(
        cilium_lab, cilium_charts, kube_lab, cilium_caller):
    # init: no Cilium yet, so helm creates every Role and ClusterRole (each one an escalation check); the bundle made
    # the namespace cilium-secrets first (the caller's Role there needs it), so helm must adopt that one
    lab = cilium_lab(nodes=1)
    lab.apply_crds("1.20")
    values = values_mod.effective(1, MOST, values_mod.owned("replaced", "vxlan"))
    lab.render("1.20", values, namespace="ichor-system")  # what helm installs, for teardown
    caller = cilium_caller()
    args = ("install", "cilium", cilium_charts["1.20"]["chart"], "--namespace", "ichor-system", "--create-namespace",
            "-f", lab.file("values.json", values))
    refused = kube_lab.helm(*args, kubeconfig=caller.kubeconfig, check=False)
    assert refused.returncode != 0 and 'Namespace "cilium-secrets"' in refused.stderr and \
        "invalid ownership metadata" in refused.stderr, refused.stderr
    assert lab.records("ichor-system") == []
    kube_lab.helm(*(args + ("--take-ownership",)), kubeconfig=caller.kubeconfig)
    (ours,) = lab.records("ichor-system")
    assert ours.metadata.labels["status"] == "deployed"
    for kind, namespace, name in (("role", "kube-system", "hubble-generate-certs"), ("clusterrole", None, "cilium"),
                                  ("role", "cilium-secrets", "cilium-tlsinterception-secrets")):
        owner = kube_lab.kubectl("get", kind, name, *(["-n", namespace] if namespace else []), "-o",
                                 "jsonpath={.metadata.annotations.meta\\.helm\\.sh/release-namespace}").stdout
        assert owner == "ichor-system", (kind, name)


def test_a_member_of_the_group_holds_every_rule_and_nobody_else_does(kube_lab, cilium_caller):
    # an AWX credential with a client certificate of organization ichor:cilium-release, or an OIDC group of that name
    caller = cilium_caller()
    member, stranger = [rbac.GROUP, "system:authenticated"], ["system:authenticated"]
    for scope in (None, "kube-system", "ichor-system", "cilium-secrets"):
        for rule in rbac_fixtures.caller_rules(caller.docs, scope):
            assert caller.allowed(scope, rule, user="awx", groups=member, every=True), (scope, rule)
            assert caller.allowed(scope, rule, every=True), (scope, rule)
    create_roles = {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["create"]}
    assert not caller.allowed("kube-system", create_roles, user="awx", groups=stranger)
    # and nothing beyond: not in another namespace, not a verb the bundle does not name
    assert not caller.allowed("default", create_roles, user="awx", groups=member)
    assert not caller.allowed("kube-system", {"apiGroups": [""], "resources": ["secrets"], "verbs": ["deletecollection"]},
                              user="awx", groups=member)
