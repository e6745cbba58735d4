"""The status findings: severities, the rules that make one need a person, fingerprints, and the report."""

import random

from ansible_collections.maesh.ichor.plugins.module_utils.status import findings as f
from ansible_collections.maesh.ichor.plugins.module_utils.status import flow

NOW = 2_000_000_000.0
DAY = 86400


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


def test_a_hold_needs_a_person_only_once_it_is_older_than_the_limit_and_its_fingerprint_does_not_age():
    recent = f.held("cp-2", "class B needs consent", NOW - 2 * DAY, NOW, 14)
    old = f.held("cp-2", "class B needs consent", NOW - 15 * DAY, NOW, 14)
    unknown = f.held("cp-2", "class B needs consent", None, NOW, 14)
    assert (recent["severity"], old["severity"], unknown["severity"]) == (f.WARNING, f.CRITICAL, f.WARNING)
    assert recent["fingerprint"] == old["fingerprint"] == unknown["fingerprint"]
    assert "longer than ichor_status_hold_days (14)" in old["what"]


def test_a_certificate_needs_a_person_within_the_expiry_days_or_once_ended():
    assert f.expiring("Talos CA", NOW + 40 * DAY, NOW, 30, "rotate it") is None
    soon = f.expiring("Talos CA", NOW + 10 * DAY, NOW, 30, "rotate it")
    ended = f.expiring("Talos CA", NOW - DAY, NOW, 30, "rotate it")
    assert soon["severity"] == ended["severity"] == f.CRITICAL
    assert soon["what"] == "expires in 10.0 days (ichor_status_expiry_days 30); rotate it"
    assert ended["what"].startswith("expired 1.0 days ago")


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
    held = f.held("w-1", "class B needs consent", 0, 20 * f.DAY, 14)
    assert [f.acknowledgeable(x) for x in (a, c, held)] == [True, False, False]
    f.acknowledge(a)
    assert a["severity"] == f.WARNING and a["what"].endswith(" (acknowledged)")
    f.acknowledge(a)  # once only
    assert a["what"].count("(acknowledged)") == 1


class _Secrets:
    """A Kubernetes client that holds one Helm record Secret, whose release data is not a release."""

    def list(self, api_version, kind, namespace, label_selector=None):
        return [{"metadata": {"name": "sh.helm.release.v1.cilium.v1", "namespace": namespace,
                              "labels": {"owner": "helm", "name": "cilium", "status": "deployed", "version": "1"}},
                 "data": {"release": "bm90IGEgcmVsZWFzZQ=="}}]


def test_an_unreadable_helm_record_is_a_finding_not_a_failure():
    found = []
    out = flow._cilium(_Secrets(), {"cilium": {"release": "ichor-system/cilium"}}, found)  # pylint: disable=protected-access
    assert out["managed"] is True and out["state"] is None
    assert [(x["severity"], x["subject"]) for x in found] == [("critical", "ichor-system/cilium")]
    assert found[0]["what"].startswith("its newest Helm record cannot be read: ")


def test_a_new_value_at_an_acknowledged_path_is_a_new_finding_and_the_digest_is_keyed_not_the_value():
    key, other_key = b"k" * 32, b"o" * 32
    path = "v1alpha1:machine.sysctls.vm.max_map_count"
    seen = f.drift("w-1", "A", path, "remove", value=f.value_digest(key, "262144"))
    acknowledged = [seen["fingerprint"]]
    assert f.drift("w-1", "A", path, "remove", acknowledged, f.value_digest(key, "262144"))["severity"] == f.WARNING
    changed = f.drift("w-1", "A", path, "remove", acknowledged, f.value_digest(key, "524288"))
    assert changed["severity"] == f.CRITICAL and "(acknowledged)" not in changed["what"]
    # the digest is keyed: the same value under another cluster's key is another digest, and the value is in neither
    assert f.value_digest(key, "hunter2") != f.value_digest(other_key, "hunter2")
    assert "hunter2" not in f.value_digest(key, "hunter2") and len(f.value_digest(key, {"a": [1]})) == 16
    assert f.value_digest(key, {"a": 1, "b": 2}) == f.value_digest(key, {"b": 2, "a": 1})
    assert f.value_digest(key, None) != f.value_digest(key, "")


def test_the_acknowledgement_token_is_the_set_of_fingerprints_whatever_their_order():
    prints = ["%016x" % i for i in range(5)]
    assert f.acknowledgement_token(prints) == f.acknowledgement_token(list(reversed(prints)) + prints[:1])
    assert f.acknowledgement_token(prints) != f.acknowledgement_token(prints[1:])
    assert len(f.acknowledgement_token([])) == 16


def test_a_hold_counts_from_its_own_start_and_says_so_when_it_counts_from_the_adoption():
    own = f.held("cp-2", "class B needs consent", NOW - DAY, NOW, 14)
    assert own["what"] == "held (class B needs consent); for 1.0 days" and own["severity"] == f.WARNING
    fallback = f.held("cp-2", "class B needs consent", NOW - 60 * DAY, NOW, 14,
                      "the adoption at 2033-03-19T03:33:20Z: the cluster record keeps no start for this hold")
    assert fallback["severity"] == f.CRITICAL and fallback["what"].endswith(
        "(counted from the adoption at 2033-03-19T03:33:20Z: the cluster record keeps no start for this hold)")
    assert own["fingerprint"] == fallback["fingerprint"]
    assert "since an unknown time" in f.held("cp-2", "r", None, NOW, 14)["what"]


def test_etcd_judgements_no_leader_errors_without_etcds_own_no_leader_and_the_database_against_its_quota():
    assert f.member_errors("cp-1", [f.NO_LEADER]) is None and f.member_errors("cp-1", []) is None
    alarm = f.member_errors("cp-1", [f.NO_LEADER, "memberID:7 alarm:NOSPACE "])
    assert alarm["severity"] == f.CRITICAL and alarm["what"] == "etcd member reports errors: memberID:7 alarm:NOSPACE "
    lost = f.no_leader(["cp-2", "cp-1"])
    assert lost["severity"] == f.CRITICAL and lost["what"].startswith("no leader: none of the 2 member(s) that "
                                                                      "answered (cp-1, cp-2) knows one")
    mib = 1024 * 1024
    assert f.database("cp-1", 79 * mib, 100 * mib, "q") is None
    full = f.database("cp-1", 80 * mib, 100 * mib, "quota-backend-bytes of cp-1's config")
    assert full["what"].startswith("database 80.0 MiB of its 100 MiB quota (quota-backend-bytes of cp-1's config)")
    assert f.database("cp-1", 10 ** 12, None, "no quota") is None and f.database("cp-1", 10, -1, "off") is None
    assert f.extra_member("cp-9", "10.0.0.9")["severity"] == f.WARNING


class _Members:
    """A Talos client whose etcd lists three members (one at an address no machine read here has): ``statuses``
    by address (a dict of EtcdMemberStatus fields, or an exception)."""

    def __init__(self, statuses):
        self.statuses = statuses
        self.asked = []

    def call(self, name, node=None):
        from types import SimpleNamespace as NS
        self.asked.append((name, node))
        if name == "EtcdMemberList":
            members = [NS(id=i, hostname="cp-%d" % i, client_urls=["https://10.0.0.%d:2379" % i], peer_urls=[])
                       for i in (1, 2, 3)]
            return NS(messages=[NS(members=members)])
        status = self.statuses[node]
        if isinstance(status, Exception):
            raise status
        fields = dict(leader=1, errors=[], db_size=20 * 1024 * 1024)
        fields.update(status)
        return NS(messages=[NS(member_status=NS(**fields))])


def _cp(n, quota=None):
    from ansible_collections.maesh.ichor.plugins.module_utils.config import documents
    cluster = {"etcd": {"extraArgs": {"quota-backend-bytes": quota}}} if quota is not None else {}
    return {"name": "cp-%d" % n, "node": "10.0.0.%d" % n, "role": "controlplane", "error": None,
            "docs": [documents.legacy({"version": "v1alpha1", "cluster": cluster})]}


def test_every_etcd_member_is_health_checked_a_missing_leader_is_critical_and_the_quota_is_the_clusters():
    from ansible_collections.maesh.ichor.plugins.module_utils.talos.errors import TalosError
    mib = 1024 * 1024
    # cp-3 is no machine read here: it is checked all the same, through a control plane
    talos = _Members({"10.0.0.1": {}, "10.0.0.2": {}, "10.0.0.3": {"errors": ["memberID:3 alarm:CORRUPT "]}})
    found = []
    out = flow._etcd(talos, [_cp(1), _cp(2)], found)  # pylint: disable=protected-access
    assert ("EtcdStatus", "10.0.0.3") in talos.asked and out["leader"] == "cp-1" and out["healthy"] == ["cp-1", "cp-2"]
    assert sorted((x["severity"], x["subject"], x["what"][:30]) for x in found) == [
        ("critical", "cp-3", "etcd member reports errors: me"), ("warning", "cp-3", "an etcd member at 10.0.0.3 tha")]
    # no member knows a leader: one critical finding, not one per member
    found = []
    lost = dict((a, {"leader": 0, "errors": [f.NO_LEADER]}) for a in ("10.0.0.1", "10.0.0.2", "10.0.0.3"))
    lost["10.0.0.3"] = TalosError("unreachable")
    out = flow._etcd(_Members(lost), [_cp(1), _cp(2), _cp(3)], found)  # pylint: disable=protected-access
    assert sorted((x["subject"], x["what"]) for x in found) == [
        ("cp-3", "etcd member does not answer: unreachable"),
        ("etcd", "no leader: none of the 2 member(s) that answered (cp-1, cp-2) knows one, so etcd takes no write; "
                 "check the control planes' etcd (talosctl etcd status, talosctl logs etcd)")] and out["leader"] is None
    # the quota is the member's config's: 90 MiB is over 80 % of 100 MiB, not of etcd's default 2 GiB
    found = []
    out = flow._etcd(_Members(dict((a, {"db_size": 90 * mib}) for a in ("10.0.0.1", "10.0.0.2", "10.0.0.3"))),
                     [_cp(1, str(100 * mib)), _cp(2), _cp(3)], found)  # pylint: disable=protected-access
    assert [x["subject"] for x in found] == ["cp-1"] and found[0]["what"].startswith(
        "database 90.0 MiB of its 100 MiB quota (quota-backend-bytes of cp-1's config): over 80 %")
    assert out["db"] == "90.0 MiB of 100 MiB (cp-1, quota-backend-bytes of cp-1's config)"


def test_the_quota_as_etcd_reads_its_flag():
    mib = 1024 * 1024
    quota = flow._quota  # pylint: disable=protected-access
    assert quota(_cp(1)) == (flow.ETCD_QUOTA, "etcd's default")
    assert quota(_cp(1, "0")) == (flow.ETCD_QUOTA, "etcd's default")
    assert quota(_cp(1, [str(mib), str(8 * mib)])) == (8 * mib, "quota-backend-bytes of cp-1's config")
    assert quota(_cp(1, "-1"))[0] is None
    assert quota(_cp(1, "lots")) == (flow.ETCD_QUOTA, "etcd's default; cp-1's quota-backend-bytes is not a number")


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


class _Conn:
    def __init__(self, user, path):
        self.user, self.path = user, path

    def kubeconfig_user(self):
        return self.user

    def kubeconfig_path(self):
        return self.path


def test_a_kubeconfig_certificate_given_as_a_file_is_read_relative_to_the_kubeconfig(tmp_path):
    import base64
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "user.crt").write_bytes(b"PEM")
    read = flow._kubeconfig_certificate  # pylint: disable=protected-access
    kubeconfig = str(tmp_path / "kubeconfig")
    assert read(_Conn({"client-certificate": "certs/user.crt"}, kubeconfig)) == (b"PEM", None)
    assert read(_Conn({"client-certificate": str(tmp_path / "certs" / "user.crt")}, None)) == (b"PEM", None)
    assert read(_Conn({"client-certificate-data": base64.b64encode(b"PEM").decode()}, kubeconfig)) == (b"PEM", None)
    assert read(_Conn({"token": "t"}, kubeconfig)) == (None, None)
    pem, why = read(_Conn({"client-certificate": "certs/gone.crt"}, kubeconfig))
    assert pem is None and why.startswith("its certificate file %s cannot be read (" % (tmp_path / "certs" / "gone.crt"))


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
