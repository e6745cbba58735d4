"""The status judgements (readings in, findings out: each rule has a test that fails when it breaks), the
acknowledgement of drift, and the report."""

import random

from ansible_collections.maesh.ichor.plugins.module_utils.status import findings as f
from ansible_collections.maesh.ichor.plugins.module_utils.status import flow

NOW = 2_000_000_000.0
DAY = 86400
PARAMS = {"hold_days": 14, "expiry_days": 30, "installer_namespace": "ichor-system"}


def seen(**read):
    """What a run read: a clean cluster, but for ``read`` (readings as ``readings`` returns them)."""
    out = {"now": NOW, "record": {}, "acknowledged": [], "machines": [], "pending": [], "nodes": [],
           "release": {"set": {}, "versions": [], "steps": [], "unread": 0, "error": None, "refused": False},
           "etcd": {"controlplanes": [], "failed": [], "members": []},
           "cilium": {"release": None, "set": "1.17.1", "newest": None, "gate": None, "orphans": None},
           "installer": {"checked": False}, "credentials": []}
    out.update(read)
    return out


def row(name="w-1", **read):
    """A machine read, known to the record, that answered and does not drift."""
    out = {"name": name, "node": "10.0.0.1", "role": "worker", "source": "inventory", "talos": "v1.9.0",
           "error": None, "known": True, "drift": None, "drift_summary": "none at v1.9", "values": {},
           "unjudged": None, "held": "", "hold": None}
    out.update(read)
    return out


def member(name, **read):
    """An etcd member that answered: no errors, knows leader 1, a small database under etcd's default quota."""
    out = {"id": int(name[-1]), "name": name, "address": "10.0.0.%s" % name[-1], "known": True, "error": None,
           "leader": 1, "errors": [], "db_size": 20 * 1048576, "quota": 2048 * 1048576, "source": "etcd's default"}
    out.update(read)
    return out


def found(judgement, **read):
    """(severity, subject, what) of each finding ``judgement`` makes of ``read``."""
    return [(x["severity"], x["subject"], x["what"]) for x in judgement(seen(**read), PARAMS)]


def test_a_clean_cluster_has_nothing_to_report_and_every_judgement_is_listed_once():
    clean = seen(machines=[row()], etcd={"controlplanes": ["cp-1"], "failed": [], "members": [member("cp-1")]})
    assert f.judge(clean, PARAMS) == []
    assert len(set(f.JUDGEMENTS)) == len(f.JUDGEMENTS)


def test_a_machine_that_does_not_answer_or_that_the_record_does_not_know():
    machines = [row("w-1", error="unreachable"), row("w-2", error="unreachable", known=False), row("w-3", known=False)]
    assert found(f.unanswered, machines=machines) == [
        ("warning", "w-1", "the cluster record names it, and it does not answer: unreachable"),
        ("warning", "w-2", "does not answer: unreachable")]
    assert found(f.unknown_machines, machines=machines) == [
        ("warning", "w-3", "answers at 10.0.0.1 and the cluster record does not know it (not made by init nor "
                           "adopted)")]


def test_class_c_drift_always_needs_a_person_and_a_or_b_only_until_acknowledged():
    a = f.drift("w-1", "A", "v1alpha1:machine.sysctls.vm.max_map_count", "add")
    c = f.drift("w-1", "C", "v1alpha1:machine.install.extensions", "add")
    assert a["severity"] == c["severity"] == f.CRITICAL
    acknowledged = [a["fingerprint"], c["fingerprint"]]
    assert f.drift("w-1", "A", "v1alpha1:machine.sysctls.vm.max_map_count", "add", acknowledged)["severity"] == f.WARNING
    assert f.drift("w-1", "C", "v1alpha1:machine.install.extensions", "add", acknowledged)["severity"] == f.CRITICAL
    # the same path on another machine, or in another class, is another finding
    assert f.drift("w-2", "A", "v1alpha1:machine.sysctls.vm.max_map_count", "add")["fingerprint"] != a["fingerprint"]
    assert f.drift("w-1", "B", "v1alpha1:machine.sysctls.vm.max_map_count", "add")["fingerprint"] != a["fingerprint"]


def test_each_drifted_path_is_a_finding_with_its_value_and_a_machine_not_compared_is_a_warning():
    path = "v1alpha1:machine.sysctls.x"
    drifted = row(drift={"zero": False, "A": [{"path": path, "change": "remove"}], "B": [],
                         "C": [{"path": "v1alpha1:machine.env.Y", "change": "add"}]},
                  values={("A", path): "aaaa", ("C", "v1alpha1:machine.env.Y"): "cccc"})
    broken = row("w-2", unjudged="another cluster's config")
    made = f.drifts(seen(machines=[drifted, broken]), PARAMS)
    assert [(x["severity"], x["subject"], x["what"]) for x in made] == [
        ("critical", "w-1", "class A drift: remove %s" % path), ("critical", "w-1", "class C drift: add "
                                                                                    "v1alpha1:machine.env.Y"),
        ("warning", "w-2", "its drift could not be judged: another cluster's config")]
    assert made[0] == f.drift("w-1", "A", path, "remove", value="aaaa")
    # acknowledged with that value: a warning; the class C path is critical all the same
    assert found(f.drifts, machines=[drifted], acknowledged=[made[0]["fingerprint"], made[1]["fingerprint"]]) == [
        ("warning", "w-1", "class A drift: remove %s (acknowledged)" % path),
        ("critical", "w-1", "class C drift: add v1alpha1:machine.env.Y")]


def test_the_release_position_and_when_it_is_a_finding():
    def judged(machines=(), **release):
        read = dict(seen()["release"], **release)
        return f.position(seen(release=read, machines=list(machines))), found(f.release_position, release=read,
                                                                              machines=list(machines))
    assert judged() == ("up to date", [])
    assert judged(steps=["talos", "cilium"]) == ("behind: next step talos", [
        ("info", "release set", "behind the release set: the next step is talos (maesh.ichor.upgrade)")])
    assert judged(unread=2) == ("not judged: 2 machine(s) not read", [])
    assert judged(error="no contract's form") == ("not judged: no contract's form", [
        ("warning", "release set", "not judged: no contract's form")])
    # a machine that drifts is why: its drift is the finding; a refusal is one all the same
    drifting = [row(drift={"zero": False, "A": [], "B": [], "C": []}), row("w-2", drift={"zero": True})]
    assert judged(drifting, error="no contract's form") == (
        "not judged: w-1 drift from the spec in the cluster record", [])
    assert judged(drifting, error="newer than the set", refused=True) == ("refused: newer than the set", [
        ("warning", "release set", "refused: newer than the set")])


def held(since, counted_from=None, reason="class B needs consent"):
    return row("cp-2", held=reason, hold={"since": since, "counted_from": counted_from})


def test_a_hold_needs_a_person_only_once_it_is_older_than_the_limit_and_its_fingerprint_does_not_age():
    recent, old, unknown = f.holds(seen(machines=[held(NOW - 2 * DAY), held(NOW - 15 * DAY), held(None), row()]),
                                   PARAMS)
    assert (recent["severity"], old["severity"], unknown["severity"]) == (f.WARNING, f.CRITICAL, f.WARNING)
    assert recent["fingerprint"] == old["fingerprint"] == unknown["fingerprint"]
    assert "longer than ichor_status_hold_days (14)" in old["what"]
    assert "since an unknown time" in unknown["what"]


def test_a_hold_counts_from_its_own_start_and_says_so_when_it_counts_from_the_adoption():
    (own,) = found(f.holds, machines=[held(NOW - DAY)])
    assert own == ("warning", "cp-2", "held (class B needs consent); for 1.0 days")
    adoption = "the adoption at 2033-03-19T03:33:20Z: the cluster record keeps no start for this hold"
    ((severity, unused, what),) = found(f.holds, machines=[held(NOW - 60 * DAY, adoption)])
    assert severity == f.CRITICAL and what.endswith("(counted from %s)" % adoption)


def test_a_pending_machine_is_information_named_by_its_address_else_its_uuid():
    pending = [{"uuid": "u-1", "address": "127.0.0.9", "since": "x", "at": NOW - 3 * DAY},
               {"uuid": "u-2", "address": None, "since": None, "at": None}]
    assert found(f.pending, pending=pending) == [
        ("info", "127.0.0.9", "pending (registered by reclaim, 3.0 days ago); join it with maesh.ichor.init"),
        ("info", "u-2", "pending (registered by reclaim); join it with maesh.ichor.init")]


def test_a_node_is_a_stranger_unless_the_record_or_a_machine_read_knows_its_name_or_an_address():
    record = {"nodes": {"cp-1": {"node": "10.0.0.5"}}}
    known = (("cp-1", []), ("w-1", []), ("host-5", ["10.0.0.5"]), ("host-1", ["10.0.0.1"]), ("stranger", ["10.9.9.9"]))
    nodes = [{"name": n, "addresses": a} for n, a in known]
    assert found(f.unknown_nodes, record=record, machines=[row()], nodes=nodes) == [
        ("warning", "stranger", "a Node the cluster runs that the cluster record does not know (not made by init nor "
                                "adopted)")]


def test_etcd_not_read_control_planes_that_are_no_member_and_members_that_are_no_machine():
    assert found(f.etcd_unread, etcd={"controlplanes": [], "failed": [], "members": None}) == [
        ("critical", "etcd", "no control plane answered: etcd was not read")]
    assert found(f.etcd_unread, etcd={"controlplanes": ["cp-1"], "failed": ["cp-1: refused"], "members": None}) == [
        ("critical", "etcd", "etcd does not answer on any control plane (cp-1: refused)")]
    etcd = {"controlplanes": ["cp-1", "cp-2", "cp-3"], "failed": [],
            "members": [member("cp-1"), member("cp-9", known=False, address=None)]}
    assert found(f.missing_members, etcd=etcd) == [
        ("critical", name, "a control plane that is no etcd member: etcd has 2 member(s) for 3 control planes")
        for name in ("cp-2", "cp-3")]
    assert found(f.extra_members, etcd=etcd) == [
        ("warning", "cp-9", "an etcd member at no address that is no machine read here (not in the inventory nor the "
                            "cluster record)")]


def test_etcd_members_that_do_not_answer_report_errors_or_know_no_leader():
    members = [member("cp-1", errors=[f.NO_LEADER]), member("cp-2", errors=[f.NO_LEADER, "memberID:2 alarm:NOSPACE "]),
               member("cp-3", error="unreachable")]
    etcd = {"controlplanes": [], "failed": [], "members": members}
    assert found(f.silent_members, etcd=etcd) == [("critical", "cp-3", "etcd member does not answer: unreachable")]
    # etcd's own no-leader error is no member's error: it is the one no-leader finding
    assert found(f.member_errors, etcd=etcd) == [("critical", "cp-2", "etcd member reports errors: memberID:2 "
                                                                      "alarm:NOSPACE ")]
    assert found(f.no_leader, etcd=etcd) == []
    for m in members:
        m["leader"] = 0
    assert found(f.no_leader, etcd=etcd) == [
        ("critical", "etcd", "no leader: none of the 2 member(s) that answered (cp-1, cp-2) knows one, so etcd takes "
                             "no write; check the control planes' etcd (talosctl etcd status, talosctl logs etcd)")]
    assert found(f.no_leader, etcd=dict(etcd, members=members[2:])) == []  # none answered: nothing known of a leader


def test_a_database_needs_a_person_from_80_percent_of_its_quota_and_never_without_one():
    mib = 1048576
    quota = "quota-backend-bytes of cp-1's config"
    members = [member("cp-1", db_size=80 * mib, quota=100 * mib, source=quota),
               member("cp-2", db_size=79 * mib, quota=100 * mib), member("cp-3", db_size=10 ** 12, quota=None),
               member("cp-4", db_size=10 ** 12, quota=-1), member("cp-5", db_size=10 ** 12, error="unreachable")]
    assert found(f.databases, etcd={"controlplanes": [], "failed": [], "members": members}) == [
        ("critical", "cp-1", "database 80.0 MiB of its 100 MiB quota (%s): over 80 %%; defragment it (talosctl etcd "
                             "defrag) or raise the quota" % quota)]


def cilium(**read):
    out = dict(seen()["cilium"], release="ichor-system/cilium")
    out.update(read)
    return out


def deployed(**read):
    out = {"state": "deployed", "chart": "1.17.1", "revision": 3, "ref": "ichor-system/sh.helm.release.v1.cilium.v3"}
    out.update(read)
    return out


def test_the_cilium_release_needs_a_person_unless_helm_knows_it_deployed():
    assert found(f.cilium_release, cilium=cilium(release=None)) == []
    assert found(f.cilium_release, cilium=cilium(newest=deployed())) == []
    for newest, wanted in ((None, ("critical", "the Helm release the cluster record names has no record: Helm no "
                                               "longer knows it")),
                           ({"error": "not a release"}, ("critical", "its newest Helm record cannot be read: not a "
                                                                     "release")),
                           (deployed(state="failed"), ("critical", "Helm release revision 3 is failed, not deployed; "
                                                       "maesh.ichor.upgrade (the cilium step) or helm history tells "
                                                       "why")),
                           (deployed(chart="1.16.0"), ("info", "chart 1.16.0 runs; the release set's is 1.17.1"))):
        assert found(f.cilium_release, cilium=cilium(newest=newest)) == [(wanted[0], "ichor-system/cilium", wanted[1])]


def test_the_diff_gate_names_each_object_changed_by_hand_and_its_paths_and_orphans_are_warnings():
    paths = ["p%d (change)" % i for i in range(7)]
    gate = {"objects": 9, "changed": [{"object": "DaemonSet kube-system/cilium", "paths": paths}]}
    assert found(f.cilium_gate, cilium=cilium(newest=deployed(), gate=gate)) == [
        ("warning", "DaemonSet kube-system/cilium", "differs from what revision 3 of the release renders: p0 (change), "
         "p1 (change), p2 (change), p3 (change), p4 (change) (+2 more); undo the edit, or make it a value of the "
         "release so that Helm applies it")]
    assert found(f.cilium_gate, cilium=cilium(newest=deployed(), gate={"error": "no API"})) == [
        ("warning", "ichor-system/sh.helm.release.v1.cilium.v3", "its objects could not be compared: no API")]
    orphans = [{"object": "ConfigMap kube-system/a", "release": "kube-system/cilium"},
               {"object": "ConfigMap kube-system/b", "release": None}]
    assert found(f.orphans, cilium=cilium(orphans=orphans)) == [
        ("warning", "ConfigMap kube-system/a", "owned by no release: the Cilium release kube-system/cilium made it and "
                                               "the takeover kept it; delete it once nothing needs it"),
        ("warning", "ConfigMap kube-system/b", "owned by no release: the Cilium release before the takeover made it and "
                                               "the takeover kept it; delete it once nothing needs it")]


def test_the_bundle_not_installed_an_object_deleted_or_changed_out_of_band_and_one_not_installed_yet():
    assert found(f.installer, installer={"checked": True, "installed": False}) == [
        ("warning", "ichor-system", "the collection's bundle is not installed (no installer inventory); "
                                    "maesh.ichor.install installs it")]
    read = {"checked": True, "installed": True, "objects": 3,
            "missing": [{"object": "Role a/gone", "installed": True}, {"object": "Role a/new", "installed": False}],
            "changed": [{"object": "Role a/b", "paths": ["rules[0].verbs"]}]}
    assert found(f.installer, installer=read) == [
        ("warning", "Role a/gone", "missing: deleted out of band; maesh.ichor.install puts it back"),
        ("info", "Role a/new", "new in this collection's bundle, not installed yet; maesh.ichor.install installs it"),
        ("warning", "Role a/b", "changed out of band at rules[0].verbs; maesh.ichor.install puts back what the bundle "
                                "ships")]


def test_a_certificate_needs_a_person_within_the_expiry_days_or_once_ended_and_says_how_to_renew_it():
    def certificate(subject, kind, end, unread=None):
        return {"subject": subject, "kind": kind, "end": end, "unread": unread}
    read = [certificate("talosconfig client certificate", "talosconfig", NOW + 40 * DAY),
            certificate("Talos CA", "ca", NOW + 10 * DAY), certificate("etcd CA", "ca", NOW - DAY),
            certificate("kubeconfig client certificate", "kubeconfig", None, "its file cannot be read"),
            certificate("Kubernetes CA", "ca", None)]
    assert found(f.credentials, credentials=read) == [
        ("critical", "Talos CA", "expires in 10.0 days (ichor_status_expiry_days 30); " + f.RENEW["ca"]),
        ("critical", "etcd CA", "expired 1.0 days ago; " + f.RENEW["ca"]),
        ("warning", "kubeconfig client certificate", "not judged: its file cannot be read")]
    assert found(f.credentials, credentials=read[:1], now=NOW + 39 * DAY)[0][2].endswith(f.RENEW["talosconfig"])


def test_the_order_and_summary_put_the_most_severe_first_whatever_order_they_came_in():
    rng = random.Random(3001)
    made = [f.finding(rng.choice(f.SEVERITIES), rng.choice(f.AREAS), "s%d" % rng.randrange(5), "w%d" % i)
            for i in range(40)]
    for unused in range(20):
        rng.shuffle(made)
        ranked = f.ordered(made)
        assert [f.SEVERITIES.index(x["severity"]) for x in ranked] == sorted(f.SEVERITIES.index(x["severity"])
                                                                             for x in made)
        assert ranked == f.ordered(list(reversed(made)))
    lines = f.summary(made)
    assert lines[0].startswith("status: a person is needed" if f.needs_person(made) else "status: nothing needs")
    assert len(lines) == len(made) + 1
    assert f.summary([]) == ["status: nothing to report (0 critical, 0 warning, 0 info)"]


def test_the_report_states_every_finding_and_machine_and_escapes_table_cells():
    status = {"cluster": "lab", "at": "2033-05-18T03:33:20Z", "needs_person": True,
              "release": {"position": "behind: next step talos",
                          "versions": [{"component": "Talos", "running": "v1.13.9", "target": "v1.14.5",
                                        "state": "Behind"}]},
              "findings": [f.finding(f.CRITICAL, "etcd", "cp-3", "a control plane that is no etcd member"),
                           f.finding(f.WARNING, "machines", "w|1", "odd | name")],
              "machines": [{"name": "cp-3", "node": "10.0.0.3", "role": "controlplane", "talos": "v1.13.9",
                            "drift_summary": "none at v1.13", "held": ""}],
              "etcd": {"members": ["cp-1", "cp-2"], "controlplanes": ["cp-1", "cp-2", "cp-3"], "leader": "cp-1",
                       "db": "20.0 MiB of 2048 MiB"},
              "credentials": [{"subject": "Talos CA", "ends": "2036-01-01T00:00:00Z"}]}
    text = f.markdown(status)
    assert "| critical | etcd | cp-3 | a control plane that is no etcd member |" in text
    assert "| warning | machines | w\\|1 | odd \\| name |" in text
    assert "| Talos | v1.13.9 | v1.14.5 | Behind |" in text and "Position: behind: next step talos" in text
    assert "| cp-3 | 10.0.0.3 | controlplane | v1.13.9 | none at v1.13 |  |" in text
    assert "Leader: cp-1" in text and "| Talos CA | 2036-01-01T00:00:00Z |" in text
    status["findings"] = []
    assert "Nothing to report." in f.markdown(status)


def test_only_class_a_or_b_drift_can_be_acknowledged_and_then_it_is_a_warning():
    a, c = f.drift("w-1", "A", "v1alpha1:machine.sysctls.x", "add"), f.drift("w-1", "C", "v1alpha1:machine.y", "add")
    (hold,) = f.holds(seen(machines=[held(0)]), PARAMS)
    assert [f.acknowledgeable(x) for x in (a, c, hold)] == [True, False, False]
    f.acknowledge(a)
    assert a["severity"] == f.WARNING and a["what"].endswith(" (acknowledged)")
    f.acknowledge(a)  # once only
    assert a["what"].count("(acknowledged)") == 1


def test_the_acknowledgement_token_is_the_set_of_fingerprints_whatever_their_order():
    prints = ["%016x" % i for i in range(5)]
    assert f.acknowledgement_token(prints) == f.acknowledgement_token(list(reversed(prints)) + prints[:1])
    assert f.acknowledgement_token(prints) != f.acknowledgement_token(prints[1:])
    assert len(f.acknowledgement_token([])) == 16


def test_acknowledge_takes_a_token_true_only_in_check_mode_and_says_why_in_one_line():
    from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
    asked = flow._acknowledge_asked  # pylint: disable=protected-access
    assert [asked(v, False) for v in ("", None, False, "false", "No")] == [None] * 5
    assert asked(True, True) is True and asked("0123456789ABCDEF", False) == "0123456789abcdef"
    for value, check_mode, starts in ((True, False, "ichor_status_acknowledge=true would record whatever"),
                                      ("yes", False, "ichor_status_acknowledge=true would record whatever"),
                                      ("0123", True, "ichor_status_acknowledge is neither false nor a token")):
        try:
            asked(value, check_mode)
        except IchorError as exc:
            assert str(exc).startswith(starts) and "\n" not in str(exc)
        else:
            raise AssertionError(value)


def test_adopt_records_when_each_hold_began_and_keeps_it_while_held():
    from ansible_collections.maesh.ichor.plugins.module_utils.adopt import write
    machines = [{"name": n, "reason": "r", "uuid": "u-" + n, "node": "10.0.0.%d" % i, "role": "worker", "spec": {}}
                for i, n in enumerate(("w-1", "w-2"))]
    result = {"record": {"detected": {}}, "cluster_spec": {}, "contract": "v1.14", "cni": {"mode": "cilium"},
              "machines": machines[:1]}
    old = {"cluster": {"name": "c"}, "adoption": {"adopted": True, "at": "2030-01-01T00:00:00Z"},
           "nodes": {}, "held": {}}
    write._record(old, result)  # pylint: disable=protected-access
    first = old["heldSince"]["w-1"]
    assert list(old["held"]) == ["w-1"] and first != "2030-01-01T00:00:00Z"
    old["heldSince"]["w-1"] = "2030-02-01T00:00:00Z"  # as an earlier run wrote it
    old["held"].pop("w-1")  # released
    write._record(old, dict(result, machines=machines))  # pylint: disable=protected-access
    assert list(old["held"]) == ["w-2"] and list(old["heldSince"]) == ["w-2"]  # released: its start went with it
    # a record an earlier adopt wrote (holds, no starts) is left as it is
    earlier = {"cluster": {"name": "c"}, "adoption": {"adopted": True}, "nodes": {"w-1": {}}, "held": {"w-1": "r"}}
    write._record(earlier, dict(result, machines=machines[:1]))  # pylint: disable=protected-access
    assert "heldSince" not in earlier
