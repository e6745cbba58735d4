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

from ansible_collections.maesh.ichor.plugins.module_utils import installer
from ansible_collections.maesh.ichor.plugins.module_utils.connection import fail, kube_client_for, with_connection


def argument_spec():
    return with_connection(dict(
        bundle=dict(type="list", elements="path", required=True),
        namespace=dict(type="str", default=installer.DEFAULT_NAMESPACE),
        snapshot_file=dict(type="path"),
    ))


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
