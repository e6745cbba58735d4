#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: talos_machine_config
short_description: Render one Talos machine's config, report its drift by class and apply it
version_added: 0.1.0
description:
  - Renders the machine config of O(node) from the secrets bundle O(secrets), the cluster spec O(cluster) and the
    machine spec O(machine), for a version contract from V(v1.12) to V(v1.14), in the form machinery's generator
    writes for that contract.
  - Reads the live config over the Talos API and reports the drift per path in three classes. Class A is
    representable (a spec field or a sysctl/kernel-module patch covers it). Class B is Ichor-owned and exists only
    with C(cni.preset=cilium) (the Cilium inline entry, flannel removal, kube-proxy when C(replaced)); it needs
    O(accept_class_b). Class C is unrepresentable and blocks the machine; nothing is applied, and paths that share
    a hint are reported under it once.
  - Without C(cluster.versionContract) the contract is probed, from the machine's running Talos version down to
    V(v1.12), taking the one with the fewest class C paths (ties go to the highest); every probed contract is
    reported.
  - Applies only when nothing is class C and class B (if any) was consented, in the least disruptive mode that
    covers the change (no reboot when none is needed), then reads the config back and verifies zero drift.
  - With O(maintenance=true) the machine has no config yet; the rendered config is applied through the maintenance
    API (the machine installs and reboots into it) and read back under the bundle's CA.
  - A secrets bundle of another cluster, a corrupt bundle file, a live config that is not YAML and a contract out of
    range each fail with one line and nothing applied.
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.connection
attributes:
  check_mode:
    support: full
    description: Reads the live config and returns the drift and the plan; applies nothing.
  diff_mode:
    support: full
    description: Returns the live and the rendered config, every secret value replaced by C(<redacted>).
options:
  node:
    description:
      - Address of the machine (without port). Required.
    type: str
    required: true
  secrets:
    description:
      - Path of the cluster's secrets bundle (see M(maesh.ichor.talos_secrets)).
    type: path
    required: true
  cluster:
    description:
      - The cluster spec. Keys C(name), C(endpoint), C(kubernetesVersion) (required), C(talosVersion),
        C(versionContract), C(network) (C(dnsDomain), C(podSubnets), C(serviceSubnets)), C(cni) (C(preset) V(cilium)
        or V(unmanaged), C(unmanaged.talosCNI) V(default) or V(none), C(kubeProxy) V(enabled) or V(replaced)),
        C(kubePrism) (C(enabled), C(port)), C(registries) (list of C(host), C(endpoints), C(overridePath),
        C(skipFallback)), C(certSANs), C(sysctls), C(kernelModules), C(inlineManifests).
    type: dict
    required: true
  machine:
    description:
      - The machine spec. Keys C(role) (V(controlplane) or V(worker), required), C(hostname), C(install) (C(disk),
        C(image), C(wipe)).
    type: dict
    required: true
  maintenance:
    description:
      - The machine is in maintenance mode (no config yet); it is reached without the talosconfig's client
        certificate, and its new config is applied with a reboot.
    type: bool
    default: false
  accept_class_b:
    description:
      - Consent to the class B (Ichor-owned) changes listed in the plan.
    type: bool
    default: false
  allow_reboot:
    description:
      - Allow an apply that needs a reboot. When false and the change needs one, nothing is applied.
    type: bool
    default: true
  wait_timeout:
    description:
      - Seconds to wait for the machine to come back after a reboot before reading its config back.
    type: float
    default: 300
"""

EXAMPLES = r"""
- name: Show the drift of a worker (check mode, with the masked diff)
  maesh.ichor.talos_machine_config:
    node: 10.0.0.21
    secrets: "~/.ichor/clusters/prod/secrets.yaml"
    cluster: "{{ ichor_cluster }}"
    machine:
      role: worker
      install: {disk: /dev/nvme0n1, image: "ghcr.io/siderolabs/installer:v1.14.1"}
  check_mode: true
  diff: true

- name: Configure a machine that waits in maintenance mode
  maesh.ichor.talos_machine_config:
    node: 10.0.0.31
    maintenance: true
    secrets: "~/.ichor/clusters/prod/secrets.yaml"
    cluster:
      name: prod
      endpoint: https://api.prod.example.com:6443
      kubernetesVersion: 1.37.0
      talosVersion: v1.14.1
      versionContract: v1.14
      cni: {preset: cilium, kubeProxy: replaced}
    machine: {role: worker, hostname: w-31}
"""

RETURN = r"""
contract:
  description: The version contract rendered (probed unless C(cluster.versionContract) was given).
  returned: success
  type: str
  sample: v1.13
probe:
  description: For each probed contract, the number of differing paths per class.
  returned: when the contract was probed
  type: dict
  sample: {"v1.14": {"A": 0, "B": 0, "C": 41}, "v1.13": {"A": 0, "B": 0, "C": 0}, "v1.12": {"A": 0, "B": 0, "C": 0}}
drift:
  description: The drift of the live config from the render, by class. Secret values are never included.
  returned: success, except on a machine in maintenance mode
  type: dict
  contains:
    zero:
      description: Whether the live config equals the render.
      type: bool
    counts:
      description: Paths per class.
      type: dict
    A:
      description: Class A differences (C(path), C(change), C(rendered), C(live), C(hint)).
      type: list
      elements: dict
    B:
      description: Class B differences.
      type: list
      elements: dict
    C:
      description: Class C differences.
      type: list
      elements: dict
    hints:
      description: Class C paths grouped under their hint (C(hint), C(paths)), each hint once.
      type: list
      elements: dict
apply_mode:
  description: How the config was (or would be) applied (C(no_reboot), C(reboot), C(maintenance)), or C(none).
  returned: success
  type: str
verified:
  description: Whether the config read back after applying has zero drift.
  returned: when applied
  type: bool
plan:
  description: Human-readable lines, gathered by the C(maesh.ichor.plan) callback.
  returned: always
  type: list
  elements: str
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.maesh.ichor.plugins.module_utils.config import contracts, documents, drift, render, secrets
from ansible_collections.maesh.ichor.plugins.module_utils.config import spec as specs
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.connection import fail, talos_client_for, with_connection
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res
from ansible_collections.maesh.ichor.plugins.module_utils.talos.machine import apply_config, apply_needs_reboot, get_resource, version


def read_live(client, node):
    """(running Talos version, live documents) of a configured machine."""
    ver = client.run(version(client, node))["tag"]
    item = client.run(get_resource(client, res.MACHINE_CONFIG, node))
    if not item or not item.get("spec"):
        raise ConfigError("%s has no machine config (is it in maintenance mode? then set maintenance: true)" % node)
    try:
        docs = documents.parse(item["spec"])
    except ConfigError as exc:
        raise ConfigError("the live config of %s cannot be read: %s" % (node, exc))
    return ver, docs


def wait_back(module, node, deadline):
    """A fresh configured client once node answers with its config again, or a failure."""
    last = None
    while time.time() < deadline:
        client = talos_client_for(module)
        try:
            ver, docs = read_live(client, node)
            return client, ver, docs
        except (errors.TalosError, ConfigError) as exc:
            last = exc
            client.close()
        time.sleep(1.0)
    raise ConfigError("%s did not come back with its config within %ds (%s)" % (node, module.params["wait_timeout"], errors.redact_text(last)))


def main():
    module = AnsibleModule(
        argument_spec=with_connection(dict(
            node=dict(type="str", required=True),
            secrets=dict(type="path", required=True),
            cluster=dict(type="dict", required=True),
            machine=dict(type="dict", required=True),
            maintenance=dict(type="bool", default=False),
            accept_class_b=dict(type="bool", default=False),
            allow_reboot=dict(type="bool", default=True),
            wait_timeout=dict(type="float", default=300.0),
        )),
        supports_check_mode=True,
    )
    params = module.params
    node = params["node"]
    plan = []
    result = dict(changed=False, plan=plan, apply_mode="none")
    client = None
    try:
        bundle = secrets.validate(secrets.load(params["secrets"]))
        cluster = specs.cluster(dict(params["cluster"], versionContract=params["cluster"].get("versionContract") or params["cluster"].get("talosVersion")))
        explicit_contract = params["cluster"].get("versionContract")
        machine = specs.machine(params["machine"], cluster)

        if params["maintenance"]:
            if not explicit_contract:
                raise ConfigError("a machine in maintenance mode has no running config to probe: set cluster.versionContract")
            contract = contracts.get(explicit_contract)
            rendered = render.render(bundle, cluster, machine, contract.name)
            text = render.render_text(bundle, cluster, machine, contract.name)
            result.update(contract=contract.name, apply_mode="maintenance", changed=True)
            plan.append("%s: maintenance mode; apply the %s config at contract %s (installs and reboots)" % (node, machine["role"], contract.name))
            if module._diff:
                result["diff"] = {"before": "", "after": documents.emit(drift.mask_docs(rendered))}
            if module.check_mode:
                module.exit_json(**result)
            mclient = talos_client_for(module, maintenance=True, dial_only=node)
            try:
                apply_config(mclient, None, text, reboot=True)
            finally:
                mclient.close()
            client, ver, live = wait_back(module, node, time.time() + params["wait_timeout"])
            after = drift.drift(rendered, live, cluster, contract.name)
            result.update(verified=after.zero, drift=after.to_dict())
            if not after.zero:
                raise ConfigError("%s came back with a config that differs from the render in %d paths" % (node, len(after.differences)))
            plan.append("%s: configured at contract %s (Talos %s), read back with zero drift" % (node, contract.name, ver))
            module.exit_json(**result)

        client = talos_client_for(module)
        ver, live = read_live(client, node)
        other = secrets.same_cluster(bundle, live)
        if other:
            raise ConfigError(other)
        if explicit_contract:
            contract_name = contracts.get(explicit_contract).name
            result_drift = drift.drift(render.render(bundle, cluster, machine, contract_name), live, cluster, contract_name)
        else:
            contract_name, probed = drift.probe(bundle, cluster, machine, live, ver)
            result_drift = probed[contract_name]
            result["probe"] = dict((name, found.counts()) for name, found in probed.items())
            plan.append("%s: Talos %s; contract probed %s: %s" % (node, ver, contract_name, ", ".join(
                "%s C=%d" % (name, found.counts()["C"]) for name, found in probed.items())))
        cluster = dict(cluster, versionContract=contract_name)
        rendered = render.render(bundle, cluster, machine, contract_name)
        result.update(contract=contract_name, drift=result_drift.to_dict())
        if module._diff and not result_drift.zero:
            result["diff"] = {"before": documents.emit(drift.mask_docs(live)), "after": documents.emit(drift.mask_docs(rendered))}
        if result_drift.zero:
            plan.append("%s: zero drift at contract %s; nothing to apply" % (node, contract_name))
            module.exit_json(**result)
        plan.extend("%s: %s" % (node, line) for line in result_drift.lines())
        if result_drift.blocked:
            plan.append("%s: blocked by %d class C path(s); nothing is applied" % (node, result_drift.counts()["C"]))
            if module.check_mode:
                module.exit_json(**result)
            module.fail_json(msg="%s: %d class C path(s) cannot be represented; nothing applied (%s)" % (
                node, result_drift.counts()["C"], "; ".join(group["hint"] for group in result_drift.hints())), **result)
        if result_drift.of_class("B") and not params["accept_class_b"]:
            plan.append("%s: class B (Ichor-owned) changes need accept_class_b: true" % node)
            if module.check_mode:
                result["changed"] = True
                module.exit_json(**result)
            module.fail_json(msg="%s: %d class B (Ichor-owned) change(s) need consent (accept_class_b: true); nothing applied" % (
                node, result_drift.counts()["B"]), **result)

        text = render.render_text(bundle, cluster, machine, contract_name)
        needs_reboot = apply_needs_reboot(client, node, text)
        result.update(changed=True, apply_mode="reboot" if needs_reboot else "no_reboot")
        if needs_reboot and not params["allow_reboot"]:
            plan.append("%s: the change needs a reboot and allow_reboot is false; nothing applied" % node)
            if module.check_mode:
                module.exit_json(**result)
            module.fail_json(msg="%s: the change needs a reboot and allow_reboot is false; nothing applied" % node, **result)
        plan.append("%s: apply %s" % (node, "with a reboot" if needs_reboot else "without a reboot"))
        if module.check_mode:
            module.exit_json(**result)
        apply_config(client, node, text, reboot=needs_reboot)
        if needs_reboot:
            client.close()
            time.sleep(1.0)
            client, ver, live = wait_back(module, node, time.time() + params["wait_timeout"])
        else:
            ver, live = read_live(client, node)
        after = drift.drift(rendered, live, cluster, contract_name)
        result.update(verified=after.zero)
        if not after.zero:
            raise ConfigError("%s: the config read back differs from the render in %d paths" % (node, len(after.differences)))
        plan.append("%s: read back, zero drift" % node)
    except ConfigError as exc:
        fail(module, exc, **result)
    except errors.TalosError as exc:
        fail(module, exc, **result)
    finally:
        if client is not None:
            client.close()
    module.exit_json(**result)


if __name__ == "__main__":
    main()
