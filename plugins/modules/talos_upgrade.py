#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: talos_upgrade
short_description: Upgrade one Talos machine to the release set's Talos and wait until it is back and healthy
version_added: 0.1.0
description:
  - "The rollout's C(talos) step for one machine (run it with C(serial: 1), control planes first)."
  - A machine already at the target is skipped (C(changed=false)), so a failed run resumes where it stopped.
  - A control plane is not started while etcd is unhealthy or would lose its quorum while the machine reboots, and is
    not rebooted when that became so while its installer ran (etcd is judged again between the installer and the
    reboot; the task fails, the new Talos installed and not booted, and a rerun once etcd is healthy finishes it).
  - Talos v1.13+ machines are upgraded with ImageService Pull, LifecycleService Upgrade and a reboot (as
    C(talosctl) 1.14 does, in the C(system) namespace of the CRI containerd); v1.12 machines with the legacy
    Upgrade call.
  - The machine reboots only when the installer reported exit code 0. An installer that exits non-zero (or reports no
    exit code) fails the task with the installer's last lines (redacted, on one line); the machine keeps running its
    Talos and is not rebooted.
  - Waits for the machine to answer with the new version, a control plane's etcd member to be healthy with the
    cluster in quorum, and its Kubernetes Node to be Ready (when a kubeconfig is given; without one there is no Node
    to wait for). With O(wait=false) it returns once the upgrade is sent.
  - The Node waited for is the one Talos names for the machine (its C(Nodename) resource, what C(talosctl get nodename)
    shows, the hostname or its FQDN), never the inventory's name for it; the plan names it when it differs. A machine
    whose Node the cluster does not have is refused before anything is sent.
notes:
  - The flow of this module is C(plugins/module_utils/rollout/talos_step.py), run in the controller by its action
    plugin C(plugins/action/talos_upgrade.py).
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.talos
  - maesh.ichor.kubernetes
attributes:
  check_mode:
    support: full
    description: Says what it would do; nothing is sent.
  diff_mode:
    support: full
    description: The Talos version before and after.
options:
  node:
    description: The machine's Talos API address (its C(ansible_host)).
    type: str
    required: true
  name:
    description: How the plan and messages name the machine (its inventory name). Defaults to the hostname Talos reports.
    type: str
  hostname:
    description:
      - The name of the machine's Kubernetes Node, when it is not the one Talos reports (a kubelet registered under a
        name of its own). Defaults to the Node name Talos reports for the machine.
      - Not the inventory name; give O(name) for that.
    type: str
  role:
    description: C(controlplane) or C(worker).
    type: str
    choices: [controlplane, worker]
    required: true
  image:
    description:
      - The installer image, used as named for this machine. Without it the machine's own is chosen, at the release
        set's Talos, so that the upgrade keeps its system extensions. It is read from the machine's extensions
        (C(ExtensionStatuses); an Image Factory image carries one named C(schematic), its schematic ID) and its machine
        config's install image (only the repository counts, since Talos leaves the config as it was on an upgrade). It is the
        Image Factory installer of the schematic it runs (C(factory.talos.dev/installer/<id>), a mirror keeping that
        path), the config's own repository, or C(ghcr.io/siderolabs/installer) for a machine that runs no extension.
      - A machine running extensions whose installer cannot be known (its config names no install image, or the plain
        installer, or another schematic's) is refused before anything is sent, naming what it would lose; naming the
        image here is the way past it.
      - "Any reference form: C([registry[:port]/]path:tag[@sha256:digest]), for example
        C(registry.example:5000/siderolabs/installer:v1.14.5) or C(ghcr.io/siderolabs/installer:v1.14.5@sha256:...)."
      - The target version is the tag, which must be a Talos version (C(vX.Y.Z)); a digest pins the image but is not the
        version. A reference without a tag (a digest alone, or none) is refused before anything is sent, since the
        version it installs cannot be known before the upgrade.
    type: str
  wait:
    description:
      - Wait for the machine to be back and healthy (see the description) before returning.
      - With C(false) the upgrade is started and the module returns; the machine reboots on its own. Use it only when
        something else waits, since the rollout's safety rests on one machine at a time.
    type: bool
    default: true
  wait_timeout:
    description: Seconds to wait for the machine to be back and healthy, when O(wait) is true.
    type: float
    default: 900
"""

EXAMPLES = r"""
- name: Upgrade Talos, one machine at a time
  hosts: controlplane:worker
  serial: 1
  gather_facts: false
  tasks:
    - name: Upgrade this machine
      maesh.ichor.talos_upgrade:
        talosconfig: "{{ ichor_talosconfig }}"
        kubeconfig: "{{ ichor_kubeconfig | default(omit) }}"
        node: "{{ ansible_host }}"
        name: "{{ inventory_hostname }}"
        role: "{{ 'controlplane' if 'controlplane' in group_names else 'worker' }}"
        wait_timeout: 1200
"""

RETURN = r"""
before:
  description: The Talos version before.
  returned: always
  type: str
after:
  description: The Talos version after (or that would be, in check mode or with O(wait=false)).
  returned: always
  type: str
plan:
  description: What was (or would be) done.
  returned: always
  type: list
  elements: str
installer:
  description: The installer the machine is (or would be) upgraded with, and the system extensions it runs.
  returned: when the machine is not at the target
  type: dict
  contains:
    image:
      description: The installer image it is (or would be) upgraded with.
      type: str
    source:
      description:
        - How the image was chosen. C(schematic) is the Image Factory installer of the schematic it runs (its config's
          repository, whose last path component is the schematic ID). C(repository) is its config's own repository,
          not an Image Factory one. C(plain) is C(ghcr.io/siderolabs/installer), for a machine that runs no extension.
          C(operator) is the image the O(image) option names, used as named.
      type: str
      choices: [schematic, repository, plain, operator]
    extensions:
      description: What it runs and what the image carries.
      type: dict
      contains:
        before:
          description: The names of the system extensions it runs (its C(ExtensionStatuses)), the C(schematic) one left out.
          type: list
          elements: str
        schematic:
          description:
            - The schematic ID of the Image Factory image it booted (its C(schematic) extension's version); empty when
              none.
          type: str
        declared:
          description:
            - The install image its machine config names (C(UnattendedInstallConfig) C(installer.image) or
              C(machine.install.image)); empty when none.
          type: str
        after:
          description:
            - C(kept) (the same schematic), C(none) (it runs no extension), C(unverified) (its config's repository, not an
              Image Factory installer, so not verified) or C(named) (the operator's image, not verified).
          type: str
          choices: [kept, none, unverified, named]
"""
