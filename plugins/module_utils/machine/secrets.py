# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The secrets bundle file, the flow of the ``talos_secrets`` module: keep a valid file (mode 0600),
else generate a new bundle or recover it from a control plane's config (read-only), and write it 0600.
A file that is not a valid bundle is never overwritten. Only the Talos CA's fingerprint is returned."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import os
import stat

from ansible_collections.maesh.ichor.plugins.module_utils.common import files
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.config import contracts, documents, secrets
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine, talosconfig
from ansible_collections.maesh.ichor.plugins.module_utils.talos.errors import TalosConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res

MODE = 0o600


def run(params, conn, check_mode):
    """The module's result dict (changed, path, action, fingerprint, plan; admin_talosconfig).

    ``params``: path, source (generate or recover), node (with recover), version_contract; admin_talosconfig,
    admin_talosconfig_context, admin_talosconfig_endpoints (the operator's talosconfig, minted from the bundle). A failure
    (ConfigError, TalosError) carries the path and the plan so far as ``result``.
    """
    path = params["path"]
    result = dict(changed=False, path=path, plan=[])
    try:
        try:
            bundle = _run(params, conn, check_mode, result)
            if params.get("admin_talosconfig"):
                write_talosconfig(params, bundle, check_mode, result)
            return result
        except (IOError, OSError) as exc:
            raise ConfigError("cannot write the secrets bundle %s: %s" % (path, exc.strerror or exc))
    except IchorError as exc:
        exc.result = dict(plan=result["plan"], path=path)
        raise


def recover(conn, node):
    """The bundle from the control plane's live config (read-only)."""
    client = conn.talos()
    item = client.run(machine.get_resource(client, res.MACHINE_CONFIG, node))
    if not item or not item.get("spec"):
        raise ConfigError("%s has no machine config to recover the secrets bundle from" % node)
    return secrets.from_config(documents.parse(item["spec"]))


def _run(params, conn, check_mode, result):
    """Keep, generate or recover the bundle (plan lines and changed in ``result``); returns it."""
    path = params["path"]
    plan = result["plan"]
    contract = contracts.get(params["version_contract"]) if params["version_contract"] else None
    if os.path.exists(path):
        bundle = secrets.validate(secrets.load(path), contract)
        result.update(action="kept", fingerprint=bundle.fingerprint())
        plan.append("%s: a valid secrets bundle exists (CA fingerprint %s); kept" % (path, bundle.fingerprint()))
        mode = stat.S_IMODE(os.stat(path).st_mode)
        if mode != MODE:
            result["changed"] = True
            plan.append("%s: set mode 0600 (was %04o)" % (path, mode))
            if not check_mode:
                os.chmod(path, MODE)
        return bundle
    if params["source"] == "recover":
        bundle = secrets.validate(recover(conn, params["node"]), contract)
        action, what = "recovered", "recover the secrets bundle from %s's config (read-only)" % params["node"]
    else:
        bundle = secrets.validate(secrets.generate(), contract)
        action, what = "generated", "generate a new secrets bundle"
    result.update(changed=True, action=action, fingerprint=bundle.fingerprint())
    if check_mode:
        plan.append("would %s and write it to %s (mode 0600)" % (what, path))
        return bundle
    secrets.write(bundle, path)
    plan.append("%s: %s (CA fingerprint %s), written with mode 0600; back it up" % (path, action, bundle.fingerprint()))
    return bundle


# -- the operator's talosconfig, minted from the bundle ----------------------------------------------

RENEW_BEFORE = 30 * 24 * 3600  # a certificate that ends within 30 days is replaced


def talosconfig_state(path, bundle, context, endpoints, now):
    """None when ``path`` holds a usable talosconfig of this cluster for ``context`` (the bundle's Talos CA, a client
    certificate it signed that is valid for 30 days more, the endpoints asked for); else why it is (re)written.
    A file that is not this cluster's talosconfig is refused: overwriting it could lose another root credential."""
    if not os.path.exists(path):
        return "missing"
    try:
        found = talosconfig.load(path, context=context)
    except TalosConfigError as exc:
        raise ConfigError("%s exists and is not a talosconfig with context %s (%s): it is not overwritten; name "
                          "another path or move it away" % (path, context, exc))
    ca = found.credentials.ca.reveal() if found.credentials.ca is not None else b""
    if ca.decode("ascii", "replace").strip() != (bundle.crt("os") or "").strip():
        raise ConfigError("%s holds a talosconfig of another cluster (its CA is not this bundle's Talos CA): it is "
                          "not overwritten; name another path or move it away" % path)
    crt = found.credentials.crt.reveal() if found.credentials.crt is not None else b""
    left = secrets.client_cert_seconds_left(bundle, crt, now)
    if left is None:
        return "its client certificate is not signed by this cluster's Talos CA"
    if left < RENEW_BEFORE:
        return "its client certificate ends in %d days" % max(0, left // 86400)
    if list(found.endpoints) != list(endpoints):
        return "its endpoints are %s, not %s" % (", ".join(found.endpoints) or "none", ", ".join(endpoints))
    return None


def write_talosconfig(params, bundle, check_mode, result):
    """Keep or (re)write the talosconfig ``params["admin_talosconfig"]`` (0600), plan lines in ``result``."""
    path, context = params["admin_talosconfig"], params["admin_talosconfig_context"]
    endpoints = params.get("admin_talosconfig_endpoints") or []
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    why = "missing" if bundle is None else talosconfig_state(path, bundle, context, endpoints, now)
    result["admin_talosconfig"] = path
    if why is None:
        result["plan"].append("%s: a talosconfig of this cluster (context %s) exists; kept" % (path, context))
        return
    result["changed"] = True
    if check_mode or bundle is None:
        result["plan"].append("would write %s: an os:admin talosconfig for context %s (%s), mode 0600" % (path, context, why))
        return
    files.write_private(path, secrets.admin_talosconfig(bundle, context, endpoints, now=now).encode("utf-8"))
    result["plan"].append("%s: an os:admin talosconfig for context %s written (%s), mode 0600; it is a root "
                          "credential" % (path, context, why))
