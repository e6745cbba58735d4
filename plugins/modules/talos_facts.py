#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: talos_facts
short_description: Read what a Talos machine is over the Talos API
version_added: 0.1.0
description:
  - Reads what adopt needs to know of Talos machines over the Talos API, read-only.
  - "Per machine (O(node)): the machine's version, UUID (over the authenticated API), hostname, role (from its
    own machine type, as C(talosctl get machinetype) reads it), stage, cluster and the cluster's discovery members; from its live machine config
    (either form: the legacy v1alpha1 fields or the typed documents) KubePrism, kube-proxy on the Talos side,
    the CNI selection (C(cluster.network.cni), the flannel document, the custom CNI's manifests), the other
    external manifests, inline manifests, install, registry mirrors and cert SANs; and the CNI configs present
    under C(/etc/cni/net.d), listed with the Talos API's file listing as C(talosctl ls) does. Returned as the
    C(talos) fact."
  - "Cluster-wide (O(machines)): one task, run once, reads every machine concurrently inside the module (at most
    16 at a time over the client's one connection per endpoint), so a plan over a hundred machines does not pay
    Ansible's per-host start a hundred times. It returns one entry per machine (the per-machine facts but the
    membership, plus C(name)) in RV(machines), the discovery membership once in RV(members) (every machine sees
    the whole of it, so it is listed on the first machine read, not on each), and the version verdict in RV(versions): any machine below Talos v1.12.0, or newer
    than the release set's Talos, refuses the cluster and the module fails with that one line (a mixed cluster
    names its machines below v1.12); so does a machine that cannot be read. Nothing is written either way."
  - The machine config is readable with the C(os:admin) role only; with a talosconfig of another role the
    config's facts are null and C(config_unread) says why.
  - The machines are addressed through the talosconfig's endpoints (the C(node) gRPC metadata), as
    C(talosctl -n) does.
notes:
  - The flow of this module is C(plugins/module_utils/machine/cluster_read.py), run in the controller by its action
    plugin C(plugins/action/talos_facts.py).
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.talos
attributes:
  check_mode:
    support: full
    description: Reads only; check mode returns the same facts.
  diff_mode:
    support: none
    description: Nothing is changed, so there is nothing to diff.
options:
  node:
    description:
      - Address of the machine to read (without port). Defaults to the endpoint itself.
      - In an inventory of Talos machines this is usually the host's C(ansible_host).
      - Mutually exclusive with O(machines).
    type: str
  machines:
    description:
      - The cluster's machines, read all at once (the cluster-wide mode); usually built from the inventory groups
        with the C(maesh.ichor.machines) filter, as for M(maesh.ichor.release_check).
      - Mutually exclusive with O(node).
    type: list
    elements: dict
    suboptions:
      name:
        description: The machine's name (its Kubernetes Node name); names it in results and messages.
        type: str
        required: true
      node:
        description: The machine's Talos API address (its C(ansible_host)).
        type: str
        required: true
      role:
        description:
          - The machine's role as the inventory says it. The role reported is the machine type its config
            states; a different one here is a warning.
        type: str
        choices: [controlplane, worker]
"""

EXAMPLES = r"""
- name: Read the Talos facts of every machine
  hosts: controlplane:worker
  gather_facts: false
  tasks:
    - name: Read facts
      maesh.ichor.talos_facts:
        talosconfig: "{{ ichor_talosconfig }}"
        node: "{{ ansible_host | default(inventory_hostname) }}"

    - name: Show the version
      ansible.builtin.debug:
        msg: "{{ inventory_hostname }} runs Talos {{ ansible_facts.talos.version }}"

- name: Read the whole cluster in one task (adopt's read; fails if a version refuses the cluster)
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Read every machine at once
      maesh.ichor.talos_facts:
        talosconfig: "{{ ichor_talosconfig }}"
        machines: "{{ groups | maesh.ichor.machines(hostvars) }}"
      register: talos_cluster

    - name: Show the CNI configs each machine has
      ansible.builtin.debug:
        msg: "{{ item.name }}: {{ item.cni_configs | join(', ') }}"
      loop: "{{ talos_cluster.machines }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts about the machine.
  returned: success
  type: dict
  contains:
    talos:
      description: The machine as its Talos API reports it.
      returned: success
      type: dict
      contains:
        node:
          description: The address the facts were read from.
          type: str
          sample: 10.0.0.11
        version:
          description: The Talos version (tag) the machine runs.
          type: str
          sample: v1.14.1
        uuid:
          description: The machine's SMBIOS UUID (SystemInformation resource).
          type: str
          sample: 4c4c4544-0042-3010-8050-b4c04f4e3332
        hostname:
          description: The machine's hostname.
          type: str
          sample: cp-1
        role:
          description: C(controlplane) or C(worker), from the machine's own type (C(talosctl get machinetype)).
          type: str
          sample: controlplane
        stage:
          description: The machine stage (booting, installing, maintenance, running, rebooting, ...).
          type: str
          sample: running
        ready:
          description: Whether the machine reports itself ready.
          type: bool
          sample: true
        node_id:
          description: The machine's discovery node identity.
          type: str
        cluster:
          description: The cluster the machine belongs to.
          type: dict
          contains:
            name:
              description: The cluster name.
              type: str
            id:
              description: The cluster ID.
              type: str
        members:
          description: The cluster's discovery members as this machine sees them.
          type: list
          elements: dict
          contains:
            id:
              description: Node identity.
              type: str
            hostname:
              description: Member hostname.
              type: str
            addresses:
              description: Member addresses.
              type: list
              elements: str
            machine_type:
              description: C(controlplane), C(init) or C(worker).
              type: str
        config:
          description:
            - What the live machine config states about the Talos side; null when it was not read (see C(config_unread)).
          type: dict
          contains:
            config_role:
              description: C(machine.type) (C(init) reads as C(controlplane)).
              type: str
            form:
              description: C(typed) when Kubernetes is configured in typed documents (contract v1.14), else C(legacy).
              type: str
            kubeprism:
              description: KubePrism, C(enabled) and C(port) (0 while off and no port is stated).
              type: dict
            kube_proxy:
              description: kube-proxy on the Talos side, C(enabled) (Talos deploys it) and C(mode).
              type: dict
            cni:
              description:
                - The CNI selection, C(name) (C(flannel), C(custom), C(none), or an empty string when the config
                  states none, as a contract v1.14 worker's does), C(urls) (the custom CNI's manifests) and
                  C(flannel_document) (a KubeFlannelCNIConfig document is present).
              type: dict
            external_manifests:
              description: External manifests, C(name) (empty for C(cluster.extraManifests)) and C(url).
              type: list
              elements: dict
            inline_manifests:
              description: Inline manifests, C(name), C(cilium) (it holds Cilium's DaemonSet) and C(size); never their contents.
              type: list
              elements: dict
            install:
              description: C(disk), C(disk_selector), C(image) and C(wipe).
              type: dict
            registries:
              description:
                - C(mirrors) (C(host), C(endpoints), C(skip_fallback)), and the hosts with credentials (C(auth)) or
                  TLS settings (C(tls)); never their values.
              type: dict
            cert_sans:
              description: C(machine) (C(machine.certSANs)) and C(api_server) (the API server's extra SANs).
              type: dict
        config_unread:
          description: Why C(config) is null (empty when it was read).
          type: str
        cni_configs:
          description: The CNI config files (C(.conf), C(.conflist), C(.json)) under C(/etc/cni/net.d), sorted.
          type: list
          elements: str
          sample: [10-flannel.conflist]
machines:
  description:
    - Cluster-wide mode; one entry per machine of O(machines) that was read, in their order, each with every key of
      the C(talos) fact but C(members) (C(config), C(stage), ... as RV(ansible_facts.talos) documents them) and
      C(name).
  returned: when O(machines) is given
  type: list
  elements: dict
  contains:
    name:
      description: The machine's name as O(machines) gives it.
      type: str
    node:
      description: The address it was read from.
      type: str
    version:
      description: The Talos version it runs.
      type: str
    role:
      description: C(controlplane) or C(worker), from its machine type.
      type: str
    uuid:
      description: Its SMBIOS UUID.
      type: str
    cni_configs:
      description: The CNI config files under C(/etc/cni/net.d).
      type: list
      elements: str
members:
  description:
    - Cluster-wide mode; the cluster's discovery members as the first machine read sees them (each entry as in
      RV(ansible_facts.talos.members)); null when no machine was read or the listing failed (a plan line says why).
  returned: when O(machines) is given
  type: list
  elements: dict
  contains:
    id:
      description: Node identity.
      type: str
    hostname:
      description: Member hostname.
      type: str
    addresses:
      description: Member addresses.
      type: list
      elements: str
    machine_type:
      description: C(controlplane), C(init) or C(worker).
      type: str
versions:
  description: Cluster-wide mode; the version verdict.
  returned: when O(machines) is given
  type: dict
  contains:
    refused:
      description: Whether the versions refuse the cluster (the module then fails with RV(versions.message)).
      type: bool
    message:
      description: The refusal, one line; empty when nothing is refused.
      type: str
      sample: >-
        Talos 1.11.5 is older than the oldest version Ichor adopts (v1.12). Upgrade Talos first, with talosctl or
        your usual tool, and run adopt again.
    older:
      description: The machines below Talos v1.12.0.
      type: list
      elements: str
    newer:
      description: The machines on a Talos newer than the release set's.
      type: list
      elements: str
    unreadable:
      description: The machines whose version is not vMAJOR.MINOR.PATCH.
      type: list
      elements: str
plan:
  description: Human-readable lines about the machine, gathered by the C(maesh.ichor.plan) callback.
  returned: always
  type: list
  elements: str
  sample: ["cp-1 (10.0.0.11): Talos v1.14.1, controlplane, running, cluster prod (5 members)"]
"""
