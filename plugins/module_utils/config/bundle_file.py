# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The secrets bundle file, the flow of the ``talos_secrets`` module: keep a valid file (mode 0600),
else generate a new bundle or recover it from a control plane's config (read-only), and write it 0600.
A file that is not a valid bundle is never overwritten. Only the Talos CA's fingerprint is returned."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat

from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.config import contracts, documents, secrets
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res

MODE = 0o600


def run(params, conn, check_mode):
    """The module's result dict (changed, path, action, fingerprint, plan).

    ``params``: path, source (generate or recover), node (with recover), version_contract. A failure
    (ConfigError, TalosError) carries the path and the plan so far as ``result``.
    """
    path = params["path"]
    result = dict(changed=False, path=path, plan=[])
    try:
        try:
            return _run(params, conn, check_mode, result)
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
        return result
    if params["source"] == "recover":
        bundle = secrets.validate(recover(conn, params["node"]), contract)
        action, what = "recovered", "recover the secrets bundle from %s's config (read-only)" % params["node"]
    else:
        bundle = secrets.validate(secrets.generate(), contract)
        action, what = "generated", "generate a new secrets bundle"
    result.update(changed=True, action=action, fingerprint=bundle.fingerprint())
    if check_mode:
        plan.append("would %s and write it to %s (mode 0600)" % (what, path))
        return result
    secrets.write(bundle, path)
    plan.append("%s: %s (CA fingerprint %s), written with mode 0600; back it up" % (path, action, bundle.fingerprint()))
    return result
