# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The live world of a reclaim (``LiveIO``) and the ``talos_reset`` module's entry (``reclaim``).

The machine is dialled with a ``dial_only`` client: the foreign credential for the inspection and the
reset, an insecure client for maintenance mode, the managed cluster's credential to recognise one of
its own machines. The managed cluster is read through the module's connections (``conn.talos()``,
``conn.kube()``): its machines' UUIDs and its record, where the reclaimed machine is registered.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.maesh.ichor.plugins.module_utils.common import retry
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.errors import Conflict, KubeError
from ansible_collections.maesh.ichor.plugins.module_utils.machine import facts as machine_facts
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim import flow, inspection
from ansible_collections.maesh.ichor.plugins.module_utils.common.who import local_user
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim.errors import ReclaimError
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim.policy import MANAGED_REQUIRED
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim.request import reset_request
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as talos_client
from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res
from ansible_collections.maesh.ichor.plugins.module_utils.talos import talosconfig

# a probe of the machine (maintenance mode, the managed credential) waits at most this long
PROBE_TIMEOUT = 5.0
RECORD_ATTEMPTS = 3


def options(params):
    """The module's options as the flow's Options."""
    return flow.Options(params["node"], confirm_uuid=params.get("confirm_uuid"), force=params.get("force"),
                        confirm_cluster=params.get("confirm_cluster"),
                        force_ungraceful=params.get("force_ungraceful"), wait=params.get("wait"),
                        wait_timeout=params.get("wait_timeout"), cluster_name=params.get("cluster_name"),
                        user=params.get("requested_by") or local_user())


def reclaim(params, conn, check_mode, io=None, clock=time.time, wait_clock=None):
    """The ``talos_reset`` module: the reclaim of the machine ``params["node"]``; the result dict (with ``diff``).

    Refused before anything else without the managed cluster's talosconfig and kubeconfig: the managed
    cluster's talosconfig has no TALOSCONFIG fallback (that names the foreign one), so without it there
    is nothing to check the machine against.
    """
    if not (params.get("talosconfig") or params.get("talosconfig_content")) or not conn.has_kube():
        raise ReclaimError(MANAGED_REQUIRED, result=flow.empty_result())
    if io is None:
        timeout = params.get("timeout", 30.0)
        io = LiveIO(conn, str(params["node"]).strip(),
                    foreign=lambda: inspection.load_foreign(params.get("foreign_talosconfig"),
                                                            params.get("foreign_talosconfig_content"),
                                                            params.get("foreign_context")),
                    managed_context=lambda: talosconfig.load(path=params.get("talosconfig"),
                                                             content=params.get("talosconfig_content"),
                                                             context=params.get("context")),
                    timeout=timeout, probe_timeout=min(PROBE_TIMEOUT, timeout), force=params.get("force"))
    try:
        result = flow.run(options(params), io, check_mode=check_mode, clock=clock, wait_clock=wait_clock)
    except ReclaimError as exc:
        exc.result = flow.empty_result() if exc.result is None else exc.result
        exc.result["diff"] = flow.diff(exc.result)
        raise
    finally:
        io.close()
    result["diff"] = flow.diff(result)
    return result


class LiveIO:
    """The real adapters (see ``flow.run`` for what each does).

    ``foreign`` and ``managed_context`` are callables, so that a bad credential is a failure of the
    run (with its audit lines), not of its setup: ``foreign()`` -> the foreign Context,
    ``managed_context()`` -> the managed cluster's Context (for a probe of the machine with it).
    ``force`` lets the inspection go on when the machine lists more control planes than it probes.
    """

    def __init__(self, conn, node, foreign, managed_context, timeout=30.0, probe_timeout=PROBE_TIMEOUT, force=False):
        self.conn = conn
        self.node = node
        self.foreign = foreign
        self.managed_context = managed_context
        self.timeout = timeout
        self.probe_timeout = probe_timeout
        self.force = bool(force)
        self._client = None
        self._managed = None

    def _foreign(self):
        if self._client is None:
            self._client = talos_client.TalosClient(context=self.foreign(), dial_only=self.node, timeout=self.timeout)
        return self._client

    def close(self):
        """Drop the foreign client (the managed cluster's are closed with the module's connections)."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def _clients(self):
        """The managed cluster's Talos client (made once) and Kubernetes client."""
        if self._managed is None:
            talos = self.conn.talos()
            try:
                kube = self.conn.kube()
            except KubeError as exc:
                raise ReclaimError("cannot use the managed cluster's kubeconfig: %s; nothing was sent" % exc)
            self._managed = talos, kube
        return self._managed

    def managed(self):
        client, kube = self._clients()
        facts = client.run(machine_facts.machine_facts(client))
        addresses = [m["addresses"][0] for m in facts["members"] if m.get("addresses")]
        uuids = set([facts["uuid"]]) if facts["uuid"] else set()
        found = client.fan_out(lambda n: machine.get_resource(client, res.SYSTEM_INFORMATION, n), addresses)
        for item in found.values():
            if item.error is None and item.message:
                uuid = res.spec_text(item.message, "uuid")
                if uuid:
                    uuids.add(uuid)
        try:
            record = cluster_record.read(kube)
        except (KubeError, cluster_record.RecordError) as exc:
            raise ReclaimError("cannot read the managed cluster's record: %s; nothing was sent" % exc)
        record_cluster = record.get("cluster") or {}
        return {"name": facts["cluster"]["name"], "id": facts["cluster"]["id"],
                "record_id": record_cluster.get("id") if isinstance(record_cluster, dict) else None,
                "uuids": sorted(uuids), "machines": list(record.get("machines") or [])}

    def inspect(self):
        client = self._foreign()
        return client.run(inspection.inspect_configured(client, self.node, force=self.force))

    def maintenance(self):
        # a client per probe, closed at once: the wait probes every half second for minutes
        with talos_client.TalosClient(dial_only=self.node, maintenance=True, timeout=self.probe_timeout) as client:
            return client.run(machine.maintenance_identity(client))

    def managed_identity(self):
        """The UUID of the machine when it takes the managed cluster's own credential."""
        with talos_client.TalosClient(context=self.managed_context(), dial_only=self.node,
                                      timeout=self.probe_timeout) as client:
            return res.spec_text(client.run(machine.get_resource(client, res.SYSTEM_INFORMATION)), "uuid")

    def send_reset(self, graceful):
        client = self._foreign()
        try:
            client.call("Reset", reset_request(talos_client.request_type("Reset"), graceful))
        finally:
            # the foreign credential is not needed any more, whatever the answer
            self.close()

    def probe(self):
        return self.maintenance()

    def register(self, uuid, node, at):
        kube = self._clients()[1]
        try:
            return retry.attempt(lambda: cluster_record.update(kube, lambda data: flow.add_pending(data, uuid, node, at))[2],
                                 RECORD_ATTEMPTS, Conflict)[0]
        except retry.Exhausted as exc:
            raise exc.last
