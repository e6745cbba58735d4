#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: talos_reset
short_description: Reclaim one Talos machine that another cluster configured
version_added: 0.1.0
description:
  - The reclaim of one machine that another cluster configured, so that this cluster can take it; not a bare
    reset. In order, it inspects the machine, applies the refusals, takes the typed UUID as consent, sends the reset,
    waits for maintenance mode and registers the machine as a pending machine of the managed cluster. The reset is
    its only write to the machine, hence the name.
  - B(Inspection.) The machine is read over its authenticated Talos API with the foreign cluster's talosconfig. Only
    O(node) is dialled; the endpoints and nodes in that talosconfig are ignored, so a talosconfig that lists other
    machines cannot widen the reach. A talosconfig with several contexts needs the one to use named in
    O(foreign_context).
  - B(The managed cluster) (the one that receives the machine) must always be given, by its own talosconfig
    (O(talosconfig) or O(talosconfig_content)) and kubeconfig (O(kubeconfig) or O(kubeconfig_content)). The check
    against it always runs, and a run without it is refused.
  - B(Refusals.) Nothing is sent for a machine of the managed cluster (its cluster ID is the managed cluster's, or
    its UUID belongs to one of the managed cluster's machines that is not merely pending). Nothing is sent for a
    control plane whose removal loses its cluster's etcd quorum, or for the last control plane of a reachable
    cluster, unless O(force) is set and the cluster name is typed as O(confirm_cluster). Nothing is sent for a reset
    that cannot be graceful, unless O(force_ungraceful) is set.
  - The foreign cluster counts as healthy and reachable in two cases. For a control plane, its etcd must keep
    quorum; the dialled member is judged by its own etcd status and the others by whether their peer port answers.
    For a worker, most of its control planes' etcd peer ports must answer.
  - The control planes to probe are listed by the machine itself, so they are probed all at once and at most 9 of
    them (etcd advises at most 7 members). A machine that lists more is refused, also in check mode, before any
    probe, unless O(force) is set; then the first 9 are probed and the others count as not answering.
  - B(The reset) wipes STATE and EPHEMERAL and reboots. User disks and other volumes are not touched but are listed
    as orphaned, and encrypted ones are called out, since their data becomes unreadable. The reset is graceful
    (cordon, drain, leave etcd) when the foreign cluster is healthy and reachable. It is not graceful only with
    O(force_ungraceful).
  - B(Consent) is the node's UUID typed as O(confirm_uuid), exactly as inspected. Nothing else replaces it.
  - B(Wait and registration.) With O(wait=true) (the default), the module waits up to O(wait_timeout) seconds for
    O(node) to answer in maintenance mode with the same UUID. It then records the machine as a pending machine in
    the managed cluster's record (ConfigMap C(ichor-cluster) in C(ichor-system), key C(machines)), where a later
    join finds it. If the machine does not come back, the module fails with a hint (it may have taken a new address
    from DHCP) and registers nothing.
  - With O(wait=false) the module returns once the machine accepts the reset, as C(talosctl reset --wait=false)
    does. It registers nothing then, because a machine is only registered after it has been seen in maintenance mode
    with its UUID. To register it, rerun the module with the same O(confirm_uuid) once the machine is up. The rerun
    finds the machine in maintenance mode, sends no second reset and registers it.
  - A machine already in maintenance mode with the typed UUID gets no reset; it is registered (whatever O(wait)).
  - The foreign talosconfig is used for this one machine and is never stored, logged or returned.
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.talos
  - maesh.ichor.kubernetes
attributes:
  check_mode:
    support: full
    description: Runs the inspection and returns the plan (the machine, the cluster that loses it, the orphaned and
      encrypted volumes, the refusals that apply). Nothing is sent.
  diff_mode:
    support: full
    description: Shows the machine's state and the managed cluster's record entry before and after.
options:
  node:
    description:
      - The one address of the machine to reclaim (C(host) or C(host:port), port 50000 by default).
    type: str
    required: true
  confirm_uuid:
    description:
      - The node's UUID, typed. It must equal the inspected UUID exactly, or nothing is sent. Run with C(--check)
        first to see it. Not needed in check mode.
    type: str
  force:
    description:
      - Override the quorum and last-control-plane refusals. Needs O(confirm_cluster) as well.
      - Also inspect a machine that lists more than 9 control planes (the first 9 are probed).
    type: bool
    default: false
  confirm_cluster:
    description:
      - With O(force), the name of the cluster that loses the machine, typed as the second confirmation.
    type: str
  force_ungraceful:
    description:
      - Reset without cordon, drain and leaving etcd. Use it only for a foreign cluster that is dead or unreachable,
        or for its last control plane. A control plane reset this way stays listed as a dead etcd member of its old
        cluster.
    type: bool
    default: false
  wait:
    description:
      - Wait for O(node) to answer in maintenance mode with the same UUID, then register it as a pending machine.
      - With C(false), return once the reset is accepted and register nothing. A rerun with the same O(confirm_uuid)
        registers the machine once it is in maintenance mode, without a second reset.
    type: bool
    default: true
  wait_timeout:
    description:
      - Seconds to wait for O(node) to answer in maintenance mode with the same UUID, when O(wait) is true.
    type: float
    default: 600
  cluster_name:
    description:
      - The name of the managed cluster. When set, the managed cluster's talosconfig must reach a cluster of this
        name, or the run is refused. This guards against the wrong inventory.
    type: str
  requested_by:
    description:
      - Who asks, for the audit lines. When run from AWX, the playbook passes the AWX user (C(awx_user_name) or
        C(tower_user_name)). The default is the local user.
    type: str
  foreign_talosconfig:
    description:
      - Path of the talosconfig of the machine's own (foreign) cluster. Falls back to E(TALOSCONFIG), which is how the
        AWX credential type injects it.
      - Only its credentials are used; its endpoints and nodes are ignored.
    type: path
  foreign_talosconfig_content:
    description:
      - The foreign talosconfig itself. Takes precedence over O(foreign_talosconfig). Never logged.
    type: str
  foreign_context:
    description:
      - The context of the foreign talosconfig to use. Required when the file holds several contexts.
    type: str
  talosconfig:
    description:
      - Path of the managed cluster's talosconfig. Unlike other modules, there is B(no) E(TALOSCONFIG) fallback and no
        default file here, since E(TALOSCONFIG) names the foreign cluster's talosconfig. Give this or
        O(talosconfig_content).
    type: path
notes:
  - The flow of this module is C(plugins/module_utils/reclaim/live.py) with C(plugins/module_utils/reclaim/flow.py),
    run in the controller by its action plugin C(plugins/action/talos_reset.py).
  - The typed UUID is the consent. In AWX the job template's survey asks for it as text; see C(docs/awx/README.md).
seealso:
  - module: maesh.ichor.init_plan
    description: Names the pending machines a reclaim leaves, and plans their join when the inventory lists them.
"""

EXAMPLES = r"""
- name: Show what a reclaim would do (the UUID to type is in the plan)
  maesh.ichor.talos_reset:
    node: 10.0.0.7
    foreign_talosconfig: ~/old-cluster/talosconfig
    talosconfig: "{{ ichor_talosconfig }}"
    kubeconfig: "{{ ichor_kubeconfig }}"
  check_mode: true

- name: Reclaim the machine
  maesh.ichor.talos_reset:
    node: 10.0.0.7
    confirm_uuid: 4c4c4544-0042-3010-8050-b4c04f4e3332
    foreign_talosconfig: ~/old-cluster/talosconfig
    talosconfig: "{{ ichor_talosconfig }}"
    kubeconfig: "{{ ichor_kubeconfig }}"
    cluster_name: prod

- name: Reclaim the only control plane of a cluster that is being retired
  maesh.ichor.talos_reset:
    node: 10.0.0.9
    confirm_uuid: 0c1f5a8e-7f3e-4a4b-9d58-0a7d2b1c9e11
    force: true
    confirm_cluster: old-lab
    force_ungraceful: true
    wait_timeout: 900
    talosconfig: "{{ ichor_talosconfig }}"
    kubeconfig: "{{ ichor_kubeconfig }}"

- name: Send the reset and return; a rerun registers the machine once it is in maintenance mode
  maesh.ichor.talos_reset:
    node: 10.0.0.7
    confirm_uuid: 4c4c4544-0042-3010-8050-b4c04f4e3332
    wait: false
    talosconfig: "{{ ichor_talosconfig }}"
    kubeconfig: "{{ ichor_kubeconfig }}"
"""

RETURN = r"""
plan:
  description: Human-readable lines about the machine and what is (or would be) sent.
  returned: always
  type: list
  elements: str
  sample:
    - "reclaim 10.0.0.7: w-7, UUID 4c4c4544-0042-3010-8050-b4c04f4e3332, worker, Talos v1.14.5, stage running"
    - cluster "old" (ID 0QfA...) loses this machine
    - "would send the reset: STATE and EPHEMERAL, reboot, graceful: true"
audit:
  description:
    - "The audit lines, C(<time> <Event>: <what>). The events are C(ReclaimRequested), C(ReclaimInspected),
      C(ReclaimConfirmed), C(ReclaimReset), C(ReclaimCompleted), C(ReclaimExpired) (the wait ran out) and
      C(ReclaimFailed). They name the requesting user, the UUID and the foreign cluster, never a credential."
  returned: always
  type: list
  elements: str
  sample:
    - "2026-11-04T10:00:00Z ReclaimRequested: alice requested the reclaim of 10.0.0.7"
    - "2026-11-04T10:00:01Z ReclaimReset: reset sent to 10.0.0.7 (STATE and EPHEMERAL, reboot), graceful: true"
inspection:
  description:
    - What the machine is, as read over its API.
    - For a machine already in maintenance mode, only RV(inspection.address), RV(inspection.mode),
      RV(inspection.uuid) and RV(inspection.stage). For a machine that answers only to the managed cluster's own
      talosconfig, only RV(inspection.address), RV(inspection.mode), RV(inspection.uuid) and RV(inspection.cluster).
  returned: when the machine answered
  type: dict
  contains:
    address:
      description: The address dialled (O(node)).
      type: str
      returned: always
    mode:
      description: C(configured) (it took a talosconfig's credential) or C(maintenance).
      type: str
      returned: always
    uuid:
      description: The machine's UUID (SystemInformation), the one to type as O(confirm_uuid).
      type: str
      returned: always
    hostname:
      description: The machine's hostname.
      type: str
      returned: in configured mode
    role:
      description: C(controlplane) or C(worker).
      type: str
      returned: in configured mode
    version:
      description: The Talos version the machine runs.
      type: str
      returned: in configured mode
    stage:
      description: The machine's stage (C(running), C(maintenance), C(rebooting), ...).
      type: str
      returned: when read
    cluster:
      description: The cluster the machine belongs to.
      type: dict
      returned: in configured mode
      contains:
        name:
          description: The cluster's name.
          type: str
        id:
          description: The cluster's ID.
          type: str
    members:
      description: The cluster's members as the machine sees them (discovery).
      type: list
      elements: dict
      returned: when the foreign talosconfig was accepted
      contains:
        id:
          description: The member's node ID.
          type: str
        hostname:
          description: The member's hostname.
          type: str
        addresses:
          description: The member's addresses.
          type: list
          elements: str
        machine_type:
          description: C(controlplane), C(init) or C(worker).
          type: str
    disks:
      description: The machine's disks.
      type: list
      elements: dict
      returned: when the foreign talosconfig was accepted
      contains:
        id:
          description: The disk's ID.
          type: str
        dev_path:
          description: Its device path.
          type: str
        size:
          description: Its size, human-readable.
          type: str
        model:
          description: Its model.
          type: str
        serial:
          description: Its serial number.
          type: str
        system_disk:
          description: Whether Talos is installed on it.
          type: bool
    volumes:
      description: The user volumes, left on disk and orphaned by the reset (not wiped).
      type: list
      elements: dict
      returned: when the foreign talosconfig was accepted
      contains:
        id:
          description: The volume's ID.
          type: str
        type:
          description: C(partition) or C(disk).
          type: str
        location:
          description: Its device path.
          type: str
        parent:
          description: The disk it is on.
          type: str
        size:
          description: Its size, human-readable.
          type: str
        mount:
          description: Where it is mounted.
          type: str
        encrypted:
          description: Whether it is encrypted; its data becomes unreadable, since its key derived from STATE or META.
          type: bool
        encryption_provider:
          description: The encryption provider of an encrypted volume, else empty.
          type: str
    etcd:
      description: A control plane's etcd view; null for a worker.
      type: dict
      returned: when the foreign talosconfig was accepted
      contains:
        running:
          description: Whether etcd runs on the machine.
          type: bool
        error:
          description: Why etcd did not answer, else empty.
          type: str
        members:
          description: The etcd members and their health.
          type: list
          elements: dict
          contains:
            id:
              description: The member ID (hex).
              type: str
            hostname:
              description: The member's hostname.
              type: str
            peer:
              description: Its peer address (C(host:port)).
              type: str
            this_node:
              description: Whether it is the machine being reclaimed.
              type: bool
            healthy:
              description: Whether it is healthy.
              type: bool
            checked_by:
              description: How health was judged (its own etcd status for this node, the peer port for the others,
                or C(not probed) beyond the first 9).
              type: str
    control_planes:
      description: A worker's view of its cluster's control planes.
      type: list
      elements: dict
      returned: for a worker
      contains:
        hostname:
          description: The control plane's hostname.
          type: str
        address:
          description: Its address.
          type: str
        healthy:
          description: Whether its etcd peer port answers.
          type: bool
        checked_by:
          description: How health was judged.
          type: str
refusals:
  description: The refusals that apply (also those overridden by O(force)).
  returned: always
  type: list
  elements: str
reset_sent:
  description: Whether the reset request was sent in this run.
  returned: always
  type: bool
graceful:
  description: Whether the reset is (or would be) graceful.
  returned: always (null unless the machine was inspected in configured mode)
  type: bool
registered:
  description: The pending machine recorded in the managed cluster's record (in check mode, the one that would be).
  returned: always (null unless the machine is, or would be, registered)
  type: dict
  sample: {"cluster": "prod", "uuid": "4c4c4544-0042-3010-8050-b4c04f4e3332", "address": "10.0.0.7",
           "state": "pending"}
  contains:
    cluster:
      description: The managed cluster's name.
      type: str
    uuid:
      description: The machine's UUID.
      type: str
    address:
      description: The machine's address (O(node)).
      type: str
    state:
      description: Always C(pending); a later join approves it.
      type: str
hint:
  description: When the machine did not come back at the address, what to do (it may have a new DHCP address).
  returned: always
  type: str
cluster:
  description: The name of the managed cluster, as its Talos API reports it.
  returned: when it was read
  type: str
"""
