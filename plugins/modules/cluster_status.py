#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: cluster_status
short_description: Read a managed cluster once and report what needs a person
version_added: 0.2.0
description:
  - Reads a cluster that the playbook C(maesh.ichor.adopt) adopted or C(maesh.ichor.init) made, once, and returns
    findings, each with a severity; C(critical) means a person is needed (the C(status) role fails the run on it).
  - B(Release position) as M(maesh.ichor.release_check) judges it, up to date, behind (with the next step), or refused
    (newer than the release set).
  - B(Machines), every machine the inventory or the cluster record names, read at once over the Talos API. Each
    one's drift from its spec in the cluster record at the record's contract, rendered with the component images the
    machine runs, by class and path; a class C path, or a path the last acknowledgement did not record, is
    critical. Held machines (adopt's hold) and why, critical once held longer than O(hold_days), counted from when
    that machine's hold began (a record an earlier adopt wrote keeps no start, and then it counts from the adoption and
    the finding says so). Pending machines
    (registered by M(maesh.ichor.talos_reset)) and for how long. Machines that answer and Nodes that run but that
    the record does not know, and record entries that no longer answer.
  - B(etcd), read through any control plane that answers, members against control planes (a control plane
    that is no member is critical), the health of every member etcd lists, also one that is no machine read here
    (through a control plane; one that does not answer or reports errors is critical), the leader (none known is
    critical), and each member's database against its quota (its config's
    C(cluster.etcd.extraArgs.quota-backend-bytes), else etcd's default of 2 GiB; over 80 % is critical).
  - B(Cilium), in the managed modes, the collection's Helm release, its state (anything but deployed is critical)
    and the chart it runs against the set's; the diff gate, read only, of the deployed revision (each object of its
    manifest, as Helm keeps it, against the live one by server-side apply dry runs); and the objects a foreign
    release made that the takeover kept, still live and owned by no release.
  - B(The installed bundle), with O(bundle), each object it ships against the live one (a server-side apply dry
    run), missing or changed out of band, with the paths that differ.
  - B(Credentials), when the talosconfig's and the kubeconfig's client certificates (inline, or the kubeconfig's
    C(client-certificate) file, relative to the kubeconfig's directory) and the cluster's CAs (Talos, Kubernetes,
    etcd, aggregator) end, critical within O(expiry_days), with the way to renew each.
  - Writes nothing, in check mode or not, unless O(acknowledge) is a token; then it records the class A and B drift
    found now as known in the cluster record (the last acknowledgement's list is replaced), under the cluster lock,
    if it is what the run that printed the token found, and refuses otherwise.
notes:
  - The flow of this module is C(plugins/module_utils/status/flow.py) with C(plugins/module_utils/status/readings.py)
    with C(plugins/module_utils/status/findings.py), run in the controller by its action plugin
    C(plugins/action/cluster_status.py).
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.talos
  - maesh.ichor.kubernetes
  - maesh.ichor.machines
attributes:
  check_mode:
    support: full
    description: Reads only; check mode returns the same result, and with O(acknowledge) says what it would record.
  diff_mode:
    support: full
    description: With O(acknowledge), the acknowledged fingerprints before and after.
options:
  machines:
    description:
      - The cluster's machines; usually built from the inventory groups with the C(maesh.ichor.machines) filter.
        Those the cluster record names and this list does not are read too, at the address the record keeps.
  expiry_days:
    description: A certificate that ends within this many days is critical.
    type: int
    default: 30
  hold_days:
    description: A machine adopt has held for longer than this many days is critical.
    type: int
    default: 14
  acknowledge:
    description:
      - Empty (or C(false)) acknowledges nothing. A token records the class A and B drift found now as known, so that
        it is a warning, not critical, until it changes; a path found later, a new value at a known path, or class C
        drift, is critical still. The token is what a run prints beside the drift it finds (RV(status.acknowledge_token),
        a digest of its fingerprints). The run refuses, recording nothing, when what it finds now is not what the
        token was made of, so that it records what the operator saw. The one write this module makes, under the
        cluster lock (refused while another run holds it).
      - C(true) in check mode shows what would be recorded and its token; outside check mode it is refused (it would
        record what nobody has seen).
    type: str
    default: ""
  requested_by:
    description: Who acknowledges, as the record keeps it (the AWX user); by default the local login name.
    type: str
  bundle:
    description:
      - The installer's bundle (files or directories, as M(maesh.ichor.installer_apply) takes them). When given, each
        object it ships is compared with the live one by a server-side apply dry run; a missing object and one
        changed out of band are warnings. Empty, the bundle is not judged.
    type: list
    elements: path
    default: []
  network_policies:
    description: The bundle's CiliumNetworkPolicies, judged only where the installer applies them (Cilium and its CRD).
    type: list
    elements: path
    default: []
  installer_namespace:
    description: The installer's namespace (its inventory).
    type: str
    default: ichor-system
"""

EXAMPLES = r"""
- name: Read the cluster's status
  maesh.ichor.cluster_status:
    machines: "{{ groups | maesh.ichor.machines(hostvars) }}"
    talosconfig: "{{ ichor_talosconfig }}"
    kubeconfig: "{{ ichor_kubeconfig }}"
  register: ichor_status_read

- name: Fail when a person is needed
  ansible.builtin.fail:
    msg: "{{ ichor_status_read.plan }}"
  when: ichor_status_read.status.needs_person
"""

RETURN = r"""
plan:
  description: One summary line, then one line per finding, most severe first.
  returned: always
  type: list
  elements: str
  sample: ["status: a person is needed (1 critical, 0 warning, 0 info)", "critical: etcd cp-3: a control plane that is no etcd member"]
diff:
  description: With O(acknowledge), the fingerprints recorded as known before and after (diff mode).
  returned: with O(acknowledge), in diff mode
  type: dict
  contains:
    before:
      description: The fingerprints recorded before.
      type: dict
    after:
      description: The fingerprints recorded after.
      type: dict
report:
  description: The same facts as RV(status) as a Markdown report a person reads at a glance (tables).
  returned: success
  type: str
status:
  description: What was read and found.
  returned: success
  type: dict
  contains:
    needs_person:
      description: Whether any finding is critical.
      type: bool
    findings:
      description: Each finding, most severe first.
      type: list
      elements: dict
      contains:
        severity:
          description: C(critical) (a person is needed), C(warning) or C(info).
          type: str
        area:
          description: C(release), C(machines), C(cilium), C(installer), C(etcd) or C(credentials).
          type: str
        subject:
          description: The machine, object or credential it is about.
          type: str
        what:
          description: The finding, one line.
          type: str
        fingerprint:
          description:
            - Stable while the condition lasts; what an acknowledgement names. A drift finding's is made of the
              machine, the class, the path and a keyed digest of the live value there (never the value).
          type: str
    release:
      description: The release position as release_check judges it.
      type: dict
      contains:
        set:
          description: The release set.
          type: dict
          contains:
            talos:
              description: The Talos release.
              type: str
            contract:
              description: The version contract.
              type: str
            kubernetes:
              description: The Kubernetes release.
              type: str
            cilium:
              description: The Cilium chart version.
              type: str
        versions:
          description: The Versions table, as M(maesh.ichor.release_check) returns it.
          type: list
          elements: dict
          contains:
            component:
              description: C(Talos), C(Version contract), C(Kubernetes) or C(Cilium).
              type: str
            running:
              description: What runs.
              type: str
            target:
              description: The release set's version.
              type: str
            state:
              description: C(Up to date), C(Behind) or C(Newer).
              type: str
        steps:
          description: The rollout's steps still needed, in order.
          type: list
          elements: str
        position:
          description: C(up to date), C(behind) with the next step, C(refused) or C(not judged), with why.
          type: str
    machines:
      description: Each machine read.
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
          description: Its role.
          type: str
        talos:
          description: The Talos version it runs (none when it did not answer).
          type: str
        source:
          description: C(inventory), or C(record) when only the cluster record names it.
          type: str
        drift:
          description:
            - Its drift from its spec in the record, by class, with paths (none when not compared), in the form
              M(maesh.ichor.adopt_plan) returns it; secret values are never included.
          type: dict
          contains:
            contract:
              description: The contract the render was made for (the record's).
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
                  description: The differing path, C(<document>:<dotted path>).
                  type: str
                change:
                  description: C(add) (only in the render), C(remove) (only live) or C(change).
                  type: str
                class:
                  description: The class.
                  type: str
                rendered:
                  description: The rendered value, C(<redacted>) for a secret or credential.
                  type: raw
                live:
                  description: The live value, C(<redacted>) for a secret or credential.
                  type: raw
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
              description: Whether a field of the secrets bundle differs.
              type: bool
        drift_summary:
          description: The drift in a few words.
          type: str
        held:
          description: Why adopt holds it (empty when it is not held).
          type: str
    acknowledged:
      description: The drift fingerprints the cluster record holds as known (after this run's acknowledgement).
      type: list
      elements: str
    acknowledge_token:
      description:
        - The token that acknowledges exactly the class A and B drift this run found (a digest of its fingerprints),
          what O(acknowledge) takes. The plan prints it when the record does not know that drift as it is.
      type: str
    pending:
      description: The machines reclaim registered that have not joined.
      type: list
      elements: dict
      contains:
        uuid:
          description: The machine's UUID.
          type: str
        address:
          description: Its address.
          type: str
        since:
          description: When it was registered.
          type: str
        days:
          description: For how many days.
          type: float
    etcd:
      description: etcd, read through any control plane that answers.
      type: dict
      contains:
        controlplanes:
          description: The control planes read.
          type: list
          elements: str
        members:
          description: The etcd members listed.
          type: list
          elements: str
        healthy:
          description: The members that answered without errors.
          type: list
          elements: str
        leader:
          description: The leader's name, as the members that answered know it (none when no member knows one).
          type: str
        db:
          description: The fullest member database against its quota, with the member and where the quota comes from.
          type: str
        db_size:
          description: The fullest member database, in bytes.
          type: int
        quota:
          description: Its quota, in bytes (none when a negative quota-backend-bytes turns it off).
          type: int
    cilium:
      description: The collection's Cilium release.
      type: dict
      contains:
        managed:
          description: Whether the cluster record names a release (false when adopt left the CNI alone).
          type: bool
        release:
          description: The release, namespace/name.
          type: str
        state:
          description: Its newest record's state (deployed, failed, pending-upgrade, ...).
          type: str
        chart:
          description: The chart version it runs.
          type: str
        set:
          description: The release set's chart version.
          type: str
        revision:
          description: The newest record's revision.
          type: int
        gate:
          description: The diff gate of the deployed revision (absent when it is not deployed).
          type: dict
          contains:
            objects:
              description: How many objects its manifest holds.
              type: int
            changed:
              description: The objects that differ from what the revision rendered.
              type: list
              elements: dict
              contains:
                object:
                  description: The object, C(Kind namespace/name).
                  type: str
                paths:
                  description: Each differing path with how it differs (never a Secret's value).
                  type: list
                  elements: str
        orphans:
          description: Objects a foreign Cilium release made that the takeover kept and that are still live.
          type: list
          elements: str
    installer:
      description: The collection's bundle as installed (read only when O(bundle) is given).
      type: dict
      contains:
        checked:
          description: Whether the bundle was compared (O(bundle) given).
          type: bool
        installed:
          description: Whether the installer's inventory exists (the bundle was installed).
          type: bool
        objects:
          description: How many objects the bundle ships.
          type: int
        missing:
          description: Bundle objects that do not exist.
          type: list
          elements: dict
          contains:
            object:
              description: The object, C(Kind namespace/name).
              type: str
            installed:
              description: Whether the inventory lists it (deleted out of band); false when it is new in the bundle.
              type: bool
        changed:
          description: Bundle objects changed away from what the bundle ships.
          type: list
          elements: dict
          contains:
            object:
              description: The object, C(Kind namespace/name).
              type: str
            paths:
              description: The paths that differ (never their values).
              type: list
              elements: str
    credentials:
      description: Each certificate read.
      type: list
      elements: dict
      contains:
        subject:
          description: Which certificate.
          type: str
        ends:
          description: When it ends (UTC).
          type: str
        days:
          description: Days left (negative when it has ended).
          type: float
    at:
      description: When the cluster was read (UTC).
      type: str
    cluster:
      description: The cluster's name from its record.
      type: str
"""
