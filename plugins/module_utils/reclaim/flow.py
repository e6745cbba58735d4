# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reclaim of one machine, step by step (``run``), the wait for maintenance mode and the
registration of the machine as pending in the managed cluster's record.

``run`` talks to the world only through an ``io`` object (``live.LiveIO``, a fake in the unit
tests). Order: read the managed cluster (always), inspect the machine with the foreign credential
(else: is it in maintenance mode already? does it take the managed cluster's own credential?), the
refusals, the typed consent, the one reset request, then, with ``wait``, the wait for maintenance
mode with the same UUID and the registration. With ``wait: false`` the run ends once the reset is
accepted and registers nothing: a machine is registered only after it was seen in maintenance mode
with its UUID, which a rerun does (it finds the machine in maintenance mode and sends no second reset).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.maesh.ichor.plugins.module_utils.common import poll
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim import policy
from ansible_collections.maesh.ichor.plugins.module_utils.common.who import local_user
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim.audit import Audit, utc
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim.errors import ReclaimError
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim.inspection import check_address
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors

DEFAULT_WAIT = 600
WAIT_INTERVAL = 0.5
RECORD_SOURCE = "reclaim"


class Options:
    """What the request says (the module's options)."""

    def __init__(self, node, confirm_uuid=None, force=False, confirm_cluster=None, force_ungraceful=False,
                 wait=True, wait_timeout=DEFAULT_WAIT, cluster_name=None, user=None):
        self.node = node
        self.confirm_uuid = confirm_uuid
        self.force = bool(force)
        self.confirm_cluster = confirm_cluster
        self.force_ungraceful = bool(force_ungraceful)
        self.wait = True if wait is None else bool(wait)
        self.wait_timeout = DEFAULT_WAIT if wait_timeout is None else wait_timeout
        self.cluster_name = cluster_name
        self.user = user or local_user()


def empty_result():
    """The result before anything is known (also what a run refused before it started returns)."""
    return {"changed": False, "plan": [], "audit": [], "inspection": {}, "refusals": [], "reset_sent": False,
            "graceful": None, "registered": None, "hint": ""}


# --- the managed cluster's record -----------------------------------------------------------------

def pending_entry(uuid, node, at):
    return {"uuid": uuid, "address": node, "state": "pending", "source": RECORD_SOURCE, "at": at}


def add_pending(data, uuid, node, at):
    """Mutate a record's data: the machine as pending (a stale pending entry of the UUID is replaced,
    an identical one kept as it is)."""
    machines = [m for m in (data.get("machines") or []) if isinstance(m, dict)]
    for entry in machines:
        if entry.get("uuid") == uuid and entry.get("state") == "pending" and entry.get("address") == node:
            data["machines"] = machines
            return
    data["machines"] = [m for m in machines if m.get("uuid") != uuid] + [pending_entry(uuid, node, at)]


# --- the wait -----------------------------------------------------------------------------------

def wait_for_maintenance(probe, uuid, timeout, clock=None, interval=WAIT_INTERVAL):
    """Poll ``probe()`` -> (uuid, stage) until the machine answers in maintenance mode with ``uuid``.

    Returns None when it does, else the last probe's text (a one-line reason).
    """

    def back():
        try:
            got, stage = probe()
        except errors.TalosError as exc:
            return False, exc.message
        if got == uuid and stage in ("maintenance", ""):
            return True, None
        if got == uuid:
            return False, "UUID %s answers but in stage %s" % (policy.shown(got), policy.shown(stage or "?"))
        return False, "a machine with UUID %s answers there" % policy.shown(got or "?")

    done, last = poll.until(back, float(timeout), interval, clock)
    return None if done else last


# --- the flow -----------------------------------------------------------------------------------

def diff(result):
    """The machine's state and the managed cluster's record entry, before and after."""
    insp = result.get("inspection") or {}
    before = {"address": insp.get("address", ""), "mode": insp.get("mode", ""), "uuid": insp.get("uuid", "")}
    if insp.get("cluster"):
        before["cluster"] = insp["cluster"].get("name", "")
    after = dict(before)
    if result.get("changed") and result.get("registered"):
        after = {"address": before["address"], "mode": "maintenance", "uuid": before["uuid"],
                 "record": dict(result["registered"])}
    return {"before": before, "after": after}


def run(opts, io, check_mode=False, clock=time.time, wait_clock=None):
    """The reclaim of one machine. Returns the result dict; raises ReclaimError with ``result`` set.

    ``io`` offers: ``managed()`` -> {name, id, record_id, uuids, machines}; ``inspect()`` -> the
    inspection of a configured machine, or raises errors.TalosError; ``maintenance()`` -> (uuid,
    stage) of the machine in maintenance mode or raises; ``managed_identity()`` -> the UUID when the
    machine takes the managed cluster's own credential, or raises; ``send_reset(graceful)``;
    ``probe()`` -> (uuid, stage) for the wait; ``register(uuid, node, at)`` -> changed (bool).
    Check mode calls only ``managed``, ``inspect``, ``maintenance`` and ``managed_identity``.
    ``clock`` gives the audit's wall-clock times, ``wait_clock`` (``common.poll``'s) the wait's.
    """
    return _Run(opts, io, check_mode, clock, wait_clock).run()


class _Run:
    """One run: the request, the world, the audit and the result so far."""

    def __init__(self, opts, io, check_mode, clock, wait_clock):
        self.opts = opts
        self.io = io
        self.check_mode = check_mode
        self.clock = clock
        self.wait_clock = wait_clock
        self.result = empty_result()
        self.audit = Audit(opts.user, opts.node, clock=clock)
        self.result["audit"] = self.audit.lines
        self.managed = {}

    def stop(self, message, sent=False, hint=None):
        self.audit.failed(message)
        raise ReclaimError(message, sent=sent, hint=hint, result=self.result)

    @property
    def cluster(self):
        return self.managed.get("name")

    def run(self):
        opts, result = self.opts, self.result
        self.audit.requested()
        try:
            check_address(opts.node)
            if float(opts.wait_timeout) < 0:
                raise ReclaimError("wait_timeout must be 0 or more seconds; nothing was sent")
            self.managed = self.io.managed()
        except ReclaimError as exc:
            self.stop(exc.message)
        except errors.TalosError as exc:
            self.stop("cannot read the managed cluster (the one that receives the machine): %s; nothing was sent"
                      % exc.message)
        except IchorError as exc:  # the managed cluster's clients cannot be made (a missing library)
            self.stop(exc.message)
        if opts.cluster_name and self.cluster != opts.cluster_name:
            self.stop("the managed cluster's talosconfig reaches cluster %s, not %s; check the inventory; nothing was "
                      "sent" % (policy.quoted(self.cluster), policy.quoted(opts.cluster_name)))
        result["cluster"] = self.cluster

        insp, first = None, None
        try:
            insp = self.io.inspect()
        except ReclaimError as exc:
            self.stop(exc.message)
        except errors.TalosError as exc:
            first = exc
        if insp is None:
            return self.in_maintenance(first)
        return self.configured(insp)

    def configured(self, insp):
        """A machine that took the foreign credential: refusals, consent, the reset, the wait."""
        opts, result = self.opts, self.result
        result["inspection"] = insp
        self.audit.inspected(insp)
        found = policy.refusals(insp, self.managed, opts.force, opts.confirm_cluster, opts.force_ungraceful)
        result["refusals"] = [r["text"] for r in found]
        graceful = policy.cluster_healthy(insp) and not opts.force_ungraceful
        result["graceful"] = graceful
        result["plan"] = policy.plan_lines(insp, found, graceful, self.managed, opts.wait, opts.wait_timeout,
                                           self.check_mode)
        stops = policy.blocking(found)
        if opts.confirm_uuid not in (None, "") and opts.confirm_uuid != insp["uuid"]:
            result["plan"].append("consent: " + policy.MISMATCH)
        elif self.check_mode and opts.confirm_uuid in (None, "") and not stops:
            result["plan"].append("consent: type the node's UUID as confirm_uuid to send the reset")
        for ref in stops:  # a machine of the managed cluster is never reclaimed: the plan fails as the run would
            if ref["kind"] == "managed":
                self.stop(ref["text"])
        if self.check_mode:  # an overridable refusal is the plan's to show (what force would do)
            result["changed"] = not stops
            return result
        if stops:
            named = policy.confirm_cluster_error(found, opts.force, opts.confirm_cluster, insp["cluster"].get("name"))
            if named:
                self.stop(named)
            self.stop("; ".join(ref["text"] for ref in stops) + (
                "" if stops[-1]["text"].endswith("nothing was sent") else "; nothing was sent"))
        try:
            policy.consent(opts.confirm_uuid, insp["uuid"])
        except ReclaimError as exc:
            self.stop(exc.message)
        self.audit.confirmed(insp["uuid"])

        try:
            self.io.send_reset(graceful)
        except errors.TalosError as exc:
            self.stop("the reset of %s was not accepted: %s" % (opts.node, exc.message))
        result["reset_sent"] = True
        result["changed"] = True
        self.audit.reset(graceful)
        if not opts.wait:
            return result
        last = wait_for_maintenance(self.io.probe, insp["uuid"], opts.wait_timeout, clock=self.wait_clock)
        if last is not None:
            message, hint = policy.did_not_return(opts.node, insp["uuid"], opts.wait_timeout, last)
            result["hint"] = hint
            self.audit.expired(opts.wait_timeout)
            self.stop(message, sent=True, hint=hint)
        return self.register(insp["uuid"], "")

    def register(self, uuid, prefix):
        """The machine, seen in maintenance mode with ``uuid``, as a pending machine of the managed cluster."""
        opts, result = self.opts, self.result
        try:
            wrote = self.io.register(uuid, opts.node, utc(self.clock()))
        except IchorError as exc:
            self.stop("%s is in maintenance mode with UUID %s, but recording it in cluster %s's record failed: %s"
                      % (opts.node, policy.shown(uuid), policy.quoted(self.cluster), exc.message), sent=result["reset_sent"])
        result["changed"] = result["changed"] or bool(wrote)
        result["registered"] = self.registered(uuid)
        self.audit.completed("%s%s is in maintenance mode with UUID %s; registered as a pending machine of cluster %s"
                             % (prefix, opts.node, uuid, policy.quoted(self.cluster)))
        return result

    def registered(self, uuid):
        return {"cluster": self.cluster, "uuid": uuid, "address": self.opts.node, "state": "pending"}

    def managed_machine(self):
        """A machine that takes neither the foreign credential nor an insecure call: does it take the managed
        cluster's own? Then it carries that cluster's CAs and is refused (state iii of the seed)."""
        try:
            uuid = self.io.managed_identity()
        except errors.TalosError:
            return
        if not uuid:
            return
        text = policy.managed_refusal({"uuid": uuid, "cluster": {"id": self.managed.get("id")}}, self.managed)
        self.result["inspection"] = {"address": self.opts.node, "mode": "configured", "uuid": uuid,
                                     "cluster": {"name": self.cluster, "id": self.managed.get("id")}}
        self.result["refusals"] = [text]
        self.result["plan"] = ["reclaim %s: UUID %s answers to the managed cluster's own talosconfig"
                               % (self.opts.node, uuid), "refused: " + text]
        self.stop(text)

    def in_maintenance(self, first):
        """The machine did not take the foreign credential: is it already in maintenance mode?"""
        opts, result = self.opts, self.result
        try:
            uuid, stage = self.io.maintenance()
        except errors.TalosError:
            self.managed_machine()
            self.stop("cannot inspect %s with the foreign talosconfig: %s; nothing was sent" % (opts.node,
                                                                                                first.message))
        if stage not in ("maintenance", ""):
            self.stop("cannot inspect %s with the foreign talosconfig: %s; nothing was sent" % (opts.node,
                                                                                                first.message))
        result["inspection"] = {"address": opts.node, "mode": "maintenance", "uuid": uuid, "stage": stage}
        self.audit.inspected_maintenance(uuid)
        # a machine of the managed cluster is never reclaimed, in whatever mode it answers
        text = policy.managed_refusal({"uuid": uuid, "cluster": {}}, self.managed)
        if text:  # never overridable: the plan fails as the run would
            result["refusals"] = [text]
            result["plan"] = ["reclaim %s: UUID %s in maintenance mode" % (opts.node, uuid), "refused: " + text]
            self.stop(text)
        verb = "would register" if self.check_mode else "registers"
        result["plan"] = ["reclaim %s: UUID %s is already in maintenance mode; no reset is needed" % (opts.node, uuid),
                          "%s it as a pending machine of cluster %s" % (verb, policy.quoted(self.cluster))]
        if self.check_mode:
            known = list(self.managed.get("machines") or [])
            after = {"machines": list(known)}
            add_pending(after, uuid, opts.node, "")
            result["changed"] = after["machines"] != known
            result["registered"] = self.registered(uuid)
            return result
        try:
            policy.consent(opts.confirm_uuid, uuid)
        except ReclaimError as exc:
            self.stop(exc.message)
        self.audit.confirmed(uuid)
        return self.register(uuid, "no reset sent: ")
