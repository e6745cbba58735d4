# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout's order, as pure rules: control planes one at a time with the member that leads etcd last, then the
workers in batches (a count or a percentage), the first of them the canary; and how many failed workers stop it.

Nothing here reads or writes a machine: ``talos_rollout`` reads the leader and the machines, and asks these rules.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError

_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")
_COUNT = re.compile(r"^\s*(\d+)\s*$")


class BatchError(IchorError):
    """A batch size or failure budget that is not one."""


def batch_size(value, workers):
    """The machines of one worker batch: ``value`` is a count (``5``) or a percentage of the workers (``"20%"``,
    rounded up, at least one); never more than the workers. BatchError for anything else."""
    text = str(value)
    count = _COUNT.match(text) if not isinstance(value, bool) else None
    percent = _PERCENT.match(text) if not isinstance(value, bool) else None
    if count:
        size = int(count.group(1))
    elif percent and 0 < float(percent.group(1)) <= 100:
        size = max(1, int(math.ceil(workers * float(percent.group(1)) / 100.0)))
    else:
        raise BatchError("ichor_upgrade_worker_batch is %r: give a count of workers (5) or a percentage of them "
                         "(\"20%%\", above 0 and at most 100)" % (value,))
    if size < 1:
        raise BatchError("ichor_upgrade_worker_batch is %r: a batch holds at least one worker" % (value,))
    return max(1, min(size, workers)) if workers else size


def failure_budget(value):
    """The workers allowed to fail before the rollout stops (``ichor_upgrade_max_failed``): a count, 0 or more."""
    if isinstance(value, bool) or not _COUNT.match(str(value)):
        raise BatchError("ichor_upgrade_max_failed is %r: give the count of workers allowed to fail (0 or more)"
                         % (value,))
    return int(value)


class Batch:
    """Machines upgraded together: ``kind`` controlplane (always one) or worker; ``canary``: the first worker batch,
    whose gates must hold for the soak before the next batch starts."""

    def __init__(self, kind, machines, canary=False):
        self.kind = kind
        self.machines = list(machines)
        self.canary = canary
        self.label = kind  # "control plane 2 of 3", "worker batch 1 of 4": set by ``schedule``

    def names(self):
        return [m["name"] for m in self.machines]

    def __repr__(self):
        return "Batch(%s, %s%s)" % (self.kind, self.names(), ", canary" if self.canary else "")


def controlplane_order(controlplanes, leader):
    """The control planes in their order with the one named ``leader`` (the machine whose member leads etcd) last:
    every other one is upgraded while the leader serves, and leadership moves once, at the end."""
    return [m for m in controlplanes if m["name"] != leader] + [m for m in controlplanes if m["name"] == leader]


def schedule(machines, leader, size, canary=True):
    """The batches of the step's machines (each ``{"name", "role", ...}``, in inventory order): every control plane
    alone (``controlplane_order``), then the workers ``size`` at a time; the first worker batch is the canary."""
    controlplanes = [m for m in machines if m["role"] == "controlplane"]
    workers = [m for m in machines if m["role"] != "controlplane"]
    batches = [Batch("controlplane", [m]) for m in controlplane_order(controlplanes, leader)]
    for start in range(0, len(workers), max(1, int(size))):
        batches.append(Batch("worker", workers[start:start + size], canary=canary and start == 0))
    for kind, words in (("controlplane", "control plane %d of %d"), ("worker", "worker batch %d of %d")):
        of_kind = [b for b in batches if b.kind == kind]
        for index, batch in enumerate(of_kind):
            batch.label = words % (index + 1, len(of_kind))
    return batches


def over_budget(failed_workers, budget):
    """Whether the rollout stops: more workers failed than ``budget`` allows (a control plane that fails always
    stops it: that is decided where it fails)."""
    return len(failed_workers) > budget


def describe(batches):
    """The plan's lines for the order: one per batch."""
    return ["%s%s: %s" % (b.label, " (canary)" if b.canary else "", ", ".join(b.names())) for b in batches]
