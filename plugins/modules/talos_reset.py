#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: talos_reset
short_description: Reclaim a Talos machine that another cluster configured
version_added: 0.1.0
description:
  - Resets one Talos machine that belongs to another (foreign) cluster, so that it comes back in maintenance mode
    with the same UUID and can join the managed cluster (ADR 0103, section 2).
  - The machine is inspected over its authenticated Talos API with the foreign cluster's talosconfig, dialling
    exactly O(address); the endpoints and nodes in that talosconfig are ignored, so a talosconfig that lists other
    machines cannot widen the reach. A talosconfig with several contexts needs the one to use named in
    O(foreign_context).
  - The managed cluster (the one that receives the machine) is always given, by its own talosconfig
    (O(talosconfig) or O(talosconfig_content)) and kubeconfig (O(kubeconfig) or O(kubeconfig_content)); the check
    against it always runs. A run without it is refused.
  - Refused, with nothing sent, are a machine of the managed cluster (its cluster ID is the managed cluster's, or its
    UUID is one of the managed cluster's machines that is not merely pending); a control plane whose removal loses
    its cluster's etcd quorum, and the last control plane of a reachable cluster (these two only with O(force) and
    the cluster name typed as O(confirm_cluster)); a reset that cannot be graceful (only with O(force_ungraceful)).
  - The foreign cluster is healthy and reachable when, for a control plane, its etcd keeps quorum (the dialled member
    judged by its own etcd status, the others by whether their peer port answers) and, for a worker, when most of its
    control planes' etcd peer ports answer.
  - The reset request wipes STATE and EPHEMERAL and reboots; user disks and other volumes are not touched but are
    listed as orphaned, and encrypted ones are called out since their data becomes unreadable. It is graceful
    (cordon, drain, leave etcd) when the foreign cluster is healthy and reachable, and not graceful only with
    O(force_ungraceful).
  - Consent is the node's UUID typed as O(confirm_uuid), exactly as inspected; nothing replaces it.
  - After the reset the module waits up to O(wait) seconds for O(address) to answer in maintenance mode with the same
    UUID and then records it as a pending machine in the managed cluster's record (ConfigMap C(ichor-cluster) in
    C(ichor-system), key C(machines)), where a later join finds it. If it does not come back, the module fails with
    a hint (it may have taken a new address from DHCP) and registers nothing.
  - The foreign talosconfig is used for this one machine and never stored, logged or returned.
author:
  - maesh.ichor developers (@maesh-ichor)
attributes:
  check_mode:
    support: full
    description: Runs the inspection and returns the plan (the machine, the cluster that loses it, the orphaned and
      encrypted volumes, the refusals that apply); nothing is sent.
  diff_mode:
    support: full
    description: Shows the machine's state and the managed cluster's record entry before and after.
options:
  address:
    description:
      - The one address of the machine to reclaim (C(host) or C(host:port), port 50000 by default).
    type: str
    required: true
  confirm_uuid:
    description:
      - The node's UUID, typed. Must equal the inspected UUID exactly, else nothing is sent. Run with C(--check)
        first to see it. Not needed in check mode.
    type: str
  force:
    description:
      - Override the quorum and last-control-plane refusals. Needs O(confirm_cluster) as well.
    type: bool
    default: false
  confirm_cluster:
    description:
      - With O(force), the name of the cluster that loses the machine, typed as the second confirmation.
    type: str
  force_ungraceful:
    description:
      - Reset without cordon, drain and leaving etcd. Only for a foreign cluster that is dead or unreachable, or its
        last control plane; a control plane reset this way stays listed as a dead etcd member of its old cluster.
    type: bool
    default: false
  wait:
    description:
      - Seconds to wait after the reset for O(address) to answer in maintenance mode with the same UUID.
    type: float
    default: 600
  cluster:
    description:
      - The name of the managed cluster. When set, the managed cluster's talosconfig must reach a cluster of this
        name, else the run is refused (a guard against the wrong inventory).
    type: str
  requested_by:
    description:
      - Who asks, for the audit lines. The playbook passes the AWX user (C(awx_user_name) or C(tower_user_name)) when
        run from AWX; the default is the local user.
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
      - Path of the managed cluster's talosconfig. Unlike other modules there is no E(TALOSCONFIG) fallback here, since
        that variable names the foreign cluster's talosconfig.
    type: path
  talosconfig_content:
    description:
      - The managed cluster's talosconfig itself. Takes precedence over O(talosconfig). Never logged.
    type: str
  context:
    description:
      - The context of the managed cluster's talosconfig, instead of its current one.
    type: str
  endpoint:
    description:
      - A Talos API endpoint of the managed cluster to use instead of its talosconfig's endpoints.
    type: str
  kubeconfig:
    description:
      - Path of the managed cluster's kubeconfig (for its record). Falls back to E(KUBECONFIG).
    type: path
  kubeconfig_content:
    description:
      - The managed cluster's kubeconfig itself. Takes precedence over O(kubeconfig). Never logged.
    type: str
  timeout:
    description:
      - Seconds to wait for each Talos API call, connection included.
    type: float
    default: 30
requirements:
  - grpclib >= 0.4.7
  - protobuf >= 4.25
  - cryptography
  - PyYAML
  - kubernetes
notes:
  - "Runs on the Ansible controller (C(connection: local))."
  - The typed UUID is the consent. In AWX the job template's survey asks for it as text; see C(docs/awx/README.md).
seealso:
  - name: Seed 0103, section 2
    description: Adding a machine that already runs Talos; reclaim.
    link: https://ichor.maesh.dev/next/adr/0103-deploy-onto-machines-that-already-run-talos/
"""

EXAMPLES = r"""
- name: Show what a reclaim would do (the UUID to type is in the plan)
  maesh.ichor.talos_reset:
    address: 10.0.0.7
    foreign_talosconfig: ~/old-cluster/talosconfig
    talosconfig: "{{ ichor_talosconfig }}"
    kubeconfig: "{{ ichor_kubeconfig }}"
  check_mode: true

- name: Reclaim the machine
  maesh.ichor.talos_reset:
    address: 10.0.0.7
    confirm_uuid: 4c4c4544-0042-3010-8050-b4c04f4e3332
    foreign_talosconfig: ~/old-cluster/talosconfig
    talosconfig: "{{ ichor_talosconfig }}"
    kubeconfig: "{{ ichor_kubeconfig }}"
    cluster: prod

- name: Reclaim the only control plane of a cluster that is being retired
  maesh.ichor.talos_reset:
    address: 10.0.0.9
    confirm_uuid: 0c1f5a8e-7f3e-4a4b-9d58-0a7d2b1c9e11
    force: true
    confirm_cluster: old-lab
    force_ungraceful: true
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
    - "The audit lines, C(<time> <Event>: <what>), with the events C(ReclaimRequested), C(ReclaimInspected),
      C(ReclaimConfirmed), C(ReclaimReset), C(ReclaimCompleted), C(ReclaimExpired) (the wait ran out) and
      C(ReclaimFailed). They name the requesting user, the UUID and the foreign cluster; never a credential."
  returned: always
  type: list
  elements: str
  sample:
    - "2026-11-04T10:00:00Z ReclaimRequested: alice requested the reclaim of 10.0.0.7"
    - "2026-11-04T10:00:01Z ReclaimReset: reset sent to 10.0.0.7 (STATE and EPHEMERAL, reboot), graceful: true"
inspection:
  description: What the machine is, as read over its API (UUID, hostname, role, version, stage, cluster, disks, user
    volumes with C(encrypted), etcd members and their health for a control plane, the control planes' health for a
    worker). For a machine already in maintenance mode only C(address), C(mode), C(uuid) and C(stage).
  returned: when the machine answered
  type: dict
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
  returned: when the machine was inspected in configured mode
  type: bool
registered:
  description: The pending machine recorded in the managed cluster's record (in check mode, the one that would be).
  returned: when the machine is (or would be) registered
  type: dict
  sample: {"cluster": "prod", "uuid": "4c4c4544-0042-3010-8050-b4c04f4e3332", "address": "10.0.0.7",
           "state": "pending"}
hint:
  description: When the machine did not come back at the address, what to do (it may have a new DHCP address).
  returned: always
  type: str
cluster:
  description: The name of the managed cluster, as its Talos API reports it.
  returned: when it was read
  type: str
"""

from ansible.module_utils.basic import AnsibleModule, env_fallback, missing_required_lib

from ansible_collections.maesh.ichor.plugins.module_utils import reclaim
from ansible_collections.maesh.ichor.plugins.module_utils.connection import with_connection
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import client as k8s_client
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as talos_client
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, talosconfig


def argument_spec():
    spec = with_connection(dict(
        address=dict(type="str", required=True),
        confirm_uuid=dict(type="str"),
        force=dict(type="bool", default=False),
        confirm_cluster=dict(type="str"),
        force_ungraceful=dict(type="bool", default=False),
        wait=dict(type="float", default=float(reclaim.DEFAULT_WAIT)),
        cluster=dict(type="str"),
        requested_by=dict(type="str"),
        foreign_talosconfig=dict(type="path", fallback=(env_fallback, ["TALOSCONFIG"])),
        foreign_talosconfig_content=dict(type="str", no_log=True),
        foreign_context=dict(type="str"),
    ))
    # TALOSCONFIG names the foreign cluster's file here, so the managed cluster's has no fallback
    spec["talosconfig"] = dict(type="path")
    return spec


def _diff(result):
    insp = result.get("inspection") or {}
    before = {"address": insp.get("address", ""), "mode": insp.get("mode", ""), "uuid": insp.get("uuid", "")}
    if insp.get("cluster"):
        before["cluster"] = insp["cluster"].get("name", "")
    after = dict(before)
    if result.get("changed") and result.get("registered"):
        after = {"address": before["address"], "mode": "maintenance", "uuid": before["uuid"],
                 "record": dict(result["registered"])}
    return {"before": before, "after": after}


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    params = module.params
    empty = dict(plan=[], audit=[], refusals=[], reset_sent=False, hint="")
    if not talos_client.HAS_DEPS:
        module.fail_json(msg=missing_required_lib("grpclib and protobuf"), **empty)
    if not k8s_client.HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), **empty)
    if not (params["talosconfig"] or params["talosconfig_content"]) or \
            not (params["kubeconfig"] or params["kubeconfig_content"]):
        module.fail_json(msg="the managed cluster is required: give the talosconfig and kubeconfig of the cluster that "
                             "receives the machine (talosconfig or talosconfig_content, kubeconfig or "
                             "kubeconfig_content); a run without it is refused; nothing was sent", **empty)

    def foreign():
        return reclaim.load_foreign(params["foreign_talosconfig"], params["foreign_talosconfig_content"],
                                    params["foreign_context"])

    def managed_clients():
        context = talosconfig.load(path=params["talosconfig"], content=params["talosconfig_content"],
                                   context=params["context"])
        talos = talos_client.TalosClient(context=context, endpoint=params["endpoint"], timeout=params["timeout"])
        try:
            kube = k8s_client.KubeClient(kubeconfig=params["kubeconfig"],
                                         kubeconfig_content=params["kubeconfig_content"])
        except k8s_client.KubeError:
            talos.close()
            raise
        return context, talos, kube

    opts = reclaim.Options(params["address"], confirm_uuid=params["confirm_uuid"], force=params["force"],
                           confirm_cluster=params["confirm_cluster"], force_ungraceful=params["force_ungraceful"],
                           wait=params["wait"], cluster=params["cluster"],
                           user=params["requested_by"] or reclaim.local_user())
    io = reclaim.LiveIO(str(params["address"]).strip(), foreign, managed_clients, timeout=params["timeout"],
                        probe_timeout=min(5.0, params["timeout"]))
    try:
        result = reclaim.run(opts, io, check_mode=module.check_mode)
    except reclaim.ReclaimError as exc:
        result = getattr(exc, "result", None) or dict(empty)
        if module._diff:  # pylint: disable=protected-access
            result["diff"] = _diff(result)
        module.fail_json(msg=exc.message, **result)
    except errors.TalosError as exc:
        module.fail_json(msg=errors.redact_text(exc.message), **empty)
    finally:
        io.close()
    if module._diff:  # pylint: disable=protected-access
        result["diff"] = _diff(result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
