#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: init_plan
short_description: Plan a new cluster from machines in maintenance mode, or a join to it; read-only
version_added: 0.1.0
description:
  - The first task of P(maesh.ichor.init#role) and its whole plan in check mode - which machine gets which role
    and config, whether etcd is bootstrapped and on which machine, the versions. Nothing is sent to a machine and
    nothing is written anywhere, in check mode as in a real run.
  - The versions are the release set's, with no free choice - a C(talosVersion), C(versionContract) or
    C(kubernetesVersion) in O(cluster) other than the set's is refused, naming the set.
  - The CNI is the collection's Cilium with KubePrism on port 7445; C(cni.preset) V(unmanaged) in O(cluster) is
    refused (that mode exists for adoption alone).
  - Each machine is read. In maintenance mode it answers the maintenance API with its UUID, checked against
    O(machines[].uuid) when given (another UUID is refused - a DHCP lease moved). One that refuses the maintenance
    API is configured - by this cluster (its config carries the bundle's CAs - it takes the same render and apply
    over the authenticated API), or by another (refused with the reclaim hint; init never resets a
    machine). An unreachable machine is refused naming it.
  - An inventory with no control plane is refused; an even number of control planes is a warning.
  - etcd is to be bootstrapped only when no control plane of this cluster lists a member.
  - With the Kubernetes connection, the cluster record's pending machines (left by M(maesh.ichor.talos_reset) of
    the playbook C(maesh.ichor.reclaim)) are named, and joined when O(machines) lists them.
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.talos
  - maesh.ichor.kubernetes
  - maesh.ichor.cluster_spec
  - maesh.ichor.machine_spec.init_machines
attributes:
  check_mode:
    support: full
    description: Read-only in every mode.
  diff_mode:
    support: none
    description: A plan has no before and after.
options:
  cluster:
    description:
      - The cluster spec. The versions default to the release set's (no other is accepted); C(endpoint) defaults to
        C(https://<first control plane>:6443); C(cni.preset) is C(cilium) and C(kubePrism) on 7445.
    type: dict
    required: true
  machines:
    description: The machines, control planes first (the inventory's groups C(controlplane) and C(worker)).
    type: list
    elements: dict
    required: true
  secrets:
    description:
      - The secrets bundle file. When it exists it is the bundle used (validated for the set's contract); else init
        generates one there.
    type: path
notes:
  - The flow of this module is C(plugins/module_utils/init/plan.py), run in the controller by its action plugin
    C(plugins/action/init_plan.py).
  - The Talos connection options are used only when O(talosconfig) names a file that exists (init writes it), to read
    machines configured by this cluster; machines in maintenance mode are read without a certificate.
"""

EXAMPLES = r"""
- name: Plan the cluster
  maesh.ichor.init_plan:
    cluster:
      name: prod
    machines:
      - {name: cp-1, node: 10.5.0.2, role: controlplane, uuid: 4c4c4544-0047-3510-8057-b4c04f4b3332}
      - {name: worker-1, node: 10.5.0.5, role: worker}
    secrets: "~/.ichor/clusters/prod/secrets.yaml"
  register: ichor_init_plan
"""

RETURN = r"""
cluster_spec:
  description: The cluster spec at the release set, every default filled in (what the other tasks of init take).
  returned: when the versions were judged
  type: dict
  contains:
    name:
      description: The cluster name.
      type: str
    endpoint:
      description: The Kubernetes API endpoint.
      type: str
    talosVersion:
      description: The release set's Talos.
      type: str
    versionContract:
      description: The release set's contract.
      type: str
    kubernetesVersion:
      description: The release set's Kubernetes (C(X.Y.Z)).
      type: str
    cni:
      description: C(preset) (always C(cilium)) and C(kubeProxy).
      type: raw
    kubePrism:
      description: C(enabled) (true) and C(port) (7445).
      type: raw
    network:
      description: C(dnsDomain), C(podSubnets), C(serviceSubnets).
      type: raw
    registries:
      description: The registry mirrors.
      type: raw
    certSANs:
      description: Extra certificate SANs.
      type: list
      elements: str
    sysctls:
      description: Kernel parameters.
      type: raw
    kernelModules:
      description: Kernel modules.
      type: list
      elements: str
    inlineManifests:
      description: Always empty (Cilium is a Helm release).
      type: raw
machines:
  description: Each machine as read, control planes first.
  returned: when every machine was read
  type: list
  elements: dict
  contains:
    name:
      description: The inventory name.
      type: str
    node:
      description: Its address.
      type: str
    role:
      description: Its role.
      type: str
    uuid:
      description: The UUID it answered with.
      type: str
    state:
      description: C(maintenance) or C(configured) (by this cluster).
      type: str
    spec:
      description: Its machine spec as the config engine takes it.
      type: dict
      contains:
        hostname:
          description: Its hostname, when the inventory gives one.
          type: str
        install:
          description: Its install C(disk), C(image) and C(wipe), when the inventory gives them.
          type: raw
    etcd_members:
      description: The etcd members a control plane of this cluster lists (null otherwise).
      type: list
      elements: str
bootstrap:
  description: Whether etcd is to be bootstrapped, and where.
  returned: when every machine was read
  type: dict
  contains:
    needed:
      description: True when no control plane of this cluster lists an etcd member.
      type: bool
    node:
      description: The control plane to bootstrap (null when not needed).
      type: str
joining:
  description: Whether the cluster exists already (etcd has members); machines are joined to it.
  returned: when every machine was read
  type: bool
pending:
  description: The cluster record's pending machines (left by the playbook C(maesh.ichor.reclaim)).
  returned: when every machine was read
  type: list
  elements: dict
  contains:
    address:
      description: Its address.
      type: str
    uuid:
      description: Its UUID.
      type: str
    state:
      description: C(pending).
      type: str
plan:
  description: The plan, one line per fact and decision.
  returned: always
  type: list
  elements: str
"""
