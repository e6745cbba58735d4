# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every machine of a cluster read at once over one client (talos_facts over a cluster, adopt's inspection), and
the versions judged against the release set; the ``talos_facts`` module's flow (``run``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.common import fanout, release
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.machine import facts as machine_facts
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, machine, version_gate
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res


def _cluster_plan_line(name, facts):
    config = facts["config"]
    if config is None:
        detail = "machine config not read: %s" % facts["config_unread"]
    else:
        prism = config["kubeprism"]
        detail = "KubePrism %s, kube-proxy %s, Talos CNI %s, %d inline manifest(s)" % (
            "on port %d" % prism["port"] if prism["enabled"] else "off",
            "on" if config["kube_proxy"]["enabled"] else "off",
            config["cni"]["name"] or "not stated", len(config["inline_manifests"]))
    return "%s: %s; %s; CNI configs: %s" % (
        name, machine_facts.plan_line(facts, facts["node"]), detail, ", ".join(facts["cni_configs"]) or "none")


class ClusterRead:
    """Every machine of a cluster read at once (read_cluster): what was read, what was not, and their plan lines."""

    def __init__(self):
        self.read = []  # (machine entry, facts with its name)
        self.texts = {}  # name -> live config text (machine_read only): secrets, never returned
        self.unread = []  # "name: why"
        self.plan = []
        self.warnings = []
        self.members = None  # the discovery membership as the first machine read sees it (None: none read)


def read_cluster(client, machines, with_config_text=False, concurrency=fanout.CONCURRENCY):
    """machine_facts (or machine_read, with_config_text) of every machine ([{name, node, role}]) concurrently,
    bounded, and the discovery membership once, from the first machine read (each machine sees the whole of it);
    a machine given twice is one line of error."""
    names = [m["name"] for m in machines]
    nodes = [m["node"] for m in machines]
    for what, values in (("name", names), ("node", nodes)):
        twice = sorted(set(v for v in values if values.count(v) > 1))
        if twice:
            raise IchorError("machines: each %s once; given more than once: %s" % (what, ", ".join(twice)),
                             result=dict(plan=[]))
    read = machine_facts.machine_read if with_config_text else machine_facts.machine_facts
    results = client.fan_out(lambda node: read(client, node, with_members=False), nodes, concurrency)
    out = ClusterRead()
    for m in machines:
        result = results[m["node"]]
        if result.error is not None:
            out.unread.append("%s: %s" % (m["name"], result.error))
            out.plan.append("%s (%s): not read: %s" % (m["name"], m["node"], result.error))
            continue
        message = result.message
        if with_config_text:
            message, out.texts[m["name"]] = message
        facts = dict(message, name=m["name"])
        del facts["members"]
        out.read.append((m, facts))
        out.plan.append(_cluster_plan_line(m["name"], facts))
        if m.get("role") and facts["role"] and m["role"] != facts["role"]:
            out.warnings.append("%s is a %s in the inventory and a %s as its machine config states it" % (
                m["name"], m["role"], facts["role"]))
    if out.read:
        _read_members(client, out)
    return out


def _read_members(client, out):
    first = out.read[0][1]
    try:
        items = client.run(machine.list_resources(client, res.MEMBERS, first["node"]))
    except errors.TalosError as exc:
        out.plan.append("discovery membership not read (on %s): %s" % (first["name"], exc))
        return
    out.members = machine_facts.member_entries(items)
    out.plan.append("discovery membership (read on %s): %d members" % (first["name"], len(out.members)))


def versions_line(verdict):
    """The version verdict's plan line."""
    if verdict["refused"]:
        return "refused: %s" % verdict["message"]
    return "versions: every machine read runs Talos %s or later, none newer than the release set's %s" % (
        version_gate.FLOOR, release.TALOS)


def cluster_facts_result(client, machines, concurrency=fanout.CONCURRENCY):
    """``talos_facts`` over a cluster (``machines``: [{name, node, role}]): every machine read concurrently on the
    client's one loop (at most ``concurrency`` at a time), and the versions judged (version_gate).

    Read-only. A machine that cannot be read, or a refusing version verdict, fails with one line; the error
    carries the facts read so far, the verdict and the plan.
    """
    found = read_cluster(client, machines, concurrency=concurrency)
    read = [facts for unused_m, facts in found.read]
    verdict = version_gate.judge([(facts["name"], facts["version"]) for facts in read])
    plan = found.plan + [versions_line(verdict)]
    result = dict(changed=False, machines=read, members=found.members, versions=verdict, plan=plan)
    if found.warnings:
        result["warnings"] = found.warnings
    problems = [verdict["message"]] if verdict["refused"] else []
    if found.unread:
        problems.append("%d of %d machines could not be read: %s" % (
            len(found.unread), len(machines), "; ".join(found.unread)))
    if problems:
        raise IchorError(" ".join(problems), result=result)
    return result


def run(params, conn, check_mode):
    """The ``talos_facts`` module: one machine (``node``), or every machine of a cluster (``machines``); read-only, so
    check mode reads the same."""
    del check_mode
    if params["machines"] is not None:
        return cluster_facts_result(conn.talos(), params["machines"])
    return machine_facts.facts_result(conn.talos(), params["node"])
