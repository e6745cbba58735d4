# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every module of the collection: its argument spec (built from ``specs``), the constraints between its options, and
the flow that runs it. The action plugin of the same name (plugins/action, one per module) validates a task's
arguments against this spec and runs the flow in the controller's process; plugins/modules holds the documentation
only, and tests/unit/test_shape.py holds each module's DOCUMENTATION to its spec here."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible.module_utils.basic import env_fallback

from ansible_collections.maesh.ichor.plugins.module_utils.adopt import inspection as adopt_inspection
from ansible_collections.maesh.ichor.plugins.module_utils.adopt import release as adopt_release
from ansible_collections.maesh.ichor.plugins.module_utils.adopt import write as adopt_write
from ansible_collections.maesh.ichor.plugins.module_utils.ansible_module import specs
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import pipeline as cilium_pipeline
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import release as cilium_release
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import takeover as cilium_takeover
from ansible_collections.maesh.ichor.plugins.module_utils.cluster import facts as cluster_facts
from ansible_collections.maesh.ichor.plugins.module_utils.cluster import lock as cluster_lock
from ansible_collections.maesh.ichor.plugins.module_utils.status import findings as status_findings
from ansible_collections.maesh.ichor.plugins.module_utils.status import flow as cluster_status
from ansible_collections.maesh.ichor.plugins.module_utils.status import readings as status_readings
from ansible_collections.maesh.ichor.plugins.module_utils.init import plan as init_plan
from ansible_collections.maesh.ichor.plugins.module_utils.init import write as init_write
from ansible_collections.maesh.ichor.plugins.module_utils.installer import stages
from ansible_collections.maesh.ichor.plugins.module_utils.machine import bootstrap, cluster_read, etcd_snapshot
from ansible_collections.maesh.ichor.plugins.module_utils.config import spec as config_spec
from ansible_collections.maesh.ichor.plugins.module_utils.machine import kubeconfig, machine_config
from ansible_collections.maesh.ichor.plugins.module_utils.machine import secrets as bundle_file
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim import flow as reclaim_flow
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim import live as reclaim_live
from ansible_collections.maesh.ichor.plugins.module_utils.recovery import archive, backup, retention
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import check, config_step, kubernetes_step, record
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import batches, gates, talos_rollout, talos_step


class Entry:
    """One module: ``argument_spec()`` (a new dict each call), the keyword constraints ArgumentSpecValidator takes
    (mutually_exclusive, required_if, ...), ``run(params, conn, check_mode)`` (the result dict; by default the
    ``run`` of its flow) and ``flows``, the module_utils modules that hold its flow."""

    def __init__(self, options, flows, run=None, talos=False, kube=False, **constraints):
        self._options = options
        self.flows = flows if isinstance(flows, tuple) else (flows,)
        self.run = run or self.flows[0].run
        self.talos = talos
        self.kube = kube
        self.constraints = constraints

    def argument_spec(self):
        # a deep copy: the validator fills a dict option's suboptions into its default in place, and a spec built
        # once (release_check's desired) would carry one task's values into the next in the controller's process
        return copy.deepcopy(specs.spec(self._options(), talos=self.talos, kube=self.kube))


def _stage(stage):
    return dict(run=lambda params, conn, check_mode: stages.run_stage(stage, params, conn, check_mode))


def _talos_facts_options():
    return dict(node=dict(type="str"), machines=dict(type="list", elements="dict", options=dict(
        name=dict(type="str", required=True), node=dict(type="str", required=True),
        role=dict(type="str", choices=["controlplane", "worker"]))))


def _machine_config_options():
    return dict(
        dict(node=dict(type="str", required=True),
             secrets=dict(type="path", required=True),
             cluster=specs.cluster(required=True),
             machine=dict(type="dict", required=True, options=dict(role=dict(type="str"), **config_spec.machine_options())),
             maintenance=dict(type="bool", default=False),
             uuid=dict(type="str"),
             accept_class_b=dict(type="bool", default=False),
             allow_reboot=dict(type="bool", default=True)),
        **specs.wait(300))


def _reset_options():
    options = dict(
        node=dict(type="str", required=True),
        confirm_uuid=dict(type="str"),
        force=dict(type="bool", default=False),
        confirm_cluster=dict(type="str"),
        force_ungraceful=dict(type="bool", default=False),
        cluster_name=dict(type="str"),
        requested_by=dict(type="str"),
        foreign_talosconfig=dict(type="path", fallback=(env_fallback, ["TALOSCONFIG"])),
        foreign_talosconfig_content=dict(type="str", no_log=True),
        foreign_context=dict(type="str"),
        # TALOSCONFIG names the foreign cluster's file here, so the managed cluster's has no fallback
        talosconfig=dict(type="path"),
    )
    options.update(specs.wait(reclaim_flow.DEFAULT_WAIT))
    return options


def _secrets_options():
    return dict(
        path=dict(type="path", required=True),
        source=dict(type="str", choices=["generate", "recover"], default="generate"),
        node=dict(type="str"),
        version_contract=dict(type="str"),
        admin_talosconfig=dict(type="path"),
        admin_talosconfig_context=dict(type="str", default="admin"),
        admin_talosconfig_endpoints=dict(type="list", elements="str", default=[]),
    )


def _upgrade_options():
    return dict(dict(node=dict(type="str", required=True), name=dict(type="str"), hostname=dict(type="str"),
                     role=dict(type="str", required=True, choices=["controlplane", "worker"]), image=dict(type="str")),
                **specs.wait(900))


def _talos_rollout_options():
    timeouts = dict((gate, dict(type="float", default=float(seconds))) for gate, seconds in gates.DEFAULT_TIMEOUTS.items())
    return dict(machines=specs.machines(), image=dict(type="str"), wait_timeout=dict(type="float", default=900.0),
                worker_batch=dict(type="raw", default=1), max_failed=dict(type="int", default=0),
                canary_soak=dict(type="float", default=0.0), drain_timeout=dict(type="float", default=300.0),
                gate_timeouts=dict(type="dict", default={}, options=timeouts), lock_holder=dict(type="str", no_log=False))


def _backup_options():
    keep = dict((key, dict(type="int")) for key in retention.POLICY_KEYS)
    return dict(machines=specs.machines(), node=dict(type="str"), recipients=dict(type="list", elements="str",
                                                                                  required=True, no_log=False),
                directory=dict(type="path", required=True), etcdutl=dict(type="str", default="etcdutl"),
                retention=dict(type="dict", default=dict(keep_last=7), options=keep))


def _rollout(**extra):
    return lambda: dict(machines=specs.machines(), cluster=specs.cluster(), secrets=dict(type="path"), **extra)


_ONE_SECRETS_SOURCE = dict(mutually_exclusive=[("secrets", "recover_from")], required_one_of=[("secrets", "recover_from")])

MODULES = {
    "adopt_plan": Entry(lambda: dict(adopt_inspection.options(), machines=specs.machines()), adopt_inspection,
                        talos=True, kube=True, **_ONE_SECRETS_SOURCE),
    "adopt_release": Entry(adopt_release.options, adopt_release, talos=True, kube=True),
    "adopt_write": Entry(lambda: dict(adopt_write.options(), machines=specs.machines()), adopt_write,
                         talos=True, kube=True, **_ONE_SECRETS_SOURCE),
    "cilium_release": Entry(lambda: dict(cilium_release.options(), **specs.wait(600)),
                            (cilium_release, cilium_pipeline), kube=True),
    "cilium_takeover": Entry(lambda: dict(cilium_takeover.options(), machines=dict(specs.machines(), required=False),
                                          **specs.wait(600)), (cilium_takeover, cilium_pipeline),
                             talos=True, kube=True),
    "cluster_backup": Entry(_backup_options, (backup, archive, retention), talos=True, kube=True),
    "cluster_facts": Entry(dict, cluster_facts, run=lambda params, conn, check_mode: cluster_facts.run(conn),
                           kube=True),
    "cluster_lock": Entry(cluster_lock.options, cluster_lock, kube=True,
                          required_if=[("state", "released", ["holder"])]),
    "cluster_record": Entry(lambda: dict(update=dict(type="dict", default={})), record, kube=True),
    "cluster_status": Entry(lambda: dict(cluster_status.options(), machines=specs.machines()),
                            (cluster_status, status_readings, status_findings),
                            talos=True, kube=True),
    "config_upgrade": Entry(_rollout(wait_timeout=specs.wait(900)["wait_timeout"]), config_step, talos=True, kube=True),
    "etcd_snapshot": Entry(lambda: dict(node=dict(type="str", required=True), path=dict(type="path", required=True)),
                           etcd_snapshot, talos=True),
    "init_plan": Entry(lambda: dict(init_plan.options(), cluster=specs.cluster(required=True)), init_plan,
                       talos=True, kube=True),
    "init_record": Entry(lambda: dict(init_write.options(), cluster=specs.cluster(required=True)), init_write,
                         kube=True),
    "installer_apply": Entry(lambda: stages.options(bundle=True), stages, kube=True, **_stage(stages.apply_run)),
    "installer_prune": Entry(lambda: stages.options(bundle=True, run_id="required"), stages, kube=True,
                             **_stage(stages.prune_run)),
    "installer_restore": Entry(lambda: stages.options(run_id="optional"), stages, kube=True, **_stage(stages.restore)),
    "kubernetes_upgrade": Entry(_rollout(wait_timeout=specs.wait(600)["wait_timeout"]), kubernetes_step,
                                talos=True, kube=True),
    "release_check": Entry(_rollout(desired=dict(type="dict", default={}, options=dict(
        talos=dict(type="str"), kubernetes=dict(type="str"), contract=dict(type="str"))), image=dict(type="str"),
        require_record=dict(type="bool", default=False)), check, talos=True, kube=True),
    "talos_bootstrap": Entry(bootstrap.options, bootstrap, talos=True),
    "talos_facts": Entry(_talos_facts_options, cluster_read, talos=True,
                         mutually_exclusive=[("node", "machines")]),
    "talos_kubeconfig": Entry(kubeconfig.options, kubeconfig, talos=True),
    "talos_machine_config": Entry(_machine_config_options, machine_config, run=machine_config.module_run,
                                  talos=True, kube=True),
    "talos_reset": Entry(_reset_options, (reclaim_live, reclaim_flow), run=reclaim_live.reclaim, talos=True, kube=True),
    "talos_secrets": Entry(_secrets_options, bundle_file, talos=True,
                           required_if=[("source", "recover", ["node"])]),
    "talos_rollout": Entry(_talos_rollout_options, (talos_rollout, batches, gates), talos=True, kube=True),
    "talos_upgrade": Entry(_upgrade_options, talos_step, talos=True, kube=True),
}
