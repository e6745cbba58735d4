"""The Cilium inline manifest entry over real Talos-generated configs (tests/fixtures/configs/*/cilium-inline): found by
content in either form, read and rendered as gone once the cluster record says it was handed over; KubePrism as a
machine's config and Talos's KubePrismStatuses state it."""

import os

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import machines
from ansible_collections.maesh.ichor.plugins.module_utils.config import documents
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import model as rollout
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import plan, state

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "configs")


def _text(case, role):
    with open(os.path.join(CONFIGS, case, role + ".conf")) as handle:
        return handle.read()


def _machines(case):
    return [rollout.Machine(name, "10.5.0.%d" % index, role, release.TALOS, _text(case, role))
            for index, (role, name) in enumerate((("controlplane", "cp-1"), ("worker", "worker-1")), 2)]


@pytest.mark.parametrize("case,where", [("v1.14/v1.14.1/cilium-inline", "KubeInlineManifestConfig"),
                                        ("v1.13/v1.14.1/cilium-inline", "cluster.inlineManifests")])
def test_the_entry_is_found_by_content_in_either_form(case, where):
    assert machines.inline_entries(documents.parse(_text(case, "controlplane"))) == [("cilium", where)]
    assert machines.inline_entries(documents.parse(_text(case, "worker"))) == []
    # another manifest, whatever its name, is not Cilium's
    other = documents.parse(_text(case.replace("cilium-inline", "inline-other"), "controlplane"))
    assert rollout.inline_names(other) and machines.inline_entries(other) == []


@pytest.mark.parametrize("case,form", [("v1.14/v1.14.1/cilium-inline", "v1.14"), ("v1.13/v1.14.1/cilium-inline", "v1.13")])
def test_a_handed_over_entry_is_read_and_rendered_as_gone_and_makes_the_config_pending(case, form):
    kept = rollout.model(_machines(case))
    assert [(m.name, m.form, m.dropped) for m in kept.machines] == [("cp-1", form, []), ("worker-1", form, [])]
    assert [i["name"] for i in kept.cluster["inlineManifests"]] == ["cilium"]
    assert kept.cluster["cni"]["preset"] == "cilium"

    dropped = rollout.model(_machines(case), handed_over=["cilium", "not-there"])
    cp, worker = dropped.machines
    assert (cp.form, cp.dropped, worker.form, worker.dropped) == (form, ["cilium"], form, [])
    assert dropped.cluster["inlineManifests"] == []
    assert [m.name for m in rollout.config_pending(dropped)] == ["cp-1"] + (["worker-1"] if form != "v1.14" else [])
    rendered = dropped.render(cp, release.CONTRACT, cp.images)
    assert documents.find(rendered, "KubeInlineManifestConfig") is None
    assert rollout.inline_names(cp.docs) == ["cilium"]  # the live docs are what they are; only the reading differs
    # what is left once applied: the render equals the config without the entry, so the step is done
    assert dropped.drift(rendered, rollout.without_inline(rendered, ["cilium"]), release.CONTRACT).zero
    # a spec given in full that still lists the entry does not bring it back
    given = rollout.model(_machines(case), cluster={"inlineManifests": kept.cluster["inlineManifests"]},
                          handed_over=["cilium"])
    assert given.cluster["inlineManifests"] == []


def test_the_record_names_handed_over_entries_only_with_the_release():
    from ansible_collections.maesh.ichor.plugins.module_utils.k8s.cluster_record import ClusterRecord
    assert state.handed_over(None) == []
    assert state.handed_over(ClusterRecord({"cilium": {"inlineManifests": ["cilium"]}})) == []
    assert state.handed_over(ClusterRecord({"cilium": {"release": "ichor-system/cilium",
                                                       "inlineManifests": ["cilium", 3]}})) == ["cilium"]
    assert state.handed_over(ClusterRecord({"cilium": "x"})) == []


def test_the_config_step_line_names_the_entry():
    lines = plan.plan_rollout([{"name": "cp-1", "role": "controlplane", "talos": release.TALOS}], {}, release.CONTRACT,
                              None, [{"name": "cp-1", "form": release.CONTRACT, "drop": ["cilium"]}])[0]["lines"]
    assert lines == ["render the config of cp-1 again, without the inline manifest cilium (Cilium, handed over to the "
                     "Helm release) (Talos says in the step's plan whether it reboots)"]


def test_kubeprism_answers_only_enabled_on_the_port_and_healthy():
    def view(case, status):
        return machines.MachineView("cp-1", "10.5.0.2", "controlplane", _text(case, "controlplane"), status)

    healthy = {"host": "localhost:7445", "healthy": True}
    assert view("v1.14/v1.14.1/basic", healthy).kubeprism(7445) == (True, "KubePrism on cp-1: localhost:7445 healthy")
    assert view("v1.13/v1.13.9/basic", healthy).kubeprism(7445)[0] is True  # legacy machine.features.kubePrism
    assert view("v1.14/v1.14.1/basic", dict(healthy, healthy=False)).kubeprism(7445) == (
        False, "KubePrism on cp-1: localhost:7445 not healthy (no API server answers through it)")
    assert view("v1.14/v1.14.1/basic", None).kubeprism(7445)[0] is False
    assert view("v1.14/v1.14.1/kubeprism-off", healthy).kubeprism(7445) == (False, "KubePrism on cp-1: off in its config")
    off_port = view("v1.14/v1.14.1/kubeprism-port", {"host": "localhost:7446", "healthy": True})
    assert off_port.kubeprism(7445)[0] is False and off_port.kubeprism(7446)[0] is True
