# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the three installer modules share: options, the Installer from them, plan lines and diffs."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

try:
    import yaml
except ImportError:  # pragma: no cover
    yaml = None

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.maesh.ichor.plugins.module_utils import installer
from ansible_collections.maesh.ichor.plugins.module_utils.connection import fail, kube_client_for, with_connection


def store_argument_spec():
    """Where the inventory and snapshot live (doc fragment maesh.ichor.installer)."""
    return with_connection(dict(
        namespace=dict(type="str", default=installer.DEFAULT_NAMESPACE),
        snapshot_file=dict(type="path"),
    ))


def argument_spec():
    spec = store_argument_spec()
    spec["bundle"] = dict(type="list", elements="path", required=True)
    return spec


def installer_for(module):
    client = kube_client_for(module)
    try:
        return installer.Installer(client, module.params["bundle"], namespace=module.params["namespace"],
                                   snapshot_file=module.params["snapshot_file"])
    except Exception as exc:  # pylint: disable=broad-except
        fail(module, exc)


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
    for renamed in installer.RENAMED_OBJECTS:
        if any(s.ref == renamed.ref for s in steps):
            plan.append("NOTICE: %s was renamed to %s (ADR 0109); the old object is still present"
                        % (renamed.ref, renamed.new_name))
    return plan + ["WARNING: %s" % w for w in warnings]


def step_dicts(steps, actions):
    return [{"action": s.action, "object": s.ref.to_dict(), "reason": s.reason} for s in steps if s.action in actions]


def finish(module, run, **result):
    """exit_json with the run's warnings as Ansible warnings."""
    for warning in run.warnings:
        module.warn(warning)
    module.exit_json(**result)


class RunFailed(Exception):
    """A failed stage; ``result`` holds what the module returns with the failure."""

    def __init__(self, message, result):
        super(RunFailed, self).__init__(message)
        self.result = result


def _restore_after(run, snapshot, message, result):
    """Restore from the snapshot after a failed stage and say so in the message."""
    if snapshot is None:
        raise RunFailed(message + "; nothing was written", result)
    try:
        recreated = run.restore(snapshot)
        run.delete_snapshot()
    except Exception as again:  # pylint: disable=broad-except
        raise RunFailed(message + "; RESTORE FAILED (%s): the snapshot is kept for installer_restore" % again, result)
    result["restored"] = [str(r) for r in recreated]
    message += "; the cluster was restored to what it was before the run"
    if recreated:
        message += " (re-created: %s)" % ", ".join(str(r) for r in recreated)
    raise RunFailed(message, result)


def apply_run(run, check_mode, diff):
    """Plan, and unless check_mode: snapshot, read back, apply. Returns the module result."""
    apply_steps = run.plan_apply()
    prune_steps = run.plan_prune()
    inventory_changed = run.inventory_changed()
    writes = [s for s in apply_steps if s.action in ("create", "update")]
    prunes = [s for s in prune_steps if s.action == "prune"]
    result = dict(plan=lines(apply_steps + prune_steps, run.warnings),
                  changes=step_dicts(apply_steps, ("create", "update")),
                  prune=step_dicts(prune_steps, ("prune", "keep")))
    if diff:
        result["diff"] = diffs(apply_steps + prune_steps)
    if check_mode:
        result["changed"] = bool(writes or prunes or inventory_changed)
        return result
    result["changed"] = False
    if not (writes or prunes):
        return result
    snapshot = None
    try:
        snapshot = run.save_snapshot(run.snapshot_entries(apply_steps, prune_steps))
        run.apply(apply_steps)
    except Exception as exc:  # pylint: disable=broad-except
        _restore_after(run, snapshot, "apply failed: %s" % exc, result)
    result["changed"] = True
    return result


def prune_run(run, check_mode, diff):
    """Plan the prune, and unless check_mode: delete, write the inventory, drop the snapshot."""
    steps = run.plan_prune()
    inventory_changed = run.inventory_changed()
    snapshot = run.load_snapshot()
    result = dict(plan=lines(steps, run.warnings), pruned=[],
                  kept=[{"object": str(s.ref), "reason": s.reason} for s in steps if s.action == "keep"])
    if diff:
        result["diff"] = diffs(steps)
    inventory_line = "the inventory %s/%s (%d objects)" % (run.namespace, installer.INVENTORY_NAME, len(run.refs))
    if check_mode:
        if inventory_changed:
            result["plan"].append("write " + inventory_line)
        result["changed"] = bool(any(s.action == "prune" for s in steps) or inventory_changed)
        return result
    try:
        done, kept = run.prune(steps, snapshot)
    except Exception as exc:  # pylint: disable=broad-except
        _restore_after(run, snapshot, "prune failed: %s" % exc, result)
    result["pruned"] = [str(r) for r in done]
    result["kept"] += [{"object": str(r), "reason": why} for r, why in kept]
    result["plan"] = (["pruned %s" % r for r in done] + ["kept %s: %s" % (r, why) for r, why in kept]
                      + [s.line() for s in steps if s.action == "keep"] + ["WARNING: %s" % w for w in run.warnings])
    if inventory_changed:
        run.write_inventory()
        result["plan"].append("wrote " + inventory_line)
    if snapshot is not None:
        run.delete_snapshot()
    result["changed"] = bool(done or inventory_changed or snapshot is not None)
    return result


def run_module(stage):
    """The whole of installer_apply and installer_prune: ``stage`` is apply_run or prune_run."""
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    run = installer_for(module)
    try:
        result = stage(run, module.check_mode, module._diff)  # pylint: disable=protected-access
    except RunFailed as exc:
        fail(module, str(exc), **exc.result)
    except Exception as exc:  # pylint: disable=broad-except
        fail(module, exc, plan=[])
    finish(module, run, **result)
