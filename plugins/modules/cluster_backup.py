#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: cluster_backup
short_description: Back a managed cluster up into one archive encrypted to age recipients
version_added: 0.4.0
description:
  - Takes one backup of a cluster the collection manages (its cluster record and secrets bundle Secret are read; a
    cluster without them is refused) and writes it as one archive in O(directory), named
    C(<cluster>-<UTC time>.tar.age).
  - "The archive is a tar stream encrypted to the age recipients O(recipients): C(age -d -i key.txt <archive> | tar x)
    alone opens it. It holds the etcd snapshot (C(etcd.snapshot)) of a healthy voting member, the secrets bundle
    (C(secrets.yaml)), the cluster record (C(record.json)), every machine's live config (C(machines/<name>.yaml)) and,
    last, C(manifest.json): the cluster's name, ID and UID (the C(kube-system) namespace's), the time, the snapshot's
    revision, hash, key count and size as C(etcdutl snapshot status) reads them, the member it was taken from, the
    Talos and Kubernetes versions and contract of the record, and each part's size and SHA-256."
  - The etcd member is the one of O(node), else the first control plane of O(machines) that answers healthy with a
    quorum; a learner, or a member etcd reports errors on, is never snapshotted.
  - Nothing unencrypted reaches O(directory) - the archive is written to a new 0600 file renamed over its name once
    whole - nor any file with a name; the snapshot is streamed into a file without one (removed by the kernel when
    the run ends, killed or not), which etcdutl reads.
  - Then the older archives of the cluster that the O(retention) policy lets go are deleted (with a drill result
    beside them); the newest archive a restore drill verified is always kept.
  - Check mode reads etcd, the record and the directory, and plans the snapshot's member, the archive and each archive
    it would prune; it writes nothing.
notes:
  - The flow of this module is C(plugins/module_utils/recovery/backup.py), run in the controller by its action plugin
    C(plugins/action/cluster_backup.py); the archive's format is C(plugins/module_utils/recovery/archive.py), the
    retention rules C(plugins/module_utils/recovery/retention.py).
  - Needs the pyrage Python package (a runtime requirement of the collection) and C(etcdutl) on the controller (the
    execution environment carries both).
  - The talosconfig's role must allow the snapshot and the machine configs' read (C(os:admin)).
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.talos
  - maesh.ichor.kubernetes
  - maesh.ichor.machines
attributes:
  check_mode:
    support: full
    description: Reads etcd, the record and the directory; plans the archive and the prunes; writes nothing.
  diff_mode:
    support: none
    description: An archive has no before and after; the plan names what is written and pruned.
options:
  node:
    description:
      - The control plane (its name or Talos API address) whose etcd member is snapshotted. By default the first
        control plane of O(machines) that qualifies.
    type: str
  recipients:
    description:
      - The age recipients (C(age1...), as C(age-keygen -y) prints them) the archive is encrypted to. Whoever holds
        the identity of one of them can open every archive; keep the identities apart from the archives.
    type: list
    elements: str
    required: true
  directory:
    description:
      - The directory the archives are written to (made 0700 when missing; refused when others can write it).
    type: path
    required: true
  retention:
    description:
      - Which of the cluster's archives in O(directory) are kept; the others are pruned after a backup. An archive any
        rule keeps is kept. A policy that keeps nothing is refused.
    type: dict
    default: {keep_last: 7}
    suboptions:
      keep_last:
        description: The newest archives kept.
        type: int
      keep_daily:
        description: The newest archive of each of this many most recent days (UTC) that hold one.
        type: int
      keep_weekly:
        description: The newest archive of each of this many most recent ISO weeks that hold one.
        type: int
  etcdutl:
    description: The C(etcdutl) binary (a name looked up in C(PATH), or a path) that reads the snapshot's status.
    type: str
    default: etcdutl
"""

EXAMPLES = r"""
- name: Back the cluster up, keeping a week of daily archives and four weekly ones
  maesh.ichor.cluster_backup:
    talosconfig: "{{ ichor_talosconfig }}"
    kubeconfig: "{{ ichor_kubeconfig }}"
    machines: "{{ groups['controlplane'] | maesh.ichor.machines(hostvars, groups) }}"
    recipients:
      - age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p
    directory: /srv/backups/prod
    retention:
      keep_daily: 7
      keep_weekly: 4
"""

RETURN = r"""
archive:
  description: The archive written (or that would be).
  returned: when the plan was made
  type: str
  sample: /srv/backups/prod/prod-20261207T030405Z.tar.age
node:
  description: The control plane whose etcd member was (or would be) snapshotted.
  returned: when the plan was made
  type: str
pruned:
  description: The archives pruned (or that would be), oldest first.
  returned: when the plan was made
  type: list
  elements: str
size:
  description: The archive's size in bytes.
  returned: when written
  type: int
sha256:
  description: The encrypted archive's SHA-256.
  returned: when written
  type: str
manifest:
  description: The archive's manifest as written (no secret in it), each part with its SHA-256.
  returned: when written
  type: dict
  contains:
    cluster:
      description: The cluster's name, Talos ID and UID.
      type: dict
      contains:
        name:
          description: The cluster's name (the record's).
          type: str
        id:
          description: The cluster's Talos ID (the record's).
          type: str
        uid:
          description: The C(kube-system) namespace's UID.
          type: str
    time:
      description: When the backup was taken (UTC).
      type: str
    etcd:
      description: The snapshot as C(etcdutl snapshot status) reads it, and where it was taken.
      type: dict
      contains:
        revision:
          description: The snapshot's revision.
          type: int
        hash:
          description: etcd's hash of the snapshot's content.
          type: int
        total_key:
          description: The keys it holds.
          type: int
        total_size:
          description: Its size in bytes, as etcd counts it.
          type: int
        member:
          description: The control plane whose member it was taken from.
          type: str
        node:
          description: That control plane's Talos API address.
          type: str
        sha256:
          description: The snapshot file's SHA-256.
          type: str
    talos:
      description: The Talos version of the record.
      type: str
    kubernetes:
      description: The Kubernetes version of the record.
      type: str
    contract:
      description: The version contract of the record.
      type: str
    machines:
      description: The machines whose live config is in the archive.
      type: list
      elements: str
    parts:
      description: Each part, by name (C(etcd.snapshot), C(secrets.yaml), C(record.json), C(machines/<name>.yaml)).
      type: dict
      contains:
        sha256:
          description: The part's SHA-256.
          type: str
plan:
  description: What was done (or would be), as lines.
  returned: always
  type: list
  elements: str
"""
