# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The release set: the one place a version is written.

Talos, its version contract, Kubernetes and the Cilium chart this collection is tested with.
Every module, role, lookup and check reads it from here; moving the set is a change to this
file and a new release of the collection. There is no override.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.common import versions
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError

TALOS = "v1.14.5"
CONTRACT = "v1.14"
KUBERNETES = "v1.36.6"
CILIUM = "1.20.4"

# The Talos installer's repository: a machine installs Talos vX.Y.Z from INSTALLER:vX.Y.Z.
INSTALLER = "ghcr.io/siderolabs/installer"


def installer_image(version=None):
    """The installer image of a Talos version (the set's by default)."""
    return "%s:%s" % (INSTALLER, version or TALOS)


# Kubernetes minors each Talos minor supports (Talos support matrix; the set uses the documented range).
TALOS_KUBERNETES = {
    (1, 12): ((1, 30), (1, 35)),
    (1, 13): ((1, 31), (1, 36)),
    (1, 14): ((1, 33), (1, 37)),
}

# Kubernetes minors each Cilium minor is e2e tested with (Cilium compatibility pages).
CILIUM_KUBERNETES = {
    (1, 18): ((1, 30), (1, 33)),
    (1, 19): ((1, 32), (1, 35)),
    (1, 20): ((1, 33), (1, 36)),
}

# Adopt needs Talos v1.12 or later; contracts below it are not rendered.
MINIMUM_TALOS = (1, 12)


class VersionError(IchorError, ValueError):
    """A version string that is not vMAJOR.MINOR[.PATCH]."""


def parse(version):
    """'v1.14.5' / '1.14' -> (1, 14, 5) / (1, 14, 0)."""
    stated = versions.read(str(version))
    if stated is None:
        raise VersionError("%r is not a version (vMAJOR.MINOR.PATCH)" % (version,))
    return stated.numbers


def minor(version):
    return parse(version)[:2]


def fmt_minor(pair):
    return "%d.%d" % pair


def release_set():
    """The set as a dict, for the lookup, the README and results."""
    return {"talos": TALOS, "contract": CONTRACT, "kubernetes": KUBERNETES, "cilium": CILIUM}


def kubernetes_range_for_talos(talos):
    """(min, max) Kubernetes minors the Talos minor supports, or None when unknown."""
    return TALOS_KUBERNETES.get(minor(talos))


def kubernetes_range_for_cilium(cilium):
    return CILIUM_KUBERNETES.get(minor(cilium))


def talos_supports(talos, kubernetes):
    rng = kubernetes_range_for_talos(talos)
    return rng is not None and rng[0] <= minor(kubernetes) <= rng[1]


def cilium_supports(cilium, kubernetes):
    rng = kubernetes_range_for_cilium(cilium)
    return rng is not None and rng[0] <= minor(kubernetes) <= rng[1]


def one_minor_step(current, target):
    """Kubernetes and Cilium move one minor at a time: target minor is current's or the next."""
    cur, tgt = minor(current), minor(target)
    return cur[0] == tgt[0] and 0 <= tgt[1] - cur[1] <= 1


def judge(running, target):
    """'up_to_date', 'behind' or 'newer' for a running version against the set's."""
    run, tgt = parse(running), parse(target)
    if run == tgt:
        return "up_to_date"
    return "behind" if run < tgt else "newer"


def validate_change(field, stored, desired):
    """A changed Talos, Kubernetes or contract value is accepted only when it is the
    pinned one and not lower than the stored one; an unchanged value always is. Returns None or the refusal."""
    pinned = {"talos": TALOS, "kubernetes": KUBERNETES, "contract": CONTRACT}[field]
    if stored is not None and parse(desired) == parse(stored):
        return None
    if parse(desired) != parse(pinned):
        return "%s %s is not the release set's %s; this collection manages only its release set (no override)" % (
            field, desired, pinned)
    if stored is not None and parse(desired) < parse(stored):
        return "%s %s is lower than the cluster's %s" % (field, desired, stored)
    return None
