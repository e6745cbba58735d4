# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout's config step: after the Talos step, move each machine's config
to the release set's contract form, rendered by the config engine, control planes first, one machine
at a time. Talos's dry run says which machines it reboots; a control plane is not started while etcd
is unhealthy; after a reboot the machine is waited for before the next one starts; every apply is
read back. ``run`` is the ``config_upgrade`` module's flow."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.common import poll
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.config import documents
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import model as rollout
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import state, talos_step
from ansible_collections.maesh.ichor.plugins.module_utils.rollout.errors import UpgradeFailed
from ansible_collections.maesh.ichor.plugins.module_utils.rollout.plan import Refused
from ansible_collections.maesh.ichor.plugins.module_utils.talos import etcd, machine

REBOOT_SETTLE = 1.0  # seconds between a reboot's apply and the first call to the rebooting machine


def run(params, conn, check_mode, clock=None):
    """The step over ``params["machines"]``; the result dict (plan, machines, diff).

    Every failure (IchorError) carries the result so far: the plan lines of the machines already done.
    """
    result = dict(changed=False, plan=[], machines=[])
    try:
        return _run(params, conn, check_mode, result, clock or poll.Clock)
    except IchorError as exc:
        exc.result = result
        raise


def _run(params, conn, check_mode, result, clock):
    client = conn.talos()
    kube = conn.kube()
    live = state.live_machines(client, params["machines"])
    early = [m for m in live if release.judge(m.talos, release.TALOS) != "up_to_date"]
    if early:
        raise Refused("the talos step is not done: %s; the config step runs after it" % ", ".join(
            "%s runs Talos %s" % (m.name, m.talos) for m in early))
    model = state.config_model(live, params["cluster"], params["secrets"], cluster_record.read(kube), kube)
    pending = rollout.config_pending(model)
    if not pending:
        result["plan"].append("every machine's config is in the %s form; nothing to do" % release.CONTRACT)
        return result
    work = []
    diffs = []
    for m in pending:
        rendered = model.render(m, release.CONTRACT, m.images)
        reboot = machine.apply_needs_reboot(client, m.node, documents.emit(rendered))
        work.append((m, rendered, reboot))
        result["machines"].append({"name": m.name, "from": m.form, "reboot": reboot, "drop": m.dropped})
        result["plan"].append("%s: config from the %s form to %s%s (%s)" % (
            m.name, m.form, release.CONTRACT,
            ", without the inline manifest %s (Cilium, handed over)" % ", ".join(m.dropped) if m.dropped else "",
            "reboots" if reboot else "no reboot"))
        diffs.append({"before_header": "%s (%s form)" % (m.name, m.form), "before": rollout.masked_text(m.docs),
                      "after_header": "%s (%s form)" % (m.name, release.CONTRACT),
                      "after": rollout.masked_text(rendered)})
    rebooted = [m.name for m, _rendered, reboot in work if reboot]
    result["plan"].append("reboots: %s" % (", ".join(rebooted) if rebooted else "none"))
    result.update(changed=True, diff=diffs)
    if check_mode:
        return result
    for m, rendered, reboot in work:
        if m.controlplane:
            healthy, detail = etcd.health(client, m.node, going_down=reboot)
            if not healthy:
                raise UpgradeFailed("%s: etcd is not healthy (%s); a control plane is not started while etcd is "
                                    "unhealthy: fix etcd and rerun" % (m.name, detail))
        machine.apply_config(client, m.node, documents.emit(rendered), reboot)
        if reboot:
            # the old client's channels end with the reboot: wait on a new one
            client.close()
            clock.sleep(REBOOT_SETTLE)
            client = conn.talos()
            talos_step.wait_back(client, kube, m.node, m.name, m.role, m.talos, params["wait_timeout"], clock=clock,
                                 node_name=m.node_name)
        if not state.reads_back(client, m, model, rendered):
            raise UpgradeFailed("%s: the config read back differs from the %s render; the remaining machines were not "
                                "touched" % (m.name, release.CONTRACT))
        result["plan"].append("%s: now in the %s form, read back" % (m.name, release.CONTRACT))
    return result
