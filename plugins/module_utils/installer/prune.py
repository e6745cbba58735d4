# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The prune rules, in one place: the kinds the installer may delete, which objects of the
previous inventory are candidates, the renamed objects of builds before the inventory, and the owner
check made on each candidate at delete time."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.installer.objects import MARK_KEY, MARK_VALUE, Ref, \
    carries_mark, labels

# The installer's own RBAC: the run needs it until its last step.
INSTALLER_PREFIX = "ichor-installer"

# The kinds the installer may delete (its Role/ClusterRole hold delete on each). Never: CRDs, Namespaces,
# Secrets, PriorityClasses, CiliumNetworkPolicies, PersistentVolumeClaims, anything else.
PRUNABLE_KINDS = frozenset([
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io", "Role"),
    ("rbac.authorization.k8s.io", "RoleBinding"),
    ("", "ServiceAccount"),
    ("", "Service"),
    ("apps", "Deployment"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
])


class Renamed:
    """An object a build before the inventory may still hold under an old name (``renamedObjects``)."""

    def __init__(self, ref, label, new_name):
        self.ref = ref
        self.label = label
        self.new_name = new_name


# The override ClusterRole was once the break-glass role; builds before the inventory may still hold it.
RENAMED_OBJECTS = (
    Renamed(Ref("rbac.authorization.k8s.io/v1", "ClusterRole", None, "ichor-ichor-break-glass-role"),
            ("app.kubernetes.io/name", "ichor"), "ichor-ichor-override-role"),
)


def is_prunable(ref, namespace):
    """Whether an inventory object may be a candidate at all (kind, scope, installer's own RBAC)."""
    if (ref.group, ref.kind) not in PRUNABLE_KINDS:
        return False, "%s is not a kind the installer prunes" % ref.kind
    if ref.namespace and ref.namespace != namespace:
        return False, "in namespace %s, not the installer's %s" % (ref.namespace, namespace)
    if ref.name.startswith(INSTALLER_PREFIX):
        return False, "the installer's own object"
    return True, None


def candidates(previous, bundle_refs, namespace):
    """(candidates, skipped): objects of the previous inventory the bundle no longer ships.

    ``skipped`` are the dropped objects that are never pruned, each with the reason.
    """
    shipped = set(bundle_refs)
    out, skipped = [], []
    for ref in previous or []:
        if ref in shipped:
            continue
        ok, why = is_prunable(ref, namespace)
        if ok:
            out.append(ref)
        else:
            skipped.append((ref, why))
    return out, skipped


def renamed_candidates(bundle_refs):
    shipped = set(bundle_refs)
    return [r for r in RENAMED_OBJECTS if r.ref not in shipped]


def owner_check(live, renamed=None):
    """At delete time: (delete?, reason). Only an object that still carries the mark is deleted."""
    if live is None:
        return False, "already gone"
    if (live.get("metadata") or {}).get("deletionTimestamp"):
        return False, "already being deleted (Terminating); not touched"
    if renamed is not None:
        key, value = renamed.label
        if labels(live).get(key) == value:
            return True, "renamed to %s in the bundle and carries %s=%s" % (renamed.new_name, key, value)
        return False, "does not carry %s=%s" % (key, value)
    if carries_mark(live):
        return True, "dropped from the bundle and carries %s=%s" % (MARK_KEY, MARK_VALUE)
    return False, "does not carry %s=%s (not installed by the installer, or relabelled by a person)" % (
        MARK_KEY, MARK_VALUE)
