# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One machine's config, the flow of the ``talos_machine_config`` module.

Render the config from the secrets bundle, the cluster spec and the machine spec; read the live config
and check that the bundle is this cluster's; take the explicit contract or probe one; classify the
drift (``drift``); refuse class C, ask consent for class B; ask Talos whether the apply reboots and
refuse a reboot that is not allowed; apply; wait for the machine to come back (``common.poll``) and
read the config back to verify zero drift. A machine in maintenance mode has no live config: its
config goes through the maintenance API, and it is read back once it has rebooted into it.

A task with ``maintenance: true`` is rerun after the machine left maintenance mode, so the machine is
asked first, directly and under the talosconfig (``configured``). One that answers with a config is
configured and takes the drift path (zero drift: nothing to do); only one that refuses the
talosconfig's CA (a maintenance-mode machine's certificate is self-signed) gets the maintenance apply.

Check mode fails where the real run would refuse (class C, class B without consent, a reboot that
is not allowed), with the same message, so ``--check`` never shows green for a run that fails.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.common import poll
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.config import contracts, documents, drift, probing, registry_auth, render, secrets
from ansible_collections.maesh.ichor.plugins.module_utils.config import spec as specs
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors
from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine as talos_machine
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res

REBOOT_SETTLE = 1.0  # seconds between a reboot's apply and the first call to the rebooting machine


def run(params, conn, check_mode, clock=None):
    """The module's result dict (changed, plan, apply_mode, contract, probe, drift, verified, diff).

    ``params``: node, secrets, cluster, machine, maintenance, accept_class_b, allow_reboot, wait,
    wait_timeout; optional consent, how the class B refusal says to give the consent (default
    ``accept_class_b: true``, the module's option; adopt's release names the role's variable ichor_accept_changes).
    ``conn.talos(maintenance=..., dial_only=...)`` gives a Talos client. Every failure (ConfigError, TalosError)
    carries the result so far (plan, drift) as ``result``.
    """
    result = dict(changed=False, plan=[], apply_mode="none")
    try:
        return _run(params, conn, check_mode, result, clock or poll.Clock)
    except IchorError as exc:
        exc.result = result
        raise


def module_run(params, conn, check_mode):
    """The ``talos_machine_config`` module: ``run``, refused first for a machine adopt holds when the module was
    given the cluster's kubeconfig (adopt's own release applies through ``run``)."""
    if conn.has_kube():
        try:
            cluster_record.refuse_held(cluster_record.read(conn.kube()), set([params["node"]]))
        except IchorError as exc:
            exc.result = dict(changed=False, plan=[], apply_mode="none")
            raise
    return run(params, conn, check_mode)


def read_live(client, node):
    """(running Talos version, live documents) of a configured machine."""
    ver = client.run(talos_machine.version(client, node))["tag"]
    item = client.run(talos_machine.get_resource(client, res.MACHINE_CONFIG, node))
    if not item or not item.get("spec"):
        raise ConfigError("%s has no machine config (is it in maintenance mode? then set maintenance: true)" % node)
    try:
        docs = documents.parse(item["spec"])
    except ConfigError as exc:
        raise ConfigError("the live config of %s cannot be read: %s" % (node, exc))
    return ver, docs


def configured(conn, node):
    """Whether ``node`` has a config under the talosconfig's CA (it left maintenance mode).

    The machine is dialled directly, so the answer is its own and not an endpoint's. A TLS refusal means
    maintenance mode (a self-signed certificate) or another CA: False. Anything else (unreachable, a
    refusal of the call, no talosconfig) is raised: a maintenance apply would not do better.
    """
    client = conn.talos(dial_only=node)
    try:
        item = client.run(talos_machine.get_resource(client, res.MACHINE_CONFIG))
    except errors.TalosUnavailable as exc:
        if exc.code == "TLS":
            return False
        raise
    finally:
        client.close()
    return bool(item and item.get("spec"))


def wait_back(conn, node, timeout, clock):
    """(version, live documents) once ``node`` answers with its config again, on a new client each try."""
    def check():
        client = conn.talos()
        try:
            return True, read_live(client, node)
        except (errors.TalosError, ConfigError) as exc:
            return False, exc
        finally:
            client.close()

    back, detail = poll.until(check, timeout, clock=clock)
    if not back:
        raise ConfigError("%s did not come back with its config within %ds (%s)" % (node, timeout, detail))
    return detail


def _specs(params):
    """(bundle, cluster spec, machine spec, the contract given explicitly or None). ``bundle``: a bundle already
    loaded (adopt's release reads it from the cluster), else the file ``secrets``."""
    bundle = secrets.validate(params.get("bundle") or secrets.load(params["secrets"]))
    given = params["cluster"]
    explicit = given.get("versionContract")
    cluster = specs.cluster(dict(given, versionContract=explicit or given.get("talosVersion")))
    return bundle, cluster, specs.machine(params["machine"], cluster), explicit


def _run(params, conn, check_mode, result, clock):
    bundle, cluster, machine, explicit = _specs(params)
    if registry_auth.refs(cluster):
        registry_auth.attach(bundle, conn.kube() if conn.has_kube() else None, cluster)
    node = params["node"]
    plan = result["plan"]
    if params["maintenance"]:
        if not configured(conn, node):
            return _maintenance(params, conn, check_mode, result, clock, bundle, cluster, machine, explicit)
        plan.append("%s: maintenance: true, but the machine is configured (it answers under the talosconfig's CA with "
                    "a config): the drift decides; nothing goes through the maintenance API" % node)
    client = conn.talos()
    ver, live = read_live(client, node)
    other = secrets.same_cluster(bundle, live)
    if other:
        raise ConfigError(other)
    if params.get("uuid"):
        uuid = res.spec_text(client.run(talos_machine.get_resource(client, res.SYSTEM_INFORMATION, node)), "uuid")
        check_uuid(node, uuid, params["uuid"])
        result["uuid"] = uuid
    if explicit:
        contract = contracts.get(explicit).name
        found = drift.drift(render.render(bundle, cluster, machine, contract), live, cluster, contract)
    else:
        contract, probed = probing.probe(bundle, cluster, machine, live, ver)
        found = probed[contract]
        result["probe"] = dict((name, each.counts()) for name, each in probed.items())
        plan.append("%s: Talos %s; contract probed %s: %s" % (node, ver, contract, ", ".join(
            "%s C=%d" % (name, each.counts()["C"]) for name, each in probed.items())))
        tied = probing.ties(contract, probed)
        if len(tied) > 1:
            plan.append("%s: contract tie: its config reads as %s alike; took %s, the highest (set cluster.versionContract "
                        "to choose; a cluster-wide run settles ties for all its machines)" % (node, " and ".join(tied), contract))
    cluster = dict(cluster, versionContract=contract)
    rendered = render.render(bundle, cluster, machine, contract)
    result.update(contract=contract, drift=found.to_dict())
    if found.zero:
        plan.append("%s: zero drift at contract %s; nothing to apply" % (node, contract))
        return result
    result["diff"] = {"before": documents.emit(drift.mask_docs(live)), "after": documents.emit(drift.mask_docs(rendered))}
    plan.extend("%s: %s" % (node, line) for line in found.lines())
    _gates(params, result, found)

    text = render.render_text(bundle, cluster, machine, contract)
    reboot = talos_machine.apply_needs_reboot(client, node, text)
    result.update(apply_mode="reboot" if reboot else "no_reboot")
    if reboot and not params["allow_reboot"]:
        refusal = "%s: the change needs a reboot and allow_reboot is false; nothing applied" % node
        plan.append(refusal)
        raise ConfigError(refusal)
    result.update(changed=True)
    plan.append("%s: apply %s" % (node, "with a reboot" if reboot else "without a reboot"))
    if check_mode:
        return result
    talos_machine.apply_config(client, node, text, reboot=reboot)
    if reboot:
        # the old client's channels end with the reboot: wait on new ones
        client.close()
        if not params["wait"]:
            plan.append("%s: applied; not waiting for it to come back (wait: false), so not read back" % node)
            return result
        clock.sleep(REBOOT_SETTLE)
        ver, live = wait_back(conn, node, params["wait_timeout"], clock)
    else:
        ver, live = read_live(client, node)
    after = drift.drift(rendered, live, cluster, contract)
    result.update(verified=after.zero)
    if not after.zero:
        raise ConfigError("%s: the config read back differs from the render in %d paths" % (node, len(after.differences)))
    plan.append("%s: read back, zero drift" % node)
    return result


def _gates(params, result, found):
    """Refuse class C (it blocks) and class B without consent: nothing applied, in check mode as in a real run."""
    node = params["node"]
    counts = found.counts()
    if found.blocked:
        result["plan"].append("%s: blocked by %d class C path(s); nothing is applied" % (node, counts["C"]))
        raise ConfigError("%s: %d class C path(s) cannot be represented; nothing applied (%s)" % (
            node, counts["C"], "; ".join(group["hint"] for group in found.hints())))
    if found.of_class("B") and not params["accept_class_b"]:
        consent = params.get("consent") or "accept_class_b: true"  # as the caller's user sets it (a role's variable)
        result["plan"].append("%s: class B (Ichor-owned) changes need %s" % (node, consent))
        raise ConfigError("%s: %d class B (Ichor-owned) change(s) need consent (%s); nothing applied" % (
            node, counts["B"], consent))


FOREIGN = ("%s is configured, and not by this cluster (it does not accept this talosconfig's CA, and it refuses the "
           "maintenance API: %s). A configured machine is never reset here: to reuse it, reclaim it with "
           "maesh.ichor.reclaim (it resets it to maintenance mode), then run again")
MOVED = ("%s answers with UUID %s, but the inventory expects %s: another machine holds this address now (a DHCP lease "
         "moved?); nothing applied. Correct the address or the expected UUID")


def check_uuid(node, uuid, expected):
    """Refuse the machine at ``node`` when the inventory expects a UUID and it answers with another."""
    if expected and uuid != expected:
        raise ConfigError(MOVED % (node, uuid or "none", expected))


def maintenance_identity_checked(client, node, expected):
    """(UUID, stage) of the machine answering in maintenance mode at ``node``, its UUID checked against ``expected``
    (the inventory's). A machine that refuses the maintenance API is configured by another cluster: refused. An
    unreachable one (UNAVAILABLE; a closed connection or a TLS refusal is a configured machine) is raised as it is,
    for the caller to say what it stops."""
    try:
        uuid, stage = client.run(talos_machine.maintenance_identity(client))
    except errors.TalosError as exc:
        if exc.code == "UNAVAILABLE":
            raise
        raise ConfigError(FOREIGN % (node, exc))
    check_uuid(node, uuid, expected)
    return uuid, stage


def _maintenance(params, conn, check_mode, result, clock, bundle, cluster, machine, explicit):
    """A machine with no config yet: apply through the maintenance API (it installs and reboots), read back."""
    node = params["node"]
    plan = result["plan"]
    if not explicit:
        raise ConfigError("a machine in maintenance mode has no running config to probe: set cluster.versionContract")
    contract = contracts.get(explicit).name
    rendered = render.render(bundle, cluster, machine, contract)
    text = render.render_text(bundle, cluster, machine, contract)
    result.update(contract=contract, apply_mode="maintenance", changed=True)
    plan.append("%s: maintenance mode; apply the %s config at contract %s (installs and reboots)" % (node, machine["role"], contract))
    result["diff"] = {"before": "", "after": documents.emit(drift.mask_docs(rendered))}
    client = conn.talos(maintenance=True, dial_only=node)
    try:
        result["uuid"] = maintenance_identity_checked(client, node, params.get("uuid"))[0]
        if check_mode:
            return result
        talos_machine.apply_config(client, None, text, reboot=True)
    finally:
        client.close()
    if not params["wait"]:
        plan.append("%s: applied; not waiting for it to reboot into its config (wait: false), so not read back" % node)
        return result
    ver, live = wait_back(conn, node, params["wait_timeout"], clock)
    after = drift.drift(rendered, live, cluster, contract)
    result.update(verified=after.zero, drift=after.to_dict())
    if not after.zero:
        raise ConfigError("%s came back with a config that differs from the render in %d paths" % (node, len(after.differences)))
    plan.append("%s: configured at contract %s (Talos %s), read back with zero drift" % (node, contract, ver))
    return result
