"""maesh.ichor.install with a bundle that drops objects: a kube-only lab (no Talos machines) given bundle A by one calm
install, then every run of the schedule installs bundle B, which drops ServiceAccounts and ClusterRoles of A (kinds
the installer prunes), updates A's ConfigMaps and adds objects of its own. Judged from the API server's objects and
its audit log: no delete without the installer's snapshot written and read back first, no marked object missing from
the inventory, and after the calm rerun exactly B installed."""

import os
import subprocess
import sys

import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.installer import inventory, snapshot
from ansible_collections.maesh.ichor.plugins.module_utils.installer.objects import MARK_KEY, MARK_VALUE, Ref
from tests.chaos.scenario import API_FAULTS, BOOKKEEPING, REFUSE_WRITES, RUN_FAULTS, Lab, Scenario, Violation, \
    may_have_landed
from tests.integration.ansible_env import ansible_env, REPO
from tests.integration.test_installer import DEFAULT_BUNDLE, _cm, _cr, _playbook_args, _pool_state, _sa, \
    _write_bundle
from tests.lab.kube.cluster import event_user, is_dry_run, is_system_user

NAMESPACE = "ichor-system"  # the installer's namespace: it prunes only there (and cluster-scoped objects)
# How many of each: enough that a run goes on writing for about 11 s after its first write (the snapshot; measured
# on the 2-core lab machine: ~5 s of applies, then ~5 s of prunes), so that most faults (0-12 s after it) strike
# while it applies or prunes
KEPT, SETTINGS, DROPPED, ADDED = 50, 200, 520, 520
SETUP_TIMEOUT = 600


def _name(what, index):
    return "ichor-chaos-%s-%03d" % (what, index)


def _kept(value):
    """What A and B both ship: ServiceAccounts as they are, ConfigMaps whose data B changes (updated by each run)."""
    return [_sa(_name("kept", i), NAMESPACE) for i in range(KEPT)] + [
        _cm(_name("settings", i), NAMESPACE, value) for i in range(SETTINGS)]


def _own(what, count):
    """ServiceAccounts in the installer's namespace and a quarter as many ClusterRoles (cluster-scoped)."""
    return [_sa(_name(what, i), NAMESPACE) for i in range(count)] + [_cr(_name(what, i)) for i in range(count // 4)]


def bundle_a():
    """The bundle the cluster has when the schedule starts."""
    return _kept("a") + _own("old", DROPPED)


def bundle_b():
    """A less what it drops (ConfigMaps are never pruned: B keeps them all, with new data), plus objects of its own."""
    return _kept("b") + _own("new", ADDED)


def default_bundle():
    """The collection's own bundle, applied by every run (the network policies stay out: no Cilium in the lab)."""
    docs = []
    for root, dirs, names in os.walk(DEFAULT_BUNDLE):
        dirs.sort()
        for name in sorted(n for n in names if n.endswith((".yaml", ".yml"))):
            with open(os.path.join(root, name)) as handle:
                docs.extend(doc for doc in yaml.safe_load_all(handle) if doc)
    return docs


def check_backups(events, namespace=NAMESPACE, shipped=None, lab_objects=()):
    """Invariant 1 on the audit events, in order: every successful delete of a run (the snapshot itself, the lock and
    Events aside) comes after a write of the snapshot Secret that may have landed (scenario.may_have_landed) and a
    successful GET of it after that write, with no delete of the snapshot in between. ``shipped``: (resource, namespace, name) of every object a bundle
    ships; a delete of anything else is a violation too. ``lab_objects``: the same of what the lab itself writes as
    the runs' user (a fault's admission policy), left out. Returns how many deletes were judged."""
    written = read = None
    judged = 0
    for event in events:
        ref = event.get("objectRef") or {}
        verb, code = event.get("verb"), (event.get("responseStatus") or {}).get("code", 200)
        if is_dry_run(event):
            continue
        key = (ref.get("resource"), ref.get("namespace") or None, ref.get("name"))
        if key == ("secrets", namespace, snapshot.SNAPSHOT_NAME) and verb in ("create", "update", "patch"):
            if may_have_landed(event):  # a 5xx (or create 409) counts once a read after it finds the snapshot
                written, read = event, None
            continue
        if code >= 300:
            continue
        if key == ("secrets", namespace, snapshot.SNAPSHOT_NAME):
            if verb == "get" and written is not None:
                read = event
            elif verb == "delete":
                written = read = None
            continue
        if verb != "delete" or ref.get("resource") in BOOKKEEPING or is_system_user(event_user(event)) or \
                key in lab_objects:
            continue
        judged += 1
        where = "%s %s at %s" % (ref.get("resource"), "/".join(k for k in key[1:] if k), event.get("stageTimestamp"))
        if shipped is not None and key not in shipped:
            raise Violation("a run deleted %s, which no bundle ships" % where)
        if written is None:
            raise Violation("a run deleted %s with no snapshot %s/%s written before it" % (
                where, namespace, snapshot.SNAPSHOT_NAME))
        if read is None:
            raise Violation("a run deleted %s after writing the snapshot (%s) without reading it back" % (
                where, written.get("stageTimestamp")))
    return judged


def _key(ref):
    return ref.key()


class Install(Scenario):
    playbook = "install"
    faults = RUN_FAULTS + API_FAULTS
    write_span = 10.0  # measured: 10 s from the first write to the end

    def __init__(self, work):
        super().__init__(work)
        self.a, self.b = bundle_a(), bundle_b()
        self.own = default_bundle()
        shipped_by_b = set(_label(o) for o in self.b)
        self.dropped = [o for o in self.a if _label(o) not in shipped_by_b]
        self.mark = None  # the audit log's position once A is installed: the schedule's runs come after it
        self.faulted_deletes = None

    def start(self):
        self.lab = Lab(self.work)
        _write_bundle(os.path.join(self.work, "bundle-a"), self.a)
        _write_bundle(os.path.join(self.work, "bundle-b"), self.b)
        log = os.path.join(self.work, "start.log")
        exe = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
        with open(log, "w") as out:
            code = subprocess.call([exe] + self._args("bundle-a"), env=ansible_env(), cwd=REPO,
                                   stdout=out, stderr=subprocess.STDOUT, timeout=SETUP_TIMEOUT)
        live, listed = _pool_state(self.lab.client, NAMESPACE, self.a)
        want = set(_label(o) for o in self.a)
        if code != 0 or live != want or listed != want:
            raise RuntimeError("installing bundle A failed (exit %d, %d of %d objects, see %s)" % (
                code, len(live), len(want), log))
        self.mark = self.lab.kube.audit_mark()
        return self.lab

    def _args(self, bundle):
        return _playbook_args(self.lab.kube, NAMESPACE, os.path.join(self.work, bundle))

    def args(self, run):
        return self._args("bundle-b")

    # -- what the API server holds ----------------------------------------------------------
    def _ref(self, obj):
        """The object's Ref as the installer names it: a namespaced object without a namespace is in the installer's."""
        ref = Ref.of(obj)
        if ref.namespace is None and self.lab.client.resource(ref.api_version, ref.kind).namespaced:
            ref.namespace = NAMESPACE
        return ref

    def _shipped(self):
        """(resource, namespace, name) of every object any of the bundles ships (as the audit log names objects)."""
        out = set()
        for obj in self.own + self.a + self.b:
            ref = self._ref(obj)
            out.add((self.lab.client.resource(ref.api_version, ref.kind).name, ref.namespace, ref.name))
        return out

    def _inventory(self):
        configmap = self.lab.client.get("v1", "ConfigMap", inventory.INVENTORY_NAME, NAMESPACE)
        refs, unused_warnings = inventory.parse(configmap)
        if refs is None:
            raise Violation("the inventory %s/%s is %s" % (NAMESPACE, inventory.INVENTORY_NAME,
                                                           "missing" if configmap is None else "unreadable"))
        return set(_key(r) for r in refs)

    def _marked(self):
        """Every object of a kind any bundle holds that carries the mark (the installer's own inventory and snapshot
        aside: they are its bookkeeping, never listed)."""
        kinds = sorted(set((o["apiVersion"], o["kind"]) for o in self.own + self.a + self.b))
        found = {}
        for api_version, kind in kinds:
            for obj in self.lab.client.list(api_version, kind, label_selector="%s=%s" % (MARK_KEY, MARK_VALUE)):
                obj.setdefault("apiVersion", api_version)
                obj.setdefault("kind", kind)
                ref = Ref.of(obj)
                found[_key(ref)] = ref
        for bookkeeping in (("", "ConfigMap", NAMESPACE, inventory.INVENTORY_NAME),
                            ("", "Secret", NAMESPACE, snapshot.SNAPSHOT_NAME)):
            found.pop(bookkeeping, None)
        return found

    # -- the invariants ---------------------------------------------------------------------
    def check(self, complete):
        # the refuse_writes fault's policy, which the campaign writes and deletes as the runs' user
        refusal = set((resource, None, REFUSE_WRITES) for resource in (
            "validatingadmissionpolicies", "validatingadmissionpolicybindings"))
        judged = check_backups(self.lab.kube.audit_events(self.mark), shipped=self._shipped(), lab_objects=refusal)
        marked = self._marked()
        listed = self._inventory()
        untracked = sorted(str(marked[k]) for k in set(marked) - listed)
        if untracked:
            raise Violation("%d marked object(s) exist and are not in the inventory: %s" % (
                len(untracked), ", ".join(untracked[:5])))
        if not complete:  # what the faulted run (and a second run) deleted: 0 < n < all when struck mid-prune
            self.faulted_deletes = judged
            return dict(faulted_deletes=judged)
        figures = dict(deletes_judged=judged, faulted_deletes=self.faulted_deletes, marked_objects=len(marked))
        want = set(_key(self._ref(o)) for o in self.own + self.b)
        extra = sorted(str(marked[k]) for k in set(marked) - want)
        missing = sorted("%s %s" % (k[1], k[3]) for k in want - set(marked))
        if extra or missing:
            raise Violation("after the calm rerun the marked objects are not B's: %d extra (%s), %d missing (%s)" % (
                len(extra), ", ".join(extra[:3]), len(missing), ", ".join(missing[:3])))
        if listed != want:
            raise Violation("after the calm rerun the inventory lists %d objects B does not ship (%s) and misses %d" % (
                len(listed - want), ", ".join(sorted("%s %s" % (k[1], k[3]) for k in listed - want)[:3]),
                len(want - listed)))
        left = [_label(o) for o in self.dropped if self._live(o) is not None]
        if left:
            raise Violation("%d object(s) B drops still exist after the calm rerun: %s" % (
                len(left), ", ".join(left[:5])))
        if self.lab.client.get("v1", "Secret", snapshot.SNAPSHOT_NAME, NAMESPACE) is not None:
            raise Violation("the snapshot %s/%s is left behind after the calm rerun" % (
                NAMESPACE, snapshot.SNAPSHOT_NAME))
        figures["dropped_gone"] = len(self.dropped)
        return figures

    def _live(self, obj):
        ref = self._ref(obj)
        return self.lab.client.get(ref.api_version, ref.kind, ref.name, ref.namespace)

    def converged(self):
        """B exactly: every object of B with B's content and the mark, none that B drops, the inventory B's."""
        wrong = []
        for obj in self.b:
            live = self._live(obj)
            if live is None or ((live.get("metadata") or {}).get("labels") or {}).get(MARK_KEY) != MARK_VALUE:
                wrong.append("%s missing or unmarked" % _label(obj))
            elif any(live.get(field) != obj[field] for field in ("data", "rules") if field in obj):
                wrong.append("%s not as B has it" % _label(obj))
        wrong += ["%s still exists" % _label(o) for o in self.dropped if self._live(o) is not None]
        if wrong:
            raise Violation("B is not installed exactly: %d wrong (%s)" % (len(wrong), ", ".join(wrong[:3])))
        if self.lab.client.get("v1", "Secret", snapshot.SNAPSHOT_NAME, NAMESPACE) is not None:
            raise Violation("the snapshot %s/%s is left behind" % (NAMESPACE, snapshot.SNAPSHOT_NAME))
        want = set(_key(self._ref(o)) for o in self.own + self.b)
        if self._inventory() != want:
            raise Violation("B is not installed exactly: the inventory is not B's")


def _label(obj):
    """How _pool_state names an object: kind and name."""
    return "%s %s" % (obj["kind"], obj["metadata"]["name"])
