"""What each playbook brings to the campaign: a lab as the playbook finds it in use, the arguments of its runs, what
its runs write, and the invariants that must hold after a fault and after the calm rerun (checked from outside: the
simulator's timeline and state, the API server and its audit log, Helm's records; never the playbook's output)."""

import base64
import gzip
import json
import os
import time

import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record, lock
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient
from tests.integration.ansible_env import write_inventory
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


def lease_holders(events):
    """Every successful write of the cluster lock, in order: (verb, holder written or None for a delete, the holder
    and expiry the Lease had just before (from the last write seen), time)."""
    writes = []
    for event in events:
        ref = event.get("objectRef") or {}
        if ref.get("resource") != "leases" or ref.get("name") != lock.NAME or event.get("verb") not in MUTATING_VERBS:
            continue
        if (event.get("responseStatus") or {}).get("code", 200) >= 300 or is_dry_run(event):
            continue
        body = event.get("responseObject") or event.get("requestObject") or {}
        holder = (body.get("spec") or {}).get("holderIdentity") if event["verb"] != "delete" else None
        writes.append((event["verb"], holder, body, event.get("stageTimestamp") or event.get("requestReceivedTimestamp")))
    return writes


def check_lock_history(events):
    """The cluster lock was never held by two runs: every write that gave it a new holder found it free (given back or
    expired when it was written). Needs the Lease's writes audited with their objects (the lab's audit policy)."""
    current = None  # (holder, the Lease body written)
    for verb, holder, body, when in lease_holders(events):
        if verb == "delete":
            current = None
            continue
        if current is not None and current[0] and holder != current[0]:
            at = _epoch(when)
            unused_holder, expires, expired = lock.state(current[1], at)
            if not expired:
                raise Violation("the cluster lock went from %s to %s at %s, %.1f s before it expired" % (
                    current[0], holder, when, expires - at))
        current = (holder, body)


def _epoch(stamp):
    import datetime  # pylint: disable=import-outside-toplevel
    value = datetime.datetime.strptime(stamp.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z")
    return value.timestamp()


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


def check_lock_free(lab, wait_s=0.0):
    """No run holds the cluster lock once every run has ended (a dead run's lock has expired by its own duration:
    ``wait_s`` is how long to let it)."""
    deadline = time.time() + wait_s
    while True:
        lease = lab.client.get(lock.API_VERSION, "Lease", lock.NAME, lock.NAMESPACE)
        holder, expires, expired = lock.state(lease, time.time()) if lease is not None else (None, None, True)
        if not holder or expired:
            return
        if time.time() >= deadline:
            raise Violation("the cluster lock is still held by %s (until %s) after every run ended" % (
                holder, time.strftime("%H:%M:%S", time.gmtime(expires)) if expires else "?"))
        time.sleep(0.3)


def wait_lock_free(lab, timeout):
    """What an operator does after a killed run: wait for its lock to expire (it says until when) before the rerun.
    Raises Violation when it outlives ``timeout``."""
    check_lock_free(lab, wait_s=timeout)


def record(lab):
    return cluster_record.read(lab.client).data


class Scenario:
    """One playbook's part. Subclasses name the playbook, the faults that apply, build the lab and check what must
    hold; the campaign drives the runs and the faults."""

    playbook = None
    faults = RUN_FAULTS
    # the runs' cluster lock, in seconds: a killed run's lock expires within the schedule (an upgrade renews it before
    # each machine and step, a few seconds apart in the lab; one that outlives it meanwhile renews it again, unless
    # another run took it, which refuses the first)
    lock_duration = 20
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
        """After the calm rerun: raises Violation unless the cluster is where the playbook takes it (or the same
        refusal with its reason)."""
        raise NotImplementedError

    def other_args(self):
        """ansible-playbook's arguments for the run of another writing playbook (fault ``second_other``): the
        installer with a one-ConfigMap bundle in a namespace of its own, under the same cluster lock."""
        path = os.path.join(self.work, "other-bundle")
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "bundle.yaml"), "w") as handle:
            json.dump({"apiVersion": "v1", "kind": "ConfigMap", "data": {"v": "1"},
                       "metadata": {"name": "chaos-other", "namespace": OTHER_NAMESPACE}}, handle)
        return ["maesh.ichor.install", "-e", json.dumps({
            "ichor_kubeconfig": self.lab.kube.kubeconfig, "ichor_installer_extra_bundles": [path],
            "ichor_installer_namespace": OTHER_NAMESPACE, "ichor_installer_lock_duration": self.lock_duration})]

    def upgrade_args(self):
        """ansible-playbook's arguments for an upgrade with follow of this cluster (fault ``second_upgrade``)."""
        return ["-i", self.lab.inventory, "maesh.ichor.upgrade", "-e", "ichor_upgrade_follow=true",
                "-e", "ichor_upgrade_lock_duration=%d" % self.lock_duration]

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

    def calm_ok(self, code, out):
        """Whether the calm rerun's exit is what converging means for this playbook (0, unless it refuses by design)."""
        return code == 0

    def stop(self):
        if self.lab is not None:
            self.lab.stop()
