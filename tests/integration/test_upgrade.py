"""The rollout through ansible-playbook maesh.ichor.upgrade against the lab, whose machines start from real
Talos configs (tests/fixtures/configs, made by machinery v1.13.9 and v1.14.1):

* check mode sends nothing; the Talos step rolls one machine at a time, control planes first;
* a cluster at Talos v1.13.9 / Kubernetes 1.35.4 / contract v1.13 is rolled step by step (talos, config,
  kubernetes), each step rendered by the config engine, and then everything is Up to date and a run changes
  nothing; ichor_upgrade_follow does the same in one run;
* a machine that does not come back fails the run, leaves the rest untouched, gives the cluster lock back, and the
  rerun continues from it;
* a run holds the cluster lock from before its first write to its end: a second run meanwhile is refused naming it;
* the removed-API check and the etcd quorum check.
"""

import time

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record, lock
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import kubernetes_step
from ansible_collections.maesh.ichor.plugins.module_utils.talos import etcd

from tests import versions
from tests.chaos.scenario import check_lock_history
from tests.integration.ansible_env import REPO, ansible_env, ansible_playbook, write_inventory

pytestmark = pytest.mark.lab

CONFIGS = REPO + "/tests/fixtures/configs/"
V113_K8S_135 = CONFIGS + "v1.13/v1.13.9/k8s-older"  # contract v1.13, Talos v1.13.9, Kubernetes 1.35.4
V114_K8S_136 = CONFIGS + "v1.14/v1.14.1/k8s-older"  # contract v1.14, Kubernetes 1.36.3


def _inventory(lab, tmp_path, **extra_vars):
    inv = write_inventory(lab.state(), str(tmp_path / "inventory.yml"))
    data = yaml.safe_load(open(inv))
    data["all"]["vars"]["ichor_kubeconfig"] = lab.kube.kubeconfig
    data["all"]["vars"].update(extra_vars)
    with open(inv, "w") as handle:
        yaml.safe_dump(data, handle)
    return inv


# a case's contract and Kubernetes, as adopt records them
CASE_VERSIONS = {V113_K8S_135: ("v1.13", "v1.35.4"), V114_K8S_136: ("v1.14", "v1.36.3")}


def _record(lab, case):
    """The cluster record adopt or init leaves (a new lab has none, and the rollout refuses a cluster without one): the
    versions the lab's cluster runs. Returns the record as read back."""
    contract, kubernetes = CASE_VERSIONS[case]
    talos = min((m["version"] for m in lab.machines), key=release.parse)
    kube = KubeClient(kubeconfig=lab.kube.kubeconfig)
    cluster_record.update(kube, lambda data: data.update(talos=talos, contract=contract, kubernetes=kubernetes))
    return cluster_record.read(kube)


def _versions(lab):
    return dict((m["name"], m["version"]) for m in lab.machines)


def _configs(lab):
    return dict((m["name"], [d for d in yaml.safe_load_all(m["machine_config"]) if d]) for m in lab.machines)


def _kinds(docs):
    return set(d.get("kind") for d in docs if d.get("kind"))


def _image(docs, kind):
    for d in docs:
        if d.get("kind") == kind:
            return d["image"]
    return None


def _upgrade(inv, *extra, env=None):
    proc = ansible_playbook("-i", inv, "maesh.ichor.upgrade", *extra, env=env)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return proc


# the calls that change a machine: none in check mode
WRITES = {"ImagePull", "LifecycleUpgrade", "Reboot", "Upgrade", "ApplyConfiguration", "EtcdForfeitLeadership", "Reset"}


def _reboots(lab):
    """The machines that went down, in the order they did (the lab's timeline)."""
    return [m for m, what in lab.control.timeline() if what.startswith("down:")]


def test_talos_step_rolls_one_machine_at_a_time(talos_kube_lab, tmp_path):
    lab = talos_kube_lab(case=V113_K8S_135, controlplanes=1, workers=2, version="v1.13.9",
                         overrides=[{"name": "worker-2", "version": "v1.12.7"}])
    _record(lab, V113_K8S_135)
    inv = _inventory(lab, tmp_path)
    before = dict((m["name"], m["machine_config"]) for m in lab.machines)
    lab.control.reset_timeline()
    proc = _upgrade(inv, "--check", "--diff")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PLAN (check mode: nothing was written)" in proc.stdout
    for name, version in (("cp-1", "v1.13.9"), ("worker-1", "v1.13.9"), ("worker-2", "v1.12.7")):
        assert "%s: upgrade Talos from %s to %s with %s, reboot" % (
            lab.label(name), version, release.TALOS, versions.installer()) in proc.stdout, proc.stdout
    assert "Talos             v1.12.7  %s  Behind" % release.TALOS in proc.stdout
    assert "then: config, kubernetes" in proc.stdout, proc.stdout  # the config step is shown, not hidden
    assert set(_versions(lab).values()) == {"v1.13.9", "v1.12.7"}
    # check mode reads (the plan, then the Talos step's preflight) and writes nothing: no pull, no install, no reboot
    served = lab.control.timeline()  # what each machine served (the first control plane also proxies the others)
    assert not [c for c in served if c[1] in WRITES], served
    for line in ("preflight: etcd healthy with a leader: ok: 1 of 1 members healthy, cp-1 leads",
                 "preflight: Nodes Ready: ok: every Node Ready",
                 "preflight: installer pulled: ok: would pull on 2 machines before any reboot",
                 "order: control plane 1 of 1: cp-1", "order: worker batch 1 of 2: worker-1",
                 "order: worker batch 2 of 2: worker-2"):
        assert line in proc.stdout, proc.stdout
    lab.control.reset_timeline()
    proc = _upgrade(inv)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert set(_versions(lab).values()) == {release.TALOS}
    assert _reboots(lab) == ["cp-1", "worker-1", "worker-2"]
    # the Talos step leaves the configs as they were (Talos does not upgrade Kubernetes); the next step is config
    assert dict((m["name"], m["machine_config"]) for m in lab.machines) == before
    proc = _upgrade(inv, "--check")
    assert proc.returncode == 0, proc.stdout
    assert "next step: config" in proc.stdout


NO_CALLBACK = {"ANSIBLE_CALLBACKS_ENABLED": "ansible.builtin.default"}  # the default output alone, as a user has it


def _before_recap(proc):
    return proc.stdout.split("PLAY RECAP", 1)[0]


def test_check_mode_prints_the_plan_without_the_plan_callback_and_records_no_step_that_did_not_run(
        talos_kube_lab, tmp_path):
    """Issue 26 section 7: `upgrade --check --diff` as the guide writes it shows the Versions table and the next step
    with Ansible's default output; the Talos play has no hosts in check mode, so nothing reports recording its step."""
    lab = talos_kube_lab(case=V113_K8S_135, controlplanes=1, workers=1, version="v1.13.9")
    stored = _record(lab, V113_K8S_135)
    inv = _inventory(lab, tmp_path)
    mark = lab.kube.audit_mark()
    proc = _upgrade(inv, "--check", "--diff", env=NO_CALLBACK)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PLAN (check mode" not in proc.stdout  # no plan callback: what follows is the role's own output
    shown = _before_recap(proc)
    for line in ("Component         Running  Target   State", "Talos             v1.13.9  %s  Behind" % release.TALOS,
                 "next step: talos", "%s: upgrade Talos from v1.13.9 to %s" % (lab.label("cp-1"), release.TALOS),
                 "then: config, kubernetes"):
        assert line in shown, shown
    assert "Record the Talos step (the version contract moves with it)" not in proc.stdout, proc.stdout
    assert "cluster record ichor-system/ichor-cluster: set" not in proc.stdout, proc.stdout
    # the one task that reports a change is the Talos step's plan (it would change the machines): nothing else ran
    assert "changed=1" in proc.stdout, proc.stdout
    assert lab.kube.mutating_requests(since=mark, user="lab-admin", namespace="ichor-system") == []
    kube = KubeClient(kubeconfig=lab.kube.kubeconfig)
    assert cluster_record.read(kube).resource_version == stored.resource_version


def test_a_cluster_without_a_record_is_refused_with_the_way_forward(talos_kube_lab, tmp_path):
    """Issue 26 section 7: a cluster neither adopted nor initialised has no cluster record; the rollout refuses it in
    one line naming adopt and init, before anything is planned or written, in check mode and in a real run."""
    lab = talos_kube_lab(case=V113_K8S_135, controlplanes=1, workers=1, version="v1.13.9")
    inv = _inventory(lab, tmp_path)
    kube = KubeClient(kubeconfig=lab.kube.kubeconfig)
    mark = lab.kube.audit_mark()
    lab.control.reset_timeline()
    for extra in (("--check", "--diff"), ()):
        proc = _upgrade(inv, *extra)
        assert proc.returncode != 0, proc.stdout
        assert ("no cluster record ichor-system/ichor-cluster: maesh.ichor has not adopted or initialised this "
                "cluster; adopt it with maesh.ichor.adopt (a running cluster) or make it with maesh.ichor.init, then "
                "plan the upgrade again; nothing was written") in proc.stdout, proc.stdout
        assert "next step" not in proc.stdout, proc.stdout
        assert "Record the Talos step (the version contract moves with it)" not in proc.stdout, proc.stdout
    assert not cluster_record.read(kube).exists
    assert lab.kube.mutating_requests(since=mark, user="lab-admin", namespace="ichor-system") == []
    assert lab.control.timeline() == []  # refused before any machine is read
    assert _versions(lab) == {"cp-1": "v1.13.9", "worker-1": "v1.13.9"}


def test_a_machine_that_does_not_come_back_stops_the_run_and_the_rerun_continues(talos_kube_lab, tmp_path):
    lab = talos_kube_lab(case=V113_K8S_135, controlplanes=1, workers=2, version="v1.13.9")
    _record(lab, V113_K8S_135)
    inv = _inventory(lab, tmp_path)
    lab.control.set_timing("worker-1", reboot_seconds=12, upgrade_seconds=12)
    proc = _upgrade(inv, "-e", "ichor_upgrade_wait_timeout=5")
    assert proc.returncode != 0
    assert "%s: gate version: waited 5s for it to answer with Talos %s" % (
        lab.label("worker-1"), release.TALOS) in proc.stdout, proc.stdout[-3000:]
    assert "the rollout stopped after worker batch 1 of 2; nothing beyond it was touched (worker-2)" in proc.stdout
    assert _versions(lab)["cp-1"] == release.TALOS
    assert _versions(lab)["worker-2"] == "v1.13.9"  # untouched
    # the failed machine's play gave the cluster lock back: the rerun need not wait for it to expire
    assert _lease(lab) is None
    lab.wait_for("worker-1", lambda m: m["up"] and m["version"] == release.TALOS, timeout=30)
    time.sleep(1)
    proc = _upgrade(inv)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "%s: already at Talos %s, skipped" % (lab.label("cp-1"), release.TALOS) in proc.stdout
    assert set(_versions(lab).values()) == {release.TALOS}


def _lease(lab):
    return KubeClient(kubeconfig=lab.kube.kubeconfig).get(lock.API_VERSION, "Lease", lock.NAME, lock.NAMESPACE)


def test_a_run_holds_the_cluster_lock_from_before_its_first_write_to_its_end(talos_kube_lab, tmp_path):
    """Two upgrades at once interfered (found by the fault campaign): the rollout now holds the cluster lock as
    every writing playbook does."""
    import subprocess
    import sys
    lab = talos_kube_lab(case=V113_K8S_135, controlplanes=1, workers=1, version="v1.13.9")
    _record(lab, V113_K8S_135)
    inv = _inventory(lab, tmp_path)
    kube = KubeClient(kubeconfig=lab.kube.kubeconfig)
    mark = lab.kube.audit_mark()
    # another run holds it: refused before any write, naming the holder; check mode takes none and plans
    lock.acquire(kube, "maesh-ichor-other-run", 60)
    lab.control.reset_timeline()
    proc = _upgrade(inv)
    assert proc.returncode != 0
    assert "the cluster lock ichor-system/ichor-cluster-lock is held by maesh-ichor-other-run until" in proc.stdout
    assert not [e for e in lab.control.timeline() if e[1] in ("Upgrade", "ApplyConfiguration", "Reboot")]
    assert _versions(lab) == {"cp-1": "v1.13.9", "worker-1": "v1.13.9"}
    proc = _upgrade(inv, "--check")
    assert proc.returncode == 0, proc.stdout
    lock.release(kube, "maesh-ichor-other-run")
    # a run in progress holds it (the machines reboot slowly, so it is seen), a second run meanwhile is refused
    # naming it, and it is given back at the end
    for name in ("cp-1", "worker-1"):
        lab.control.set_timing(name, reboot_seconds=3, upgrade_seconds=3)
    exe = sys.executable.rsplit("/", 1)[0] + "/ansible-playbook"
    with open(str(tmp_path / "first.log"), "w+") as log:
        first = subprocess.Popen([exe, "-i", inv, "maesh.ichor.upgrade", "-e", "ichor_upgrade_follow=true"],
                                 env=ansible_env(), cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        try:
            lab.wait_for("cp-1", lambda m: not m["up"], timeout=60)
            holder = (_lease(lab) or {}).get("spec", {}).get("holderIdentity")
            assert holder and holder.startswith("maesh-ichor-"), holder
            # the second run looks at the lock before it reads the machines (one of them is rebooting)
            second = _upgrade(inv, "-e", "ichor_upgrade_follow=true")
            assert second.returncode != 0, second.stdout[-3000:]
            assert "is held by %s until" % holder in second.stdout, second.stdout[-3000:]
            assert "TASK [maesh.ichor.upgrade : Judge the cluster against the release set]" not in second.stdout
            assert first.wait(300) == 0, open(str(tmp_path / "first.log")).read()[-4000:]
        finally:
            if first.poll() is None:  # a failed assertion leaves no run behind against a stopped lab
                first.kill()
    assert _lease(lab) is None
    _assert_at_the_set(lab, inv)
    check_lock_history(lab.kube.audit_events(mark))  # never two holders at once, from the API server's audit log


def _upgrade_rebooting_once(lab, inv, tmp_path, seen, what, victim):
    """Run the upgrade and, once the timeline shows ``seen`` (``what`` it means), reboot ``victim`` unasked for 8 s;
    the run must fail. Returns its output."""
    import subprocess
    import sys
    exe = sys.executable.rsplit("/", 1)[0] + "/ansible-playbook"
    with open(str(tmp_path / "run.log"), "w+") as log:
        run = subprocess.Popen([exe, "-i", inv, "maesh.ichor.upgrade"], env=ansible_env(), cwd=REPO, stdout=log,
                               stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120
            while seen not in [tuple(e) for e in lab.control.timeline()]:
                assert time.monotonic() < deadline and run.poll() is None, "the run never reached: " + what
                time.sleep(0.02)
            lab.control.reboot(victim, seconds=8)
            assert run.wait(300) != 0
        finally:
            if run.poll() is None:
                run.kill()
        log.seek(0)
        return log.read()


def test_a_control_plane_down_on_its_own_stops_the_rollout_before_the_next_one(talos_kube_lab, tmp_path):
    """Found by the fault campaign (seed 3251 when it drove only the upgrade: cp-3 rebooting unasked for 7.75 s just
    after the first write): the rollout took cp-2 down while cp-3 was down, since 2 of 3 etcd members answered; etcd
    kept 1 of 3. A control plane is now upgraded only when etcd keeps its quorum without it."""
    lab = talos_kube_lab(case=V113_K8S_135, controlplanes=3, workers=0, version="v1.13.9")
    _record(lab, V113_K8S_135)
    inv = _inventory(lab, tmp_path)
    lab.control.reset_timeline()
    # cp-1 leads etcd, so the order is cp-2, cp-3, then cp-1: cp-3 goes down on its own while cp-2 reboots and stays
    # down 8 s, past cp-2's return (cp-1 is also the talosconfig's endpoint, which proxies every call). Taken down
    # once cp-2 is back, it raced the rollout: cp-2's gates pass within a tenth of a second of its boot.
    out = _upgrade_rebooting_once(lab, inv, tmp_path, ("cp-2", "down:rebooting"), "cp-2 rebooting", "cp-3")
    assert "order: control plane 3 of 3: cp-1" in out, out[-3000:]
    assert "%s: etcd: etcd is not healthy (etcd on %s does not answer" % (lab.label("cp-3"), lab.address("cp-3")) \
        in out, out[-3000:]
    assert "no upgrade was started; the rollout stopped at control plane 2 of 3; nothing beyond it was touched " \
           "(cp-1)" in out, out[-3000:]
    down = set()
    for machine, what in lab.control.timeline():  # never a control plane taken down while another is down
        if what.startswith("down:"):
            assert what == "down:unasked" or not down, (machine, what, down)
            down.add(machine)
        elif what == "boot":
            down.discard(machine)
    assert ("cp-3", "Upgrade") not in [tuple(e) for e in lab.control.timeline()]
    assert _versions(lab) == {"cp-1": "v1.13.9", "cp-2": release.TALOS, "cp-3": "v1.13.9"}
    assert _lease(lab) is None  # the failed run gave the lock back
    lab.wait_for("cp-3", lambda m: m["up"], timeout=30)
    proc = _upgrade(inv)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert set(_versions(lab).values()) == {release.TALOS}


def test_a_control_plane_is_not_rebooted_when_another_went_down_while_its_installer_ran(talos_kube_lab, tmp_path):
    """Found by the soak of 2026-12-05 (seed 2939: cp-2 rebooting unasked the moment it was back from its upgrade):
    the rollout judged cp-3's etcd before the pull and the installer, and rebooted it after them, while cp-2 was down;
    etcd kept 1 of 3. On a real machine the pull and the installer take minutes: etcd is now judged again between the
    installer and the reboot. Here cp-2's installer runs 3 s, cp-3 goes down meanwhile; cp-2 is not rebooted, the run
    says so, and the rerun (cp-3 back) finishes."""
    lab = talos_kube_lab(case=V113_K8S_135, controlplanes=3, workers=0, version="v1.13.9")
    _record(lab, V113_K8S_135)
    inv = _inventory(lab, tmp_path)
    # the order is cp-2, cp-3, then cp-1 (the leader): cp-2, back, goes down on its own while cp-3's installer runs
    lab.control.set_faults("cp-3", installer_seconds=3)
    lab.control.reset_timeline()
    out = _upgrade_rebooting_once(lab, inv, tmp_path, ("cp-3", "Upgrade"), "cp-3's installer", "cp-2")
    assert "%s: etcd: etcd is no longer healthy (only 1 of the 2 other etcd members are healthy: etcd would lose its " \
           "quorum of 2 while %s is down); Talos %s is installed but the machine was not rebooted and still runs Talos " \
           "v1.13.9; rerun once etcd is healthy" % (lab.label("cp-3"), lab.address("cp-3"), release.TALOS) in out, \
        out[-3000:]
    timeline = [tuple(e) for e in lab.control.timeline()]
    assert ("cp-3", "Reboot") not in timeline and ("cp-3", "down:rebooting") not in timeline, timeline
    assert _versions(lab) == {"cp-1": "v1.13.9", "cp-2": release.TALOS, "cp-3": "v1.13.9"}
    lab.control.clear_faults("cp-3")
    lab.wait_for("cp-2", lambda m: m["up"], timeout=30)
    proc = _upgrade(inv)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert set(_versions(lab).values()) == {release.TALOS}


def test_talos_step_stops_at_a_failed_installer_without_a_reboot(talos_kube_lab, tmp_path):
    """Issue 11: an installer that exits non-zero is not followed by a Reboot nor reported as success."""
    lab = talos_kube_lab(case=V113_K8S_135, controlplanes=1, workers=2, version="v1.13.9")
    _record(lab, V113_K8S_135)
    inv = _inventory(lab, tmp_path)
    lab.control.set_faults("worker-1", installer_exit_code=7)
    lab.control.reset_calls("worker-1")
    proc = _upgrade(inv)
    assert proc.returncode != 0
    said = ("%s: install: the Talos installer (%s) exited with code 7 (installation "
            "error), it said: " % (lab.label("worker-1"), versions.installer()))
    assert said in proc.stdout, proc.stdout[-3000:]
    assert ("validating install disk / error: failed to install bootloader: write /boot/EFI: no space left on device"
            in proc.stdout.split(said, 1)[1].split("; the machine was not rebooted", 1)[0]), proc.stdout[-3000:]
    assert "the machine was not rebooted and still runs Talos v1.13.9; fix the cause and rerun" in proc.stdout
    calls = lab.control.calls("worker-1")
    # pulled by the preflight (every machine, before any reboot) and again by its batch (the name it installs from)
    assert "Reboot" not in calls and calls.get("Pull") == 2 and calls.get("Upgrade") == 1, calls
    assert _versions(lab) == {"cp-1": release.TALOS, "worker-1": "v1.13.9", "worker-2": "v1.13.9"}
    assert lab.machine("worker-1")["up"] and lab.machine("worker-1")["stage"] == "running"
    # the cause fixed, the rerun continues from worker-1
    lab.control.clear_faults("worker-1")
    proc = _upgrade(inv)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert set(_versions(lab).values()) == {release.TALOS}


DIGEST = "sha256:" + "0123456789abcdef" * 4
PINNED = "registry.example:5000/siderolabs/installer:%s@%s" % (release.TALOS, DIGEST)

TALOS_UPGRADE_PLAY = """
- hosts: controlplane:worker
  serial: 1
  gather_facts: false
  tasks:
    - maesh.ichor.talos_upgrade:
        talosconfig: "{{ ichor_talosconfig }}"
        kubeconfig: "{{ ichor_kubeconfig }}"
        node: "{{ ansible_host }}"
        name: "{{ inventory_hostname }}"
        role: "{{ 'controlplane' if 'controlplane' in group_names else 'worker' }}"
        image: "{{ image }}"
"""


def test_an_installer_pinned_by_digest_upgrades_to_its_tag_and_converges(talos_kube_lab, tmp_path):
    """Issue 12: name:vX.Y.Z@sha256:... targets vX.Y.Z (not the digest), so the rerun changes nothing; a digest alone is
    refused before anything is sent."""
    lab = talos_kube_lab(case=V113_K8S_135, controlplanes=1, workers=1, version="v1.13.9")
    _record(lab, V113_K8S_135)
    inv = _inventory(lab, tmp_path)
    play = tmp_path / "talos_upgrade.yml"
    play.write_text(TALOS_UPGRADE_PLAY)
    lab.control.reset_calls("worker-1")
    proc = ansible_playbook("-i", inv, str(play), "-e", "image=registry.example:5000/siderolabs/installer@" + DIGEST)
    assert proc.returncode != 0
    assert "is pinned by digest only: the Talos version it installs cannot be known before the upgrade" in proc.stdout
    assert not set(lab.control.calls("worker-1")) & {"Pull", "Upgrade", "Reboot"}
    proc = _upgrade(inv, "-e", "ichor_upgrade_installer_image=" + PINNED, "-e", "ichor_upgrade_wait_timeout=30")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert set(_versions(lab).values()) == {release.TALOS}
    proc = ansible_playbook("-i", inv, str(play), "-e", "image=" + PINNED)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "changed=0" in proc.stdout and "changed=1" not in proc.stdout, proc.stdout
    assert "%s: already at Talos %s, skipped" % (lab.label("worker-1"), release.TALOS) in proc.stdout


def _assert_at_the_set(lab, inv):
    configs = _configs(lab)
    for name, docs in configs.items():
        assert "KubeletConfig" in _kinds(docs), name  # the set's contract form (typed documents)
        assert _image(docs, "KubeletConfig") == "ghcr.io/siderolabs/kubelet:%s" % release.KUBERNETES
    assert _image(configs["cp-1"], "KubeAPIServerConfig") == "registry.k8s.io/kube-apiserver:%s" % release.KUBERNETES
    assert _image(configs["cp-1"], "KubeProxyConfig") == "registry.k8s.io/kube-proxy:%s" % release.KUBERNETES
    stored = cluster_record.read(KubeClient(kubeconfig=lab.kube.kubeconfig)).data
    assert (stored["talos"], stored["contract"], stored["kubernetes"]) == (release.TALOS, release.CONTRACT,
                                                                           release.KUBERNETES)
    proc = _upgrade(inv, "--check", "--diff")
    assert proc.returncode == 0, proc.stdout
    for component, version in (("Talos", release.TALOS), ("Version contract", release.CONTRACT),
                               ("Kubernetes", release.KUBERNETES)):
        assert "%-16s  %-7s  %-7s  Up to date" % (component, version, version) in proc.stdout, proc.stdout
    proc = _upgrade(inv)
    assert proc.returncode == 0 and "changed=0" in proc.stdout, proc.stdout
    assert "the cluster is at the release set; nothing to do" in proc.stdout


def test_a_v113_cluster_is_rolled_step_by_step_to_the_set(talos_kube_lab, tmp_path):
    lab = talos_kube_lab(case=V113_K8S_135, controlplanes=1, workers=1, version="v1.13.9")
    _record(lab, V113_K8S_135)
    inv = _inventory(lab, tmp_path)

    # talos
    proc = _upgrade(inv)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert set(_versions(lab).values()) == {release.TALOS}

    # config: the plan (Talos's dry run says whether it reboots), with a masked diff, then the step
    proc = _upgrade(inv, "--check", "--diff")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "next step: config" in proc.stdout
    assert "cp-1: config from the v1.13 form to %s (no reboot)" % release.CONTRACT in proc.stdout
    assert "worker-1: config from the v1.13 form to %s (no reboot)" % release.CONTRACT in proc.stdout
    assert "reboots: none" in proc.stdout
    assert "KubeletConfig" in proc.stdout and "PRIVATE KEY" not in proc.stdout
    assert all("KubeletConfig" not in _kinds(docs) for docs in _configs(lab).values())
    proc = _upgrade(inv)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name, docs in _configs(lab).items():
        assert _image(docs, "KubeletConfig") == "ghcr.io/siderolabs/kubelet:v1.35.4", name
    assert all(m["stage"] == "running" for m in lab.machines)

    # kubernetes: control planes, kube-proxy, kubelets
    proc = _upgrade(inv, "--check")
    assert proc.returncode == 0, proc.stdout
    lines = [line.strip().lstrip("- ") for line in proc.stdout.splitlines()]
    order = [i for i, line in enumerate(lines) if line in (
        "cp-1: control plane (kube-apiserver, kube-controller-manager, kube-scheduler) to %s (no reboot)" % release.KUBERNETES,
        "cp-1: kube-proxy to %s (no reboot)" % release.KUBERNETES,
        "cp-1 (Node %s): kubelet to %s (no reboot)" % (lab.node_name("cp-1"), release.KUBERNETES),
        "worker-1 (Node %s): kubelet to %s (no reboot)" % (lab.node_name("worker-1"), release.KUBERNETES))]
    assert len(order) == 4 and order == sorted(order), proc.stdout
    proc = _upgrade(inv)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    _assert_at_the_set(lab, inv)


def test_follow_runs_the_steps_in_order_in_one_run(talos_kube_lab, tmp_path):
    lab = talos_kube_lab(case=V113_K8S_135, controlplanes=1, workers=1, version="v1.13.9")
    _record(lab, V113_K8S_135)
    # the inventory's spec (in part) and bundle file, instead of what the running configs state
    inv = _inventory(lab, tmp_path, ichor_cluster={"name": "k8s-older", "network": {"dnsDomain": "cluster.local"}},
                     ichor_secrets=V113_K8S_135 + "/secrets.yaml")
    # the inventory's spec is what the engine renders from: another name is refused, naming the path
    proc = _upgrade(inv, "--check", "-e", '{"ichor_cluster": {"name": "prod"}}')
    assert proc.returncode != 0 and "v1alpha1:cluster.clusterName" in proc.stdout, proc.stdout
    proc = _upgrade(inv, "-e", "ichor_upgrade_follow=true")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tasks = [line for line in proc.stdout.splitlines() if line.startswith("TASK [")]
    ran = [t for t in tasks if any(k in t for k in ("Roll Talos over the machines", "Move each machine's config",
                                                    "Upgrade Kubernetes"))]
    assert [t.split(":", 1)[-1].split("]")[0].strip() for t in ran][-3:] == [
        "Roll Talos over the machines (preflight, batches, gates)", "Move each machine's config to the release set's contract form",
        "Upgrade Kubernetes (control planes, kube-proxy, kubelets; no reboot)"], tasks
    _assert_at_the_set(lab, inv)


def test_a_run_stopped_before_it_recorded_its_step_is_recorded_by_the_rerun(talos_kube_lab, tmp_path):
    # found by the fault campaign (its first schedule: ansible-playbook killed with SIGKILL after the Talos
    # step upgraded every machine, before it recorded the step): the rerun found the step done, never recorded it,
    # and the record stated Talos v1.13.9 for machines that all ran the set's
    lab = talos_kube_lab(case=V113_K8S_135, controlplanes=1, workers=1, version=release.TALOS)
    kube = KubeClient(kubeconfig=lab.kube.kubeconfig)
    cluster_record.update(kube, lambda data: data.update(talos="v1.13.9", contract="v1.13", kubernetes="v1.35.4"))
    inv = _inventory(lab, tmp_path)
    proc = _upgrade(inv, "--check")
    assert proc.returncode == 0, proc.stdout
    assert "the cluster record is behind what every machine runs (a run stopped before recording its step): record " \
           "contract %s, talos %s" % (release.CONTRACT, release.TALOS) in proc.stdout, proc.stdout
    assert cluster_record.read(kube).data["talos"] == "v1.13.9"  # check mode wrote nothing
    proc = _upgrade(inv, "-e", "ichor_upgrade_follow=true")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _assert_at_the_set(lab, inv)


def _kube_proxy_daemonset(kube, image):
    kube.apply({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "kube-proxy", "namespace": "kube-system"},
                "spec": {"selector": {"matchLabels": {"k8s-app": "kube-proxy"}},
                         "template": {"metadata": {"labels": {"k8s-app": "kube-proxy"}},
                                      "spec": {"containers": [{"name": "kube-proxy", "image": image}]}}}}, "talos")


def test_follow_stops_rather_than_start_a_step_a_second_time(talos_kube_lab, tmp_path):
    # --limit keeps worker-1 out of the Talos step, so the plan after it still starts with talos
    lab = talos_kube_lab(case=V113_K8S_135, controlplanes=1, workers=1, version="v1.13.9")
    _record(lab, V113_K8S_135)
    inv = _inventory(lab, tmp_path)
    proc = _upgrade(inv, "-e", "ichor_upgrade_follow=true", "--limit", "cp-1,localhost")
    assert proc.returncode != 0
    assert "the talos step is still needed after it ran; stopping rather than starting it a second time" in proc.stdout
    assert _versions(lab) == {"cp-1": release.TALOS, "worker-1": "v1.13.9"}
    # worker-1 was not upgraded: the record keeps its versions (issue 26 section 7), and the run says why
    assert "the Talos step is not recorded: this run did not upgrade worker-1" in proc.stdout, proc.stdout
    stored = cluster_record.read(KubeClient(kubeconfig=lab.kube.kubeconfig))
    assert (stored.get("talos"), stored.get("contract")) == ("v1.13.9", "v1.13")
    assert all("KubeletConfig" not in _kinds(docs) for docs in _configs(lab).values())


def test_kubernetes_step_alone_moves_the_kube_proxy_daemonset_too(talos_kube_lab, tmp_path):
    lab = talos_kube_lab(case=V114_K8S_136, controlplanes=1, workers=1, version=release.TALOS)
    _record(lab, V114_K8S_136)
    kube = KubeClient(kubeconfig=lab.kube.kubeconfig)
    _kube_proxy_daemonset(kube, "registry.k8s.io/kube-proxy:v1.36.3")
    try:
        inv = _inventory(lab, tmp_path)
        proc = _upgrade(inv, "--check", "--diff")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "next step: kubernetes" in proc.stdout
        assert "worker-1 (Node %s): kubelet to %s (no reboot)" % (lab.node_name("worker-1"), release.KUBERNETES) in proc.stdout
        assert "kube-system/kube-proxy DaemonSet to %s" % release.KUBERNETES in proc.stdout
        assert "kubelet:v1.36.3" in lab.machine("worker-1")["machine_config"]
        proc = _upgrade(inv)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "kubelet:" + release.KUBERNETES in lab.machine("worker-1")["machine_config"]
        ds = kube.get("apps/v1", "DaemonSet", "kube-proxy", "kube-system")
        assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.k8s.io/kube-proxy:" + release.KUBERNETES
        proc = _upgrade(inv)
        assert proc.returncode == 0 and "changed=0" in proc.stdout, proc.stdout
    finally:
        kube.delete("apps/v1", "DaemonSet", "kube-proxy", "kube-system")


def _bundle_secrets(case_dir):
    """Every secret value of the case's bundle, as it appears in the bundle and in a config."""
    import base64
    with open(case_dir + "/secrets.yaml") as handle:
        bundle = yaml.safe_load(handle)
    values = [bundle["cluster"]["id"], bundle["cluster"]["secret"], bundle["secrets"]["bootstraptoken"],
              bundle["secrets"]["secretboxencryptionsecret"], bundle["trustdinfo"]["token"]]
    for name, pair in bundle["certs"].items():
        if pair.get("key"):
            values.append(pair["key"])
        if name in ("k8s", "k8saggregator", "k8sserviceaccount"):
            # the v1.14 form holds these keys as PEM text: the first line of the key body
            values.append(base64.b64decode(pair["key"]).decode().splitlines()[1])
    return values


def _awx_job(lab, inv, tmp_path):
    """The upgrade job template as AWX runs it: the inventory without credentials, the managed-cluster credential
    (the talosconfig, with a marker, and the kubeconfig) injected; ``job.markers`` are their secrets."""
    from tests.integration.awx import AwxJob, kubeconfig_markers
    from tests.integration.test_reclaim import marked_talosconfig
    job = AwxJob(tmp_path / "runner", "upgrade")
    job.inventory(yaml.safe_load(open(inv)))
    marked = str(tmp_path / "marked-talosconfig")
    job.markers = marked_talosconfig(lab, marked) + kubeconfig_markers(lab.kube.kubeconfig)
    with open(marked) as talos, open(lab.kube.kubeconfig) as kube:  # the type docs/awx/credential_types.yml defines
        job.credential_of_type("managed_cluster", {"talosconfig": talos.read(), "kubeconfig": kube.read(),
                                                   "cluster": "k8s-older"})  # the case's cluster
    return job


@pytest.mark.floor
def test_upgrade_through_ansible_runner_as_awx_runs_it_leaks_no_secret(talos_kube_lab, tmp_path):
    """The plan job, the run job with ichor_upgrade_follow from the survey (talos, config, kubernetes in one job), and
    a rerun that changes nothing, each through ansible-runner; no credential or bundle secret in what they left."""
    lab = talos_kube_lab(case=V113_K8S_135, controlplanes=1, workers=1, version="v1.13.9")
    _record(lab, V113_K8S_135)
    job = _awx_job(lab, _inventory(lab, tmp_path), tmp_path)
    outs = []
    for cmdline in ("--check --diff", None, None):
        rc, out = job.run({"ichor_upgrade_follow": True}, cmdline=cmdline, job_id=len(outs) + 1)
        assert rc == 0, out[-4000:]
        outs.append(out)
    assert "next step: talos" in outs[0] and "then: config, kubernetes" in outs[0], outs[0][-4000:]
    assert set(_versions(lab).values()) == {release.TALOS}
    assert "the cluster is at the release set; nothing to do" in outs[2] and "changed=0" in outs[2], outs[2][-3000:]
    assert job.sweep(_bundle_secrets(V113_K8S_135) + job.markers, outs) == []


def test_config_step_reboots_what_talos_says_and_leaks_no_secret(talos_kube_lab, tmp_path):
    # Talos already at the set, configs still in the v1.13 form: the first step is config
    lab = talos_kube_lab(case=V113_K8S_135, controlplanes=1, workers=1, version=release.TALOS)
    _record(lab, V113_K8S_135)
    lab.control.set_faults("cp-1", apply_needs_reboot=True)
    inv = _inventory(lab, tmp_path)
    markers = _bundle_secrets(V113_K8S_135)
    proc = _upgrade(inv, "--check", "--diff", "-vvvv")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cp-1: config from the v1.13 form to %s (reboots)" % release.CONTRACT in proc.stdout
    assert "worker-1: config from the v1.13 form to %s (no reboot)" % release.CONTRACT in proc.stdout
    assert "reboots: cp-1" in proc.stdout
    assert "KubeletConfig" in proc.stdout and "<redacted>" in proc.stdout
    for marker in markers:
        assert marker not in proc.stdout + proc.stderr
    assert all("KubeletConfig" not in _kinds(docs) for docs in _configs(lab).values())
    # the same plan as an AWX job (tests/integration/awx.py): the credentials injected, nothing of them or of the
    # bundle in the runner's artifacts
    job = _awx_job(lab, inv, tmp_path)
    rc, out = job.run(cmdline="--check --diff")
    assert rc == 0 and "config from the v1.13 form to " + release.CONTRACT in out, out[-4000:]
    assert job.sweep(markers + job.markers, [out]) == []

    proc = _upgrade(inv, "--diff", "-vvvv")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for marker in markers:
        assert marker not in proc.stdout + proc.stderr
    assert lab.stderr().count("cp-1 down") == 1 and "worker-1 down" not in lab.stderr()
    # the markers are real: each is in the control plane's config before or after the step
    with open(V113_K8S_135 + "/controlplane.conf") as handle:
        held = handle.read() + lab.machine("cp-1")["machine_config"]
    assert all(marker in held for marker in markers)
    for name, docs in _configs(lab).items():
        assert _image(docs, "KubeletConfig") == "ghcr.io/siderolabs/kubelet:v1.35.4", name
    assert "next step: kubernetes" in _upgrade(inv, "--check").stdout


def test_removed_api_check_reads_metrics_only_with_the_right_rbac(kube_lab, kube_namespace):
    from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient, KubeError
    denied = KubeClient(kubeconfig=kube_lab.service_account_kubeconfig(kube_namespace, "no-metrics"))
    with pytest.raises(KubeError) as exc:
        denied.raw_get("/metrics")
    assert "403" in str(exc.value)
    allowed = KubeClient(kubeconfig=kube_lab.service_account_kubeconfig(kube_namespace, "metrics", rbac={
        "cluster_rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}))
    metrics = allowed.raw_get("/metrics")
    assert "apiserver_request_total" in metrics
    # the lab's API server serves no API removed by its own version: the no-hit path
    assert kubernetes_step.removed_apis_in_use(metrics, release.KUBERNETES) == []


def test_etcd_health_needs_a_quorum_of_members(talos_lab):
    from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as tc
    from ansible_collections.maesh.ichor.plugins.module_utils.talos import talosconfig
    lab = talos_lab(controlplanes=3, workers=0)
    cp1 = lab.address("cp-1")
    with tc.TalosClient(talosconfig.load(lab.talosconfig), timeout=3) as client:
        assert etcd.health(client, cp1) == (True, "3 of 3 etcd members healthy")
        lab.control.set_faults("cp-2", unreachable=True)
        assert etcd.health(client, cp1) == (True, "2 of 3 etcd members healthy")
        # cp-1 must not go down now: etcd would keep 1 of 3 (the rollout's check before a control plane reboots)
        assert etcd.health(client, cp1, going_down=True) == (
            False, "only 1 of the 2 other etcd members are healthy: etcd would lose its quorum of 2 while %s is "
                   "down" % cp1)
        lab.control.clear_faults("cp-2")
        assert etcd.health(client, cp1, going_down=True) == (True, "3 of 3 etcd members healthy")
        lab.control.set_faults("cp-2", unreachable=True)
        lab.control.set_faults("cp-3", unreachable=True)
        assert etcd.health(client, cp1) == (False, "only 1 of 3 etcd members are healthy (no quorum)")


def test_kubernetes_step_pulls_every_component_image_on_every_machine_before_its_first_apply(talos_kube_lab, tmp_path):
    # issue 46: Talos at the set, Kubernetes behind; the images upgrade-k8s pre-pulls (pkg/cluster/kubernetes/
    # talos_managed.go prePullImages): the control plane's three static pod images and every machine's kubelet
    lab = talos_kube_lab(case=V114_K8S_136, controlplanes=1, workers=2, version=release.TALOS)
    _record(lab, V114_K8S_136)
    inv = _inventory(lab, tmp_path)
    images = ["registry.k8s.io/%s:%s" % (c, release.KUBERNETES)
              for c in ("kube-apiserver", "kube-controller-manager", "kube-scheduler")]
    kubelet = "ghcr.io/siderolabs/kubelet:" + release.KUBERNETES
    lab.control.reset_timeline()
    proc = _upgrade(inv, "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "next step: kubernetes" in proc.stdout
    assert "pull before anything is applied (ImageService.Pull): %s on 1 machine; %s (system namespace) on 3 machines" % (
        ", ".join("%s (k8s.io namespace)" % i for i in images), kubelet) in proc.stdout, proc.stdout
    assert not [c for c in lab.control.timeline() if c[1] in WRITES]  # check mode: nothing pulled, nothing applied

    # a worker whose registry does not serve the image: the step fails naming it, nothing applied anywhere
    lab.control.set_faults("worker-1", pull_error=True)
    lab.control.reset_timeline()
    proc = _upgrade(inv)
    assert proc.returncode != 0
    assert "the Kubernetes images could not be pulled on 1 machine (worker-1); nothing was applied: worker-1: " \
           "%s" % kubelet in proc.stdout, proc.stdout
    served = lab.control.timeline()
    assert ("worker-1", "Pull") in served and not [c for c in served if c[1] == "ApplyConfiguration"], served
    assert all("kubelet:v1.36.3" in m["machine_config"] for m in lab.machines)

    lab.control.clear_faults("worker-1")
    lab.control.reset_timeline()
    proc = _upgrade(inv)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    served = lab.control.timeline()
    calls = [c for c in served if c[1] in ("Pull", "ApplyConfiguration")]
    first_apply = [c[1] for c in calls].index("ApplyConfiguration")
    pulls = calls[:first_apply]
    assert sorted(pulls) == sorted([("cp-1", "Pull")] * 4 + [("worker-1", "Pull"), ("worker-2", "Pull")]), served
    assert ("Pull" not in [c[1] for c in calls[first_apply:]]), served
    assert set(c[0] for c in calls[first_apply:]) == {"cp-1", "worker-1", "worker-2"}
    _assert_at_the_set(lab, inv)
