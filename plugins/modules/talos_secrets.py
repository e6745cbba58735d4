#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: talos_secrets
short_description: Generate or recover a Talos cluster's secrets bundle and keep it in a 0600 file
version_added: 0.1.0
description:
  - Makes sure O(path) holds a valid secrets bundle (what C(talosctl gen secrets) writes) with mode 0600.
  - With O(source=generate) a new bundle is made (new CAs and keys, cluster ID and secret, bootstrap token,
    secretbox secret, trustd token), for a cluster that does not exist yet.
  - With O(source=recover) the bundle is rebuilt from the machine config of the control plane O(node), read
    over the Talos API (read-only on the node), as machinery's C(NewBundleFromConfig) does.
  - An existing valid file is kept as it is (its mode is set to 0600 if it was not). An existing file that is not
    a valid bundle is never overwritten; the module fails and writes nothing.
  - The bundle is never printed, returned or logged; only a fingerprint of the Talos CA certificate is returned.
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.connection
attributes:
  check_mode:
    support: full
    description: Says what it would do (keep, generate or recover, and write); writes nothing and, for
      O(source=recover), still reads the control plane's config to check that recovery would succeed.
  diff_mode:
    support: none
    description: The file holds secrets; no diff is shown.
options:
  path:
    description:
      - The bundle file. Its directory is created with mode 0700 when missing.
    type: path
    required: true
  source:
    description:
      - Where a missing bundle comes from.
    type: str
    choices: [generate, recover]
    default: generate
  node:
    description:
      - The control plane to recover the bundle from (required with O(source=recover)). Only a control plane's
        config holds the whole bundle.
    type: str
  version_contract:
    description:
      - The version contract (V(v1.12), V(v1.13) or V(v1.14)) the bundle is validated against.
    type: str
"""

EXAMPLES = r"""
- name: Generate the bundle of a new cluster
  maesh.ichor.talos_secrets:
    path: "~/.ichor/clusters/prod/secrets.yaml"

- name: Recover the bundle of a running cluster from one control plane (read-only on the node)
  maesh.ichor.talos_secrets:
    path: "~/.ichor/clusters/prod/secrets.yaml"
    source: recover
    node: 10.0.0.11
    talosconfig: "{{ ichor_talosconfig }}"
    version_contract: v1.13
"""

RETURN = r"""
path:
  description: The bundle file.
  returned: always
  type: str
action:
  description: C(kept), C(generated) or C(recovered) (in check mode, what would be done).
  returned: success
  type: str
  sample: recovered
fingerprint:
  description: The first 16 hex digits of the SHA-256 of the Talos CA certificate (not a secret); the same for
    every bundle of one cluster.
  returned: success
  type: str
plan:
  description: Human-readable lines about what was or would be done, gathered by the C(maesh.ichor.plan) callback.
  returned: always
  type: list
  elements: str
"""

import os
import stat

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.maesh.ichor.plugins.module_utils.config import contracts, documents, secrets
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.connection import fail, talos_client_for, with_connection
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res
from ansible_collections.maesh.ichor.plugins.module_utils.talos.machine import get_resource


def recover(module, node):
    """The bundle from the control plane's live config (read-only)."""
    client = talos_client_for(module)
    try:
        item = client.run(get_resource(client, res.MACHINE_CONFIG, node))
    except errors.TalosError as exc:
        fail(module, exc, plan=[], path=module.params["path"])
    finally:
        client.close()
    if not item or not item.get("spec"):
        module.fail_json(msg="%s has no machine config to recover the secrets bundle from" % node, plan=[], path=module.params["path"])
    return secrets.from_config(documents.parse(item["spec"]))


def main():
    module = AnsibleModule(
        argument_spec=with_connection(dict(
            path=dict(type="path", required=True),
            source=dict(type="str", choices=["generate", "recover"], default="generate"),
            node=dict(type="str"),
            version_contract=dict(type="str"),
        )),
        required_if=[("source", "recover", ["node"])],
        supports_check_mode=True,
    )
    params = module.params
    path = params["path"]
    result = dict(changed=False, path=path, plan=[])
    try:
        contract = contracts.get(params["version_contract"]) if params["version_contract"] else None
        if os.path.exists(path):
            bundle = secrets.validate(secrets.load(path), contract)
            result.update(action="kept", fingerprint=bundle.fingerprint())
            mode = stat.S_IMODE(os.stat(path).st_mode)
            if mode != 0o600:
                result["changed"] = True
                result["plan"].append("%s: set mode 0600 (was %04o)" % (path, mode))
                if not module.check_mode:
                    os.chmod(path, 0o600)
            result["plan"].insert(0, "%s: a valid secrets bundle exists (CA fingerprint %s); kept" % (path, bundle.fingerprint()))
            module.exit_json(**result)
        if params["source"] == "recover":
            bundle = secrets.validate(recover(module, params["node"]), contract)
            action, what = "recovered", "recover the secrets bundle from %s's config (read-only)" % params["node"]
        else:
            bundle = secrets.validate(secrets.generate(), contract)
            action, what = "generated", "generate a new secrets bundle"
        result.update(changed=True, action=action, fingerprint=bundle.fingerprint())
        if module.check_mode:
            result["plan"].append("would %s and write it to %s (mode 0600)" % (what, path))
            module.exit_json(**result)
        secrets.write(bundle, path)
        result["plan"].append("%s: %s (CA fingerprint %s), written with mode 0600; back it up" % (path, action, bundle.fingerprint()))
    except ConfigError as exc:
        fail(module, exc, plan=result["plan"], path=path)
    except (IOError, OSError) as exc:
        module.fail_json(msg="cannot write the secrets bundle %s: %s" % (path, exc.strerror or exc), plan=result["plan"], path=path)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
