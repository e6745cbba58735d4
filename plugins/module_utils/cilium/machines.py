# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the takeover reads from the Talos machines: the Cilium inline manifest entry and KubePrism.

The inline entry is found by content, not by name: an entry of ``cluster.inlineManifests`` (legacy form) or a
``KubeInlineManifestConfig`` document whose manifest holds the DaemonSet ``cilium`` in kube-system. Talos applies
inline manifests from the control planes' configs only, so only theirs are read for it.

KubePrism answers on a machine when its config enables it on the expected port (``KubePrismConfig`` or
``machine.features.kubePrism``) and Talos's own KubePrism controller reports the balancer healthy
(``KubePrismStatuses`` ``k8s-loadbalancer``: it is healthy while an API server answers through it) on that port.
The controller cannot dial a machine's localhost:7445 itself; this is the machine's own word, read over its API.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.config import documents
from ansible_collections.maesh.ichor.plugins.module_utils.config import spec as specs
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine as talos_machine
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res


def inline_entries(docs):
    """[(name, where)] of the inline manifests in a config's documents that hold the cilium DaemonSet."""
    found = []
    for doc in docs:
        if doc.kind == "KubeInlineManifestConfig" and specs.is_cilium_manifest(doc.body.get("manifest")):
            found.append((doc.name, "KubeInlineManifestConfig"))
        elif doc.kind == documents.LEGACY:
            for item in documents.get_path(doc.body, "cluster.inlineManifests") or []:
                if isinstance(item, dict) and specs.is_cilium_manifest(item.get("contents")):
                    found.append((item.get("name"), "cluster.inlineManifests"))
    return [(name, where) for name, where in found if isinstance(name, str) and name]


def kubeprism_config(docs):
    """(enabled, port) as the config sets KubePrism: the typed document (present = enabled), else the legacy field."""
    typed = documents.find(docs, "KubePrismConfig")
    if typed is not None:
        return True, (typed.body or {}).get("port")
    legacy = documents.find(docs, documents.LEGACY)
    prism = documents.get_path(legacy.body, "machine.features.kubePrism") if legacy is not None else None
    prism = prism if isinstance(prism, dict) else {}
    return bool(prism.get("enabled")), prism.get("port")


async def _read(client, m):
    config = await talos_machine.get_resource(client, res.MACHINE_CONFIG, m["node"])
    status = await talos_machine.get_resource(client, res.KUBEPRISM_STATUS, m["node"])
    return {"config": (config or {}).get("spec") or "", "status": (status or {}).get("spec")}


class MachineView:
    """One machine as the takeover sees it."""

    def __init__(self, name, node, role, text, status):
        self.name, self.node, self.role = name, node, role
        if not text:
            raise ConfigError("%s has no machine config (is it in maintenance mode?)" % name)
        try:
            docs = documents.parse(text)
        except ConfigError as exc:
            raise ConfigError("%s: its machine config cannot be read: %s" % (name, exc))
        self.inline = inline_entries(docs) if role == "controlplane" else []
        self.prism_enabled, self.prism_port = kubeprism_config(docs)
        self.status = status if isinstance(status, dict) else None

    def kubeprism(self, port):
        """(answering, line) for KubePrism on port."""
        if not self.prism_enabled:
            return False, "KubePrism on %s: off in its config" % self.name
        if self.prism_port != port:
            return False, "KubePrism on %s: on port %s in its config, not %d" % (self.name, self.prism_port, port)
        if self.status is None:
            return False, "KubePrism on %s: enabled on %d, but Talos reports no KubePrism status (not running)" % (
                self.name, port)
        host = str(self.status.get("host") or "")
        healthy = self.status.get("healthy") is True
        if not host.endswith(":%d" % port):
            return False, "KubePrism on %s: Talos reports it on %s, not port %d" % (self.name, host or "no address", port)
        state = "healthy" if healthy else "not healthy (no API server answers through it)"
        return healthy, "KubePrism on %s: %s %s" % (self.name, host, state)


def read(client, machines):
    """MachineView per machine (the order given); a machine that cannot be read fails the run."""
    by_node = dict((m["node"], m) for m in machines)
    fan = client.fan_out(lambda node: _read(client, by_node[node]), list(by_node))
    views = []
    for m in machines:
        result = fan[m["node"]]
        if result.error is not None:
            raise result.error
        views.append(MachineView(m["name"], m["node"], m["role"], result.message["config"], result.message["status"]))
    return views
