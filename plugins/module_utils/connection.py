# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The connection options every module takes (doc fragment ``maesh.ichor.connection``), in one place."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.basic import env_fallback, missing_required_lib

from ansible_collections.maesh.ichor.plugins.module_utils.k8s import client as kube
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as talos_client
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, talosconfig


def connection_argument_spec():
    """Options for the Talos and Kubernetes connections; the credential ones are no_log."""
    return dict(
        talosconfig=dict(type="path", fallback=(env_fallback, ["TALOSCONFIG"])),
        talosconfig_content=dict(type="str", no_log=True),
        context=dict(type="str"),
        endpoint=dict(type="str"),
        kubeconfig=dict(type="path", fallback=(env_fallback, ["KUBECONFIG"])),
        kubeconfig_content=dict(type="str", no_log=True),
        timeout=dict(type="float", default=30.0),
    )


def with_connection(spec):
    """An argument spec with the connection options added."""
    merged = connection_argument_spec()
    merged.update(spec)
    return merged


def fail(module, exc, **result):
    """Fail the module with the error's one line: no traceback, no credential."""
    module.fail_json(msg=errors.redact_text(str(exc)), **result)


def talos_client_for(module, maintenance=False, dial_only=None):
    """A TalosClient from the module's connection options; failures end the module cleanly."""
    if not talos_client.HAS_DEPS:
        module.fail_json(msg=missing_required_lib("grpclib and protobuf"))
    params = module.params
    try:
        context = None
        if not maintenance:
            context = talosconfig.load(path=params.get("talosconfig"), content=params.get("talosconfig_content"),
                                       context=params.get("context"))
        return talos_client.TalosClient(context=context, endpoint=params.get("endpoint"), dial_only=dial_only,
                                        maintenance=maintenance, timeout=params.get("timeout"))
    except errors.TalosError as exc:
        fail(module, exc)


def kube_client_for(module):
    """A KubeClient from the module's kubeconfig options; failures end the module cleanly."""
    if not kube.HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"))
    params = module.params
    try:
        return kube.KubeClient(kubeconfig=params.get("kubeconfig"), kubeconfig_content=params.get("kubeconfig_content"))
    except kube.KubeError as exc:
        fail(module, exc)
