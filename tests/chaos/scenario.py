"""What each playbook brings to the campaign: a lab as the playbook finds it in use, the arguments of its runs, what
its runs write, and the invariants that must hold after a fault and after the calm rerun (checked from outside: the
simulator's timeline and state, the API server and its audit log, Helm's records; never the playbook's output)."""

import base64
import datetime
import gzip
import json
import os
import re
import time

import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient
from tests.integration.ansible_env import REPO, write_inventory
from tests.lab.agent import LabAgent
from tests.lab.kube.cluster import KubeLab, event_user, is_dry_run, is_system_user, MUTATING_VERBS
from tests.lab.process import LabProcess

# the calls that change a machine (as the simulator's timeline names them); the rest read
TALOS_WRITES = frozenset(("ApplyConfiguration", "Upgrade", "Reboot", "Reset", "Bootstrap", "EtcdLeaveCluster",
                          "EtcdRemoveMemberByID", "Shutdown", "Pull"))
# what changes a machine's config or takes it down: none of it may reach a machine while adopt holds it
HOLD_BREAKERS = frozenset(("ApplyConfiguration", "Upgrade", "Reboot", "Reset", "Shutdown"))
# the lab agent mirrors the simulated machines into Nodes: its writes are the lab's, not a run's
AGENT_USER_AGENT = "ichor-chaos-lab-agent"
# what a run writes to the API server that is only bookkeeping (the lock) or noise (Events)
BOOKKEEPING = frozenset(("leases", "events"))

# the stages of a machine that is done with what it was doing (not installing, rebooting, resetting)
SETTLED = ("running", "maintenance")
# the admission policy of the refuse_writes fault: the campaign's own write, never a run's
REFUSE_WRITES = "ichor-chaos-refuse-writes"

# faults any playbook's run can meet; the Talos and API server ones need that part in the scenario's lab
RUN_FAULTS = ("sigkill", "sigterm", "second_run")
# a run of another writing playbook (an install of a one-object bundle) started while the faulted run goes on: the two
# share the cluster lock
OTHER_FAULTS = ("second_other",)
OTHER_NAMESPACE = "chaos-other"
TALOS_FAULTS = ("unreachable", "lose_reply", "slow", "reboot")
API_FAULTS = ("apiserver_restart", "refuse_writes")


class Violation(AssertionError):
    """An invariant did not hold."""


class Lab:
    """A fresh lab per schedule: an API server (its own audit log) and, when ``controlplanes``, simulated machines
    mirrored into it by the lab agent, with an inventory of them."""

    def __init__(self, work, controlplanes=0, workers=0, version=None, case=None, **machines):
        self.work = work
        self.kube = KubeLab.start(workdir=os.path.join(work, "kube"))
        self.client = KubeClient(kubeconfig=self.kube.kubeconfig)
        self.talos = self.agent = None
        self.inventory = None
        if controlplanes:
            self.talos = LabProcess(os.path.join(work, "talos"), controlplanes=controlplanes, workers=workers,
                                    version=version, case=case, **machines).start(timeout=60)
            self.talos.control.settings(kubeconfig_path=self.kube.kubeconfig)
            api_client = self.kube.api_client()
            api_client.user_agent = AGENT_USER_AGENT
            self.agent = LabAgent(api_client, talos_lab=self.talos, owner="chaos")
            self.agent.sync_once()
            self.agent.start()
            self.inventory = self.write_inventory()
        self.audit_start = self.kube.audit_mark()

    def write_inventory(self, path=None, **extra_vars):
        path = path or os.path.join(self.work, "inventory.yml")
        write_inventory(self.talos.state(), path)
        with open(path) as handle:
            data = yaml.safe_load(handle)
        data["all"]["vars"]["ichor_kubeconfig"] = self.kube.kubeconfig
        data["all"]["vars"].update(extra_vars)
        with open(path, "w") as handle:
            yaml.safe_dump(data, handle)
        return path

    def timeline(self):
        return self.talos.control.timeline() if self.talos else []

    def machine_names(self):
        return [m["name"] for m in self.talos.machines] if self.talos else []

    def stop(self):
        if self.agent:
            self.agent.stop()
        if self.talos:
            self.talos.stop()
        self.kube.stop()


def run_writes(events):
    """The audit events of writes a run made (not the lab's control plane, not the lab agent, not dry runs, not the
    lock or Events, not the campaign's own fault), in order."""
    out = []
    for event in events:
        if event.get("verb") not in MUTATING_VERBS or is_dry_run(event):
            continue
        if is_system_user(event_user(event)) or (event.get("userAgent") or "").startswith(AGENT_USER_AGENT):
            continue
        if (event.get("objectRef") or {}).get("resource") in BOOKKEEPING:
            continue
        if (event.get("objectRef") or {}).get("name") == REFUSE_WRITES:
            continue
        if (event.get("responseStatus") or {}).get("code", 200) >= 300:
            continue
        out.append(event)
    return out


def may_have_landed(event):
    """Whether a write may have changed what is stored: answered 2xx, or 5xx, or a create answered 409. The
    kube-apiserver answers 504 ("context canceled") to a write whose client went away mid-request (its run killed) and
    may have stored the object all the same (seed 2992: a backup created "504", then read back by the rerun); in the
    lab, such a create was once answered 409 AlreadyExists for a name nobody else wrote (its storage write retried
    after it had landed). Only a read after such a write says what is stored; the runs compare what they read."""
    code = (event.get("responseStatus") or {}).get("code", 200)
    return code < 300 or code >= 500 or (event.get("verb") == "create" and code == 409)


# The cluster lock as the docs name it (docs/README.md), read by the judge from the Lease itself: its holderIdentity,
# renewTime (or acquireTime), leaseDurationSeconds and annotations; never through the collection's lock code
LOCK_NAMESPACE, LOCK_NAME = "ichor-system", "ichor-cluster-lock"
PROCESS_ANNOTATION = "maesh.ichor/process"  # "<controller> <pid> <start>" of the holder's ansible-playbook
BROKEN_ANNOTATION = "maesh.ichor/broken"  # "<holder>, broken by ...": a lock broken as an operator asked
LOCKING_ROLES = ("adopt", "init", "installer", "upgrade")
# A run's writes as the audit log names their author: each run of a schedule writes as a user of its own
# (Scenario.identity); the lab, the lab agent and the campaign's faults write as the lab's admin
RUN_USER_PREFIX = "ichor-chaos-run-"
# how long after its ansible-playbook is gone a run may still have a write arrive (one sent just before, or the
# heartbeat's, which looks at the playbook's process every second)
QUIET_AFTER_S = 2.0


def production_lock_duration():
    """The lock duration an operator gets: the roles' defaults (``ichor_<role>_lock_duration``), read from the roles'
    files (the campaign passes none: its runs hold the production lock)."""
    found = {}
    for role in LOCKING_ROLES:
        with open(os.path.join(REPO, "roles", role, "defaults", "main.yml")) as handle:
            found[role] = yaml.safe_load(handle)["ichor_%s_lock_duration" % role]
    if len(set(found.values())) != 1:
        raise RuntimeError("the roles' lock durations differ: %s" % found)
    return found[LOCKING_ROLES[0]]


def _epoch(stamp):
    """An audit timestamp or a Lease MicroTime (RFC 3339, UTC, with or without a fraction) as epoch seconds; None when
    absent."""
    if not stamp:
        return None
    text = str(stamp).replace("Z", "+0000")
    form = "%Y-%m-%dT%H:%M:%S.%f%z" if "." in text else "%Y-%m-%dT%H:%M:%S%z"
    return datetime.datetime.strptime(text, form).timestamp()


def lease_state(lease, now):
    """(holder or None, expires at (epoch seconds) or None, expired) of the Lease body, from its own fields."""
    spec = (lease or {}).get("spec") or {}
    holder = spec.get("holderIdentity") or None
    if holder is None:
        return None, None, True
    renewed = _epoch(spec.get("renewTime") or spec.get("acquireTime"))
    duration = spec.get("leaseDurationSeconds")
    if renewed is None or not isinstance(duration, int):
        raise Violation("the cluster lock held by %s has no renewTime or no leaseDurationSeconds: %s" % (holder, spec))
    return holder, renewed + duration, renewed + duration <= now


def lease_pid(lease):
    """The pid of the holder's ansible-playbook as the Lease's process annotation names it, or None."""
    parts = (((lease or {}).get("metadata") or {}).get("annotations") or {}).get(PROCESS_ANNOTATION, "").split()
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None


def lease_writes(events):
    """Every successful write of the cluster lock, in order: (verb, holder written or None for a delete, the Lease
    body written, when it was stored)."""
    writes = []
    for event in events:
        ref = event.get("objectRef") or {}
        if (ref.get("resource"), ref.get("namespace"), ref.get("name")) != ("leases", LOCK_NAMESPACE, LOCK_NAME) or \
                event.get("verb") not in MUTATING_VERBS:
            continue
        if (event.get("responseStatus") or {}).get("code", 200) >= 300 or is_dry_run(event):
            continue
        body = event.get("responseObject") or event.get("requestObject") or {}
        holder = (body.get("spec") or {}).get("holderIdentity") if event["verb"] != "delete" else None
        writes.append((event["verb"], holder, body, event.get("stageTimestamp") or event.get("requestReceivedTimestamp")))
    return writes


def check_lock_history(events, ended=None, duration=None):
    """The cluster lock was never held by two live runs: every write that gave it a new holder found it free (given
    back, or expired by the Lease's own renewTime and leaseDurationSeconds), or took it from a run whose
    ansible-playbook had ended by then (the pid the Lease's process annotation names, in ``ended``: {pid: epoch it
    ended}), or broke it as asked (the broken annotation naming the holder). With ``duration``, every write holds it
    for that many seconds (the production lock). Needs the Lease's writes audited with their objects (the lab's audit
    policy). Returns how many times it changed hands."""
    current, handovers = None, 0  # (holder, the Lease body written)
    for verb, holder, body, when in lease_writes(events):
        if verb == "delete":
            current = None
            continue
        seconds = (body.get("spec") or {}).get("leaseDurationSeconds")
        if duration is not None and seconds != duration:
            raise Violation("the cluster lock was written at %s for %s s by %s, not for the production %d s" % (
                when, seconds, holder, duration))
        if current is not None and current[0] and holder != current[0]:
            at = _epoch(when)
            unused_holder, expires, expired = lease_state(current[1], at)
            pid = lease_pid(current[1])
            gone = (ended or {}).get(pid)
            broken = ((body.get("metadata") or {}).get("annotations") or {}).get(BROKEN_ANNOTATION, "")
            if not expired and not broken.startswith(current[0] + ",") and (gone is None or gone > at):
                raise Violation("the cluster lock went from %s to %s at %s, %.1f s before it expired, while %s" % (
                    current[0], holder, when, expires - at, "its playbook (pid %s) still ran" % pid
                    if gone is not None else "nothing says its playbook (pid %s) had ended" % pid))
            handovers += 1
        current = (holder, body)
    return handovers


def run_of(event):
    """The run whose identity made the audited request ("faulted", "second", "calm", "third"), or None (the lab's)."""
    user = event_user(event)
    return user[len(RUN_USER_PREFIX):] if user.startswith(RUN_USER_PREFIX) else None


def writes_by_run(events):
    """{run: [(received, stored, what)]}, epoch seconds, in order: every write a run's identity made that may have
    changed what is stored (answered 2xx or 5xx; a refusal changed nothing), the cluster lock's and Events included."""
    out = {}
    for event in events:
        run = run_of(event)
        code = (event.get("responseStatus") or {}).get("code", 200)
        if run is None or event.get("verb") not in MUTATING_VERBS or is_dry_run(event) or 300 <= code < 500:
            continue
        ref = event.get("objectRef") or {}
        out.setdefault(run, []).append((
            _epoch(event["requestReceivedTimestamp"]), _epoch(event.get("stageTimestamp")) or
            _epoch(event["requestReceivedTimestamp"]), "%s %s %s/%s" % (
                event["verb"], ref.get("resource"), ref.get("namespace") or "", ref.get("name") or "")))
    return out


def check_writes_apart(events):
    """No two runs' writes interleaved: from the audit log's users and times, each run's writes (from the first
    received to the last stored) fall outside every other run's. Returns {run: how many writes}."""
    runs = writes_by_run(events)
    spans = sorted((writes[0][0], max(w[1] for w in writes), run) for run, writes in runs.items())
    for (first, last, run), (later_first, unused_last, later) in zip(spans, spans[1:]):
        if later_first < last:
            inside = next(w for w in runs[later] if w[0] < last)
            raise Violation("the writes of runs %s and %s interleave: %s wrote %s at %s, before %s's last write (%s) "
                            "was stored at %s" % (run, later, later, inside[2], _stamp(inside[0]), run, next(
                                w[2] for w in runs[run] if w[1] == last), _stamp(last)))
    return dict((run, len(writes)) for run, writes in runs.items())


def check_quiet_after(events, ended, grace=QUIET_AFTER_S):
    """No write of a run arrived more than ``grace`` seconds after its ansible-playbook was gone (``ended``: {run:
    epoch}): neither its heartbeat nor a worker the playbook left behind writes on without it."""
    for event in events:
        run = run_of(event)
        at = _epoch(event.get("requestReceivedTimestamp"))
        if run in ended and ended[run] is not None and event.get("verb") in MUTATING_VERBS and at > ended[run] + grace:
            ref = event.get("objectRef") or {}
            raise Violation("run %s wrote (%s %s %s/%s) at %s, %.1f s after its ansible-playbook was gone" % (
                run, event["verb"], ref.get("resource"), ref.get("namespace") or "", ref.get("name") or "",
                _stamp(at), at - ended[run]))


# a host's line of ansible-playbook's PLAY RECAP: "cp-1   : ok=5 changed=0 unreachable=0 failed=0 skipped=2 ..."
_RECAP_LINE = re.compile(r"^(\S+)\s+:\s+((?:[a-z]+=\d+\s*)+)$")
RECAP_COUNTS = ("ok", "changed", "unreachable", "failed")


def recap(out):
    """{host: {count: n}} of the last PLAY RECAP in ansible-playbook's output."""
    hosts, inside = {}, False
    for line in out.splitlines():
        if line.startswith("PLAY RECAP"):
            hosts, inside = {}, True
            continue
        match = _RECAP_LINE.match(line.strip()) if inside else None
        if match:
            hosts[match.group(1)] = dict((k, int(v)) for k, v in re.findall(r"([a-z]+)=(\d+)", match.group(2)))
        elif inside and line.strip():
            inside = False
    return hosts


def check_unchanged_recap(out):
    """Every host of the run's PLAY RECAP changed nothing, failed nothing and was reached; raises Violation (with no
    recap, or a host's line without its counts, too). Returns how many hosts."""
    hosts = recap(out)
    if not hosts:
        raise Violation("the run printed no PLAY RECAP")
    wrong = sorted("%s %s" % (host, " ".join("%s=%s" % (k, counts.get(k)) for k in RECAP_COUNTS))
                   for host, counts in hosts.items()
                   if any(counts.get(k) is None for k in RECAP_COUNTS) or counts["changed"] or counts["failed"] or
                   counts["unreachable"])
    if wrong:
        raise Violation("the run's recap is not unchanged for every host: %s" % "; ".join(wrong))
    return len(hosts)


def helm_release(secret):
    """The release a Helm record Secret holds, read as Helm stores it (base64 of gzipped JSON, in the Secret's own
    base64): the campaign's own reading, not the collection's."""
    raw = base64.b64decode(base64.b64decode(secret["data"]["release"]))
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw)


def helm_status(secret):
    """A Helm record's status as helm list says it: its release's own (the label can differ: a helm interrupted as
    it wrote left ``deployed`` on a release it recorded ``failed``)."""
    return (helm_release(secret).get("info") or {}).get("status") or secret["metadata"]["labels"].get("status")


def hold_windows(events):
    """{machine: [(from, until)]}, epoch seconds: when the cluster record surely held each machine (adopt's hold), from
    the record's writes as the audit log has them with their objects. A window opens when the write that holds the
    machine completed and closes when the write that lifts it was received (or never: ``inf``)."""
    windows, since = {}, {}
    for event in events:
        ref = event.get("objectRef") or {}
        if (ref.get("resource"), ref.get("namespace"), ref.get("name")) != (
                "configmaps", cluster_record.NAMESPACE, cluster_record.NAME):
            continue
        if event.get("verb") not in MUTATING_VERBS or is_dry_run(event) or \
                (event.get("responseStatus") or {}).get("code", 200) >= 300:
            continue
        if event["verb"] in ("delete", "deletecollection"):
            held = set()
        else:
            body = event.get("responseObject")
            if not isinstance(body, dict):  # not audited with its object: nothing to judge by
                continue
            try:
                held = set(json.loads((body.get("data") or {}).get(cluster_record.KEY) or "{}").get("held") or {})
            except (ValueError, AttributeError):
                continue
        for name in held - set(since):
            since[name] = _epoch(event.get("stageTimestamp") or event["requestReceivedTimestamp"])
        for name in set(since) - held:
            windows.setdefault(name, []).append((since.pop(name), _epoch(event["requestReceivedTimestamp"])))
    for name, start in since.items():
        windows.setdefault(name, []).append((start, float("inf")))
    return windows


def applied_while_held(windows, timeline):
    """The first (machine, what, at, held since) of the timeline's ``(machine, what, epoch)`` entries that changed a
    machine inside one of its hold ``windows``, or None."""
    for machine, what, at in timeline:
        if what not in HOLD_BREAKERS:
            continue
        for start, until in windows.get(machine, ()):
            if start < at < until:
                return machine, what, at, start
    return None


def check_not_applied_while_held(lab):
    """No run applied a config to, upgraded, rebooted or reset a machine while the cluster record held it (adopt's
    hold), judged from the simulator's timeline beside the record's history in the audit log. Returns how many holds
    there were (the invariant's material)."""
    if lab.talos is None:
        return 0
    windows = hold_windows(lab.kube.audit_events(lab.audit_start))
    found = applied_while_held(windows, lab.talos.control.timeline(at=True))
    if found:
        machine, what, at, start = found
        raise Violation("%s: %s at %s while the cluster record held it (held since %s)" % (
            machine, what, _stamp(at), _stamp(start)))
    return sum(len(spans) for spans in windows.values())


def _stamp(epoch):
    return time.strftime("%H:%M:%S", time.gmtime(epoch)) + ("%.2f" % (epoch % 1))[1:]


def check_lock_free(lab):
    """No run holds the cluster lock once every run has ended: the Lease is gone, names no holder, or has expired by
    its own fields (the judge waits for nothing: a run that ended gave it back)."""
    lease = lab.client.get("coordination.k8s.io/v1", "Lease", LOCK_NAME, LOCK_NAMESPACE)
    holder, expires, expired = lease_state(lease, time.time())
    if holder and not expired:
        raise Violation("the cluster lock is still held by %s (until %s) after every run ended" % (
            holder, _stamp(expires)))


def record(lab):
    return cluster_record.read(lab.client).data


class Scenario:
    """One playbook's part. Subclasses name the playbook, the faults that apply, build the lab and check what must
    hold; the campaign drives the runs and the faults."""

    playbook = None
    faults = RUN_FAULTS
    # seconds a run of the playbook goes on writing after its first write (measured on the 2-core lab machine): a
    # kill's moment is drawn over it, so that kills meet every point of the run
    write_span = 20.0
    # whether the playbook's runs hold the cluster lock, so that no two runs' writes may interleave
    locked = True
    lose_reply_method = "Upgrade"  # the Talos write whose reply the lose_reply fault loses

    def __init__(self, work):
        self.work = work
        self.lab = None
        self.fault = None  # the schedule's fault (set by the campaign)
        self.second_exit = None  # a second run's exit code, once it ended (the second_* faults)

    def start(self):
        """Build the lab as the playbook finds a cluster in use; returns it."""
        raise NotImplementedError

    def args(self, run):
        """ansible-playbook's arguments for ``run`` ("faulted", "second", "calm", "third")."""
        raise NotImplementedError

    def check(self, complete):
        """The invariants after the faulted run (``complete`` False) or after the calm rerun (True). Raises Violation;
        returns figures for the report (what the invariants had to judge)."""
        raise NotImplementedError

    def converged(self):
        """What a run of the playbook that exits 0 has done, judged from outside (the simulator, the API server,
        Helm): raises Violation unless the cluster is where the playbook takes it. Judged after every run of it that
        exits 0 (the faulted run's, a second run's, the calm rerun's, the third run's), not only the calm one."""
        raise NotImplementedError

    def identity(self, run):
        """ansible-playbook's arguments that make ``run`` write to the API server as a user of its own
        (RUN_USER_PREFIX + run, a client certificate the lab's CA signs): the audit log tells the runs apart."""
        path = os.path.join(self.work, "identities", "%s.kubeconfig" % run)
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            self.lab.kube.client_kubeconfig(path, RUN_USER_PREFIX + run)
        return ["-e", json.dumps(self.identity_vars(path))]

    def identity_vars(self, kubeconfig):
        """The extra variables that point a run at its kubeconfig."""
        return {"ichor_kubeconfig": kubeconfig}

    def other_args(self):
        """ansible-playbook's arguments for the run of another writing playbook (fault ``second_other``): the
        installer with a one-ConfigMap bundle in a namespace of its own, under the same cluster lock."""
        path = os.path.join(self.work, "other-bundle")
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "bundle.yaml"), "w") as handle:
            json.dump({"apiVersion": "v1", "kind": "ConfigMap", "data": {"v": "1"},
                       "metadata": {"name": "chaos-other", "namespace": OTHER_NAMESPACE}}, handle)
        return ["maesh.ichor.install", "-e", json.dumps({
            "ichor_installer_extra_bundles": [path], "ichor_installer_namespace": OTHER_NAMESPACE})]

    def other_done(self):
        """What the other playbook's run (fault ``second_other``) has done when it exits 0: its ConfigMap installed."""
        live = self.lab.client.get("v1", "ConfigMap", "chaos-other", OTHER_NAMESPACE)
        if live is None or live.get("data") != {"v": "1"}:
            raise Violation("the install run started meanwhile exited 0, and its ConfigMap %s/chaos-other is %s" % (
                OTHER_NAMESPACE, "missing" if live is None else live.get("data")))

    def upgrade_args(self):
        """ansible-playbook's arguments for an upgrade with follow of this cluster (fault ``second_upgrade``)."""
        return ["-i", self.lab.inventory, "maesh.ichor.upgrade", "-e", "ichor_upgrade_follow=true"]

    def settle(self, timeout=60.0):
        """Before the calm rerun, what an operator waits for: every machine up again after the fault and settled,
        running or in maintenance mode (a machine rebooted or unreachable comes back; one whose config was applied
        though the reply was lost finishes its install and reboot; the rerun is not the place to meet the fault a
        second time)."""
        if self.lab.talos is None:
            return
        for name in self.lab.machine_names():
            self.lab.talos.wait_for(name, lambda m: m["up"] and m["stage"] in SETTLED, timeout=timeout)

    def fault_machines(self):
        """The machines a machine fault may strike."""
        return self.lab.machine_names() if self.lab else []

    def stop(self):
        if self.lab is not None:
            self.lab.stop()
