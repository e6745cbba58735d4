# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout's Talos step over the whole set of machines (the ``talos_rollout`` module's flow).

1. Preflight, before any write: every machine answers and runs no older Talos than the cluster record says; etcd has
   every member healthy and a leader; every Node Ready; each machine's installer known (``rollout.installer``); and,
   not in check mode, the installer pulled on every machine still to upgrade (``ImageService.Pull``, bounded by the one
   fan-out limit), so a registry that cannot serve it is found with nothing rebooted.
2. The batches (``rollout.batches``): control planes one at a time with the member that leads etcd last, then the
   workers ``worker_batch`` at a time, the first batch the canary.
3. Each batch: pulled again (the name pinned by digest the installer runs from), installed, a control plane's
   leadership moved away (``EtcdForfeitLeadership``, read back) and etcd judged at the last moment, cordoned and
   drained (v1.13+: what talosctl 1.14's upgrade does on the client side; a v1.12 machine's legacy Upgrade drains
   itself), rebooted, then held to the gates (``rollout.gates``), each with its own timeout, and uncordoned once its
   Node is Ready. The canary's gates must hold for ``canary_soak`` seconds before the next batch.
4. A control plane that fails stops the rollout; workers may fail up to ``max_failed``. The cluster record keeps which
   machines are done (``rollout``), and a rerun skips every machine already at the target.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.maesh.ichor.plugins.module_utils.common import fanout, images, poll, release
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.config import yamlio
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record, drain, lock, nodes
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import batches, gates, installer, plan, talos_step
from ansible_collections.maesh.ichor.plugins.module_utils.rollout.errors import UpgradeFailed
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as tc
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, etcd, machine

# how often a batch's gates are read while it comes back (a Version call per machine away, then cheap reads): every
# POLL seconds per round of the fan-out, so a batch of hundreds does not ask each machine twenty times a second
POLL = 0.05
# how often a canary's gates are read again while it soaks
SOAK_POLL = 1.0


def _modern(version):
    """Whether the machine takes ImageService Pull + LifecycleService Upgrade + Reboot (v1.13+); else legacy Upgrade."""
    return release.minor(version) >= (1, 13)


def _label(m):
    return plan.machine_label(m["name"], m["node"], m["node_name"])


def _names(ms, limit=10):
    names = [m if isinstance(m, str) else m["name"] for m in ms]
    return ", ".join(names[:limit]) + (" and %d more" % (len(names) - limit) if len(names) > limit else "")


class Rollout:
    def __init__(self, params, conn, check_mode, clock=None):
        self.params = params
        self.check_mode = check_mode
        self.clock = clock or poll.Clock
        self.client = conn.talos()
        self.kube = conn.kube() if conn.has_kube() else None
        self.timeouts = dict(gates.DEFAULT_TIMEOUTS, **dict(
            (k, v) for k, v in (params.get("gate_timeouts") or {}).items() if v is not None))
        self.preflight = []  # (check, passed, detail)
        self.failed = {}  # machine name -> its line
        self.done = []
        self.pulled = {}  # machine name -> the name its pull reported (pinned by digest)
        self.audit = []  # what each batch did and each gate found, in order
        self.moves = []  # each move of etcd's leadership
        self.cilium = False  # the Cilium gate applies (a Cilium the collection manages)
        self.target = ""
        self.baseline = []  # the Pods stuck in kube-system before the first batch
        self.stuck_now = []  # ... before the next batch: the baseline, then what the last batch's gate read
        self.lines = []

    # --- reads --------------------------------------------------------------------------------------------------
    def _read(self, machines):
        """Each machine's running Talos, hostname, Node name, machine config and extensions (one bounded fan-out)."""
        by_node = dict((m["node"], m) for m in machines)

        async def one(node):
            facts, (text, items) = await machine.gather(machine.running(self.client, node),
                                                        machine.installer_reads(self.client, node))
            return facts, text, items

        rows, silent = [], []
        for node, answer in sorted(self.client.fan_out(one, list(by_node)).items()):
            m = by_node[node]
            if answer.error is not None:
                silent.append("%s (%s): %s" % (m["name"], node, answer.error))
                continue
            facts, text, items = answer.message
            rows.append(dict(m, version=facts["version"], hostname=facts["hostname"],
                             node_name=m.get("hostname") or facts["node_name"] or facts["hostname"] or m["name"],
                             config=text, extensions=items))
        order = dict((m["node"], i) for i, m in enumerate(machines))
        return sorted(rows, key=lambda r: order[r["node"]]), silent

    def _check(self, name, passed, detail):
        self.preflight.append((name, passed, detail))
        return passed

    def _etcd(self, controlplanes):
        """(passed, detail, name of the control plane whose member leads)."""
        if not controlplanes:
            return True, "no control plane in this run", None
        listed = None
        for m in controlplanes:
            try:
                listed = self.client.call("EtcdMemberList", node=m["node"]).messages[0].members
                break
            except errors.TalosError:
                continue
        if listed is None:
            return False, "no control plane of this run answers for etcd's members", None
        by_host = dict((m["node"], m) for m in controlplanes)
        by_hostname = dict((m["hostname"], m) for m in controlplanes)
        hosts = dict((etcd.member_host(member) or member.hostname, member) for member in listed if not member.is_learner)

        async def status(host):
            reply = await self.client.ainvoke("EtcdStatus", node=host)
            return reply.messages[0].member_status

        answers = self.client.fan_out(status, list(hosts))
        sick, leaders, leader_name = [], set(), None
        for host, member in sorted(hosts.items()):
            answer = answers[host]
            if answer.error is not None or answer.message.errors:
                sick.append(member.hostname or host)
                continue
            leaders.add(answer.message.leader)
        for host, member in hosts.items():
            if member.id in leaders:
                owner = by_host.get(host) or by_hostname.get(member.hostname)
                leader_name = owner["name"] if owner else member.hostname
        if sick:
            return False, "etcd members not healthy: %s (fix them first; the rollout takes a control plane down)" % (
                _names(sick)), None
        if len(leaders) != 1 or 0 in leaders:
            return False, "etcd has no leader every member agrees on", None
        return True, "%d of %d members healthy, %s leads" % (len(hosts), len(hosts), leader_name), leader_name

    def _nodes_ready(self, rows):
        found = dict(((n.get("metadata") or {}).get("name"), n) for n in self.kube.list("v1", "Node"))
        missing = [r for r in rows if r["node_name"] not in found]
        if missing:
            raise UpgradeFailed(nodes.unregistered(*[(r["name"], r["node"], r["node_name"]) for r in missing]),
                                result=self._result([]))
        not_ready = [r["name"] for r in rows if not nodes.ready(found[r["node_name"]])]
        return self._check("Nodes Ready", not not_ready, "every Node Ready" if not not_ready else
                           "Nodes not Ready: %s (the rollout takes a Ready cluster down one batch at a time)"
                           % _names(not_ready))

    def _installers(self, rows, target):
        refused = []
        for r in rows:
            try:
                objects = yamlio.load_all(r["config"]) if r["config"].strip() else []
            except ConfigError:
                objects = []
            try:
                r["choice"] = installer.choose(r["name"], installer.installed(objects, r["extensions"]), target,
                                               self.params.get("image"))
            except installer.Refused as exc:
                refused.append(str(exc))
        self._check("installers known", not refused, "; ".join(refused) if refused else
                    "each machine's installer keeps its system extensions")

    def _pull(self, rows):
        """Pull each machine's installer (v1.13+; a v1.12 machine's legacy Upgrade pulls it itself); True when every
        pull succeeded. Failures go to ``self.failed`` when a batch pulls, to the preflight when ``preflight``."""
        modern = [r for r in rows if _modern(r["version"])]
        by_node = dict((r["node"], r) for r in modern)

        async def one(node):
            r = by_node[node]
            replies = await self.client.ainvoke("ImagePull", talos_step.pull_request(r["choice"].image), node=node,
                                                timeout=self.params["wait_timeout"])
            return talos_step.pulled_name(replies, r["choice"].image)

        cannot = []
        for node, answer in self.client.fan_out(one, list(by_node)).items():
            r = by_node[node]
            if answer.error is not None:
                cannot.append((r, str(answer.error)))
            else:
                self.pulled[r["name"]] = answer.message
        return cannot

    # --- the preflight ------------------------------------------------------------------------------------------
    def _preflight(self, machines, target):
        rows, silent = self._read(machines)
        self._check("machines answer", not silent, "%d machines answer" % len(rows) if not silent else
                    "machines that do not answer: %s" % "; ".join(silent))
        record = cluster_record.read(self.kube) if self.kube is not None else None
        stated = (record.get("talos") if record is not None else None) or None
        older = [r for r in rows if stated and release.judge(r["version"], stated) == "behind"]
        newer = [r for r in rows if release.judge(r["version"], target) == "ahead"]
        self._check("Talos as recorded", not (older or newer), "; ".join(
            ["%s runs Talos %s, older than the %s the cluster record states: a machine rolled back or replaced by "
             "hand; bring it to %s first" % (r["name"], r["version"], stated, stated) for r in older]
            + ["%s runs Talos %s, newer than the target %s: never downgraded" % (r["name"], r["version"], target)
               for r in newer]) or "every machine runs %s or %s" % (stated or "its Talos", target))
        controlplanes = [r for r in rows if r["role"] == "controlplane"]
        passed, detail, leader = self._etcd(controlplanes)
        self._check("etcd healthy with a leader", passed, detail)
        if self.kube is not None:
            self._nodes_ready(rows)
            self.cilium = _cilium_managed(record)
        todo = [r for r in rows if r["version"] != target]
        self._installers(todo, target)
        if self.kube is not None:
            self.baseline = self.stuck_now = gates.stuck_pods(self.kube)
            self._check("kube-system Pods", True, "%d stuck Pending or CrashLooping now (the gate: no more after a "
                        "batch)" % len(self.baseline))
        failed = [c for c in self.preflight if not c[1]]
        pulls = [r for r in todo if _modern(r["version"]) and "choice" in r]
        if not failed and pulls:
            if self.check_mode:
                by_image = {}
                for r in pulls:
                    by_image.setdefault(r["choice"].image, []).append(r)
                self._check("installer pulled", True, "would pull on %d machines before any reboot: %s" % (
                    len(pulls), "; ".join("%s on %s" % (image, _names(ms)) for image, ms in sorted(by_image.items()))))
            else:
                cannot = self._pull(pulls)
                said = "; ".join("%s: %s" % (r["name"], why) for r, why in cannot[:3])
                self._check("installer pulled", not cannot, "pulled on %d machines" % len(pulls) if not cannot else
                            "could not pull the installer on %s: %s" % (_names([r for r, why in cannot]), said))
        return rows, todo, leader

    # --- one batch ----------------------------------------------------------------------------------------------
    def _fail(self, r, gate, detail):
        self.failed[r["name"]] = "%s: %s" % (gate, detail)

    def _install(self, ms, target):
        modern = dict((r["node"], r) for r in ms if _modern(r["version"]))
        for r, why in self._pull(list(modern.values())):
            self._fail(r, "pull", "the installer %s could not be pulled: %s" % (r["choice"].image, why))

        async def one(node):
            r = modern[node]
            return talos_step.installer_outcome(await self.client.ainvoke(
                "LifecycleUpgrade", talos_step.upgrade_request(self.pulled[r["name"]]), node=node,
                timeout=self.params["wait_timeout"]))

        ready = [n for n, r in modern.items() if r["name"] not in self.failed]
        for node, answer in self.client.fan_out(one, ready).items():
            r = modern[node]
            if answer.error is not None:
                self._fail(r, "install", str(answer.error))
            elif answer.message[0] != 0:
                code, output = answer.message
                self._fail(r, "install", talos_step.installer_failed(r["choice"].image, code, output, r["version"]))

    def _quorum_kept(self, r):
        """Before a control plane is touched: etcd keeps its quorum while it is down (another member may be down)."""
        healthy, detail = etcd.health(self.client, r["node"], going_down=True)
        if not healthy:
            self._fail(r, "etcd", "etcd is not healthy (%s); no upgrade was started" % detail)

    def _leadership(self, r):
        """Before a control plane reboots: etcd judged again at the last moment (an install takes minutes), and its
        leadership moved away and read back when its member leads."""
        healthy, detail = etcd.health(self.client, r["node"], going_down=True)
        if not healthy:
            self._fail(r, "etcd", "etcd is no longer healthy (%s); Talos %s is installed but the machine was not "
                       "rebooted and still runs Talos %s; rerun once etcd is healthy" % (detail, self.target,
                                                                                         r["version"]))
            if r.get("cordoned"):
                drain.uncordon(self.kube, r["node_name"])
            return
        status = self.client.call("EtcdStatus", node=r["node"]).messages[0].member_status
        if status.leader != status.member_id or len(etcd.members(self.client, r["node"]) or ()) < 2:
            return  # it does not lead, or it is etcd's only member (nothing to move leadership to)
        moved = etcd.forfeit_leadership(self.client, r["node"])
        now = etcd.leader(self.client, r["node"])
        if not moved or now in (0, status.member_id):
            self._fail(r, "etcd", "its member leads etcd and leadership did not move away (EtcdForfeitLeadership "
                       "answered %r, the leader is now %x); it was not rebooted" % (moved, now))
        else:
            self.moves.append({"from": r["name"], "to": moved})
            self.audit.append("%s: etcd leadership moved to %s" % (r["name"], moved))

    def _drain(self, ms):
        """Cordon and drain the batch's v1.13+ machines (kube given); the ones the operator had cordoned stay so."""
        names = dict((r["node_name"], r) for r in ms if _modern(r["version"]) and r["name"] not in self.failed)
        if self.kube is None or not names:
            return
        for name, r in names.items():
            r["cordoned"] = drain.cordon(self.kube, name)
        run = drain.Drain(self.kube, names)
        if poll.until(lambda: (run.step(), None), self.params["drain_timeout"], 1.0, self.clock)[0]:
            return
        for name, r in names.items():
            blocking = run.blocking(name)
            if blocking:
                self._fail(r, "drain", "Pods did not leave Node %s within %ss: %s; it was not rebooted"
                           % (name, int(self.params["drain_timeout"]), ", ".join(blocking[:5])))
                if r["cordoned"]:
                    drain.uncordon(self.kube, name)

    def _reboot(self, ms):
        by_node = dict((r["node"], r) for r in ms if r["name"] not in self.failed)

        async def one(node):
            r = by_node[node]
            if _modern(r["version"]):
                return await self.client.ainvoke("Reboot", node=node)
            return await self.client.ainvoke("Upgrade", tc.request_type("Upgrade")(image=r["choice"].image), node=node)

        for node, answer in self.client.fan_out(one, list(by_node)).items():
            if answer.error is not None:
                r = by_node[node]
                self._fail(r, "reboot", str(answer.error))
                if r.get("cordoned"):
                    drain.uncordon(self.kube, r["node_name"])
        return [r for r in ms if r["name"] not in self.failed]

    def _gates_of(self, r):
        return [g for g in gates.ORDER if gates.applies(g, r["role"], self.cilium, self.kube is not None)]

    def _await_gates(self, ms):
        """Hold each rebooted machine to its gates in order, each with its own deadline; uncordon once Ready."""
        now = self.clock.time()
        pending = dict((r["name"], {"r": r, "gates": self._gates_of(r), "deadline": now + self.params["wait_timeout"],
                                    "timeout": self.params["wait_timeout"]}) for r in ms)
        while pending:
            # the machines still away are asked for their version at once (a batch may be hundreds of machines)
            away = [state["r"]["node"] for state in pending.values() if state["gates"][0] == "version"]
            running = self.client.fan_out(lambda node: machine.version(self.client, node), away)
            for name, state in list(pending.items()):
                if self._advance(state, running):
                    del pending[name]
            if pending:
                self.clock.sleep(POLL * max(1, -(-len(pending) // fanout.CONCURRENCY)))

    def _advance(self, state, running):
        """Judge one machine's gates in order from its current one, as far as they pass (the next is judged at once:
        a machine back and Ready moves on without another poll); True when it is done, passed or failed."""
        r = state["r"]
        while state["gates"]:
            gate = state["gates"][0]
            if gate == "version":
                answer = running[r["node"]]
                passed = answer.error is None and answer.message["tag"] == self.target
                detail = "it to answer with Talos %s" % self.target
            else:
                passed, detail = gates.judge(gate, self.client, self.kube, r, self.target)
            if not passed:
                if self.clock.time() < state["deadline"]:
                    return False
                self._fail(r, "gate " + gate, "waited %ss for %s" % (int(state["timeout"]), detail))
                return True
            state["gates"].pop(0)
            self.audit.append("%s: gate %s passed" % (r["name"], gate))
            if gate == "node_ready" and r.get("cordoned"):
                drain.uncordon(self.kube, r["node_name"])
            if state["gates"]:
                state["timeout"] = self.timeouts[state["gates"][0]]
                state["deadline"] = self.clock.time() + state["timeout"]
        return True

    def _batch_gate(self, before):
        if self.kube is None:
            return None
        read = {}

        def check():
            read["now"] = gates.stuck_pods(self.kube)
            return gates.as_many_stuck(before, read["now"])

        done, detail = poll.until(check, self.timeouts["pods"], 1.0, self.clock)
        if done:  # what the next batch starts from: read a moment before it, so not read again
            self.stuck_now = read["now"]
        return None if done else "gate pods: waited %ss for %s" % (int(self.timeouts["pods"]), detail)

    def _soak(self, batch):
        """The canary's gates read again for ``canary_soak`` seconds: the first that fails stops the rollout."""
        deadline = self.clock.time() + float(self.params["canary_soak"])
        while self.clock.time() < deadline:
            for r in batch:
                for gate in self._gates_of(r):
                    passed, detail = gates.judge(gate, self.client, self.kube, r, self.target)
                    if not passed:
                        return "%s: gate %s during the canary's soak: %s no longer holds" % (_label(r), gate, detail)
            line = self._batch_gate(self.baseline) if self.kube is not None else None
            if line:
                return line + " (during the canary's soak)"
            self.clock.sleep(min(SOAK_POLL, max(0.0, deadline - self.clock.time())))
        return None

    def _record(self, stopped=None):
        if self.kube is None:
            return
        entry = {"step": "talos", "target": self.target, "done": sorted(self.done),
                 "failed": dict(self.failed), "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        if stopped:
            entry["stopped"] = stopped
        cluster_record.update(self.kube, lambda data: data.update(rollout=entry))

    def _keep_lock(self):
        if self.params.get("lock_holder") and self.kube is not None:
            lock.keep(self.kube, self.params["lock_holder"])

    # --- the whole step -----------------------------------------------------------------------------------------
    def _result(self, lines, changed=False):
        return dict(changed=changed, plan=lines, target=self.target,
                    preflight=[{"check": c, "passed": p, "detail": d} for c, p, d in self.preflight],
                    done=sorted(self.done),
                    failed=[{"machine": name, "why": why} for name, why in sorted(self.failed.items())],
                    leadership=list(self.moves), audit=list(self.audit))

    def run(self):
        named = self.params.get("image")
        try:
            self.target = talos_step.image_version(named or release.installer_image())
            budget = batches.failure_budget(self.params["max_failed"])
        except (images.ImageRefError, batches.BatchError) as exc:
            exc.result = self._result([])
            raise
        machines = self.params["machines"]
        if self.kube is not None:
            cluster_record.refuse_held(cluster_record.read(self.kube), set(m["name"] for m in machines))
        rows, todo, leader = self._preflight(machines, self.target)
        workers = [r for r in todo if r["role"] != "controlplane"]
        try:
            size = batches.batch_size(self.params["worker_batch"], len(workers))
        except batches.BatchError as exc:
            exc.result = self._result([])
            raise
        order = batches.schedule(todo, leader, size, canary=float(self.params["canary_soak"]) > 0)
        lines = ["preflight: %s: %s: %s" % (c, "ok" if p else "FAILED", d) for c, p, d in self.preflight]
        lines += ["order: %s" % line for line in batches.describe(order)]
        lines += [plan.talos_line(r["name"], r["node"], r["version"], self.target, r["choice"].image,
                                  r["role"] == "controlplane", node_name=r["node_name"],
                                  extensions=installer.describe(r["choice"])) for b in order for r in b.machines
                  if "choice" in r]
        lines += ["%s: already at Talos %s, skipped" % (_label(r), self.target) for r in rows
                  if r["version"] == self.target]
        failed = [(c, d) for c, p, d in self.preflight if not p]
        if failed:
            raise UpgradeFailed("preflight failed, nothing was rebooted: %s" % "; ".join(
                "%s: %s" % (c, d) for c, d in failed), result=self._result(lines))
        self.done = [r["name"] for r in rows if r["version"] == self.target]
        if not todo:
            lines.append("every machine runs Talos %s" % self.target)
            return dict(self._result(lines), diff={"before": "", "after": ""})
        self.lines = lines
        result = self._result(lines, changed=True)
        result["diff"] = {"before": "".join("%s: %s\n" % (r["name"], r["version"]) for r in todo),
                          "after": "".join("%s: %s\n" % (r["name"], self.target) for r in todo)}
        if self.check_mode:
            return result
        for index, batch in enumerate(order):
            self._run_batch(index, order, batch, budget)
        self._record()
        result.update(self._result(lines, changed=True))
        if self.failed:
            raise UpgradeFailed("the rollout finished, but workers failed: %d (ichor_upgrade_max_failed allows %d): %s; "
                                "fix them and rerun: it upgrades only them" % (
                                    len(self.failed), budget, "; ".join("%s: %s" % kv for kv in sorted(
                                        self.failed.items()))), result=result)
        return result

    def _run_batch(self, index, order, batch, budget):
        self._keep_lock()
        before = self.stuck_now
        ms = batch.machines
        failed_before = set(self.failed)
        if batch.kind == "controlplane":
            for r in ms:
                self._quorum_kept(r)
        self._install([r for r in ms if r["name"] not in self.failed], self.target)
        self._drain(ms)
        if batch.kind == "controlplane":  # at the last moment before the reboot: an install and a drain take minutes
            for r in ms:
                if r["name"] not in self.failed:
                    self._leadership(r)
        self._await_gates(self._reboot(ms))
        self.done += [r["name"] for r in ms if r["name"] not in self.failed]
        new = [r for r in ms if r["name"] in self.failed and r["name"] not in failed_before]
        where = batch.label
        rest = [m["name"] for b in order[index + 1:] for m in b.machines]
        beyond = "; nothing beyond it was touched (%s)" % _names(rest) if rest else ""
        if batch.kind == "controlplane" and new:
            r = new[0]
            self._stop("%s: %s; the rollout stopped at %s%s; fix it and rerun: the rollout resumes at %s" % (
                _label(r), self.failed[r["name"]], where, beyond, r["name"]))
        if batches.over_budget(list(self.failed), budget):  # only workers are left failed: a control plane stops it
            self._stop("%s; workers failed: %d, ichor_upgrade_max_failed allows %d: the rollout stopped after %s%s; "
                       "fix them and rerun: the rollout resumes with them" % (
                           "; ".join("%s: %s" % (_label(r), self.failed[r["name"]]) for r in new) or
                           "; ".join("%s: %s" % kv for kv in sorted(self.failed.items())),
                           len(self.failed), budget, where, beyond))
        line = self._batch_gate(before)
        if line is None:
            self.audit.append("%s: gate pods passed" % where)
        if line is None and batch.canary:
            line = self._soak([r for r in ms if r["name"] not in self.failed])
            if line is None:
                self.audit.append("%s: the canary held for %ss" % (where, self.params["canary_soak"]))
        if line:
            self._stop("%s: %s; the rollout stopped after it%s; fix it and rerun: the rollout resumes after the "
                       "machines already upgraded" % (where, line, beyond))
        self._record()

    def _stop(self, line):
        self._record(stopped=line)
        raise UpgradeFailed(line, result=self._result(self.lines + [line], changed=bool(self.done)))


def _cilium_managed(record):
    cni = ((record.get("cluster") or {}).get("cni") or {}) if record is not None else {}
    return cni.get("preset") == "cilium"


def run(params, conn, check_mode, clock=None):
    """The Talos step over ``params["machines"]``; the result dict (UpgradeFailed: the line, with its result)."""
    try:
        return Rollout(params, conn, check_mode, clock).run()
    except IchorError as exc:
        if exc.result is None:
            exc.result = dict(changed=False, plan=[])
        raise
