# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: machines
short_description: The cluster's machines from the inventory groups controlplane and worker
version_added: 0.1.0
description:
  - Turns the inventory's C(controlplane) and C(worker) groups into the list of machines the cluster-wide modules
    take, each with C(name), C(node) (C(ansible_host), else the host name) and C(role); control planes first.
author:
  - maesh.ichor developers (@maesh-ichor)
options:
  _input:
    description: The C(groups) variable.
    type: dict
    required: true
  hostvars:
    description: The C(hostvars) variable.
    type: raw
    required: true
  details:
    description:
      - Also each machine's identity and spec from its host variables, as M(maesh.ichor.init_plan) takes them -
        C(uuid) (C(ichor_uuid), the UUID it must answer with), C(hostname) (C(ichor_hostname)), C(install)
        (C(ichor_install_disk), C(ichor_install_image), C(ichor_install_wipe)), C(network) (C(ichor_network), its
        C(interfaces) with addresses, routes, mtu, a Layer 2 C(vip), a C(bond) and C(vlans), and its C(nameservers)),
        C(timeServers) (C(ichor_time_servers)), C(nodeLabels) (C(ichor_node_labels)), C(nodeTaints)
        (C(ichor_node_taints)) and C(kubelet) (C(ichor_kubelet) with C(extraArgs), C(extraMounts), C(nodeIPSubnets));
        each only when set.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Judge the cluster
  maesh.ichor.release_check:
    machines: "{{ groups | maesh.ichor.machines(hostvars) }}"

- name: Plan a new cluster with each machine's expected UUID and install disk
  maesh.ichor.init_plan:
    cluster:
      name: prod
    machines: "{{ groups | maesh.ichor.machines(hostvars, details=true) }}"
"""

RETURN = r"""
_value:
  description: The machines, control planes first (the suboptions of the rollout modules' O(maesh.ichor.release_check#module:machines)).
  type: list
  elements: dict
  contains:
    name:
      description: The inventory host name (the machine's Kubernetes Node name).
      type: str
    node:
      description: The machine's Talos API address (C(ansible_host), else the host name).
      type: str
    role:
      description: C(controlplane) or C(worker), from its inventory group.
      type: str
    uuid:
      description: With O(details), C(ichor_uuid) when set.
      type: str
    hostname:
      description: With O(details), C(ichor_hostname) when set.
      type: str
    install:
      description: With O(details), C(disk), C(image) and C(wipe) from C(ichor_install_*) when any is set.
      type: dict
    network:
      description: With O(details), C(ichor_network) when set.
      type: dict
    timeServers:
      description: With O(details), C(ichor_time_servers) when set.
      type: list
      elements: str
    nodeLabels:
      description: With O(details), C(ichor_node_labels) when set.
      type: dict
    nodeTaints:
      description: With O(details), C(ichor_node_taints) when set.
      type: dict
    kubelet:
      description: With O(details), C(ichor_kubelet) when set.
      type: dict
"""


INSTALL = (("disk", "ichor_install_disk"), ("image", "ichor_install_image"), ("wipe", "ichor_install_wipe"))
# machine spec field -> the host variable that states it (the config engine judges the values)
SPEC_VARS = (("network", "ichor_network"), ("timeServers", "ichor_time_servers"), ("nodeLabels", "ichor_node_labels"),
             ("nodeTaints", "ichor_node_taints"), ("kubelet", "ichor_kubelet"))


def machines(groups, hostvars, details=False):
    out = []
    for role in ("controlplane", "worker"):
        for host in groups.get(role, []):
            hv = hostvars[host]
            node = hv.get("ansible_host") or host
            entry = {"name": host, "node": str(node), "role": role}
            if details:
                for key, var in (("uuid", "ichor_uuid"), ("hostname", "ichor_hostname")):
                    if hv.get(var):
                        entry[key] = str(hv[var])
                install = dict((key, hv[var]) for key, var in INSTALL if hv.get(var) not in (None, ""))
                if install:
                    entry["install"] = install
                for key, var in SPEC_VARS:
                    if hv.get(var) not in (None, "", [], {}):
                        entry[key] = hv[var]
            out.append(entry)
    return out


class FilterModule:
    def filters(self):
        return {"machines": machines}
