#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: adopt_plan
short_description: Inspect a running Talos cluster and plan its adoption (adopt's first phase; writes nothing)
version_added: 0.1.0
description:
  - The first phase of adopting a cluster someone else built (plan, write, Cilium takeover, release). One task, run
    once, reads every machine at once over the Talos API (its facts and its live config) and the Kubernetes side
    cluster-wide, and returns the whole plan. Nothing is written anywhere, in check mode or not.
  - "Versions first: any machine below Talos v1.12.0 refuses the cluster (a mixed cluster names its machines), and so
    does a Talos or a Kubernetes newer than the release set."
  - "The CNI table decides the mode, never a migration: the collection's own Cilium release (only checked); a Cilium
    from Helm, the Cilium CLI, an inline manifest or an applied C(helm template) (taken over in phase 3, or left alone
    with O(cni_unmanaged)); flannel, Calico or another CNI (refused unless O(cni_unmanaged)); two CNIs, two
    DaemonSets or two CNI configs under C(/etc/cni/net.d) (refused even with O(cni_unmanaged)); no CNI at all
    (C(cni.name: none) and every Node NotReady: the collection's Cilium is installed first, then the cluster is
    adopted managed)."
  - "kube-proxy: in a managed mode Talos's kube-proxy setting and Cilium's kubeProxyReplacement must agree (enabled
    with the replacement off gives C(enabled), disabled with it on gives C(replaced)); unmanaged records the Talos
    side. KubePrism must be on port 7445 on every machine in every managed mode, else the adoption is refused."
  - "The secrets bundle comes from exactly one source: O(secrets) or O(recover_from); it must be the cluster's own.
    The version contract is probed per machine and settled for the cluster (O(version_contract) may only name the
    release set's). Each machine's drift is classified (A representable, B Ichor-owned and needing consent, C
    blocking) with its paths and hints, at that contract; every machine will be held by the write phase."
  - The plan ends with what the write phase would record and the CA-rotation advice (adopt never starts a rotation).
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.talos
  - maesh.ichor.kubernetes
  - maesh.ichor.adopt
  - maesh.ichor.machines
attributes:
  check_mode:
    support: full
    description: The module reads only, in check mode or not.
  diff_mode:
    support: none
    description: Nothing is changed; each machine's drift is in RV(machines).
options: {}
notes:
  - The flow of this module is C(plugins/module_utils/adopt/inspection.py), run in the controller by its action plugin
    C(plugins/action/adopt_plan.py).
  - The machine configs are read with the talosconfig's identity, which needs the C(os:admin) role.
"""

EXAMPLES = r"""
- name: Plan the adoption of a cluster (nothing written)
  maesh.ichor.adopt_plan:
    talosconfig: "{{ ichor_talosconfig }}"
    kubeconfig: "{{ ichor_kubeconfig }}"
    machines: "{{ groups | maesh.ichor.machines(hostvars) }}"
    recover_from: cp-1
  register: adopt_plan

- name: Plan the adoption of a flannel cluster, its CNI left alone
  maesh.ichor.adopt_plan:
    talosconfig: "{{ ichor_talosconfig }}"
    kubeconfig: "{{ ichor_kubeconfig }}"
    machines: "{{ groups | maesh.ichor.machines(hostvars) }}"
    secrets: /secure/prod/secrets.yaml
    cni_unmanaged: true
"""

RETURN = r"""
versions:
  description: The Talos version verdict (as M(maesh.ichor.talos_facts) returns it).
  returned: when the machines were read
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
kubernetes:
  description: The Kubernetes versions running, where each was read (each kubelet, each control-plane component).
  returned: when the Kubernetes side was read
  type: list
  elements: dict
  contains:
    source:
      description: Where it was read, for example C(cp-1 kube-apiserver) or C(worker-1 kubelet).
      type: str
    version:
      description: The version, C(vX.Y.Z).
      type: str
cni:
  description: The CNI row and the mode.
  returned: when the CNI was judged
  type: dict
  contains:
    row:
      description: The row of the CNI table (C(ours), C(cilium-helm), C(cilium-cli), C(cilium-manifest), C(none), ...).
      type: str
    mode:
      description: C(ours), C(takeover), C(install) or C(unmanaged).
      type: str
    preset:
      description: The cluster spec's C(cni.preset), C(cilium) or C(unmanaged).
      type: str
    talos_cni:
      description: The Talos side's CNI, C(default) or C(none) (the record's C(talosCNI) in unmanaged mode).
      type: str
    names:
      description: The CNIs whose DaemonSets run.
      type: list
      elements: str
    evidence:
      description: What the verdict rests on.
      type: list
      elements: str
    version:
      description: The running CNI's version, from its agent image's tag (null when the tag is no version).
      type: str
kube_proxy:
  description: The cluster spec's C(cni.kubeProxy), C(enabled) or C(replaced).
  returned: when kube-proxy was judged
  type: str
network_policies:
  description:
    - The network-policy gate as phase 2's installer will find it - the collection's CiliumNetworkPolicies are
      applied only when Cilium runs and its CRD exists, in either mode (the gate follows what runs, read live).
  returned: when kube-proxy was judged
  type: dict
  contains:
    applied:
      description: Whether the installer will apply them.
      type: bool
      sample: false
    reason:
      description: Why, as the plan says it.
      type: str
      sample: >-
        maesh.ichor's network policies are not applied: the CNI is calico, and they are CiliumNetworkPolicies;
        the ichor-system namespace is not isolated by the collection
contract:
  description: The cluster's version contract (probed and settled, or the override).
  returned: when the drift was computed
  type: str
cluster_spec:
  description:
    - The cluster spec read from the live configs, its fields as M(maesh.ichor.talos_machine_config)'s O(maesh.ichor.talos_machine_config#module:cluster)
      names them; inline manifests by name and size only.
  returned: when the drift was computed
  type: dict
  contains:
    name:
      description: The cluster's name.
      type: str
    endpoint:
      description: The control plane endpoint.
      type: str
    kubernetesVersion:
      description: The Kubernetes version the configs run (the lowest).
      type: str
    talosVersion:
      description: The lowest Talos version running.
      type: str
    versionContract:
      description: The cluster's contract.
      type: str
    network:
      description: C(dnsDomain), C(podSubnets) and C(serviceSubnets).
      type: raw
    cni:
      description: C(preset), C(kubeProxy) and, unmanaged, C(unmanaged.talosCNI).
      type: raw
    kubePrism:
      description: C(enabled) and C(port).
      type: raw
    registries:
      description: The registry mirrors every machine states alike.
      type: raw
    certSANs:
      description: The extra SANs every machine states alike.
      type: list
      elements: str
    sysctls:
      description: The sysctls.
      type: raw
    kernelModules:
      description: The kernel modules.
      type: list
      elements: str
    inlineManifests:
      description: The inline manifests carried (a managed Cilium's entry), C(name) and C(size).
      type: raw
machines:
  description: One entry per machine, each held by the write phase.
  returned: when the drift was computed
  type: list
  elements: dict
  contains:
    name:
      description: The machine's name.
      type: str
    node:
      description: Its Talos API address.
      type: str
    role:
      description: C(controlplane) or C(worker), from its discovery member.
      type: str
    uuid:
      description: Its SMBIOS UUID, read over the authenticated API.
      type: str
    talos:
      description: The Talos version it runs.
      type: str
    probed:
      description: The contract its own config reads as (ties settled for the cluster).
      type: str
    contract:
      description: The cluster's contract its drift is computed at.
      type: str
    drift:
      description: Its drift at RV(contract), as M(maesh.ichor.talos_machine_config) returns it; secret values are never included.
      type: dict
      contains:
        contract:
          description: The contract the render was made for.
          type: str
        zero:
          description: Whether the live config equals the render.
          type: bool
        counts:
          description: Paths per class.
          type: dict
          contains:
            A:
              description: Class A (representable) paths.
              type: int
            B:
              description: Class B (Ichor-owned) paths.
              type: int
            C:
              description: Class C (unrepresentable) paths.
              type: int
        A:
          description: Class A differences.
          type: list
          elements: dict
          contains: &difference
            path:
              description: The differing path, C(<document>:<dotted path>) (for example C(SysctlConfig:params.vm.max_map_count)).
              type: str
            change:
              description: C(add) (only in the render), C(remove) (only live) or C(change).
              type: str
            class:
              description: The class, C(A), C(B) or C(C).
              type: str
            rendered:
              description: The rendered value, C(<redacted>) for a secret or credential, null when absent.
              type: raw
            live:
              description: The live value, C(<redacted>) for a secret or credential, null when absent.
              type: raw
            hint:
              description: Which spec field covers the path, or (class C) why none does.
              type: str
              returned: when there is one
        B:
          description: Class B differences.
          type: list
          elements: dict
          contains: *difference
        C:
          description: Class C differences.
          type: list
          elements: dict
          contains: *difference
        hints:
          description: Class C paths grouped under their hint, each hint once.
          type: list
          elements: dict
          contains:
            hint:
              description: The hint.
              type: str
            paths:
              description: The class C paths under it.
              type: list
              elements: str
        secret_drift:
          description: Whether a field of the secrets bundle differs (the bundle is not this cluster's).
          type: bool
    held:
      description: Always true; the write phase holds every machine until its release.
      type: bool
    spec:
      description: Its machine spec as adopt reads it from its config (what the write phase records).
      type: dict
      contains:
        role:
          description: C(controlplane) or C(worker).
          type: str
        hostname:
          description: The hostname its config states, or null.
          type: str
        install:
          description: C(disk), C(image) and C(wipe).
          type: raw
    reason:
      description: Why it is held, or what releases it.
      type: str
consent:
  description: The class B changes the operator consents to (C(ichor_accept_changes)), one per machine and path.
  returned: when the drift was computed
  type: list
  elements: str
record:
  description: What the write phase would store in the cluster record.
  returned: when the drift was computed
  type: dict
  contains:
    adopted:
      description: The adoption marker.
      type: bool
    contract:
      description: The cluster's contract.
      type: str
    talos:
      description: The lowest Talos version running.
      type: str
    kubernetes:
      description: The lowest Kubernetes version running.
      type: str
    cni:
      description: C(preset), C(kubeProxy) and, unmanaged, C(unmanaged.talosCNI).
      type: raw
    detected:
      description: The detected CNI (C(cni), the row) and its C(version).
      type: raw
    held:
      description: The machines held.
      type: list
      elements: str
advice:
  description: The CA-rotation advice.
  returned: when the plan is complete
  type: str
plan:
  description: The plan, as lines; a refusal ends it with its C(refused:) line.
  returned: always
  type: list
  elements: str
"""
