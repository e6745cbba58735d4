# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout's health gates and its preflight reads: each gate is ``(passed?, what is awaited)`` for one machine or
one batch, read once per poll; the rollout waits on each with its own timeout, in ``ORDER``.

- ``version``: the machine answers with the new Talos;
- ``node_ready``: its Node is Ready and reports the new Talos;
- ``etcd`` (control planes): its member is healthy, the cluster has its quorum and a leader;
- ``cilium`` (a Cilium the collection manages): the Cilium agent Pod on its Node is Ready;
- ``pods`` (once per batch): no more Pods stuck Pending or CrashLooping in kube-system than before the batch.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.rollout import talos_step
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, etcd, machine

ORDER = ("version", "node_ready", "etcd", "cilium")
BATCH_GATE = "pods"
# seconds each gate may take once the one before it passed (the version gate: the reboot's ``wait_timeout``)
DEFAULT_TIMEOUTS = {"node_ready": 300, "etcd": 300, "cilium": 300, "pods": 300}

CILIUM_AGENT = "k8s-app=cilium"
CRASH_LOOP = "CrashLoopBackOff"


def applies(gate, role, cilium_managed, with_kube):
    """Whether ``gate`` is judged for a machine of ``role``."""
    if gate == "etcd":
        return role == "controlplane"
    if gate in ("node_ready", "cilium", BATCH_GATE):
        return with_kube and (gate != "cilium" or cilium_managed)
    return True


def version(client, node, target):
    try:
        running = client.run(machine.version(client, node))["tag"]
    except errors.TalosError:
        running = None
    return running == target, "it to answer with Talos %s" % target


def node_ready(kube, node_name, target):
    return talos_step.node_ready(kube, node_name, target), "its Node %s to be Ready on Talos %s" % (node_name, target)


def etcd_member(client, node):
    healthy, detail = etcd.health(client, node)
    if not healthy:
        return False, "its etcd member to be healthy with the cluster in quorum (%s)" % detail
    try:
        leader = etcd.leader(client, node)
    except errors.TalosError as exc:
        return False, "its etcd member to answer (%s)" % exc
    if not leader:
        return False, "etcd to have a leader (the member on %s knows none)" % node
    return True, "etcd healthy with a leader"


def cilium_agent(kube, node_name):
    for pod in kube.list("v1", "Pod", "kube-system", label_selector=CILIUM_AGENT,
                         field_selector="spec.nodeName=%s" % node_name):
        if pod_ready(pod) and not (pod.get("metadata") or {}).get("deletionTimestamp"):
            return True, "the Cilium agent on %s Ready" % node_name
    return False, "the Cilium agent Pod on Node %s to be Ready" % node_name


def pod_ready(pod):
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def stuck(pod):
    """Whether a Pod is stuck: Pending (not being deleted), or a container waiting in CrashLoopBackOff."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    if meta.get("deletionTimestamp"):
        return False
    if status.get("phase") == "Pending":
        return True
    return any(((c.get("state") or {}).get("waiting") or {}).get("reason") == CRASH_LOOP
               for c in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []))


def stuck_pods(kube):
    """'kube-system/<name>' of every stuck Pod in kube-system (one list, from the API server's cache: a gate polled
    between batches, whose Pod statuses are the kubelets' reports of seconds ago anyway)."""
    return sorted("kube-system/%s" % p["metadata"]["name"] for p in kube.list("v1", "Pod", "kube-system", cached=True)
                  if stuck(p))


def no_more_stuck(kube, before):
    """The batch gate: no more stuck Pods in kube-system than ``before`` (the list read before the batch)."""
    return as_many_stuck(before, stuck_pods(kube))


def as_many_stuck(before, now):
    """The batch gate on two reads of ``stuck_pods``: before the batch and ``now``."""
    new = [name for name in now if name not in before]
    if len(now) <= len(before):
        return True, "%d Pods stuck in kube-system, as before" % len(now)
    return False, "no more Pods stuck Pending or CrashLooping in kube-system than the %d before the batch (now %d: " \
        "%s)" % (len(before), len(now), ", ".join(new[:5]) + (" and %d more" % (len(new) - 5) if len(new) > 5 else ""))


def judge(gate, client, kube, m, target):
    """One gate for machine ``m`` (its ``node``, ``node_name``)."""
    if gate == "version":
        return version(client, m["node"], target)
    if gate == "node_ready":
        return node_ready(kube, m["node_name"], target)
    if gate == "etcd":
        return etcd_member(client, m["node"])
    return cilium_agent(kube, m["node_name"])
