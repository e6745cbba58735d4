#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: talos_machine_config
short_description: Render one Talos machine's config, report its drift by class and apply it
version_added: 0.1.0
description:
  - Renders the machine config of O(node) from the secrets bundle O(secrets), the cluster spec O(cluster) and the
    machine spec O(machine), for a version contract from V(v1.12) to V(v1.14), in the form machinery's generator
    writes for that contract.
  - Reads the live config over the Talos API and reports the drift per path in three classes. Class A is
    representable (a spec field or a sysctl/kernel-module patch covers it). Class B is Ichor-owned and exists only
    with O(cluster.cni.preset=cilium) (the Cilium inline entry, flannel removal, kube-proxy when C(replaced)); it needs
    O(accept_class_b). Class C is unrepresentable and blocks the machine; nothing is applied, and paths that share
    a hint are reported under it once.
  - Without O(cluster.versionContract) the contract is probed, from the machine's running Talos version down to
    V(v1.12), taking the one with the fewest class C paths (ties go to the highest); every probed contract is
    reported.
  - Applies only when nothing is class C and class B (if any) was consented, in the least disruptive mode that
    covers the change (no reboot when none is needed), then reads the config back and verifies zero drift (after a
    reboot, once the machine is back; see O(wait)).
  - With O(maintenance=true) the machine has no config yet; the rendered config is applied through the maintenance
    API (the machine installs and reboots into it) and read back under the bundle's CA. The machine is asked first,
    directly and under the talosconfig (see O(maintenance)); one that is configured already takes the drift path
    above, so a rerun of the same task reports C(changed=false) and applies nothing.
  - A refusal (class C, class B without O(accept_class_b), a reboot with O(allow_reboot=false)) fails in check mode
    exactly as in a real run, with the same message, plan and drift, so check mode never reports success for a run
    that would fail.
  - A secrets bundle of another cluster, a corrupt bundle file, a live config that is not YAML and a contract out of
    range each fail with one line and nothing applied.
  - Given the cluster's kubeconfig, a machine that adopt holds (the cluster record's hold, until adopt's release
    phase lifts it) is refused with nothing sent to it.
notes:
  - The flow of this module is C(plugins/module_utils/machine/machine_config.py), run in the controller by its action
    plugin C(plugins/action/talos_machine_config.py).
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.talos
  - maesh.ichor.kubernetes
  - maesh.ichor.cluster_spec
  - maesh.ichor.machine_spec
attributes:
  check_mode:
    support: full
    description:
      - Reads the live config and returns the drift and the plan; applies nothing.
      - Fails, with the real run's message, where the real run would refuse (class C, class B without consent, a
        reboot that is not allowed).
  diff_mode:
    support: full
    description: Returns the live and the rendered config, every secret value replaced by C(<redacted>).
options:
  node:
    description:
      - The machine's Talos API address (without port; its C(ansible_host)).
    type: str
    required: true
  secrets:
    description:
      - Path of the cluster's secrets bundle (see M(maesh.ichor.talos_secrets)).
    type: path
    required: true
  cluster:
    description:
      - The cluster spec (field names in camelCase, as the TalosCluster resource names them). The config engine checks
        the values and fills the defaults; a field it does not know is refused.
    type: dict
    required: true
  machine:
    description:
      - The machine spec.
    type: dict
    required: true
  maintenance:
    description:
      - The machine is in maintenance mode (no config yet); it is reached without the talosconfig's client
        certificate, and its new config is applied with a reboot.
      - Before that, the module dials O(node) directly with the talosconfig. A machine that answers under the
        talosconfig's CA with a config has left maintenance mode (an earlier run of the task configured it), so the task
        then reads its live config and acts on the drift as with V(false) (zero drift changes nothing; a class C
        drift fails). Only a machine that refuses the talosconfig's CA (in maintenance mode its certificate is
        self-signed) gets the maintenance apply. An unreachable machine fails with nothing applied.
      - So a talosconfig of the cluster (with the CA of the bundle O(secrets)) is needed here too; it is also what
        the config is read back with.
    type: bool
    default: false
  uuid:
    description:
      - The UUID the machine must answer with (its SMBIOS UUID, as C(talosctl get systeminformation) shows it),
        checked before anything is applied - over the maintenance API in maintenance mode, else over the
        authenticated API. Another UUID at O(node) fails the task with nothing applied (a DHCP lease moved).
      - In maintenance mode, a machine that refuses the maintenance API is configured by another cluster; it is
        refused with the reclaim hint, never reset.
    type: str
  accept_class_b:
    description:
      - Consent to the class B (Ichor-owned) changes listed in the plan. Without it such a change fails, in check mode
        too, with nothing applied.
    type: bool
    default: false
  allow_reboot:
    description:
      - Allow an apply that needs a reboot. When false and the change needs one, the task fails (in check mode too)
        and nothing is applied.
    type: bool
    default: true
  wait:
    description:
      - After an apply that reboots the machine (and after a maintenance-mode apply), wait for it to come back with
        its config and verify the config read back (zero drift).
      - With V(false) the module returns once the config is applied, without RV(verified); the machine reboots on its
        own. An apply without a reboot is always read back and verified, as that needs no wait.
    type: bool
    default: true
  wait_timeout:
    description:
      - Seconds to wait for the machine to come back after a reboot before reading its config back, when O(wait) is
        true.
    type: float
    default: 300
"""

EXAMPLES = r"""
- name: Show the drift of a worker (check mode, with the masked diff)
  maesh.ichor.talos_machine_config:
    node: 10.0.0.21
    secrets: "~/.ichor/clusters/prod/secrets.yaml"
    cluster: "{{ ichor_cluster }}"
    machine:
      role: worker
      install: {disk: /dev/nvme0n1, image: "ghcr.io/siderolabs/installer:v1.14.1"}
  check_mode: true
  diff: true

- name: Configure a machine that waits in maintenance mode
  maesh.ichor.talos_machine_config:
    node: 10.0.0.31
    maintenance: true
    secrets: "~/.ichor/clusters/prod/secrets.yaml"
    cluster:
      name: prod
      endpoint: https://api.prod.example.com:6443
      kubernetesVersion: 1.37.0
      talosVersion: v1.14.1
      versionContract: v1.14
      cni: {preset: cilium, kubeProxy: replaced}
    machine: {role: worker, hostname: w-31}
"""

RETURN = r"""
contract:
  description: The version contract rendered (probed unless O(cluster.versionContract) was given).
  returned: success
  type: str
  sample: v1.13
probe:
  description: For each probed contract (from the running Talos version's down to V(v1.12)), the number of differing
    paths per class.
  returned: when the contract was probed
  type: dict
  sample: {"v1.14": {"A": 0, "B": 0, "C": 41}, "v1.13": {"A": 0, "B": 0, "C": 0}, "v1.12": {"A": 0, "B": 0, "C": 0}}
  contains:
    v1.12:
      description: The counts at contract V(v1.12) (C(A), C(B), C(C)).
      type: dict
      returned: when probed
      contains:
        A:
          description: Class A paths.
          type: int
        B:
          description: Class B paths.
          type: int
        C:
          description: Class C paths.
          type: int
    v1.13:
      description: The counts at contract V(v1.13) (C(A), C(B), C(C)).
      type: dict
      returned: when probed (a machine running Talos v1.13 or later)
      contains:
        A:
          description: Class A paths.
          type: int
        B:
          description: Class B paths.
          type: int
        C:
          description: Class C paths.
          type: int
    v1.14:
      description: The counts at contract V(v1.14) (C(A), C(B), C(C)).
      type: dict
      returned: when probed (a machine running Talos v1.14 or later)
      contains:
        A:
          description: Class A paths.
          type: int
        B:
          description: Class B paths.
          type: int
        C:
          description: Class C paths.
          type: int
drift:
  description: The drift of the live config from the render, by class. Secret values are never included.
  returned: when the live config was read; on a machine in maintenance mode, the drift of the config read back
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
uuid:
  description: The UUID the machine answered with, when O(uuid) was given or the maintenance API was used.
  returned: when read
  type: str
  sample: 4c4c4544-0047-3510-8057-b4c04f4b3332
apply_mode:
  description: How the config was (or would be) applied (C(no_reboot), C(reboot), C(maintenance)), or C(none).
  returned: success
  type: str
verified:
  description: Whether the config read back after applying has zero drift.
  returned: when applied and read back (not after an apply that reboots with O(wait=false))
  type: bool
plan:
  description: Human-readable lines, gathered by the C(maesh.ichor.plan) callback.
  returned: always
  type: list
  elements: str
"""
