"""rollout.plan (the rollout's gates), the edges mutation testing found untested (issue 43, scripts/mutation): a newer
contract and a newer Cilium refused by the plan itself, the Talos floor at its own minor, each refusal and the whole
plan in full, the lowest version by its numbers, an unmanaged Cilium not judged, the record's contract."""

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import plan


def _shift(version, minors, patch=None, v="v"):
    """The version ``minors`` minors from ``version`` (negative: behind), at ``patch`` (default: its own)."""
    major, minor, own = release.parse(version)
    return "%s%d.%d.%d" % (v, major, minor + minors, own if patch is None else patch)


TALOS_BEHIND = _shift(release.TALOS, -1, 9)
KUBE_BEHIND = _shift(release.KUBERNETES, -1, 4)
CILIUM_BEHIND = _shift(release.CILIUM, -1, 3, v="")
CONTRACT_BEHIND = "v%d.%d" % release.minor(_shift(release.CONTRACT, -1))
INSTALLER = release.installer_image()


def _machine(name, role, talos, node="10.0.0.9"):
    return {"name": name, "node": node, "role": role, "talos": talos}


def _refused(*args):
    with pytest.raises(plan.Refused) as info:
        plan.plan_rollout(*args)
    return str(info.value)


def test_the_whole_plan_in_order_in_full():
    machines = [_machine("w-1", "worker", TALOS_BEHIND, "10.0.0.5"), _machine("cp-1", "controlplane", TALOS_BEHIND, "10.0.0.1"),
                _machine("cp-2", "controlplane", release.TALOS, "10.0.0.2")]
    # the lowest Kubernetes by its numbers: .4 below .10
    kubernetes = {"cp-1 kube-apiserver": KUBE_BEHIND, "w-1 kubelet": _shift(KUBE_BEHIND, 0, 10)}
    pending = [{"name": "cp-1", "form": CONTRACT_BEHIND}, {"name": "w-1", "form": release.CONTRACT, "drop": ["cilium", "x"]}]
    cni = {"name": "cilium", "version": CILIUM_BEHIND}
    reboots = " (Talos says in the step's plan whether it reboots)"
    assert plan.plan_rollout(machines, kubernetes, CONTRACT_BEHIND, cni, pending) == [
        {"step": "talos", "machines": ["cp-1", "w-1"], "lines": [
            "cp-1 (10.0.0.1): upgrade Talos from %s to %s with %s, reboot, wait for it, its etcd member and its Node"
            % (TALOS_BEHIND, release.TALOS, INSTALLER),
            "w-1 (10.0.0.5): upgrade Talos from %s to %s with %s, reboot, wait for it and its Node"
            % (TALOS_BEHIND, release.TALOS, INSTALLER),
            "then record the version contract %s (it moves with Talos)" % release.CONTRACT]},
        {"step": "config", "machines": ["cp-1", "w-1"], "lines": [
            "move the config of cp-1 from the %s form to %s" % (CONTRACT_BEHIND, release.CONTRACT) + reboots,
            "render the config of w-1 again, without the inline manifest cilium, x (Cilium, handed over to the Helm "
            "release)" + reboots]},
        {"step": "kubernetes", "machines": ["cp-1", "cp-2", "w-1"], "lines": [
            "upgrade the Kubernetes control plane on cp-1 from %s to %s (no reboot)" % (KUBE_BEHIND, release.KUBERNETES),
            "upgrade the Kubernetes control plane on cp-2 from %s to %s (no reboot)" % (KUBE_BEHIND, release.KUBERNETES),
            "upgrade kube-proxy to %s" % release.KUBERNETES,
            "upgrade the kubelets of every machine to %s (no reboot)" % release.KUBERNETES]},
        {"step": "cilium", "machines": [], "lines": [
            "upgrade the Cilium release from %s to chart %s" % (CILIUM_BEHIND, release.CILIUM)]}]


def test_the_versions_table_and_its_text_in_full():
    cni = {"name": "cilium", "version": CILIUM_BEHIND}
    rows = plan.versions_table([_machine("a", "worker", TALOS_BEHIND)], release.KUBERNETES, _shift(release.CONTRACT, 1),
                               cni)
    assert rows == [
        {"component": "Talos", "running": TALOS_BEHIND, "target": release.TALOS, "state": "Behind"},
        {"component": "Version contract", "running": _shift(release.CONTRACT, 1), "target": release.CONTRACT,
         "state": "Newer"},
        {"component": "Kubernetes", "running": release.KUBERNETES, "target": release.KUBERNETES, "state": "Up to date"},
        {"component": "Cilium", "running": CILIUM_BEHIND, "target": release.CILIUM, "state": "Behind"}]
    widths = [max(len(str(r[k])) for r in rows + [dict(component="Component", running="Running", target="Target")])
              for k in ("component", "running", "target")]
    assert plan.format_table(rows) == ["%-*s  %-*s  %-*s  %s" % (widths[0], r["component"], widths[1], r["running"],
                                                                 widths[2], r["target"], r["state"])
                                       for r in [dict(component="Component", running="Running", target="Target",
                                                      state="State")] + rows]
    assert plan.format_table(rows)[0].startswith("Component         Running")


def test_the_newer_than_the_set_refusals_in_full_and_in_the_plan_too():
    newer_contract = "v%d.%d" % release.minor(_shift(release.CONTRACT, 1))
    newer_cilium = _shift(release.CILIUM, 1, v="")
    refusals = [
        (([_machine("a", "worker", _shift(release.TALOS, 1))], {}, None, None),
         "Talos on a is %s, newer than the release set's %s; this collection cannot manage it"
         % (_shift(release.TALOS, 1), release.TALOS)),
        (([], {"x": _shift(release.KUBERNETES, 1)}, None, None),
         "Kubernetes (x) is %s, newer than the release set's %s; this collection cannot manage it"
         % (_shift(release.KUBERNETES, 1), release.KUBERNETES)),
        (([], {}, newer_contract, None),
         "the version contract is %s, newer than the release set's %s" % (newer_contract, release.CONTRACT)),
        (([], {}, None, {"name": "cilium", "version": newer_cilium}),
         "Cilium is %s, newer than the release set's chart %s; this collection cannot manage it"
         % (newer_cilium, release.CILIUM)),
    ]
    for args, text in refusals:
        with pytest.raises(plan.Refused) as info:
            plan.check_not_newer(*args)
        assert str(info.value) == text
        assert _refused(*args) == text
    # an unmanaged Cilium is not the rollout's to judge
    plan.check_not_newer([], {}, None, {"name": "cilium", "version": newer_cilium, "unmanaged": True})


def test_the_talos_floor_holds_its_own_minor():
    floor = "v%d.%d.7" % release.MINIMUM_TALOS
    below = _shift(floor, -1, 3)
    assert plan.plan_rollout([_machine("a", "worker", floor, "n")], {}, None)[0]["step"] == "talos"
    assert _refused([_machine("a", "worker", below, "n")], {}, None) == (
        "Talos on a is %s; this collection manages Talos v%d.%d or later: upgrade Talos first"
        % (below, release.MINIMUM_TALOS[0], release.MINIMUM_TALOS[1]))


def test_the_one_minor_refusals_in_full():
    machines = [_machine("a", "worker", release.TALOS, "n")]
    low, high = release.TALOS_KUBERNETES[release.minor(release.TALOS)]
    unsupported = "v%d.%d.1" % (low[0], low[1] - 1)
    assert _refused(machines, {"x": unsupported}, None) == (
        "Kubernetes %s is not supported by Talos %s (it supports %s to %s); upgrade Kubernetes to %s first with the tool "
        "that manages it" % (unsupported, release.TALOS, release.fmt_minor(low), release.fmt_minor(high),
                             release.fmt_minor(low)))
    two_behind = _shift(release.KUBERNETES, -2, 1)
    if release.talos_supports(release.TALOS, two_behind):
        assert _refused(machines, {"x": two_behind}, None) == (
            "Kubernetes %s is more than one minor behind the release set's %s; Kubernetes moves one minor at a time: "
            "bring it to %s first" % (two_behind, release.KUBERNETES,
                                      release.fmt_minor(release.minor(_shift(release.KUBERNETES, -1)))))
    cilium = _shift(release.CILIUM, -2, 2, v="")
    assert _refused(machines, {}, None, {"name": "cilium", "version": cilium}) == (
        "Cilium %s is more than one minor behind the chart %s; Cilium moves one minor at a time: upgrade it to %s first "
        "with the tool that installed it" % (cilium, release.CILIUM,
                                             release.fmt_minor(release.minor(_shift(release.CILIUM, -1)))))


def test_lowest_is_by_numbers_and_none_without_a_version():
    assert plan.lowest([_shift(KUBE_BEHIND, 0, 10), KUBE_BEHIND, None]) == KUBE_BEHIND
    assert plan.lowest([None, ""]) is None


def test_the_record_behind_takes_the_sets_contract_with_the_sets_talos():
    machines = [_machine("a", "worker", release.TALOS)]
    stored = {"talos": TALOS_BEHIND, "contract": CONTRACT_BEHIND, "kubernetes": release.KUBERNETES}
    assert plan.record_behind(stored, machines, release.KUBERNETES) == {"talos": release.TALOS,
                                                                        "contract": release.CONTRACT}
    assert plan.record_behind(dict(stored, contract=release.CONTRACT), machines, release.KUBERNETES) == {
        "talos": release.TALOS}


def test_the_table_text_in_full_each_column_its_own_width():
    rows = [{"component": "Talos", "running": "a-long-running", "target": "t", "state": "Behind"}]
    assert plan.format_table(rows) == ["Component  Running         Target  State",
                                       "Talos      a-long-running  t       Behind"]


def test_control_planes_go_first_whatever_their_names():
    machines = [_machine("a-worker", "worker", TALOS_BEHIND), _machine("b-cp", "controlplane", TALOS_BEHIND)]
    assert plan.plan_rollout(machines, {}, None)[0]["machines"] == ["b-cp", "a-worker"]


def test_a_short_running_version_is_padded_to_its_own_column():
    rows = [{"component": "Talos", "running": "r", "target": "a-long-target", "state": "Behind"}]
    assert plan.format_table(rows)[1] == "Talos      r        a-long-target  Behind"
