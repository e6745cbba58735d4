# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Cilium values: the keys the collection owns, the Talos guide's values, the operator-replica rule,
and the effective values (chart defaults < the collection's preset < the user's values < owned keys).

Owned keys are set by the collection and never taken from a user: IPAM (``kubernetes`` only), the
tunnel (read from the running Cilium, immutable), ``kubeProxyReplacement`` (from the kube-proxy mode),
``k8sServiceHost``/``k8sServicePort`` (KubePrism when kube-proxy is replaced), the Talos guide's capability
and cgroup keys, and ``namespaceOverride`` (the release is stored in ichor-system, every object stays in
kube-system).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible_collections.maesh.ichor.plugins.module_utils.config.documents import get_path as get
from ansible_collections.maesh.ichor.plugins.module_utils.talos import KUBEPRISM_PORT

OBJECTS_NAMESPACE = "kube-system"
KUBEPRISM_HOST = "localhost"

# the Talos guide (docs.siderolabs.com, deploying-cilium); a Helm list replaces the chart's, which adds SYSLOG
AGENT_CAPABILITIES = ["CHOWN", "KILL", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "SYS_ADMIN", "SYS_RESOURCE", "DAC_OVERRIDE",
                      "FOWNER", "SETGID", "SETUID"]
CLEAN_STATE_CAPABILITIES = ["NET_ADMIN", "SYS_ADMIN", "SYS_RESOURCE"]
CGROUP_HOST_ROOT = "/sys/fs/cgroup"

# dotted paths of the owned keys; "tunnel" is the key before Cilium 1.14 (lifted values may still carry it)
OWNED = ("ipam.mode", "routingMode", "tunnelProtocol", "tunnel", "kubeProxyReplacement", "k8sServiceHost",
         "k8sServicePort", "securityContext.capabilities.ciliumAgent", "securityContext.capabilities.cleanCiliumState",
         "cgroup.autoMount.enabled", "cgroup.hostRoot", "namespaceOverride")
# owned keys the collection makes match the Talos guide without asking
GUIDE_KEYS = ("securityContext.capabilities.ciliumAgent", "securityContext.capabilities.cleanCiliumState",
              "cgroup.autoMount.enabled", "cgroup.hostRoot")
TUNNELS = ("vxlan", "geneve", "native")


def has(values, path):
    marker = object()
    return get(values, path, marker) is not marker


def put(values, path, value):
    parts = path.split(".")
    node = values
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[parts[-1]] = value


def remove(values, path):
    """Remove a dotted key and the mappings it leaves empty."""
    parts = path.split(".")
    trail = [values]
    for part in parts[:-1]:
        child = trail[-1].get(part) if isinstance(trail[-1], dict) else None
        if not isinstance(child, dict):
            return
        trail.append(child)
    trail[-1].pop(parts[-1], None)
    for depth in range(len(parts) - 1, 0, -1):
        if not trail[depth]:
            trail[depth - 1].pop(parts[depth - 1], None)


def merge(base, layer):
    """Helm's coalescing of values: mappings merge key by key, anything else (lists too) replaces."""
    out = copy.deepcopy(base)
    for key, value in (layer or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def lift(user_values):
    """(the user's values minus the owned keys, {owned key: the user's value} for those it set)."""
    lifted = copy.deepcopy(user_values or {})
    taken = {}
    for path in OWNED:
        if has(lifted, path):
            taken[path] = get(lifted, path)
            remove(lifted, path)
    return lifted, taken


def operator_replicas(nodes, control_planes=None):
    """1 when the spec has one control plane (workers included) or the cluster one Node, since the operator's host
    ports and anti-affinity allow one per node; None (the chart's default) with two or more Nodes. Every Node counts,
    Ready or not; 0 Nodes (unknown) falls back to the control-plane count."""
    if control_planes == 1 or nodes == 1:
        return 1
    return None


def preset(nodes, control_planes=None):
    """The collection's layer under the user's values: the operator replicas."""
    replicas = operator_replicas(nodes, control_planes)
    return {"operator": {"replicas": replicas}} if replicas is not None else {}


def owned(kube_proxy, tunnel, kubeprism_port=KUBEPRISM_PORT):
    """The owned keys' values for a kube-proxy mode (enabled | replaced) and a tunnel (vxlan | geneve | native)."""
    out = {"ipam": {"mode": "kubernetes"}, "namespaceOverride": OBJECTS_NAMESPACE,
           "kubeProxyReplacement": kube_proxy == "replaced",
           "securityContext": {"capabilities": {"ciliumAgent": list(AGENT_CAPABILITIES),
                                                "cleanCiliumState": list(CLEAN_STATE_CAPABILITIES)}},
           "cgroup": {"autoMount": {"enabled": False}, "hostRoot": CGROUP_HOST_ROOT}}
    if tunnel == "native":
        out["routingMode"] = "native"
    else:
        out["routingMode"] = "tunnel"
        out["tunnelProtocol"] = tunnel
    if kube_proxy == "replaced":
        out["k8sServiceHost"] = KUBEPRISM_HOST
        out["k8sServicePort"] = kubeprism_port
    return out


def effective(nodes, user_values, owned_values, control_planes=None):
    """chart defaults < preset(nodes, control_planes) < the user's values (owned keys removed) < the owned keys."""
    lifted = lift(user_values)[0]
    return merge(merge(preset(nodes, control_planes), lifted), owned_values)
