# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout's Kubernetes step (ADR 0057): removed APIs still in use refuse it; kubelets are
waited for one at a time."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.maesh.ichor.plugins.module_utils import release
from ansible_collections.maesh.ichor.plugins.module_utils.common import poll
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import nodes
from ansible_collections.maesh.ichor.plugins.module_utils.rollout.errors import UpgradeFailed

_DEPRECATED = re.compile(r'^apiserver_requested_deprecated_apis\{([^}]*)\}\s+(\S+)', re.M)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def removed_apis_in_use(metrics_text, target):
    """APIs still requested whose removed_release is at or below the target minor (apiserver /metrics)."""
    target_minor = release.minor(target)
    hits = set()
    for labels, value in _DEPRECATED.findall(metrics_text or ""):
        fields = dict(_LABEL.findall(labels))
        removed = fields.get("removed_release")
        if not removed or float(value) <= 0:
            continue
        if release.minor(removed) <= target_minor:
            group = fields.get("group") or "core"
            hits.add("%s/%s %s (removed in %s)" % (group, fields.get("version"), fields.get("resource"), removed))
    return sorted(hits)


def check_removed_apis(metrics_text, target):
    """Refuse the Kubernetes step (UpgradeFailed) while an API the target no longer serves is requested."""
    hits = removed_apis_in_use(metrics_text, target)
    if hits:
        raise UpgradeFailed("removed APIs are still in use, Kubernetes %s no longer serves them: %s; move their "
                            "clients to the replacement APIs first" % (target, "; ".join(hits)))


def wait_kubelet(kube, hostname, target, timeout, interval=0.5, clock=None):
    def at_target():
        node = nodes.get(kube, hostname)
        return nodes.info(node).get("kubeletVersion") == target and nodes.ready(node), None

    if not poll.until(at_target, timeout, interval, clock)[0]:
        raise UpgradeFailed("the kubelet of %s did not report %s and Ready within %ss; the remaining machines were "
                            "not touched; rerun to continue" % (hostname, target, int(timeout)))
