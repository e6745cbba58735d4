"""Reclaim (seed 0103, section 2; issue 6) against the lab: test group C.

Two simulated Talos clusters per test, the managed one (``name="managed"``) and the foreign one
(``name="foreign"``), plus the real kube-apiserver of the kube lab, whose admin kubeconfig stands
for the managed cluster's (its record, ConfigMap ``ichor-system/ichor-cluster``). Every run goes
through ``playbooks/reclaim.yml`` with ansible-runner (structured results from its events) or
ansible-playbook (stdout, ``-vvvv``).
"""

import base64
import glob
import json
import os
import shutil
import sys
import time

import pytest
import yaml

from tests.integration.ansible_env import ansible_env, ansible_playbook, write_inventory

pytestmark = pytest.mark.lab

TASK = "Inspect, check, reset and register the machine"
MARKER = "ICHOR-RECLAIM-MARKER-7c41"
MISMATCH = "the typed UUID does not match the node's UUID; nothing was sent"
FAST = dict(reboot_seconds=0.3, install_seconds=0.1, upgrade_seconds=0.2)


# --- the world of one test --------------------------------------------------------------------

class World:
    """The managed cluster (lab + kube record), the foreign cluster, and ways to run reclaim."""

    def __init__(self, talos_lab, kube_lab, tmp_path, foreign_cps=1, foreign_workers=1, managed_cps=1):
        self.tmp = tmp_path
        self.kube_lab = kube_lab
        self.managed = talos_lab(name="managed", controlplanes=managed_cps, workers=0, **FAST)
        self.foreign = talos_lab(name="foreign", controlplanes=foreign_cps, workers=foreign_workers, **FAST) \
            if foreign_cps or foreign_workers else None
        self.inventory = str(tmp_path / "managed-inventory.yml")
        write_inventory(self.managed.state(), self.inventory)
        data = yaml.safe_load(open(self.inventory))
        data["all"]["vars"]["ichor_kubeconfig"] = kube_lab.kubeconfig
        data["all"]["vars"]["ichor_cluster"] = {"name": "managed"}
        with open(self.inventory, "w") as f:
            yaml.safe_dump(data, f, sort_keys=False)
        self.runs = 0
        self.clear_record()

    # -- the managed cluster's record
    def kube(self):
        from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient
        return KubeClient(kubeconfig=self.kube_lab.kubeconfig)

    def clear_record(self):
        kube = self.kube()
        if kube.get("v1", "ConfigMap", "ichor-cluster", "ichor-system") is not None:
            kube.delete("v1", "ConfigMap", "ichor-cluster", "ichor-system")
        kube.close()

    def record_machines(self):
        from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
        kube = self.kube()
        try:
            return cluster_record.read(kube).get("machines") or []
        finally:
            kube.close()

    def set_record_machines(self, machines):
        from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
        kube = self.kube()
        try:
            cluster_record.update(kube, lambda data: data.update(machines=machines))
        finally:
            kube.close()

    # -- runs
    def envvars(self, talosconfig=None):
        env = ansible_env()
        out = dict((k, env[k]) for k in ("ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_CALLBACKS_ENABLED",
                                         "ANSIBLE_LOCAL_TEMP", "ANSIBLE_NOCOLOR"))
        out["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
        if talosconfig is not False:
            out["TALOSCONFIG"] = talosconfig or self.foreign.talosconfig
        return out

    def private_dir(self):
        self.runs += 1
        private = self.tmp / ("runner%d" % self.runs)
        os.makedirs(str(private / "project"))
        with open(str(private / "project" / "reclaim.yml"), "w") as f:
            f.write("---\n- name: Reclaim\n  ansible.builtin.import_playbook: maesh.ichor.reclaim\n")
        return private

    def reclaim(self, check=False, talosconfig=None, **extravars):
        """reclaim.yml through ansible-runner; returns Outcome (rc, the module's result, stdout)."""
        import ansible_runner
        private = self.private_dir()
        extravars.setdefault("ichor_reclaim_foreign_context", "foreign" if talosconfig is None else "managed")
        result = ansible_runner.run(private_data_dir=str(private), playbook="reclaim.yml",
                                    inventory=self.inventory, extravars=extravars,
                                    envvars=self.envvars(talosconfig), cmdline="--check" if check else None,
                                    quiet=True)
        return Outcome(result, private)

    def playbook(self, *args, talosconfig=None, environ=None, **extravars):
        """reclaim.yml through ansible-playbook (stdout and stderr as text); ``environ``: more of its environment."""
        env = dict(environ or {}, TALOSCONFIG=talosconfig or self.foreign.talosconfig)
        extravars.setdefault("ichor_reclaim_foreign_context", "foreign")
        return ansible_playbook("-i", self.inventory, "maesh.ichor.reclaim", "-e", json.dumps(extravars), *args,
                                env=env)

    def calls(self, lab, name):
        return lab.control.calls(name)


class Outcome:
    def __init__(self, runner_result, private):
        self.private = private
        self.rc = runner_result.rc
        self.stdout = runner_result.stdout.read()
        self.events = list(runner_result.events)
        self.res = None
        self.failed = None
        for e in self.events:
            data = e.get("event_data") or {}
            if data.get("task") == TASK and e.get("event") in ("runner_on_ok", "runner_on_failed"):
                self.res = data["res"]
                self.failed = e["event"] == "runner_on_failed"
        self.msg = (self.res or {}).get("msg", "")

    def __repr__(self):
        return "Outcome(rc=%r, msg=%r, plan=%r, stdout tail=%r)" % (
            self.rc, self.msg, (self.res or {}).get("plan"), self.stdout[-2000:])


@pytest.fixture
def world(talos_lab, kube_lab, tmp_path):
    def make(**kwargs):
        return World(talos_lab, kube_lab, tmp_path, **kwargs)
    return make


def events(outcome, name):
    return [line for line in outcome.res["audit"] if (" %s: " % name) in line]


# --- C1 ---------------------------------------------------------------------------------------

@pytest.mark.floor
def test_c1_worker_of_another_cluster_is_reset_and_registered(world):
    w = world(foreign_cps=1, foreign_workers=1)
    worker = w.foreign.machine("worker-1")
    address, uuid = worker["address"], worker["uuid"]

    plan = w.reclaim(check=True, ichor_reclaim_node=address)
    assert plan.rc == 0 and not plan.failed, plan
    text = "\n".join(plan.res["plan"])
    assert "UUID %s" % uuid in text
    assert 'cluster "foreign"' in text
    assert "would send the reset: STATE and EPHEMERAL, reboot, graceful: true" in text
    assert plan.res["reset_sent"] is False
    assert w.calls(w.foreign, "worker-1").get("Reset", 0) == 0
    assert w.record_machines() == []

    done = w.reclaim(ichor_reclaim_node=address, ichor_reclaim_confirm_uuid=uuid)
    assert done.rc == 0 and not done.failed, done
    assert done.res["changed"] is True and done.res["reset_sent"] is True and done.res["graceful"] is True
    back = w.foreign.machine("worker-1")
    assert back["mode"] == "maintenance" and back["uuid"] == uuid and back["address"] == address
    assert [v["id"] for v in back["volumes"]] == ["META", "u-data", "u-secret"]  # STATE, EPHEMERAL gone
    assert w.calls(w.foreign, "worker-1")["Reset"] == 1
    machines = w.record_machines()
    assert len(machines) == 1
    entry = machines[0]
    assert (entry["uuid"], entry["address"], entry["state"], entry["source"]) == (uuid, address, "pending", "reclaim")
    assert done.res["registered"] == {"cluster": "managed", "uuid": uuid, "address": address, "state": "pending"}

    # the same request again: already in maintenance with the confirmed UUID, no second reset
    again = w.reclaim(ichor_reclaim_node=address, ichor_reclaim_confirm_uuid=uuid)
    assert again.rc == 0 and not again.failed, again
    assert again.res["changed"] is False and again.res["reset_sent"] is False
    assert w.calls(w.foreign, "worker-1")["Reset"] == 1
    assert w.record_machines() == machines


# --- C2 ---------------------------------------------------------------------------------------

def test_c2_control_plane_of_three_graceful_then_two_refused(world):
    from tests.integration.test_lab_sim import MS, call
    w = world(foreign_cps=3, foreign_workers=0)
    cp3 = w.foreign.machine("cp-3")
    plan = w.reclaim(check=True, ichor_reclaim_node=cp3["address"])
    assert plan.rc == 0, plan
    etcd = plan.res["inspection"]["etcd"]
    assert len(etcd["members"]) == 3 and all(m["healthy"] for m in etcd["members"])
    assert [m["checked_by"] for m in etcd["members"] if m["this_node"]] == ["its own etcd status"]
    assert sorted(m["checked_by"] for m in etcd["members"] if not m["this_node"]) == ["peer port answers"] * 2

    done = w.reclaim(ichor_reclaim_node=cp3["address"], ichor_reclaim_confirm_uuid=cp3["uuid"])
    assert done.rc == 0 and not done.failed, done
    assert done.res["graceful"] is True
    assert w.foreign.machine("cp-3")["mode"] == "maintenance"
    # the old cluster keeps 2 members, both healthy
    reply = call(w.foreign.address("cp-1"), w.foreign.ssl(), MS + "EtcdMemberList",
                 __import__("tests.lab.talos_sim.protos", fromlist=["machine"]).machine().EtcdMemberListRequest())
    assert sorted(m.hostname for m in reply.messages[0].members) == ["cp-1", "cp-2"]
    assert all(w.foreign.machine(n)["etcd_member_id"] for n in ("cp-1", "cp-2"))

    cp2 = w.foreign.machine("cp-2")
    refused = w.reclaim(ichor_reclaim_node=cp2["address"], ichor_reclaim_confirm_uuid=cp2["uuid"])
    assert refused.rc != 0 and refused.failed, refused
    assert 'cluster "foreign" has 2 etcd members; removing one loses quorum; pass force to override' in refused.msg
    assert refused.msg.endswith("nothing was sent")
    assert w.calls(w.foreign, "cp-2").get("Reset", 0) == 0
    assert w.foreign.machine("cp-2")["mode"] == "configured"


# --- C3 ---------------------------------------------------------------------------------------

def test_c3_only_control_plane_refused_then_forced(world):
    w = world(foreign_cps=1, foreign_workers=0)
    cp = w.foreign.machine("cp-1")
    base = dict(ichor_reclaim_node=cp["address"], ichor_reclaim_confirm_uuid=cp["uuid"])

    refused = w.reclaim(**base)
    assert refused.failed, refused
    assert 'this is the last control plane of cluster "foreign"; pass force to override' in refused.msg

    no_name = w.reclaim(ichor_reclaim_force=True, ichor_reclaim_force_ungraceful=True, **base)
    assert no_name.failed and "force needs the name of the cluster that loses the node typed as confirm_cluster" \
        in no_name.msg, no_name
    wrong_name = w.reclaim(ichor_reclaim_force=True, ichor_reclaim_force_ungraceful=True,
                           ichor_reclaim_confirm_cluster="Foreign", **base)
    assert wrong_name.failed and wrong_name.msg == \
        "the typed cluster name does not match the node's cluster; nothing was sent", wrong_name
    graceful = w.reclaim(ichor_reclaim_force=True, ichor_reclaim_confirm_cluster="foreign", **base)
    assert graceful.failed and "the only etcd member cannot leave etcd, so a graceful reset would fail; pass " \
        "force_ungraceful" in graceful.msg, graceful
    assert w.calls(w.foreign, "cp-1").get("Reset", 0) == 0

    done = w.reclaim(ichor_reclaim_force=True, ichor_reclaim_confirm_cluster="foreign",
                     ichor_reclaim_force_ungraceful=True, **base)
    assert done.rc == 0 and not done.failed, done
    assert done.res["graceful"] is False
    assert any("refusal overridden: this is the last control plane" in line for line in done.res["plan"])
    assert events(done, "ReclaimReset")[0].endswith(
        "reset sent to %s (STATE and EPHEMERAL, reboot), graceful: false" % cp["address"])
    back = w.foreign.machine("cp-1")
    assert back["mode"] == "maintenance" and back["uuid"] == cp["uuid"]
    assert w.calls(w.foreign, "cp-1")["Reset"] == 1


# --- C4 ---------------------------------------------------------------------------------------

def test_c4_machine_of_the_managed_cluster_refused(world):
    w = world(foreign_cps=1, foreign_workers=0)
    cp = w.managed.machine("cp-1")
    out = w.reclaim(talosconfig=w.managed.talosconfig, ichor_reclaim_node=cp["address"],
                    ichor_reclaim_confirm_uuid=cp["uuid"], ichor_reclaim_force=True,
                    ichor_reclaim_confirm_cluster="managed", ichor_reclaim_force_ungraceful=True)
    assert out.failed, out
    assert "node %s is already an Ichor machine" % cp["uuid"] in out.msg
    assert out.msg.endswith("nothing was sent")
    assert w.calls(w.managed, "cp-1").get("Reset", 0) == 0
    assert w.managed.machine("cp-1")["mode"] == "configured"
    assert events(out, "ReclaimFailed")
    # with the foreign cluster's talosconfig (the machine does not take it): recognised by the managed one's
    out = w.reclaim(ichor_reclaim_node=cp["address"], ichor_reclaim_confirm_uuid=cp["uuid"], ichor_reclaim_force=True,
                    ichor_reclaim_confirm_cluster="managed", ichor_reclaim_force_ungraceful=True)
    assert out.failed and out.msg.startswith("node %s is already an Ichor machine" % cp["uuid"]), out
    assert w.calls(w.managed, "cp-1").get("Reset", 0) == 0
    # the plan fails as the run would (an AWX plan job goes red): this refusal is never overridable
    for talosconfig in (w.managed.talosconfig, None):
        plan = w.reclaim(check=True, talosconfig=talosconfig, ichor_reclaim_node=cp["address"])
        assert plan.failed and plan.rc != 0 and "node %s is already an Ichor machine" % cp["uuid"] in plan.msg, plan
    assert w.calls(w.managed, "cp-1").get("Reset", 0) == 0


def test_c4_wrong_uuid_sends_nothing(world):
    w = world(foreign_cps=1, foreign_workers=1)
    worker = w.foreign.machine("worker-1")
    typed = worker["uuid"].upper()  # the same UUID in other letters is not the UUID
    out = w.reclaim(ichor_reclaim_node=worker["address"], ichor_reclaim_confirm_uuid=typed)
    assert out.failed and out.msg == MISMATCH, out
    assert out.res["reset_sent"] is False and out.res["changed"] is False
    assert w.calls(w.foreign, "worker-1").get("Reset", 0) == 0
    assert w.foreign.machine("worker-1")["mode"] == "configured"
    missing = w.reclaim(ichor_reclaim_node=worker["address"])
    assert missing.failed and "confirm_uuid is required" in missing.msg, missing
    assert w.calls(w.foreign, "worker-1").get("Reset", 0) == 0
    assert w.record_machines() == []


def test_c4_stale_pending_entry_does_not_count_but_a_joined_one_does(world):
    w = world(foreign_cps=1, foreign_workers=1)
    worker = w.foreign.machine("worker-1")
    w.set_record_machines([{"uuid": worker["uuid"], "address": "10.9.9.9", "state": "approved"}])
    joined = w.reclaim(ichor_reclaim_node=worker["address"], ichor_reclaim_confirm_uuid=worker["uuid"])
    assert joined.failed and "node %s is already an Ichor machine" % worker["uuid"] in joined.msg, joined
    assert w.calls(w.foreign, "worker-1").get("Reset", 0) == 0

    w.set_record_machines([{"uuid": worker["uuid"], "address": "10.9.9.9", "state": "pending",
                            "source": "reclaim", "at": "2026-11-01T00:00:00Z"}])
    done = w.reclaim(ichor_reclaim_node=worker["address"], ichor_reclaim_confirm_uuid=worker["uuid"])
    assert done.rc == 0 and not done.failed, done
    assert [(m["uuid"], m["address"], m["state"]) for m in w.record_machines()] == [
        (worker["uuid"], worker["address"], "pending")]


# --- C5 ---------------------------------------------------------------------------------------

def test_c5_user_and_encrypted_volumes_listed(world):
    w = world(foreign_cps=1, foreign_workers=1)
    worker = w.foreign.machine("worker-1")
    plan = w.reclaim(check=True, ichor_reclaim_node=worker["address"])
    assert plan.rc == 0, plan
    volumes = {v["id"]: v for v in plan.res["inspection"]["volumes"]}
    assert set(volumes) == {"u-data", "u-secret"}
    assert volumes["u-secret"]["encrypted"] is True and volumes["u-data"]["encrypted"] is False
    lines = plan.res["plan"]
    assert any(line.startswith("user volumes left on disk, orphaned (not wiped): u-data (/dev/sdb1 on /dev/sdb), "
                               "u-secret (/dev/sdb2 on /dev/sdb)") for line in lines), lines
    assert any(line.startswith("encrypted user volumes whose data becomes unreadable") and "u-secret" in line
               and "u-data" not in line for line in lines), lines
    disks = {d["dev_path"]: d for d in plan.res["inspection"]["disks"]}
    assert disks["/dev/sda"]["system_disk"] is True and disks["/dev/sdb"]["system_disk"] is False

    done = w.reclaim(ichor_reclaim_node=worker["address"], ichor_reclaim_confirm_uuid=worker["uuid"])
    assert done.rc == 0, done
    # user disks survive the reset; only STATE and EPHEMERAL are gone
    assert [v["id"] for v in w.foreign.machine("worker-1")["volumes"]] == ["META", "u-data", "u-secret"]


# --- C10 --------------------------------------------------------------------------------------

def test_c10_audit_lines_in_the_result(world):
    w = world(foreign_cps=1, foreign_workers=1)
    worker = w.foreign.machine("worker-1")
    out = w.reclaim(ichor_reclaim_node=worker["address"], ichor_reclaim_confirm_uuid=worker["uuid"],
                    awx_user_name="alice")
    assert out.rc == 0, out
    audit = out.res["audit"]
    names = [line.split(" ", 2)[1].rstrip(":") for line in audit]
    assert names == ["ReclaimRequested", "ReclaimInspected", "ReclaimConfirmed", "ReclaimReset", "ReclaimCompleted"]
    for line in audit:
        assert line[:20].endswith("Z") and line[4] == "-" and line[10] == "T"
    assert audit[0].endswith("ReclaimRequested: alice requested the reclaim of %s" % worker["address"])
    assert "UUID %s" % worker["uuid"] in audit[1]
    assert 'cluster "foreign" (ID %s)' % w.foreign.state()["cluster"]["id"] in audit[1]
    assert audit[2].endswith("ReclaimConfirmed: alice confirmed UUID %s" % worker["uuid"])
    assert audit[3].endswith("graceful: true")
    assert 'registered as a pending machine of cluster "managed"' in audit[4]
    # the audit lines are printed by the playbook too
    assert "ReclaimCompleted" in out.stdout

    # without AWX, the local user
    refused = w.reclaim(ichor_reclaim_node=worker["address"], ichor_reclaim_confirm_uuid="nope")
    user = os.environ.get("USER") or os.environ.get("LOGNAME")
    if user:
        assert ("ReclaimRequested: %s requested" % user) in refused.res["audit"][0]
    assert [line.split(" ", 2)[1] for line in refused.res["audit"]][-1] == "ReclaimFailed:"


# --- C7 ---------------------------------------------------------------------------------------

def test_c7_new_address_after_the_reset_hint_failure_nothing_registered(world):
    w = world(foreign_cps=1, foreign_workers=1)
    worker = w.foreign.machine("worker-1")
    address, uuid = worker["address"], worker["uuid"]
    w.foreign.control.set_faults("worker-1", new_address_on_reboot=True)

    out = w.reclaim(ichor_reclaim_node=address, ichor_reclaim_confirm_uuid=uuid, ichor_reclaim_wait_timeout=3)
    assert out.rc != 0 and out.failed, out
    assert out.msg.startswith("the reset was sent but the machine did not come back at %s" % address), out.msg
    assert ("%s did not return to maintenance mode with UUID %s" % (address, uuid)) in out.msg
    hint = ("The machine may have taken a new address from DHCP after the reboot. Find it (its UUID is %s)" % uuid)
    assert hint in out.msg and out.res["hint"].startswith(hint)
    assert out.res["reset_sent"] is True and out.res["changed"] is True
    assert out.res["registered"] is None
    names = [line.split(" ", 2)[1].rstrip(":") for line in out.res["audit"]]
    assert names[-3:] == ["ReclaimReset", "ReclaimExpired", "ReclaimFailed"]
    # the machine is in maintenance with the same UUID, elsewhere; no guess, nothing registered
    moved = w.foreign.machine("worker-1")
    assert moved["mode"] == "maintenance" and moved["uuid"] == uuid and moved["address"] != address
    assert moved["address"] not in out.stdout
    assert w.record_machines() == []
    assert w.calls(w.foreign, "worker-1")["Reset"] == 1

    # a rerun at the old address finds nothing there and sends nothing
    rerun = w.reclaim(ichor_reclaim_node=address, ichor_reclaim_confirm_uuid=uuid, ichor_reclaim_wait_timeout=3)
    assert rerun.failed and rerun.msg.startswith("cannot inspect %s" % address), rerun
    assert w.calls(w.foreign, "worker-1")["Reset"] == 1
    assert w.record_machines() == []


# --- wait: false ----------------------------------------------------------------------------------

def test_wait_false_sends_the_reset_and_a_rerun_registers(world):
    w = world(foreign_cps=1, foreign_workers=1)
    worker = w.foreign.machine("worker-1")
    address, uuid = worker["address"], worker["uuid"]
    w.foreign.control.set_timing("worker-1", reboot_seconds=2)

    sent = w.reclaim(ichor_reclaim_node=address, ichor_reclaim_confirm_uuid=uuid, ichor_reclaim_wait=False)
    assert sent.rc == 0 and not sent.failed, sent
    assert sent.res["changed"] is True and sent.res["reset_sent"] is True and sent.res["registered"] is None
    assert "registers nothing" in sent.res["plan"][-1]
    assert w.record_machines() == []
    assert w.calls(w.foreign, "worker-1")["Reset"] == 1

    # not seen in maintenance mode, not registered: the rerun sees it there and registers it, without a reset
    w.foreign.wait_for("worker-1", lambda m: m["mode"] == "maintenance" and m["up"], timeout=15)
    rerun = w.reclaim(ichor_reclaim_node=address, ichor_reclaim_confirm_uuid=uuid, ichor_reclaim_wait=False)
    assert rerun.rc == 0 and not rerun.failed, rerun
    assert rerun.res["reset_sent"] is False and rerun.res["registered"]["state"] == "pending"
    assert [(m["uuid"], m["address"], m["state"]) for m in w.record_machines()] == [(uuid, address, "pending")]
    assert w.calls(w.foreign, "worker-1")["Reset"] == 1


# --- C9 ---------------------------------------------------------------------------------------

def marked_talosconfig(lab, path, endpoints=None, nodes=None, source=None):
    """The lab's talosconfig (or ``source``) with a comment marker, one context, and optionally other endpoints/nodes.

    Returns the markers: the comment, and pieces of the key and certificate (base64 and PEM body).
    """
    data = yaml.safe_load(open(source or lab.talosconfig))
    ctx = data["contexts"][data["context"]]
    if endpoints is not None:
        ctx["endpoints"] = endpoints
    if nodes is not None:
        ctx["nodes"] = nodes
    data["contexts"] = {data["context"]: ctx}
    with open(path, "w") as f:
        f.write("# %s\n" % MARKER)
        yaml.safe_dump(data, f, sort_keys=False)
    os.chmod(path, 0o600)
    markers = [MARKER]
    for field in ("key", "crt"):
        pem = base64.b64decode(ctx[field]).decode()
        # past the PEM header and the ASN.1 prefix that every key and certificate of its kind shares
        markers += [ctx[field][-56:-12], "".join(pem.splitlines()[1:-1])[-40:-2]]
    return markers


def files_text(root, skip=()):
    out = {}
    for path in glob.glob(os.path.join(str(root), "**", "*"), recursive=True):
        if os.path.isfile(path) and os.path.abspath(path) not in skip:
            with open(path, errors="replace") as f:
                out[path] = f.read()
    return out


@pytest.mark.floor
def test_c9_no_credential_in_stdout_or_vvvv(world, tmp_path):
    began = time.time() - 1
    w = world(foreign_cps=1, foreign_workers=1)
    worker = w.foreign.machine("worker-1")
    talosconfig = str(tmp_path / "foreign-talosconfig")
    markers = marked_talosconfig(w.foreign, talosconfig)
    # the runs' temp dir and home are their own: what they leave there (and in /tmp) is theirs (issue 42)
    private = {"TMPDIR": str(tmp_path / "tmp"), "HOME": str(tmp_path / "home")}
    for path in private.values():
        os.makedirs(path)
    # a refused run and a plan, at -vvvv
    wrong = w.playbook("-vvvv", talosconfig=talosconfig, environ=private, ichor_reclaim_node=worker["address"],
                       ichor_reclaim_confirm_uuid="x")
    assert wrong.returncode != 0 and MISMATCH in wrong.stdout, wrong.stdout[-3000:]
    plan = w.playbook("-vvvv", "--check", "--diff", talosconfig=talosconfig, environ=private,
                      ichor_reclaim_node=worker["address"])
    assert plan.returncode == 0, plan.stdout[-3000:]
    done = w.playbook(talosconfig=talosconfig, environ=private, ichor_reclaim_node=worker["address"],
                      ichor_reclaim_confirm_uuid=worker["uuid"])
    assert done.returncode == 0, done.stdout[-3000:]
    assert "ReclaimCompleted" in done.stdout
    for proc in (wrong, plan, done):
        text = proc.stdout + proc.stderr
        assert "Traceback" not in text
        for marker in markers:
            assert marker not in text
    from tests.integration import sweep  # pylint: disable=import-outside-toplevel
    skip = {talosconfig, w.foreign.workdir, w.managed.workdir}
    assert sweep.holding(list(private.values()) + ["/tmp"], markers[1:], began, skip) == []


def test_c9_endpoint_of_another_machine_reaches_only_the_address(world, tmp_path):
    w = world(foreign_cps=1, foreign_workers=2)
    cp, worker = w.foreign.machine("cp-1"), w.foreign.machine("worker-2")
    talosconfig = str(tmp_path / "wide-talosconfig")
    marked_talosconfig(w.foreign, talosconfig, endpoints=[cp["address"], w.foreign.address("worker-1")],
                       nodes=[cp["address"], w.foreign.address("worker-1")])
    for name in ("cp-1", "worker-1", "worker-2"):
        w.foreign.control.reset_calls(name)
    plan = w.reclaim(check=True, talosconfig=talosconfig, ichor_reclaim_node=worker["address"],
                     ichor_reclaim_foreign_context="foreign")
    assert plan.rc == 0, plan
    assert plan.res["inspection"]["uuid"] == worker["uuid"]
    done = w.reclaim(talosconfig=talosconfig, ichor_reclaim_node=worker["address"],
                     ichor_reclaim_confirm_uuid=worker["uuid"], ichor_reclaim_foreign_context="foreign")
    assert done.rc == 0, done
    # no call reaches cp-1 (its etcd peer port is probed, as the worker's control plane)
    assert dict((k, v) for k, v in w.calls(w.foreign, "cp-1").items() if k != "etcd-peer-port") == {}
    assert w.calls(w.foreign, "worker-1") == {}
    assert w.calls(w.foreign, "worker-2")["Reset"] == 1


# --- the control planes a machine lists: probed at once, at most PROBE_LIMIT (issue 12) -------------------

def test_a_machine_listing_more_control_planes_than_reclaim_probes_is_refused_then_forced(world):
    from ansible_collections.maesh.ichor.plugins.module_utils.reclaim.inspection import PROBE_LIMIT
    count = PROBE_LIMIT + 1
    w = world(foreign_cps=count, foreign_workers=1)
    cps = ["cp-%d" % i for i in range(1, count + 1)]

    def peer_probes():
        return sum(w.calls(w.foreign, name).get("etcd-peer-port", 0) for name in cps)

    def refusal(address, what):
        return ("%s lists %d control planes (%s), more than the %d a reclaim probes (a real cluster has a handful); "
                "pass force to probe the first %d and count the others as not answering; nothing was probed or sent"
                % (address, count, what, PROBE_LIMIT, PROBE_LIMIT))

    for name in cps + ["worker-1"]:
        w.foreign.control.reset_calls(name)
    worker, cp = w.foreign.machine("worker-1"), w.foreign.machine("cp-1")
    refused = w.reclaim(check=True, ichor_reclaim_node=worker["address"])
    assert refused.rc != 0 and refused.failed, refused
    assert refused.msg == refusal(worker["address"], "discovery members"), refused
    refused_cp = w.reclaim(check=True, ichor_reclaim_node=cp["address"])
    assert refused_cp.failed and refused_cp.msg == refusal(cp["address"], "etcd members"), refused_cp
    assert peer_probes() == 0

    # force: the first PROBE_LIMIT are probed (each once), the last one is reported unprobed
    forced = w.reclaim(check=True, ichor_reclaim_node=worker["address"], ichor_reclaim_force=True)
    assert forced.rc == 0 and not forced.failed, forced
    assert peer_probes() == PROBE_LIMIT
    assert all(w.calls(w.foreign, name).get("etcd-peer-port", 0) <= 1 for name in cps)
    checked = [c["checked_by"] for c in forced.res["inspection"]["control_planes"]]
    assert checked == ["etcd peer port answers"] * PROBE_LIMIT + ["not probed (beyond the first %d)" % PROBE_LIMIT]
    assert forced.res["graceful"] is True
    assert all(w.calls(w.foreign, name).get("Reset", 0) == 0 for name in cps + ["worker-1"])


RETRY_PLAYBOOK = """---
- name: Reclaim with retries
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
  tasks:
    - name: Reset until it worked
      maesh.ichor.talos_reset:
        node: "{{ ichor_reclaim_node }}"
        confirm_uuid: "{{ ichor_reclaim_confirm_uuid }}"
        wait_timeout: 1
        foreign_context: foreign
        talosconfig: "{{ ichor_talosconfig }}"
        kubeconfig: "{{ ichor_kubeconfig }}"
        cluster_name: managed
      register: reset
      retries: 8
      delay: 1
      until: reset is succeeded
"""


def test_c9_retries_and_a_rerun_after_a_timed_out_wait_reset_once(world, tmp_path):
    w = world(foreign_cps=1, foreign_workers=2)
    # the machines take 3 s to come back, longer than the 1 s wait
    for name in ("worker-1", "worker-2"):
        w.foreign.control.set_timing(name, reboot_seconds=3)

    # retries/until: the first attempt resets and times out, the later ones find it rebooting, then back
    worker = w.foreign.machine("worker-1")
    playbook = tmp_path / "retry.yml"
    playbook.write_text(RETRY_PLAYBOOK)
    proc = ansible_playbook("-i", w.inventory, str(playbook), "-e", json.dumps(
        {"ichor_reclaim_node": worker["address"], "ichor_reclaim_confirm_uuid": worker["uuid"]}),
        env={"TALOSCONFIG": w.foreign.talosconfig})
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "FAILED - RETRYING" in proc.stdout
    assert w.calls(w.foreign, "worker-1")["Reset"] == 1
    assert [m["uuid"] for m in w.record_machines()] == [worker["uuid"]]

    # a rerun after a timed-out wait
    other = w.foreign.machine("worker-2")
    first = w.reclaim(ichor_reclaim_node=other["address"], ichor_reclaim_confirm_uuid=other["uuid"],
                      ichor_reclaim_wait_timeout=1)
    assert first.failed and "did not come back" in first.msg, first
    w.foreign.wait_for("worker-2", lambda m: m["mode"] == "maintenance" and m["up"], timeout=15)
    rerun = w.reclaim(ichor_reclaim_node=other["address"], ichor_reclaim_confirm_uuid=other["uuid"],
                      ichor_reclaim_wait_timeout=1)
    assert rerun.rc == 0 and not rerun.failed, rerun
    assert rerun.res["reset_sent"] is False
    assert any("no reset sent" in line for line in rerun.res["audit"])
    assert w.calls(w.foreign, "worker-2")["Reset"] == 1
    assert sorted(m["uuid"] for m in w.record_machines()) == sorted([worker["uuid"], other["uuid"]])


# --- the AWX path -----------------------------------------------------------------------------

@pytest.mark.floor
def test_awx_style_runner_with_injected_credential(world):
    """reclaim.yml the way AWX runs it: survey answers in env/extravars tagged !unsafe, the custom
    credential injected as a file (0600) with TALOSCONFIG in env/envvars pointing at it by path."""
    import ansible_runner
    w = world(foreign_cps=1, foreign_workers=1)
    worker = w.foreign.machine("worker-1")
    private = w.private_dir()
    os.makedirs(str(private / "env"))
    os.makedirs(str(private / "inventory"))
    shutil.copy(w.inventory, str(private / "inventory" / "hosts.yml"))
    credential = str(private / "env" / "tmp_ichor_foreign_talosconfig")
    markers = marked_talosconfig(w.foreign, credential)
    assert oct(os.stat(credential).st_mode & 0o777) == "0o600"
    survey = {"ichor_reclaim_node": worker["address"], "ichor_reclaim_confirm_uuid": worker["uuid"],
              "ichor_reclaim_force": "false", "ichor_reclaim_confirm_cluster": "",
              "ichor_reclaim_foreign_context": "foreign"}
    with open(str(private / "env" / "extravars"), "w") as f:
        for key, value in survey.items():
            f.write("%s: !unsafe %s\n" % (key, json.dumps(value)))
        f.write("awx_user_name: alice\nawx_job_id: 42\n")
    envvars = w.envvars(talosconfig=False)
    envvars["TALOSCONFIG"] = credential
    with open(str(private / "env" / "envvars"), "w") as f:
        yaml.safe_dump(envvars, f)
    result = ansible_runner.run(private_data_dir=str(private), playbook="reclaim.yml", quiet=True)
    out = Outcome(result, private)
    assert out.rc == 0 and not out.failed, out
    assert out.res["reset_sent"] is True
    assert out.res["audit"][0].endswith("ReclaimRequested: alice requested the reclaim of %s" % worker["address"])
    assert w.foreign.machine("worker-1")["mode"] == "maintenance"
    # the runner recorded the environment: the credential by path only
    texts = files_text(private, skip=(os.path.abspath(credential),))
    assert any(credential in text for path, text in texts.items() if "artifacts" in path)
    for path, text in texts.items():
        for marker in markers:
            assert marker not in text, path
