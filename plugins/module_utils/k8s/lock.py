# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster lock: a coordination.k8s.io Lease ``ichor-cluster-lock`` in ichor-system, held by every playbook that
writes to a cluster's machines (adopt's write phases first), so that two runs never write to one cluster at once.

A run takes the lock under an id of its own (``holder``), keeps it (renewed) before each stage, and gives it back at
its end. A lock whose holder stopped without giving it back (a killed run) expires ``duration`` seconds after it was
last taken or renewed; the next run takes it over then, and until then is refused with the holder and the time it
expires. Every write is
conditional on what was read (resourceVersion, UID), so two runs racing for a free lock cannot both win.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import time
import uuid

from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.errors import Conflict

API_VERSION = "coordination.k8s.io/v1"
NAME = "ichor-cluster-lock"
NAMESPACE = "ichor-system"
DURATION = 1800  # seconds: longer than a playbook's longest step; a killed run's lock is free after it
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


def _lease(holder, duration, now, acquired=None, meta=None):
    metadata = dict(meta or {}, name=NAME, namespace=NAMESPACE)
    metadata.setdefault("labels", {})["app.kubernetes.io/managed-by"] = "maesh.ichor"
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


def acquire(client, holder, duration=DURATION, check=False, now=None):
    """Take (or renew) the lock for ``holder``. Returns plan lines; LockError when another run holds it."""
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
            _write(client.create, _lease(holder, duration, now))
        return ["cluster lock %s: %s by %s for %ds" % (where, "would be taken" if check else "taken", holder, duration)]
    current, expires, expired = state(lease, now)
    meta = lease["metadata"]
    keep = {"resourceVersion": meta.get("resourceVersion"), "uid": meta.get("uid"), "labels": meta.get("labels") or {}}
    if current == holder:
        if not check:
            _write(client.replace, _lease(holder, duration, now, lease["spec"].get("acquireTime"), keep))
        return ["cluster lock %s: renewed by %s for %ds" % (where, holder, duration)]
    if not expired:
        raise LockError("the cluster lock %s is held by %s until %s: another run is writing to this cluster; wait for "
                        "it to end (or, if it was stopped, for the lock to expire) and run again" % (
                            where, current, _stamp(expires)))
    if not check:
        _write(client.replace, _lease(holder, duration, now, None, keep))
    return ["cluster lock %s: %s by %s for %ds (left by %s, expired %s)" % (
        where, "would be taken over" if check else "taken over", holder, duration, current or "nobody",
        _stamp(expires) if expires else "long ago")]


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
    lease = client.get(API_VERSION, "Lease", NAME, NAMESPACE)
    current = state(lease, now)[0]
    if current != holder:
        raise LockError("this run (%s) does not hold the cluster lock %s/%s (%s): take it first (maesh.ichor.cluster_lock)"
                        % (holder, NAMESPACE, NAME, "held by %s" % current if current else "free"))
    spec, meta = lease["spec"], lease["metadata"]
    duration = spec.get("leaseDurationSeconds") if isinstance(spec.get("leaseDurationSeconds"), int) else DURATION
    _write(client.replace, _lease(holder, duration, now, spec.get("acquireTime"), {
        "resourceVersion": meta.get("resourceVersion"), "uid": meta.get("uid"), "labels": meta.get("labels") or {}}))


def _write(call, body):
    try:
        call(body)
    except Conflict:
        raise LockError("another run took the cluster lock %s/%s at the same moment; run again" % (NAMESPACE, NAME))
