# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the two Helm flows (``cilium_release``, ``cilium_takeover``) share: the chart options, the helm they run
with the module's kubeconfig, the chart resolved at the release set's version, the plan they return, a record of
the collection's release deleted by UID, and the wait until Cilium is ready on every Node."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.cilium import helm as helm_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import live as live_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import values as values_mod
from ansible_collections.maesh.ichor.plugins.module_utils.cilium.errors import CiliumError, Refused
from ansible_collections.maesh.ichor.plugins.module_utils.common import poll
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.errors import Conflict, NotFound

# a release record left by a run that stopped mid-apply: the next run deletes it first
PENDING = ("pending-install", "pending-upgrade", "pending-rollback")


def options():
    """The options both modules take for the chart and helm (documented once: doc fragment maesh.ichor.cilium_chart)."""
    return dict(
        chart=dict(type="str"),
        chart_digest=dict(type="str"),
        chart_repository=dict(type="str"),
        helm=dict(type="path", default="helm"),
        kubeprism_port=dict(type="int", default=values_mod.KUBEPRISM_PORT),
    )


def helm(params):
    """The Helm of a run: the module's binary and kubeconfig; each helm call may take ten API timeouts, 2 min at least."""
    return helm_mod.Helm(binary=params.get("helm"), kubeconfig=params.get("kubeconfig"),
                         kubeconfig_content=params.get("kubeconfig_content"), kube_context=params.get("kube_context"),
                         timeout=max(float(params.get("timeout") or 30) * 10, 120))


def resolve(helm_run, params, say):
    """(chart path, chart version): the chart the options name, at the release set's version only; said in the plan."""
    helm_version = helm_run.version()
    chart, meta = helm_run.resolve_chart(params.get("chart"), params.get("chart_digest"), params.get("chart_repository"))
    version = str(meta["version"])
    say("chart: cilium %s (%s), helm %s" % (
        version, params.get("chart") or params.get("chart_repository") or helm_mod.REPOSITORY,
        ".".join(str(p) for p in helm_version)))
    return chart, version


class Plan:
    """What the run found and decided, returned with success and with every refusal."""

    def __init__(self, **result):
        self.lines = []
        self.result = dict(result, changed=False, plan=self.lines)

    def say(self, line):
        self.lines.append(line)

    def refuse(self, message):
        self.say("refused: " + message)
        return Refused(message, result=self.result)


def delete_record(kube, rec):
    """Delete a record Secret only if it is still the one read (UID precondition); gone already is fine."""
    try:
        kube.delete("v1", "Secret", rec.name, rec.namespace, uid=rec.uid)
    except NotFound:
        pass
    except Conflict:
        raise CiliumError("the record %s changed since this run read it (another uid); it is kept: rerun" % rec.ref)


def ready(kube, plan, wait, wait_timeout, clock, not_ready):
    """Wait (``wait_timeout`` seconds, or one look without ``wait``) until the DaemonSet and the operator are ready on
    every Node. Not ready: ``not_ready % reasons`` fails the run when it waited, else it is a warning; False."""
    def check():
        running = live_mod.read(kube)
        return live_mod.health(running, live_mod.node_count(kube)) if running else (False, ["gone"])

    done, lines = poll.until(check, wait_timeout if wait else 0, clock=clock)
    if done:
        plan.say("ready: " + "; ".join(lines))
        return True
    message = not_ready % "; ".join(lines)
    if wait:
        raise CiliumError(message, result=plan.result)
    plan.result.setdefault("warnings", []).append(message)
    return False
