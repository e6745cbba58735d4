# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a run holds the whole cluster (pure functions, no I/O).

A playbook whose work is cluster-wide (one module over every machine, the cluster lock, the cluster record) judges or
changes the cluster from the machines its run holds. A run may hold part of them: an AWX job slice sees only its hosts,
``--limit`` leaves hosts out, an inventory may be stale. The cluster record names the cluster's machines (``nodes``,
written by init and adopt: name -> {uuid, node, role, spec}); a run that holds fewer of them is refused, naming the
ones missing, unless the operator says the subset is deliberate (``ichor_subset``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# the missing machines a refusal names before "and N more"
NAMED = 10
VARIABLE = "ichor_subset"


def _text(value):
    return value if isinstance(value, str) and value else None


def missing(record, machines):
    """The names of the machines the record lists that the run does not hold, sorted. ``record``: the cluster record's
    data; ``machines``: the run's, each {name, node, role} and maybe uuid and hostname. A record entry is held by a run
    machine of its name, else of its node address, else of its UUID. A record without ``nodes`` lists none."""
    nodes = (record or {}).get("nodes") if isinstance(record, dict) else None
    if not isinstance(nodes, dict) or not nodes:
        return []
    names, addresses, uuids = set(), set(), set()
    for m in machines or ():
        if not isinstance(m, dict):
            continue
        names.add(_text(m.get("name")))
        addresses.add(_text(m.get("node")))
        uuids.add(_text(m.get("uuid")))
    for held in (names, addresses, uuids):
        held.discard(None)
    out = []
    for name, entry in nodes.items():
        entry = entry if isinstance(entry, dict) else {}
        if name in names or _text(entry.get("node")) in addresses or _text(entry.get("uuid")) in uuids:
            continue
        out.append(str(name))
    return sorted(out)


def named(names, most=NAMED):
    """``a, b, c`` or, past ``most``, the first ``most`` and ``and N more``."""
    if len(names) <= most:
        return ", ".join(names)
    return "%s and %d more" % (", ".join(names[:most]), len(names) - most)


def refusal(record, machines, deliberate=False):
    """The one line that refuses a run holding fewer of the cluster's machines than its record lists (None: the run
    holds every one, the record lists none, or ``deliberate``)."""
    if deliberate:
        return None
    absent = missing(record, machines)
    if not absent:
        return None
    listed = len(record["nodes"])
    return ("this run holds %d of the %d machines the cluster record lists; %s %s missing (%s): a playbook acting on "
            "the whole cluster would judge or change it from part of it; add %s to the inventory (groups controlplane "
            "and worker) and run it whole (an AWX job template with job_slice_count 1, no --limit), or run with "
            "-e %s=true when the subset is deliberate; nothing was written" % (
                listed - len(absent), listed, len(absent), "is" if len(absent) == 1 else "are", named(absent),
                "it" if len(absent) == 1 else "them", VARIABLE))
