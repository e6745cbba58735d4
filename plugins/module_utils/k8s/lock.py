# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster lock: a coordination.k8s.io Lease ``ichor-cluster-lock`` in ichor-system, held by every playbook that
writes to a cluster's machines (adopt's write phases first), so that two runs never write to one cluster at once.

A run takes the lock under an id of its own (``holder``), keeps it (renewed) before each stage, and gives it back at
its end. It is a lease, as Kubernetes' own leader election is one: short (``DURATION``), renewed by a heartbeat
(``k8s.heartbeat``) every third of it for as long as the playbook's process lives, so a lock whose run was killed
(SIGKILL, a cancelled AWX job, an OOM kill) is free within ``DURATION`` seconds. The Lease names the holder's process
(annotation ``PROCESS``): a run on the same controller whose holder's process has ended takes the lock over at once.
An operator who knows a holder is gone breaks its lock deliberately by typing its id back (``break_holder``, the
playbooks' ``ichor_lock_break``, as ``terraform force-unlock LOCK_ID``): shown in the plan, recorded on the Lease
(annotation ``BROKEN``) and in the run's audit. Every write is conditional on what was read (resourceVersion, UID), so
two runs racing for a free lock cannot both win.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import time
import uuid

from ansible_collections.maesh.ichor.plugins.module_utils.common import processes
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.errors import Conflict

API_VERSION = "coordination.k8s.io/v1"
NAME = "ichor-cluster-lock"
NAMESPACE = "ichor-system"
# seconds: the heartbeat renews the lock every third of it, so a renewal may miss twice before the lock lapses; a
# killed run's lock is free within it
DURATION = 45
PROCESS = "maesh.ichor/process"  # the holder's playbook process: processes.playbook()
BROKEN = "maesh.ichor/broken"  # the last deliberate break: whose lock, by whom, when
_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"  # the Lease's MicroTime


class LockError(IchorError):
    """The lock is another run's (or changed under this run)."""


def new_holder():
    """A run's holder id: when it started (UTC) and a random part."""
    return "maesh-ichor-%s-%s" % (time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()), uuid.uuid4().hex[:12])


def _stamp(now):
    return datetime.datetime.fromtimestamp(now, datetime.timezone.utc).strftime(_FORMAT)


def _when(text):
    """A MicroTime as seconds since the epoch (None when absent or unreadable)."""
    for form in (_FORMAT, "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.datetime.strptime(str(text), form).replace(tzinfo=datetime.timezone.utc).timestamp()
        except ValueError:
            continue
    return None


def _lease(holder, duration, now, acquired=None, meta=None, process=None, broken=None):
    metadata = dict(meta or {}, name=NAME, namespace=NAMESPACE)
    metadata.setdefault("labels", {})["app.kubernetes.io/managed-by"] = "maesh.ichor"
    annotations = dict(metadata.get("annotations") or {})
    if process:
        annotations[PROCESS] = process
    if broken:
        annotations[BROKEN] = broken
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": API_VERSION, "kind": "Lease", "metadata": metadata, "spec": {
        "holderIdentity": holder, "leaseDurationSeconds": int(duration),
        "acquireTime": acquired or _stamp(now), "renewTime": _stamp(now)}}


def state(lease, now):
    """(holder or None, expires at (seconds) or None, expired)."""
    spec = (lease or {}).get("spec") or {}
    holder = spec.get("holderIdentity") or None
    renewed = _when(spec.get("renewTime") or spec.get("acquireTime"))
    duration = spec.get("leaseDurationSeconds")
    if holder is None or renewed is None or not isinstance(duration, int):
        return holder, None, True
    expires = renewed + duration
    return holder, expires, expires <= now


def _kept(meta):
    """What a write keeps of the Lease read: its version and UID (the write's preconditions), labels, annotations."""
    return {"resourceVersion": meta.get("resourceVersion"), "uid": meta.get("uid"), "labels": meta.get("labels") or {},
            "annotations": meta.get("annotations") or {}}


def acquire(client, holder, duration=DURATION, check=False, now=None, process=None, break_holder=None, by=None):
    """Take (or renew) the lock for ``holder``, whose playbook runs as ``process`` (processes.playbook()). Returns
    plan lines; LockError when another live run holds it. ``break_holder``, the id of the run that holds it typed
    back, takes it from that run whatever its state (``by``: who breaks it, for the record)."""
    now = time.time() if now is None else now
    lease = client.get(API_VERSION, "Lease", NAME, NAMESPACE)
    where = "%s/%s" % (NAMESPACE, NAME)
    if lease is None:
        if not check:
            if client.get("v1", "Namespace", NAMESPACE) is None:
                try:
                    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
                except Conflict:
                    pass  # another run made it at the same moment
            _write(client.create, _lease(holder, duration, now, process=process))
        return ["cluster lock %s: %s by %s for %ds" % (where, "would be taken" if check else "taken", holder, duration)
                ] + _nothing_to_break(break_holder, None)
    current, expires, expired = state(lease, now)
    meta = lease["metadata"]
    if current == holder:
        if not check:
            _renew(client, holder, now, lease, duration, process)
        return ["cluster lock %s: renewed by %s for %ds" % (where, holder, duration)]
    holder_process = (meta.get("annotations") or {}).get(PROCESS)
    if break_holder and current and break_holder == current:
        broken = "%s, broken by %s at %s" % (current, by or "an operator", _stamp(now))
        if not check:
            _write(client.replace, _lease(holder, duration, now, None, _kept(meta), process=process, broken=broken))
        return ["cluster lock %s: %s: held by %s%s, broken as asked (ichor_lock_break), taken by %s for %ds" % (
            where, "would be broken" if check else "broken", current,
            " until %s" % _stamp(expires) if not expired and expires else "", holder, duration)]
    if not expired:
        if break_holder:
            raise LockError("ichor_lock_break names %s, but the cluster lock %s is held by %s: nothing was broken; "
                            "type back the holder's id exactly" % (break_holder, where, current))
        if not processes.ended(holder_process):
            raise LockError(
                "the cluster lock %s is held by %s until %s: another run is writing to this cluster; wait for it to "
                "end (a stopped run's lock is free within %ss), or, if you know that run is stopped, break its lock "
                "with -e ichor_lock_break=%s" % (where, current, _stamp(expires), lease["spec"].get(
                    "leaseDurationSeconds"), current))
        left = "left by %s, whose playbook (process %s on this controller) has ended" % (
            current, processes.parse(holder_process)[1])
    else:
        left = "left by %s, expired %s" % (current or "nobody", _stamp(expires) if expires else "long ago")
    if not check:
        _write(client.replace, _lease(holder, duration, now, None, _kept(meta), process=process))
    return ["cluster lock %s: %s by %s for %ds (%s)" % (
        where, "would be taken over" if check else "taken over", holder, duration, left)
    ] + _nothing_to_break(break_holder, current)


def _nothing_to_break(break_holder, current):
    """The plan's word on an ichor_lock_break that found no live lock of that run to break."""
    if not break_holder:
        return []
    return ["cluster lock: nothing to break for ichor_lock_break=%s (%s)" % (
        break_holder, "the lock was free" if current is None else "the lock of %s had lapsed" % current)]


def release(client, holder, check=False):
    """Give the lock back if ``holder`` has it (deleted with a UID precondition). Returns plan lines."""
    lease = client.get(API_VERSION, "Lease", NAME, NAMESPACE)
    where = "%s/%s" % (NAMESPACE, NAME)
    if lease is None:
        # in check mode the run never took it: what it would do is give back what it would have taken
        return ["cluster lock %s: %s" % (where, "would be given back by %s" % holder if check else "not held")]
    current = ((lease.get("spec") or {}).get("holderIdentity")) or None
    if current != holder:
        return ["cluster lock %s: held by %s, not by this run (%s); left as it is" % (where, current, holder)]
    if not check:
        try:
            client.delete(API_VERSION, "Lease", NAME, NAMESPACE, uid=lease["metadata"].get("uid"),
                          resource_version=lease["metadata"].get("resourceVersion"))
        except Conflict:
            raise LockError("the cluster lock %s changed while %s held it; run again" % (where, holder))
    return ["cluster lock %s: %s by %s" % (where, "would be given back" if check else "given back", holder)]


def keep(client, holder, now=None):
    """LockError unless ``holder`` holds the lock; renewed then for the duration it was taken for, so that a run that
    keeps it before each stage holds it for as long as it goes on writing. A lock of this run's that expired while no
    other run took it is still this run's: a run that writes takes the lock first, so nobody wrote meanwhile."""
    now = time.time() if now is None else now
    _renew(client, holder, now)


def _renew(client, holder, now, lease=None, duration=None, process=None):
    """Renew ``holder``'s lock (``lease``: as just read; ``duration``, ``process``: new ones, else the Lease's). A
    conflict is this run's heartbeat renewing between the read and the write: read again, and renew (another run that
    took the lock meanwhile is refused)."""
    for unused in range(KEEP_ATTEMPTS):
        if lease is None:
            lease = client.get(API_VERSION, "Lease", NAME, NAMESPACE)
        current = state(lease, now)[0]
        if current != holder:
            raise LockError("this run (%s) does not hold the cluster lock %s/%s (%s): take it first (maesh.ichor.cluster_lock)"
                            % (holder, NAMESPACE, NAME, "held by %s" % current if current else "free"))
        spec = lease["spec"]
        kept = spec.get("leaseDurationSeconds") if isinstance(spec.get("leaseDurationSeconds"), int) else DURATION
        try:  # _kept carries the Lease's annotations: its process unless a new one is given
            client.replace(_lease(holder, duration or kept, now, spec.get("acquireTime"), _kept(lease["metadata"]),
                                  process=process))
            return
        except Conflict:
            lease = None
    raise LockError("the cluster lock %s/%s kept changing while this run renewed it; run again" % (NAMESPACE, NAME))


# reads and writes a renewal may take while the run's own heartbeat renews the same Lease
KEEP_ATTEMPTS = 3


def _write(call, body):
    try:
        call(body)
    except Conflict:
        raise LockError("another run took the cluster lock %s/%s at the same moment; run again" % (NAMESPACE, NAME))
