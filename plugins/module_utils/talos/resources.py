# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The COSI resources the collection reads (what ``talosctl get`` reads): type, namespace, id."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class Ref:
    """A COSI resource type in its namespace, with the id of its singleton when it has one."""

    def __init__(self, resource_type, namespace, singleton=None, sensitive=False):
        self.type = resource_type
        self.namespace = namespace
        self.singleton = singleton
        self.sensitive = sensitive

    def __repr__(self):
        return "Ref(%s/%s)" % (self.namespace, self.type)


MACHINE_CONFIG = Ref("MachineConfigs.config.talos.dev", "config", "v1alpha1", sensitive=True)
MEMBERS = Ref("Members.cluster.talos.dev", "cluster")
# the machine's own type as its config states it (``talosctl get machinetype``), discovery or not
MACHINE_TYPE = Ref("MachineTypes.config.talos.dev", "config", "machine-type")
CLUSTER_INFO = Ref("Infos.cluster.talos.dev", "cluster", "current")
IDENTITY = Ref("Identities.cluster.talos.dev", "cluster", "local")
MACHINE_STATUS = Ref("MachineStatuses.runtime.talos.dev", "runtime", "machine")
SYSTEM_INFORMATION = Ref("SystemInformations.hardware.talos.dev", "hardware", "systeminformation")
HOSTNAME_STATUS = Ref("HostnameStatuses.net.talos.dev", "network", "hostname")
DISCOVERED_VOLUMES = Ref("DiscoveredVolumes.block.talos.dev", "runtime")
VOLUME_STATUSES = Ref("VolumeStatuses.block.talos.dev", "runtime")
DISKS = Ref("Disks.block.talos.dev", "runtime")
SYSTEM_DISK = Ref("SystemDisks.block.talos.dev", "runtime", "system-disk")
# Talos's KubePrism controller writes it while the balancer runs: host (localhost:<port>), healthy (an API server
# answers through it); absent while KubePrism is off
KUBEPRISM_STATUS = Ref("KubePrismStatuses.kubernetes.talos.dev", "k8s", "k8s-loadbalancer")
# the name the machine's kubelet registers its Node with (Talos's NodenameController: the hostname, or its FQDN)
NODENAME = Ref("Nodenames.kubernetes.talos.dev", "k8s", "nodename")
# one per system extension the machine booted with (ids "0", "1", ... in load order; spec extensions.Layer): an Image
# Factory image carries one named "schematic" whose version is its schematic ID
EXTENSION_STATUSES = Ref("ExtensionStatuses.runtime.talos.dev", "runtime")


def spec_of(item):
    """A COSI resource's spec as a mapping (an empty one for a missing resource, or a spec of another shape: the
    machine's YAML decides what it holds)."""
    spec = item.get("spec") if isinstance(item, dict) else None
    return spec if isinstance(spec, dict) else {}


def spec_text(item, key):
    """A text field of a resource's spec ("" when it is missing or not text)."""
    value = spec_of(item).get(key)
    return value if isinstance(value, str) else ""


def role_of(machine_type):
    """controlplane | worker from a machine type as Talos writes it (init is the legacy first control plane);
    None for another or none."""
    text = str(machine_type or "").lower().replace("_", "").replace("-", "")
    if text in ("controlplane", "init"):
        return "controlplane"
    if text == "worker":
        return "worker"
    return None


def machine_role(item):
    """controlplane | worker from a MachineType resource (its spec is the bare type; a mapping holding
    ``machineType`` is read too); None for a missing resource or another type."""
    spec = (item or {}).get("spec")
    return role_of(spec.get("machineType") if isinstance(spec, dict) else spec)
