# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stages of an installer run, one per module: ``apply_run`` (plan, snapshot, apply),
``prune_run`` (prune, inventory, drop the snapshot) and ``restore`` (put the snapshot back). Each takes
an ``Installer`` and returns the module's result (``plan`` lines, ``diff``, ``warnings``); a failed stage
restores the snapshot and raises ``RunFailed`` carrying the result so far. ``run_stage`` is what a module
calls: the Installer of its options, then the stage. ``out_of_band`` is what ``cluster_status`` reads of an installed
bundle (dry runs only)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

try:
    import yaml
except ImportError:  # pragma: no cover
    yaml = None

from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.config import documents
from ansible_collections.maesh.ichor.plugins.module_utils.installer.errors import InstallerError, RunFailed
from ansible_collections.maesh.ichor.plugins.module_utils.installer.inventory import INVENTORY_NAME
from ansible_collections.maesh.ichor.plugins.module_utils.installer.live import Installer
from ansible_collections.maesh.ichor.plugins.module_utils.installer import policies
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import lock
from ansible_collections.maesh.ichor.plugins.module_utils.installer.objects import DEFAULT_NAMESPACE, Ref, comparable
from ansible_collections.maesh.ichor.plugins.module_utils.installer.prune import RENAMED_OBJECTS
from ansible_collections.maesh.ichor.plugins.module_utils.installer.snapshot import new_run_id


def options(bundle=False, run_id=None):
    """The installer modules' own options (doc fragment maesh.ichor.installer); ``bundle`` for apply and prune;
    ``run_id``: "required" for installer_prune, "optional" for installer_restore (installer_apply makes the id)."""
    opts = dict(namespace=dict(type="str", default=DEFAULT_NAMESPACE), snapshot_file=dict(type="path"),
                holder=dict(type="str"))
    if bundle:
        opts["bundle"] = dict(type="list", elements="path", required=True)
        opts["network_policies"] = dict(type="list", elements="path", default=[])
    if run_id:
        opts["run_id"] = dict(type="str", required=run_id == "required")
    return opts


def run_stage(stage, params, conn, check_mode):
    """An installer module's run: the Installer of its options, then ``stage``.

    installer_apply makes the run's id (returned, also with a failure); the other stages are given it.
    A failure before the stage has a plan (bundle, discovery, reads) carries an empty one.
    """
    run_id = new_run_id() if stage is apply_run else params.get("run_id")
    try:
        kube = conn.kube()
        if params.get("holder") and not check_mode:
            lock.keep(kube, params["holder"])  # two runs never write one cluster's bundle at once
        paths = list(params.get("bundle") or [])
        gated = None
        if params.get("network_policies"):
            applied, why = policies.read(kube)
            gated = dict(applied=applied, reason=why)
            paths += params["network_policies"] if applied else []
        run = Installer(kube, paths, namespace=params["namespace"], snapshot_file=params["snapshot_file"], run_id=run_id)
        result = stage(run, check_mode)
        if gated is not None:
            result["network_policies"] = gated
            if stage is apply_run:
                result["plan"].append("NOTICE: " + gated["reason"])
        return result
    except IchorError as exc:
        if exc.result is None:
            exc.result = dict(plan=[])
        if stage is apply_run:
            exc.result.setdefault("run_id", run_id)
        raise


# -- what a stage returns ---------------------------------------------------------------------

def _masked(obj):
    """A Secret's values never reach a diff."""
    if obj and obj.get("kind") == "Secret":
        obj = copy.deepcopy(obj)
        for key in ("data", "stringData"):
            if obj.get(key):
                obj[key] = dict((k, "<masked>") for k in obj[key])
    return obj


def diffs(steps):
    out = []
    for step in steps:
        if step.action in ("create", "update", "prune"):
            out.append({
                "before_header": str(step.ref), "after_header": str(step.ref),
                "before": yaml.safe_dump(_masked(step.before), sort_keys=True) if step.before else "",
                "after": yaml.safe_dump(_masked(step.after), sort_keys=True) if step.after else "",
            })
    return out


def lines(steps, warnings=()):
    plan = [s.line() for s in steps if s.action != "unchanged"]
    for renamed in RENAMED_OBJECTS:
        if any(s.ref == renamed.ref for s in steps):
            plan.append("NOTICE: %s was renamed to %s in the bundle; the old object is still present"
                        % (renamed.ref, renamed.new_name))
    return plan + ["WARNING: %s" % w for w in warnings]


def step_dicts(steps, actions):
    return [{"action": s.action, "object": s.ref.to_dict(), "reason": s.reason} for s in steps if s.action in actions]


# -- the stages -------------------------------------------------------------------------------

def _restore_after(run, own, message, result):
    """Restore from this run's snapshot after a failed stage and raise RunFailed saying so."""
    if own is None:
        raise RunFailed(message + "; nothing was written", result)
    try:
        recreated = run.restore(own.entries)
        run.delete_snapshot(own)
    except Exception as again:  # pylint: disable=broad-except
        # the stage's failure must still be told, with the restore's; the snapshot stays for installer_restore
        raise RunFailed(message + "; RESTORE FAILED (%s): the snapshot is kept for installer_restore" % again, result)
    result["restored"] = [str(r) for r in recreated]
    message += "; the cluster was restored to what it was before the run"
    if recreated:
        message += " (re-created: %s)" % ", ".join(str(r) for r in recreated)
    raise RunFailed(message, result)


def apply_run(run, check_mode, diff=True):
    """Plan, and unless check_mode: snapshot, read back, apply. Returns the module result.

    ``changed`` is whether this stage writes (a snapshot and objects), the same in check mode and in a real run;
    the inventory is installer_prune's to write, so a change of it alone is not this stage's.
    """
    apply_steps = run.plan_apply()
    prune_steps = run.plan_prune()
    run.this_runs_snapshot()  # another run's snapshot: a warning; save_snapshot replaces it
    writes = [s for s in apply_steps if s.action in ("create", "update")]
    prunes = [s for s in prune_steps if s.action == "prune"]
    result = dict(run_id=run.run_id, plan=lines(apply_steps + prune_steps, run.warnings),
                  changes=step_dicts(apply_steps, ("create", "update")),
                  prune=step_dicts(prune_steps, ("prune", "keep")),
                  warnings=list(run.warnings), changed=bool(writes or prunes))
    if diff:
        result["diff"] = diffs(apply_steps + prune_steps)
    if check_mode or not result["changed"]:
        return result
    own = None
    try:
        own = run.save_snapshot(run.snapshot_entries(apply_steps, prune_steps))
        recorded = run.record_inventory()  # before anything is applied: a run stopped after it leaves nothing untracked
        if recorded is not None:
            result["plan"].append("recorded the objects to apply in the inventory %s/%s (%d objects)" % (
                run.namespace, INVENTORY_NAME, len(recorded)))
        run.apply(apply_steps)
    except Exception as exc:  # pylint: disable=broad-except
        # whatever stops the apply, the cluster goes back to the snapshot
        _restore_after(run, own, "apply failed: %s" % exc, result)
    return result


def prune_run(run, check_mode, diff=True):
    """Plan the prune, and unless check_mode: delete, write the inventory, drop the snapshot (this run's, or one
    another run left: this run succeeded, so that one no longer describes the cluster before a change)."""
    steps = run.plan_prune()
    planned = run.planned_inventory(steps)
    inventory_changed = run.inventory_changed(planned)
    own = run.this_runs_snapshot()
    leftover = run.leftover
    result = dict(plan=lines(steps, run.warnings), pruned=[], warnings=list(run.warnings),
                  kept=[{"object": str(s.ref), "reason": s.reason} for s in steps if s.action == "keep"])
    if diff:
        result["diff"] = diffs(steps)
    inventory_line = "the inventory %s/%s (%d objects)" % (run.namespace, INVENTORY_NAME, len(planned))
    leftover_line = leftover and "the snapshot in %s left by %s" % (
        run.snapshot_place(), leftover.describe() if leftover.run_id else "a run (it cannot be read)")
    if check_mode:
        if inventory_changed:
            result["plan"].append("write " + inventory_line)
        if leftover:
            result["plan"].append("drop " + leftover_line)
        result["changed"] = bool(any(s.action == "prune" for s in steps) or inventory_changed or own or leftover)
        return result
    try:
        done, kept = run.prune(steps, own and own.entries)
    except Exception as exc:  # pylint: disable=broad-except
        # whatever stops the prune, the cluster goes back to the snapshot
        _restore_after(run, own, "prune failed: %s" % exc, result)
    result["pruned"] = [str(r) for r in done]
    result["kept"] += [{"object": str(r), "reason": why} for r, why in kept]
    written = run.write_inventory(done)
    result["warnings"] = list(run.warnings)
    result["plan"] = (["pruned %s" % r for r in done] + ["kept %s: %s" % (r, why) for r, why in kept]
                      + [s.line() for s in steps if s.action == "keep"] + ["WARNING: %s" % w for w in run.warnings])
    if written is not None:
        result["plan"].append("wrote the inventory %s/%s (%d objects)" % (run.namespace, INVENTORY_NAME, len(written)))
    dropped = False
    try:
        if own is not None:
            run.delete_snapshot(own)
        elif leftover:
            dropped = run.delete_snapshot(leftover)  # not when another run replaced it meanwhile
            if dropped:
                result["plan"].append("dropped " + leftover_line)
    except (IchorError, OSError) as exc:
        # the prune is done and the inventory says so: a restore now would bring back objects the inventory no
        # longer lists, which no later run would prune. The snapshot stays, a later run's leftover to drop
        warning = "the snapshot in %s could not be dropped (%s); the next run drops it" % (run.snapshot_place(), exc)
        result["warnings"].append(warning)
        result["plan"].append("WARNING: " + warning)
    result["changed"] = bool(done or written is not None or own or dropped)
    return result


def restore(run, check_mode):
    """Put the cluster back as the snapshot of run ``run.run_id`` has it, then drop the snapshot. Any other snapshot
    is left as it is and named (without ``run_id``, every snapshot is another's): restoring one that another run
    wrote would roll back what that run did. Nothing to do without a snapshot."""
    found = run.load_snapshot()
    if not found or not found.entries:
        return dict(changed=False, plan=["no installer snapshot: nothing to restore"], restored=[])
    if found.run_id != run.run_id:
        said = ("not of this run (%s)" % run.run_id) if run.run_id else "and no run_id was given"
        line = ("the installer snapshot in %s is of %s, %s: not restored; to restore it, give run_id %s"
                % (run.snapshot_place(), found.describe(), said, found.run_id))
        return dict(changed=False, plan=[line], restored=[], warnings=[line])
    plan = ["restore %s" % Ref.from_dict(e["ref"]) for e in found.entries]
    if check_mode:
        return dict(changed=True, plan=plan, restored=[])
    try:
        recreated = run.restore(found.entries)
        run.delete_snapshot(found)
    except IchorError as exc:
        raise InstallerError("restore failed: %s; the snapshot is kept" % exc, result=dict(plan=plan))
    return dict(changed=True, plan=plan, restored=[str(r) for r in recreated])


def out_of_band(kube, bundle_paths, policy_paths=(), namespace=DEFAULT_NAMESPACE):
    """What ``cluster_status`` reports of the installed bundle, read only (server-side apply dry runs): the
    inventory's state and each bundle object that is missing or changed away from what the bundle ships. Returns
    {"installed": bool, "objects": n, "changed": [{"object", "paths"}], "missing": [{"object", "installed"}]}; a
    missing object the inventory does not list is new in this collection's bundle (``installed`` false)."""
    paths = list(bundle_paths)
    if policy_paths and policies.read(kube)[0]:
        paths += list(policy_paths)
    run = Installer(kube, paths, namespace=namespace)
    previous, unused_configmap = run.previous_inventory()
    out = {"installed": previous is not None, "objects": len(run.refs), "changed": [], "missing": []}
    if previous is None:
        return out
    listed = set(str(ref) for ref in previous)
    for step in run.plan_apply():
        if step.action == "create":
            out["missing"].append({"object": str(step.ref), "installed": str(step.ref) in listed})
        elif step.action == "update":
            out["changed"].append({"object": str(step.ref), "paths": _changed_paths(step.before, step.after)})
    return out


def _changed_paths(live, shipped):
    """The paths whose values differ between the live object and what the bundle would make of it (paths only: a
    Secret's values are never shown)."""
    left, right = _leaves(live), _leaves(shipped)
    return sorted(path for path in set(left) | set(right) if left.get(path) != right.get(path))


def _leaves(obj):
    body, meta = comparable(obj)
    return documents.flatten(meta, "metadata", documents.flatten(body, "", {}))
