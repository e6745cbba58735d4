"""The status readings: what ``cluster_status`` reads, as plain data (the machines, the record's holds and pending
machines, etcd through a control plane, the Cilium release, the credentials), and what the result shows of it."""

from ansible_collections.maesh.ichor.plugins.module_utils.status import findings as f
from ansible_collections.maesh.ichor.plugins.module_utils.status import flow, readings

from tests.unit.test_status_findings import PARAMS, seen

MIB = 1024 * 1024


def test_the_machines_read_are_the_inventorys_then_those_only_the_record_names():
    given = [{"name": "cp-1", "node": "10.0.0.1", "role": "controlplane"}]
    record = {"nodes": {"cp-1": {"node": "10.0.0.9"}, "w-2": {"node": "10.0.0.2"},
                        "w-1": {"node": "10.0.0.3", "role": "worker"}, "gone": {}, "odd": "x"}}
    assert [(m["name"], m["node"], m["role"], m["source"]) for m in readings.machines(given, record)] == [
        ("cp-1", "10.0.0.1", "controlplane", "inventory"), ("w-1", "10.0.0.3", "worker", "record"),
        ("w-2", "10.0.0.2", "worker", "record")]


def _row(name, **read):
    out = {"name": name, "node": "10.0.0.1", "role": "worker", "source": "inventory", "talos": None, "config": "",
           "docs": None, "error": None}
    out.update(read)
    return out


def test_a_machine_is_compared_only_when_it_answered_the_record_knows_it_and_a_spec_is_there():
    rows = [_row("w-1", error="unreachable"), _row("w-2"), _row("w-3"), _row("w-4", docs=[])]
    readings.compare(rows, {"nodes": {"w-1": {}, "w-3": {"spec": {}}, "w-4": {"spec": {}}}})
    assert [(r["known"], r["drift"], r["unjudged"], r["drift_summary"]) for r in rows] == [
        (True, None, None, "not read"), (False, None, None, "not in the record"),
        (True, None, None, "not compared: no machine config"),
        (True, None, None, "not compared: the cluster record holds no cluster spec")]


def test_a_hold_is_read_from_its_own_start_else_from_the_adoption_else_from_an_unknown_time():
    rows = [_row(n) for n in ("cp-1", "cp-2", "cp-3", "cp-4")]
    record = {"held": {"cp-1": "class B needs consent", "cp-2": "r", "cp-3": 7},
              "heldSince": {"cp-1": "2033-05-17T03:33:20Z"}, "adoption": {"at": "2033-03-19T03:33:20Z"}}
    readings.holds(rows, record)
    assert [(r["held"], r["hold"]) for r in rows] == [
        ("class B needs consent", {"since": 2000000000 - 86400, "counted_from": None}),
        ("r", {"since": 2000000000 - 60 * 86400, "counted_from": "the adoption at 2033-03-19T03:33:20Z: the cluster "
                                                                 "record keeps no start for this hold"}),
        ("held", {"since": 2000000000 - 60 * 86400, "counted_from": "the adoption at 2033-03-19T03:33:20Z: the "
                                                                    "cluster record keeps no start for this hold"}),
        ("", None)]
    readings.holds(rows, {"held": {"cp-1": "r"}})
    assert rows[0]["hold"] == {"since": None, "counted_from": None}


def test_the_pending_machines_are_the_records_entries_in_state_pending():
    record = {"machines": [{"uuid": "u-1", "address": "127.0.0.9", "state": "pending", "at": "2033-05-15T03:33:20Z"},
                           {"uuid": "u-2", "state": "joined"}, "junk", {"uuid": "u-3", "state": "pending"}]}
    assert readings.pending(record) == [
        {"uuid": "u-1", "address": "127.0.0.9", "since": "2033-05-15T03:33:20Z", "at": 2000000000 - 3 * 86400},
        {"uuid": "u-3", "address": None, "since": None, "at": None}]


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


def judged(read):
    """(the findings, what the result shows) of an etcd reading."""
    return f.judge(seen(etcd=read), PARAMS), flow._etcd_shown(read)  # pylint: disable=protected-access


def test_every_etcd_member_is_health_checked_a_missing_leader_is_critical_and_the_quota_is_the_clusters():
    from ansible_collections.maesh.ichor.plugins.module_utils.talos.errors import TalosError
    # cp-3 is no machine read here: it is checked all the same, through a control plane
    talos = _Members({"10.0.0.1": {}, "10.0.0.2": {}, "10.0.0.3": {"errors": ["memberID:3 alarm:CORRUPT "]}})
    found, out = judged(readings.etcd(talos, [_cp(1), _cp(2)]))
    assert ("EtcdStatus", "10.0.0.3") in talos.asked and out["leader"] == "cp-1" and out["healthy"] == ["cp-1", "cp-2"]
    assert sorted((x["severity"], x["subject"], x["what"][:30]) for x in found) == [
        ("critical", "cp-3", "etcd member reports errors: me"), ("warning", "cp-3", "an etcd member at 10.0.0.3 tha")]
    # no member knows a leader: one critical finding, not one per member
    lost = dict((a, {"leader": 0, "errors": [f.NO_LEADER]}) for a in ("10.0.0.1", "10.0.0.2", "10.0.0.3"))
    lost["10.0.0.3"] = TalosError("unreachable")
    found, out = judged(readings.etcd(_Members(lost), [_cp(1), _cp(2), _cp(3)]))
    assert sorted((x["subject"], x["what"]) for x in found) == [
        ("cp-3", "etcd member does not answer: unreachable"),
        ("etcd", "no leader: none of the 2 member(s) that answered (cp-1, cp-2) knows one, so etcd takes no write; "
                 "check the control planes' etcd (talosctl etcd status, talosctl logs etcd)")] and out["leader"] is None
    assert out["healthy"] == [] and out["members"] == ["cp-1", "cp-2", "cp-3"]
    # the quota is the member's config's: 90 MiB is over 80 % of 100 MiB, not of etcd's default 2 GiB
    found, out = judged(readings.etcd(_Members(dict((a, {"db_size": 90 * MIB}) for a in (
        "10.0.0.1", "10.0.0.2", "10.0.0.3"))), [_cp(1, str(100 * MIB)), _cp(2), _cp(3)]))
    assert [x["subject"] for x in found] == ["cp-1"] and found[0]["what"].startswith(
        "database 90.0 MiB of its 100 MiB quota (quota-backend-bytes of cp-1's config): over 80 %")
    assert out["db"] == "90.0 MiB of 100 MiB (cp-1, quota-backend-bytes of cp-1's config)"
    assert (out["db_size"], out["quota"]) == (90 * MIB, 100 * MIB)


def test_etcd_is_not_read_when_no_control_plane_answers_and_the_result_says_nothing_of_it():
    read = readings.etcd(_Members({}), [dict(_cp(1), error="unreachable"), _row("w-1")])
    assert read == {"controlplanes": ["cp-1"], "failed": [], "members": None}
    assert flow._etcd_shown(read) == {"controlplanes": ["cp-1"], "members": [], "healthy": [],  # pylint: disable=protected-access
                                      "leader": None, "db": None, "quota": None}


def test_the_quota_as_etcd_reads_its_flag():
    mib = 1024 * 1024
    quota = readings._quota  # pylint: disable=protected-access
    assert quota(_cp(1)) == (readings.ETCD_QUOTA, "etcd's default")
    assert quota(_cp(1, "0")) == (readings.ETCD_QUOTA, "etcd's default")
    assert quota(_cp(1, [str(mib), str(8 * mib)])) == (8 * mib, "quota-backend-bytes of cp-1's config")
    assert quota(_cp(1, "-1"))[0] is None
    assert quota(_cp(1, "lots")) == (readings.ETCD_QUOTA, "etcd's default; cp-1's quota-backend-bytes is not a number")


class _Secrets:
    """A Kubernetes client that holds one Helm record Secret, whose release data is not a release."""

    def list(self, api_version, kind, namespace, label_selector=None):
        return [{"metadata": {"name": "sh.helm.release.v1.cilium.v1", "namespace": namespace,
                              "labels": {"owner": "helm", "name": "cilium", "status": "deployed", "version": "1"}},
                 "data": {"release": "bm90IGEgcmVsZWFzZQ=="}}]


def test_an_unreadable_helm_record_is_a_finding_not_a_failure():
    read = readings.cilium(_Secrets(), {"cilium": {"release": "ichor-system/cilium"}})
    shown = flow._cilium_shown(read)  # pylint: disable=protected-access
    assert shown == {"managed": True, "release": "ichor-system/cilium", "state": None, "chart": None, "set": read["set"]}
    found = f.judge(seen(cilium=read), PARAMS)
    assert [(x["severity"], x["subject"]) for x in found] == [("critical", "ichor-system/cilium")]
    assert found[0]["what"].startswith("its newest Helm record cannot be read: ")
    assert flow._cilium_shown(readings.cilium(_Secrets(), {})) == {"managed": False}  # pylint: disable=protected-access


def test_a_new_value_at_an_acknowledged_path_is_a_new_finding_and_the_digest_is_keyed_not_the_value():
    key, other_key = b"k" * 32, b"o" * 32
    digest = readings.value_digest
    path = "v1alpha1:machine.sysctls.vm.max_map_count"
    acknowledged = [f.drift("w-1", "A", path, "remove", value=digest(key, "262144"))["fingerprint"]]
    assert f.drift("w-1", "A", path, "remove", acknowledged, digest(key, "262144"))["severity"] == f.WARNING
    changed = f.drift("w-1", "A", path, "remove", acknowledged, digest(key, "524288"))
    assert changed["severity"] == f.CRITICAL and "(acknowledged)" not in changed["what"]
    # the digest is keyed: the same value under another cluster's key is another digest, and the value is in neither
    assert digest(key, "hunter2") != digest(other_key, "hunter2")
    assert "hunter2" not in digest(key, "hunter2") and len(digest(key, {"a": [1]})) == 16
    assert digest(key, {"a": 1, "b": 2}) == digest(key, {"b": 2, "a": 1})
    assert digest(key, None) != digest(key, "")


class _Conn:
    def __init__(self, user, path):
        self.user, self.path = user, path

    def kubeconfig_user(self):
        return self.user

    def kubeconfig_path(self):
        return self.path

    def talos_context(self):
        from types import SimpleNamespace as NS
        return NS(credentials=NS(crt=None))


def test_a_kubeconfig_certificate_given_as_a_file_is_read_relative_to_the_kubeconfig(tmp_path):
    import base64
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "user.crt").write_bytes(b"PEM")
    read = readings._kubeconfig_certificate  # pylint: disable=protected-access
    kubeconfig = str(tmp_path / "kubeconfig")
    assert read(_Conn({"client-certificate": "certs/user.crt"}, kubeconfig)) == (b"PEM", None)
    assert read(_Conn({"client-certificate": str(tmp_path / "certs" / "user.crt")}, None)) == (b"PEM", None)
    assert read(_Conn({"client-certificate-data": base64.b64encode(b"PEM").decode()}, kubeconfig)) == (b"PEM", None)
    assert read(_Conn({"token": "t"}, kubeconfig)) == (None, None)
    pem, why = read(_Conn({"client-certificate": "certs/gone.crt"}, kubeconfig))
    assert pem is None and why.startswith("its certificate file %s cannot be read (" % (tmp_path / "certs" / "gone.crt"))


def test_a_certificate_file_that_cannot_be_read_is_read_as_such_and_the_result_shows_no_end(tmp_path):
    read = readings.credentials(_Conn({"client-certificate": "gone.crt"}, str(tmp_path / "kubeconfig")), [])
    assert [(c["subject"], c["kind"], c["end"]) for c in read] == [("kubeconfig client certificate", "kubeconfig", None)]
    assert read[0]["unread"].startswith("its certificate file %s cannot be read" % (tmp_path / "gone.crt"))
    assert readings.credentials(_Conn({"token": "t"}, None), []) == []
