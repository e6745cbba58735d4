# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The running Cilium, read through a KubeClient: what runs (version, configuration, owned keys as they
are), who installed it (the foreign Helm records), whether it is healthy, and the version rule."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import record, values
from ansible_collections.maesh.ichor.plugins.module_utils.cilium.errors import Refused
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cni

NAMESPACE = values.OBJECTS_NAMESPACE
DAEMONSET = "cilium"
OPERATOR = "cilium-operator"
CONFIG = "cilium-config"
AGENT_CONTAINER = "cilium-agent"
KUBE_PROXY = "kube-proxy"
RELEASE = "cilium"
RELEASE_NAMESPACE = "ichor-system"  # where the collection stores its release record
HELM_RELEASE_NAME = "meta.helm.sh/release-name"
HELM_RELEASE_NAMESPACE = "meta.helm.sh/release-namespace"


def server_version(kube):
    return json.loads(kube.raw_get("/version"))["gitVersion"]


def api_versions(kube):
    """What helm's Capabilities.APIVersions holds against this cluster: every group/version and group/version/Kind."""
    found = set()
    paths = ["/api/v1"]
    for group in json.loads(kube.raw_get("/apis")).get("groups") or []:
        paths += ["/apis/" + v["groupVersion"] for v in group.get("versions") or []]
    for path in paths:
        listing = json.loads(kube.raw_get(path))
        group_version = listing.get("groupVersion") or path[len("/api/"):]
        found.add(group_version)
        for resource in listing.get("resources") or []:
            if "/" not in resource.get("name", ""):
                found.add("%s/%s" % (group_version, resource["kind"]))
    return found


def node_count(kube):
    """Every Node counts, Ready or not (the first one is NotReady until Cilium runs)."""
    return len(kube.list("v1", "Node"))


def _container(pod_spec, name, init=False):
    for container in pod_spec.get("initContainers" if init else "containers") or []:
        if container.get("name") == name:
            return container
    return None


class LiveCilium:
    """The DaemonSet kube-system/cilium, its ConfigMap and operator, and what they say about the owned keys."""

    def __init__(self, daemonset, config, operator):
        self.daemonset = daemonset
        self.config = ((config or {}).get("data") or {})
        self.operator = operator
        self.pod = ((daemonset.get("spec") or {}).get("template") or {}).get("spec") or {}
        agent = _container(self.pod, AGENT_CONTAINER) or (self.pod.get("containers") or [{}])[0]
        self.agent = agent
        self.image = agent.get("image", "")
        self.version = cni.image_version(self.image)
        annotations = (daemonset.get("metadata") or {}).get("annotations") or {}
        self.helm_release = (annotations.get(HELM_RELEASE_NAME), annotations.get(HELM_RELEASE_NAMESPACE))

    @property
    def ipam(self):
        return self.config.get("ipam") or "cluster-pool"

    @property
    def kube_proxy_replacement(self):
        value = str(self.config.get("kube-proxy-replacement", "false")).lower()
        return value in ("true", "strict")

    @property
    def tunnel(self):
        """vxlan | geneve | native, from routing-mode and tunnel-protocol (or the key ``tunnel`` before 1.14)."""
        legacy = self.config.get("tunnel")
        if legacy:
            return "native" if legacy == "disabled" else legacy
        if self.config.get("routing-mode") == "native":
            return "native"
        return self.config.get("tunnel-protocol") or "vxlan"

    def _env(self, name):
        for item in self.agent.get("env") or []:
            if item.get("name") == name:
                return item.get("value")
        return None

    @property
    def service_endpoint(self):
        """(k8sServiceHost, k8sServicePort) as the agent runs with them; (None, None) when unset."""
        port = self._env("KUBERNETES_SERVICE_PORT")
        return self._env("KUBERNETES_SERVICE_HOST"), int(port) if port and port.isdigit() else port

    def owned_as_running(self):
        """The owned keys as the running Cilium has them (dotted key -> value)."""
        host, port = self.service_endpoint
        clean = _container(self.pod, "clean-cilium-state", init=True) or {}
        caps = (((self.agent.get("securityContext") or {}).get("capabilities") or {}).get("add"))
        clean_caps = (((clean.get("securityContext") or {}).get("capabilities") or {}).get("add"))
        return {"ipam.mode": self.ipam, "tunnel": self.tunnel, "kubeProxyReplacement": self.kube_proxy_replacement,
                "k8sServiceHost": host, "k8sServicePort": port,
                "securityContext.capabilities.ciliumAgent": caps,
                "securityContext.capabilities.cleanCiliumState": clean_caps,
                "cgroup.autoMount.enabled": _container(self.pod, "mount-cgroup", init=True) is not None,
                "cgroup.hostRoot": self.config.get("cgroup-root")}


def read(kube):
    """The running Cilium, or None when kube-system has no DaemonSet cilium."""
    daemonset = kube.get("apps/v1", "DaemonSet", DAEMONSET, NAMESPACE)
    if daemonset is None:
        return None
    return LiveCilium(daemonset, kube.get("v1", "ConfigMap", CONFIG, NAMESPACE),
                      kube.get("apps/v1", "Deployment", OPERATOR, NAMESPACE))


def kube_proxy_mode(kube):
    """enabled when kube-system runs the kube-proxy DaemonSet (Talos deploys it unless disabled), else replaced."""
    return "enabled" if kube.get("apps/v1", "DaemonSet", KUBE_PROXY, NAMESPACE) is not None else "replaced"


def records(kube, namespace, release_name):
    return [record.Record(s) for s in kube.list("v1", "Secret", namespace,
                                                label_selector="owner=helm,name=%s" % release_name)]


def foreign_records(kube, live):
    """The records of the foreign release that installed this Cilium: the one its DaemonSet names
    (meta.helm.sh annotations, as ``helm`` and the Cilium CLI write them) and ``cilium`` in kube-system."""
    places = set([(RELEASE, NAMESPACE)])
    name, namespace = live.helm_release
    if name and namespace:
        places.add((name, namespace))
    found = []
    for release_name, where in sorted(places):
        if where == RELEASE_NAMESPACE and release_name == RELEASE:
            continue  # the collection's own release
        found += records(kube, where, release_name)
    return sorted(found, key=lambda r: (r.namespace, r.release_name, r.revision))


def health(live, nodes):
    """(healthy, lines): the DaemonSet Ready and up to date on every Node, the operator's replicas Ready."""
    lines, healthy = [], True
    ds_meta, ds_status = live.daemonset.get("metadata") or {}, live.daemonset.get("status") or {}
    desired = ds_status.get("desiredNumberScheduled") or 0
    ready = ds_status.get("numberReady") or 0
    updated = ds_status.get("updatedNumberScheduled") or 0
    current = ds_status.get("observedGeneration") == ds_meta.get("generation")
    ok = current and desired == nodes and ready == nodes and updated == nodes and nodes > 0
    healthy = healthy and ok
    lines.append("DaemonSet %s/%s: %d of %d nodes ready%s" % (NAMESPACE, DAEMONSET, ready, nodes,
                                                              "" if current and updated == desired else ", rolling out"))
    if live.operator is None:
        return False, lines + ["Deployment %s/%s: missing" % (NAMESPACE, OPERATOR)]
    op_meta, op_status = live.operator.get("metadata") or {}, live.operator.get("status") or {}
    want = (live.operator.get("spec") or {}).get("replicas")
    want = 1 if want is None else want
    op_ready = op_status.get("readyReplicas") or 0
    op_current = op_status.get("observedGeneration") == op_meta.get("generation")
    op_ok = op_current and op_ready >= want and (op_status.get("updatedReplicas") or 0) >= want
    lines.append("Deployment %s/%s: %d of %d replicas ready%s" % (NAMESPACE, OPERATOR, op_ready, want,
                                                                  "" if op_current else ", rolling out"))
    return healthy and op_ok, lines


def version_step(live_version, chart_version, result=None):
    """"takeover" (same minor) or "upgrade" (exactly one minor lower); anything else is refused."""
    if live_version is None:
        raise Refused("the Cilium DaemonSet %s/%s runs an image without a version tag; cannot judge the version rule"
                      % (NAMESPACE, DAEMONSET), result=result)
    live, chart = release.minor(live_version), release.minor(chart_version)
    if live == chart:
        return "takeover"
    if live[0] == chart[0] and live[1] == chart[1] - 1:
        return "upgrade"
    if live > chart:
        raise Refused("Cilium %s is newer than this collection's chart %s: a takeover would downgrade it; use a "
                      "maesh.ichor whose release set has Cilium %s" % (live_version, chart_version, release.fmt_minor(live)),
                      result=result)
    raise Refused("Cilium %s is more than one minor below the chart %s: upgrade it with the tool that installed it "
                  "first (to %d.%d), then run the takeover again" % (live_version, chart_version, chart[0], chart[1] - 1),
                  result=result)
