# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Judge a running cluster against the release set and plan the rollout's next step:
the ``release_check`` module's flow. Reads only: the machines, the Nodes, the CNI, the cluster
record; validates a desired change against the stored versions; finds each config's contract form
with the config engine; returns the Versions table and the steps still needed."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.common.given import given
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record, nodes
from ansible_collections.maesh.ichor.plugins.module_utils.config import registry_auth
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import model as rollout
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import installer, plan, state, talos_step

Refused = plan.Refused  # what position() raises for a component newer than the set

# Versions table component -> the key of ``components`` in the result
STATE_KEYS = {"Talos": "talos", "Version contract": "contract", "Kubernetes": "kubernetes", "Cilium": "cilium"}

NO_RECORD = ("no cluster record %s/%s: maesh.ichor has not adopted or initialised this cluster; adopt it with "
             "maesh.ichor.adopt (a running cluster) or make it with maesh.ichor.init, then plan the upgrade again; "
             "nothing was written" % (cluster_record.NAMESPACE, cluster_record.NAME))


def check_desired(stored, desired):
    """Refuse (plan.Refused) a desired change the stored versions do not allow (release.validate_change)."""
    for field, value in sorted(given(desired or {}).items()):
        if field not in stored:
            raise plan.Refused("desired: unknown field %r (talos, kubernetes, contract)" % field)
        refusal = release.validate_change(field, stored[field], value)
        if refusal:
            raise plan.Refused(refusal)


def require_record(record):
    """Refuse (plan.Refused) a cluster without a cluster record: the rollout follows a cluster adopt or init wrote."""
    if not record.exists:
        raise plan.Refused(NO_RECORD)


def run(params, conn, check_mode):
    """The result dict: release_set, versions, components, cni, config_pending, steps, step, plan, installers (the
    installer image each machine the Talos step upgrades gets, and the system extensions it runs).

    With ``require_record``, a cluster without a cluster record is refused before anything else is read.

    Every failure (IchorError) carries the result so far (at least the release set and the plan).
    ``check_mode`` changes nothing: the check reads only.
    """
    result = dict(changed=False, release_set=release.release_set(), plan=[])
    try:
        _run(params, conn, result)
    except IchorError as exc:
        exc.result = result
        raise
    return result


def _run(params, conn, result):
    named = params.get("image")
    image = named or release.installer_image()
    target = talos_step.image_version(image)  # a reference naming no version is refused before anything is read
    kube = conn.kube()
    record = None
    if params.get("require_record"):
        record = cluster_record.read(kube)
        require_record(record)
    talos = conn.talos()
    found = state.read(talos, kube, params["machines"], record=record)
    check_desired(state.stored_versions(found["record"]), params["desired"])
    plan.check_not_newer(found["machines"], found["kubernetes"], None, found["cni"])
    model = state.config_model(state.live_from(found), params["cluster"], params["secrets"], found["record"], kube)
    pending = [{"name": m.name, "form": m.form, "drop": m.dropped} for m in rollout.config_pending(model)]
    contract = rollout.lowest_form(model)
    result["config_pending"] = pending
    kubernetes = plan.lowest(found["kubernetes"].values())
    rows = plan.versions_table(found["machines"], kubernetes, contract, found["cni"])
    result.update(versions=rows, cni=found["cni"],
                  components=dict((STATE_KEYS[r["component"]], r["state"].lower().replace(" ", "_")) for r in rows))
    result["plan"] = plan.format_table(rows)
    read_rows = dict((r["name"], r) for r in found["rows"])
    result["installers"] = []

    def installer_for(m):  # each machine the Talos step upgrades keeps what it runs, or the plan is refused
        row = read_rows[m["name"]]
        choice = installer.choose(m["name"], installer.installed(row["objects"], row["extensions"]), target, named)
        result["installers"].append(dict(installer.result(choice), name=m["name"]))
        return choice.image, installer.describe(choice)

    steps = plan.plan_rollout(found["machines"], found["kubernetes"], contract, found["cni"], pending, image, target,
                              installer_for=installer_for)
    result.update(steps=steps, step=steps[0]["step"] if steps else "")
    # every step waits for the machines' Nodes: one the cluster lacks would stop the rollout with a machine changed
    missing = [(m["name"], m["node"], m["node_name"]) for m in found["machines"] if m["node_name"] not in found["nodes"]]
    if steps and missing:
        raise plan.Refused(nodes.unregistered(*missing))
    behind = plan.record_behind(state.stored_versions(found["record"]), found["machines"], kubernetes) \
        if found["record"].exists else {}
    result["record_behind"] = behind
    if behind:
        result["plan"].append("the cluster record is behind what every machine runs (a run stopped before recording "
                              "its step): record %s" % ", ".join("%s %s" % (k, behind[k]) for k in sorted(behind)))
    if steps:
        result["plan"] += ["next step: %s" % steps[0]["step"]] + steps[0]["lines"]
        result["plan"] += ["then: %s" % ", ".join(s["step"] for s in steps[1:])] if steps[1:] else []
    else:
        result["plan"].append("the cluster is at the release set; nothing to do")


def position(rows, kube, record):
    """(Versions table rows, the steps still needed) of machines read already (dicts with name, node, role, talos
    and config): release_check's judgement without reading them again (``cluster_status``). Refused (plan.Refused)
    when a component is newer than the set; ConfigError when a config is in no contract's form."""
    live = [rollout.Machine(r["name"], r["node"], r["role"], r["talos"], r["config"]) for r in rows]
    machines = [{"name": r["name"], "node": r["node"], "role": r["role"], "talos": r["talos"]} for r in rows]
    kubernetes = state.kubernetes_versions([(m.name, dict((c, "v" + v) for c, v in m.images.items()))
                                            for m in live if m.controlplane], kube)
    found_cni = state.cni_of(kube, record)
    plan.check_not_newer(machines, kubernetes, None, found_cni)
    model = rollout.model(live, handed_over=state.handed_over(record), auth_refs=registry_auth.record_refs(record), kube=kube)
    pending = [{"name": m.name, "form": m.form, "drop": m.dropped} for m in rollout.config_pending(model)]
    contract = rollout.lowest_form(model)
    rows_ = plan.versions_table(machines, plan.lowest(kubernetes.values()), contract, found_cni)
    image = release.installer_image()
    return rows_, plan.plan_rollout(machines, kubernetes, contract, found_cni, pending, image,
                                    talos_step.image_version(image))
