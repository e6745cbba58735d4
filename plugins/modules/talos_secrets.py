#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: talos_secrets
short_description: Generate or recover a Talos cluster's secrets bundle and keep it in a 0600 file
version_added: 0.1.0
description:
  - Makes sure O(path) holds a valid secrets bundle (what C(talosctl gen secrets) writes) with mode 0600.
  - With O(source=generate) a new bundle is made (new CAs and keys, cluster ID and secret, bootstrap token,
    secretbox secret, trustd token), for a cluster that does not exist yet.
  - With O(source=recover) the bundle is rebuilt from the machine config of the control plane O(node), read
    over the Talos API (read-only on the node), as machinery's C(NewBundleFromConfig) does.
  - An existing valid file is kept as it is (its mode is set to 0600 if it was not). An existing file that is not
    a valid bundle is never overwritten; the module fails and writes nothing.
  - The bundle is never printed, returned or logged; only a fingerprint of the Talos CA certificate is returned.
notes:
  - The flow of this module is C(plugins/module_utils/machine/secrets.py), run in the controller by its action plugin
    C(plugins/action/talos_secrets.py).
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.talos
attributes:
  check_mode:
    support: full
    description: Says what it would do (keep, generate or recover, and write); writes nothing and, for
      O(source=recover), still reads the control plane's config to check that recovery would succeed.
  diff_mode:
    support: none
    description: The file holds secrets; no diff is shown.
options:
  path:
    description:
      - The bundle file. Its directory is created with mode 0700 when missing.
    type: path
    required: true
  source:
    description:
      - Where a missing bundle comes from.
    type: str
    choices: [generate, recover]
    default: generate
  node:
    description:
      - The control plane to recover the bundle from (required with O(source=recover)). Only a control plane's
        config holds the whole bundle.
    type: str
  version_contract:
    description:
      - The version contract (V(v1.12), V(v1.13) or V(v1.14)) the bundle is validated against.
    type: str
  admin_talosconfig:
    description:
      - Also keep the operator's talosconfig in this file (mode 0600) - context O(admin_talosconfig_context) with a client
        certificate of role C(os:admin) signed by the bundle's Talos CA (Ed25519, valid a year), as
        C(talosctl gen config) makes one. It is a root credential of the cluster.
      - Kept when it is this cluster's (the bundle's Talos CA, a certificate it signed valid 30 more days, the same
        endpoints); rewritten with a new certificate otherwise. A file that is not a talosconfig, or is another
        cluster's, is never overwritten; the module fails.
    type: path
  admin_talosconfig_context:
    description: The context of O(admin_talosconfig), usually the cluster's name.
    type: str
    default: admin
  admin_talosconfig_endpoints:
    description: The endpoints of O(admin_talosconfig) (the control planes' addresses).
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Generate the bundle of a new cluster
  maesh.ichor.talos_secrets:
    path: "~/.ichor/clusters/prod/secrets.yaml"

- name: Generate the bundle of a new cluster and the operator's talosconfig minted from it
  maesh.ichor.talos_secrets:
    path: "~/.ichor/clusters/prod/secrets.yaml"
    admin_talosconfig: "~/.ichor/clusters/prod/talosconfig"
    admin_talosconfig_context: prod
    admin_talosconfig_endpoints: [10.0.0.11, 10.0.0.12, 10.0.0.13]

- name: Recover the bundle of a running cluster from one control plane (read-only on the node)
  maesh.ichor.talos_secrets:
    path: "~/.ichor/clusters/prod/secrets.yaml"
    source: recover
    node: 10.0.0.11
    talosconfig: "{{ ichor_talosconfig }}"
    version_contract: v1.13
"""

RETURN = r"""
path:
  description: The bundle file.
  returned: always
  type: str
action:
  description: C(kept), C(generated) or C(recovered) (in check mode, what would be done).
  returned: success
  type: str
  sample: recovered
fingerprint:
  description: The first 16 hex digits of the SHA-256 of the Talos CA certificate (not a secret); the same for
    every bundle of one cluster.
  returned: success
  type: str
admin_talosconfig:
  description: The operator's talosconfig file (never its content).
  returned: when O(admin_talosconfig) is set
  type: str
plan:
  description: Human-readable lines about what was or would be done, gathered by the C(maesh.ichor.plan) callback.
  returned: always
  type: list
  elements: str
"""
