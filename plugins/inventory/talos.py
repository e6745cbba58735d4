# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: talos
short_description: A Talos cluster's machines, from Talos discovery, the Kubernetes Nodes or the talosconfig
version_added: 0.1.0
description:
  - Builds the inventory of one Talos cluster from a talosconfig (and O(context)) and one endpoint, in the
    groups C(controlplane) and C(worker), each host with C(ansible_host), C(ichor_role) and
    C(ichor_talos_version).
  - The machines come from the cluster's discovery members as the endpoint's machine sees them (one call,
    as C(talosctl get members) reads them). When discovery is off (Talos then keeps no members), from the
    Kubernetes Nodes (their InternalIP; needs O(kubeconfig)), else from the talosconfig context's C(nodes)
    (else the endpoint), each asked for its version, machine type and hostname.
  - The source used is the variable C(ichor_inventory_source) (C(discovery), C(kubernetes) or
    C(talosconfig)) of the group C(all) and of each host.
  - With O(kubeconfig), the machines the cluster record (ConfigMap C(ichor-cluster) in C(ichor-system)) holds
    as pending (registered by M(maesh.ichor.talos_reset), not yet configured) are in the group C(pending),
    named by address, with C(ichor_uuid).
  - The group C(all) gets what the collection's playbooks expect (C(ichor_talosconfig), C(ichor_talos_context),
    C(ichor_kubeconfig), C(ichor_kube_context)); a group_vars file overrides them. No connection variable is set,
    since the collection's modules reach the machines over the Talos API only.
  - A machine's own settings are not read into host variables - adoption and the rollout read them from its live
    config (network, VIP, nameservers, time servers, node labels and taints, kubelet arguments, mounts and node-IP
    subnets are class A there). To state them for M(maesh.ichor.init_plan) (a machine joining), give a host the
    variables the C(maesh.ichor.machines) filter reads - C(ichor_hostname), C(ichor_install_disk),
    C(ichor_install_image), C(ichor_install_wipe), C(ichor_network), C(ichor_time_servers), C(ichor_node_labels),
    C(ichor_node_taints), C(ichor_kubelet) - in host_vars or with O(compose).
  - The inventory source is a YAML file whose name ends in C(talos.yml) or C(talos.yaml), with the key
    C(plugin) set to C(maesh.ichor.talos) (see EXAMPLES); in AWX, such a file in a project is an inventory
    source of type "Sourced from a Project".
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - constructed
options:
  plugin:
    description: The name of this plugin; it makes the file an inventory source of it.
    required: true
    type: str
    choices: [maesh.ichor.talos]
  talosconfig:
    description: Path of the cluster's talosconfig.
    type: path
    env:
      - name: TALOSCONFIG
  context:
    description: The talosconfig context to use instead of its current one.
    type: str
  endpoint:
    description: The Talos API endpoint to ask (C(host) or C(host:port)); default the context's first endpoint.
    type: str
  kubeconfig:
    description:
      - Path of the cluster's kubeconfig. Needed for the C(kubernetes) source and the C(pending) group.
    type: path
    env:
      - name: KUBECONFIG
  kube_context:
    description: The kubeconfig context to use instead of its current one.
    type: str
  source:
    description:
      - Where the machines come from. C(auto) takes discovery, and when the endpoint's machine has no
        members (discovery off) the Nodes when O(kubeconfig) is set, else the talosconfig's nodes.
    type: str
    default: auto
    choices: [auto, discovery, kubernetes, talosconfig]
  timeout:
    description: Seconds to wait for each API call (Talos and Kubernetes), connection included.
    type: float
    default: 30
"""

EXAMPLES = r"""
---
# prod.talos.yml: an inventory source (ansible-inventory -i prod.talos.yml --graph; in AWX, a project file)
plugin: maesh.ichor.talos
talosconfig: ~/clusters/prod/talosconfig
context: prod
endpoint: 10.0.0.11

---
# with the Kubernetes side: the Nodes when discovery is off, and the pending group
plugin: maesh.ichor.talos
talosconfig: ~/clusters/prod/talosconfig
kubeconfig: ~/clusters/prod/kubeconfig
keyed_groups:
  - key: ichor_talos_version
    prefix: talos
"""

from ansible.errors import AnsibleParserError
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.inventory import BaseInventoryPlugin, Constructable

from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import client as kube_client
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as talos_client
from ansible_collections.maesh.ichor.plugins.module_utils.talos import inventory as talos_inventory
from ansible_collections.maesh.ichor.plugins.module_utils.talos import talosconfig

ROLES = ("controlplane", "worker")
PENDING = "pending"


class InventoryModule(BaseInventoryPlugin, Constructable):
    NAME = "maesh.ichor.talos"

    def verify_file(self, path):
        return super(InventoryModule, self).verify_file(path) and path.endswith(("talos.yml", "talos.yaml"))

    def parse(self, inventory, loader, path, cache=True):
        super(InventoryModule, self).parse(inventory, loader, path, cache)
        self._read_config_data(path)
        try:
            machines, source, pending = self._read()
        except IchorError as exc:
            raise AnsibleParserError("maesh.ichor.talos (%s): %s" % (path, to_native(exc.message)))
        self._populate(machines, source, pending)

    # -- reading ---------------------------------------------------------------------------
    def _kube(self):
        if not kube_client.HAS_KUBERNETES:
            raise IchorError("the kubernetes Python package is required for kubeconfig (%s)" % kube_client.IMPORT_ERROR)
        return kube_client.KubeClient(kubeconfig=self.get_option("kubeconfig"), context=self.get_option("kube_context"),
                                      timeout=self.get_option("timeout"))

    def _read(self):
        if not talos_client.HAS_DEPS:
            raise IchorError("the Talos client needs protobuf and PyYAML (%s)" % talos_client.IMPORT_ERROR)
        wanted = self.get_option("source")
        has_kube = bool(self.get_option("kubeconfig"))
        if wanted == talos_inventory.KUBERNETES and not has_kube:
            raise IchorError("source kubernetes needs the option kubeconfig")
        context = talosconfig.load(path=self.get_option("talosconfig"), context=self.get_option("context"))
        kube = self._kube() if has_kube else None
        try:
            with talos_client.TalosClient(context=context, endpoint=self.get_option("endpoint"),
                                          timeout=self.get_option("timeout")) as talos:
                machines, source = [], None
                if wanted in ("auto", talos_inventory.DISCOVERY):
                    machines, source = talos_inventory.members(talos), talos_inventory.DISCOVERY
                    if not machines and wanted == talos_inventory.DISCOVERY:
                        raise IchorError("the machine at the endpoint has no discovery members: discovery is off "
                                         "(cluster.discovery in its config); use source kubernetes or talosconfig")
                if not machines and wanted in ("auto", talos_inventory.KUBERNETES) and kube is not None:
                    machines, source = talos_inventory.from_nodes(kube.list("v1", "Node")), talos_inventory.KUBERNETES
                if not machines and wanted in ("auto", talos_inventory.TALOSCONFIG):
                    nodes = context.nodes or [talos.endpoints[0][0]]
                    machines, failed = talos_inventory.from_talos_nodes(talos, nodes)
                    source = talos_inventory.TALOSCONFIG
                    for node, error in sorted(failed.items()):
                        self.display.warning("maesh.ichor.talos: %s left out: %s" % (node, error))
            pending = []
            if kube is not None:
                pending = talos_inventory.pending(cluster_record.read(kube).data)
        finally:
            if kube is not None:
                kube.close()
        return machines, source, pending

    # -- the inventory ---------------------------------------------------------------------
    def _populate(self, machines, source, pending):
        for group in ROLES + (PENDING,):
            self.inventory.add_group(group)
        strict = self.get_option("strict")
        shared = {"ichor_inventory_source": source}
        for option, var in (("talosconfig", "ichor_talosconfig"), ("context", "ichor_talos_context"),
                            ("kubeconfig", "ichor_kubeconfig"), ("kube_context", "ichor_kube_context")):
            if self.get_option(option):
                shared[var] = self.get_option(option)
        for name, value in shared.items():
            self.inventory.set_variable("all", name, value)
        for found in machines:
            host = found["name"]
            if found["role"] in ROLES:
                self.inventory.add_host(host, group=found["role"])
            else:
                self.inventory.add_host(host)
                self.display.warning("maesh.ichor.talos: %s has no known role; it is in neither controlplane nor worker"
                                     % host)
            hostvars = {"ansible_host": found["address"], "ichor_role": found["role"],
                        "ichor_talos_version": found["version"], "ichor_inventory_source": source}
            if found.get("node_id"):
                hostvars["ichor_node_id"] = found["node_id"]
            self._host_vars(host, hostvars, strict)
        for entry in pending:
            self.inventory.add_host(entry["name"], group=PENDING)
            self._host_vars(entry["name"], {"ansible_host": entry["address"], "ichor_uuid": entry["uuid"],
                                            "ichor_inventory_source": "cluster-record"}, strict)

    def _host_vars(self, host, hostvars, strict):
        for name, value in hostvars.items():
            self.inventory.set_variable(host, name, value)
        self._set_composite_vars(self.get_option("compose"), hostvars, host, strict=strict)
        self._add_host_to_composed_groups(self.get_option("groups"), hostvars, host, strict=strict)
        self._add_host_to_keyed_groups(self.get_option("keyed_groups"), hostvars, host, strict=strict)
