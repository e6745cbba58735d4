# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Versions first: the Talos versions a cluster's machines run, judged before adopt writes anything.

Any machine below v1.12.0 refuses the cluster ("upgrade Talos first"); in a mixed
cluster (some machines at v1.12 or later, some below) the message names the machines below. Any machine
on a Talos newer than the release set refuses it too (in the rollout's wording). A machine whose
version cannot be read as vMAJOR.MINOR.PATCH refuses it as well: nothing can be judged for it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.common import release

FLOOR = "v%d.%d" % release.MINIMUM_TALOS

OLDER = ("Talos %s is older than the oldest version Ichor adopts (%s). Upgrade Talos first, with talosctl or your "
         "usual tool, and run adopt again.")


def _bare(version):
    """'v1.11.5' -> '1.11.5' (the message's X.Y.Z)."""
    return "%d.%d.%d" % release.parse(version)


def _names(items):
    return ", ".join("%s (%s)" % (name, version) for name, version in items)


def judge(machines):
    """The verdict for [(machine name, Talos version)], in any order.

    Returns {refused, message, older, newer, unreadable}: the lists name the machines (sorted), ``message``
    is "" when nothing is refused, else one line for the user.
    """
    older, newer, unreadable, fine = [], [], [], []
    for name, version in sorted(machines, key=lambda item: str(item[0])):
        try:
            parsed = release.parse(version)
        except release.VersionError:
            unreadable.append((name, version))
            continue
        if parsed[:2] < release.MINIMUM_TALOS:
            older.append((name, version))
        elif release.judge(version, release.TALOS) == "newer":
            newer.append((name, version))
        else:
            fine.append((name, version))
    parts = []
    if older:
        lowest = min(older, key=lambda item: release.parse(item[1]))[1]
        text = OLDER % (_bare(lowest), FLOOR)
        if fine or newer or unreadable or len(set(version for _name, version in older)) > 1:
            # a mixed cluster: name the machines below the floor
            text += " Below %s: %s." % (FLOOR, _names(older))
        parts.append(text)
    for version in sorted(set(version for _name, version in newer), key=release.parse):
        names = [name for name, v in newer if v == version]
        parts.append("Talos on %s is %s, newer than the release set's %s; this collection cannot manage it." % (
            ", ".join(names), version, release.TALOS))
    if unreadable:
        parts.append("The Talos version of %s cannot be read (%s); check that each is a Talos machine." % (
            ", ".join(name for name, _v in unreadable), ", ".join(repr(str(v)[:40]) for _n, v in unreadable)))
    return {
        "refused": bool(parts),
        "message": " ".join(parts),
        "older": [name for name, _v in older],
        "newer": [name for name, _v in newer],
        "unreadable": [name for name, _v in unreadable],
    }
