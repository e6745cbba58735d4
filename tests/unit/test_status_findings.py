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
