"""CI's slice of the fault campaign (tests/chaos): the regression seeds, and from a seed derived from the commit, one
schedule of each of the fourteen kinds of fault and of each playbook (adopt, init, install, reclaim, upgrade) whose
fault strikes while the run writes; each a real playbook run on a fresh lab, then a calm rerun started at once and a
third run, invariants checked from outside the playbook. ``python -m tests.chaos --count 200`` is the soak before a
release. And the lab tests of what the campaign found that a schedule meets only by chance."""

import json
import os
import socket
import ssl
import sys
import time
import urllib.parse

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.cilium import record as record_mod, takeover
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient
from tests.chaos import campaign
from tests.chaos.scenario import AGENT_USER_AGENT

pytestmark = pytest.mark.lab


def test_the_commits_slice_of_the_campaign_meets_every_fault_kind_finds_no_violation_and_converges(tmp_path):
    commit, seeds = campaign.ci_slice()
    # printed first, so that a failure (or a slice cut short by CI's timeout) names what to replay
    print("the campaign's slice of commit %s: seeds %s; replay one: python -m tests.chaos --seed SEED --count 1; the "
          "whole slice: python -m tests.chaos --ci-slice %s" % (commit, seeds, commit), file=sys.stderr, flush=True)
    assert set(campaign.Schedule(seed).fault for seed in seeds) == set(campaign.FAULT_KINDS)
    assert set(campaign.Schedule(seed).playbook for seed in seeds) == set(campaign.PLAYBOOKS)
    summary = campaign.campaign(None, None, work=str(tmp_path), stream=sys.stderr, seeds=seeds)
    brief = json.dumps(dict((k, v) for k, v in summary.items() if k != "reports"), sort_keys=True)
    assert summary["schedules"] == len(seeds), brief  # every one: no budget cuts the slice short
    assert summary["violations"] == 0, brief
    assert summary["errors"] == 0, brief
    assert summary["convergence"] == 1.0, brief
    assert summary["enough_landed"], brief  # at least half of each playbook's faults struck after its first write


def _faulted_run_killed_when(scenario, tmp_path, seen):
    """The scenario's faulted run, killed (every process) the moment ``seen()`` returns something true, or once the run
    ended; returns what ``seen()`` returned last."""
    found = None
    with open(str(tmp_path / "faulted.log"), "w") as log:
        proc = campaign._start(scenario, "faulted", log)  # pylint: disable=protected-access
        while proc.poll() is None and not found:
            found = seen()
            time.sleep(0.02)
        campaign._kill_run(proc)  # pylint: disable=protected-access
    return found


def _cilium_records(lab, namespace):
    return lab.client.list("v1", "Secret", namespace, label_selector="owner=helm,name=cilium")


def test_an_adopt_killed_while_helm_writes_the_collections_release_is_finished_by_the_rerun(tmp_path):
    """The adopt scenario's schedules of seeds 2 and 36 (SIGKILL of every process of the run while its takeover's helm
    wrote the collection's release): the next run saw the release, skipped the takeover, and every machine stayed
    held for good. The schedule, made certain: the run is killed the moment Helm's record of ichor-system/cilium is
    pending; then a calm rerun finishes the takeover, and the scenario's invariants hold."""
    from tests.chaos import adopt
    scenario = adopt.Adopt(str(tmp_path))
    lab = scenario.start()
    try:
        pending = _faulted_run_killed_when(scenario, tmp_path, lambda: any(
            s["metadata"]["labels"].get("status", "").startswith("pending") for s in _cilium_records(lab, "ichor-system")))
        assert pending, open(str(tmp_path / "faulted.log")).read()[-3000:]
        scenario.check(complete=False)
        code, out = campaign._run(scenario, "calm", str(tmp_path / "calm.log"))  # pylint: disable=protected-access
        assert code == 0, out[-4000:]
        assert "the takeover an earlier run began is not finished" in out, out[-4000:]
        scenario.check(complete=True)
        scenario.converged()
    finally:
        campaign._kill_left()  # pylint: disable=protected-access
        scenario.stop()


def test_an_adopt_cancelled_as_helm_recorded_a_failed_release_under_a_deployed_label_is_finished_by_the_rerun(
        tmp_path):
    """The soak's violation of 2026-12-05, seed 2963 (adopt: SIGTERM, AWX's cancel, 4.72 s after the first write,
    as the takeover's helm wrote the collection's release): the interrupted helm 3.21 left its record of
    ichor-system/cilium labelled deployed, holding a release it recorded failed ("context canceled"); helm list says
    failed. The rerun trusted the label, took the takeover for done, retired the foreign records, and no Cilium
    release was deployed. A record's status is now the one Helm reports (its release's own); the rerun takes the
    Cilium over again. The schedule made certain: the run killed once the record is labelled deployed, before the
    foreign records are retired, and the record made what helm left."""
    from tests import helm_record
    from tests.chaos import adopt
    scenario = adopt.Adopt(str(tmp_path))
    lab = scenario.start()
    try:
        ours = _faulted_run_killed_when(scenario, tmp_path, lambda: [
            s for s in _cilium_records(lab, "ichor-system") if s["metadata"]["labels"].get("status") == "deployed"])
        assert ours, open(str(tmp_path / "faulted.log")).read()[-3000:]
        assert _cilium_records(lab, "kube-system"), \
            "the foreign records were retired before the kill"
        secret = lab.client.get("v1", "Secret", ours[0]["metadata"]["name"], "ichor-system")
        release = record_mod.decode(secret["data"]["release"])
        release["info"].update(status="failed", description='Release "cilium" failed: context canceled')
        secret["data"]["release"] = helm_record.encode(release)
        lab.client.replace(secret)
        assert [(r["name"], r["status"]) for r in adopt.helm_list(lab) if r["namespace"] == "ichor-system"] == [
            ("cilium", "failed")]
        code, out = campaign._run(scenario, "calm", str(tmp_path / "calm.log"))  # pylint: disable=protected-access
        assert code == 0, out[-4000:]
        scenario.check(complete=True)
        scenario.converged()
    finally:
        campaign._kill_left()  # pylint: disable=protected-access
        scenario.stop()


def _create_as_a_killed_run(kube, obj, tries=120):
    """POST ``obj`` as a run killed mid-request leaves it: the request sent whole, the connection closed before the
    answer. The kube-apiserver then logs the create 504 ("context canceled") or 409, and sometimes has stored the object
    all the same (seed 2992). Tried with a growing wait before the close until it stored the object under such an
    answer; an attempt answered 201 is undone (as the lab's write, which no invariant judges). Returns the code the
    audit log gives the create that stored it."""
    url = urllib.parse.urlparse(kube.server)
    context = ssl.create_default_context(cafile=kube.ca_file)
    pki = os.path.join(kube.workdir, "pki")
    context.load_cert_chain(os.path.join(pki, "admin.crt"), os.path.join(pki, "admin.key"))
    meta = obj["metadata"]
    path = "/api/v1/namespaces/%s/secrets" % meta["namespace"]
    body = json.dumps(obj).encode()
    request = ("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (
        path, url.netloc, len(body))).encode() + body

    def connect():
        return context.wrap_socket(socket.create_connection((url.hostname, url.port)), server_hostname=url.hostname)
    client = KubeClient(kubeconfig=kube.kubeconfig)
    mark = kube.audit_mark()
    for attempt in range(tries):
        with connect() as conn:
            conn.sendall(request)
            time.sleep(0.001 * (attempt % 60))
        creates = []
        deadline = time.monotonic() + 10
        while len(creates) <= attempt and time.monotonic() < deadline:  # each attempt's create, once logged
            time.sleep(0.1)
            creates = [e for e in kube.audit_events(mark) if e.get("verb") == "create" and
                       e.get("requestURI") == path and e.get("stage") == "ResponseComplete"]  # a body cut short: no name
        named = [e for e in creates if (e.get("objectRef") or {}).get("name") == meta["name"]]
        code = (named[-1].get("responseStatus") or {}).get("code") if len(creates) > attempt and named else None
        if client.get("v1", "Secret", meta["name"], meta["namespace"]) is None:
            continue
        if code is not None and code >= 300:
            return code
        undo = ("DELETE %s/%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: %s\r\nConnection: close\r\n\r\n" % (
            path, meta["name"], url.netloc, AGENT_USER_AGENT)).encode()  # the lab's write, not a run's delete
        with connect() as conn:
            conn.sendall(undo)
            assert b" 200 " in conn.recv(4096).split(b"\r\n")[0]
    raise AssertionError("no create of %s/%s closed mid-request was stored under an error in %d tries" % (
        meta["namespace"], meta["name"], tries))


def test_an_adopt_killed_as_the_api_server_stored_a_backup_it_answered_504_is_judged_by_the_read_back(tmp_path):
    """The soak's violation of 2026-12-05, seed 2992, the campaign's own (adopt: SIGKILL 3.71 s after the first write,
    as the takeover created the backup of the first foreign record): the kube-apiserver logged that create 504
    (context canceled) and stored the backup; the calm rerun read it, compared it byte for byte and retired the record.
    The delete invariant counted only a 2xx write as the backup's and reported the delete as done before its backup was
    written. A write answered 5xx (or a create answered 409) may have landed; the read after it says so
    (``scenario.may_have_landed``). The schedule made certain: the run killed as helm writes the collection's
    release, before any backup; the killed request played by a client closed mid-request until the server stored the
    backup under an error."""
    from tests.chaos import adopt
    scenario = adopt.Adopt(str(tmp_path))
    lab = scenario.start()
    try:
        ours = _faulted_run_killed_when(scenario, tmp_path, lambda: _cilium_records(lab, "ichor-system"))
        assert ours, open(str(tmp_path / "faulted.log")).read()[-3000:]
        assert not [s for s in lab.client.list("v1", "Secret", "ichor-system", label_selector=adopt.BACKUP_OF)
                    if s["metadata"]["name"].startswith(takeover.BACKUP_PREFIX)], "a record was backed up before the kill"
        first = min((record_mod.Record(s) for s in _cilium_records(lab, "kube-system")), key=lambda rec: rec.revision)
        backup = takeover.backup_secret(first)
        code = _create_as_a_killed_run(lab.kube, backup)
        assert code >= 500 or code == 409, code
        stored = lab.client.get("v1", "Secret", backup["metadata"]["name"], "ichor-system")
        assert stored["data"] == backup["data"]
        code, out = campaign._run(scenario, "calm", str(tmp_path / "calm.log"))  # pylint: disable=protected-access
        assert code == 0, out[-4000:]
        assert "backed up: kube-system/%s into ichor-system/%s" % (first.name, backup["metadata"]["name"]) in out
        figures = scenario.check(complete=True)
        assert figures["deletes"] >= 2, figures  # both foreign records, each judged by its backup's read back
        scenario.converged()
    finally:
        campaign._kill_left()  # pylint: disable=protected-access
        scenario.stop()


def test_an_upgrade_after_a_killed_adopt_touches_no_machine_adopt_holds(tmp_path):
    """The adopt scenario's fault sigkill_upgrade, made certain: the adopt is killed (every process) once the record
    holds every machine; at once another operator runs the upgrade with follow, which takes the dead run's lock over
    and must refuse before writing, naming the held machines. The hold invariant (no machine applied, upgraded, rebooted or reset
    while the record holds it; the simulator's timeline beside the record's audited writes) then has five holds to
    judge; the calm rerun of adopt releases them."""
    from tests.chaos import adopt
    from tests.chaos.scenario import check_not_applied_while_held, record
    scenario = adopt.Adopt(str(tmp_path))
    lab = scenario.start()
    try:
        with open(str(tmp_path / "faulted.log"), "w") as log:
            proc = campaign._start(scenario, "faulted", log)  # pylint: disable=protected-access
            held = []
            while proc.poll() is None and len(held) < 5:
                held = sorted(record(lab).get("held") or {})
                time.sleep(0.05)
            campaign._kill_run(proc)  # pylint: disable=protected-access
        assert held == ["cp-1", "cp-2", "cp-3", "worker-1", "worker-2"], open(str(tmp_path / "faulted.log")).read()[-3000:]
        code, out = campaign._run(  # pylint: disable=protected-access
            scenario, "second", str(tmp_path / "upgrade.log"), scenario.upgrade_args())
        assert code != 0, out[-4000:]
        assert "cp-1, cp-2, cp-3, worker-1, worker-2 held by adopt" in out and "nothing was written" in out, out[-4000:]
        assert check_not_applied_while_held(lab) == 5
        scenario.check(complete=False)
        code, out = campaign._run(scenario, "calm", str(tmp_path / "calm.log"))  # pylint: disable=protected-access
        assert code == 0, out[-4000:]
        scenario.check(complete=True)
        scenario.converged()
        assert check_not_applied_while_held(lab) == 5
    finally:
        campaign._kill_left()  # pylint: disable=protected-access
        scenario.stop()


def test_a_join_whose_reply_was_lost_is_finished_by_a_rerun_once_the_machine_settled(tmp_path):
    """The soak's one violation, seed 3067 (init: worker-2's ApplyConfiguration carried out and its reply lost): the
    calm rerun began while worker-2 still installed and rebooted, and init refused ("worker-2 ... does not answer ...
    nothing was sent to any machine"). The refusal was right; the campaign's rerun came before an operator's would:
    it waited for the machine to be up, not for it to be done installing. It now waits for every machine running or in
    maintenance mode, and the schedule converges."""
    report = campaign.run_schedule(campaign.Schedule(3067), str(tmp_path))
    assert report["schedule"] == "init: worker-2 loses the reply to its next write (carried out)", report
    assert report["landed_after_first_write"] and report["faulted_exit"] != 0, report
    assert report["converged"] and report["violation"] is None and not report.get("error"), report


def test_a_control_plane_rebooted_unasked_as_the_rollout_moves_on_stops_the_next_ones_reboot(tmp_path):
    """The soak's violation of 2026-12-05, seed 2939 (upgrade: cp-2 rebooting unasked the moment it was back from its
    own upgrade): cp-3's etcd was judged before its pull and installer and cp-3 rebooted after them, while cp-2 was
    down. etcd is now judged again just before the reboot, and the invariant judges a run by what it saw at that last
    look. The schedule made certain is test_upgrade's ``..._when_another_went_down_while_its_installer_ran``."""
    report = campaign.run_schedule(campaign.Schedule(2939), str(tmp_path))
    assert report["schedule"] == "upgrade: cp-2 rebooting unasked (down 7.99 s) 3.79 s after the start", report
    assert report["converged"] and report["violation"] is None and not report.get("error"), report
