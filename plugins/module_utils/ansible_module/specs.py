# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Argument specs, each option defined once for the whole collection.

Connection options come in two concerns, each with its doc fragment: Talos
(``maesh.ichor.talos``: talosconfig, talosconfig_content, context, endpoint, timeout) and Kubernetes
(``maesh.ichor.kubernetes``: kubeconfig, kubeconfig_content, kube_context, timeout). A module takes
only the ones it uses. Waiting is ``wait`` (bool) and ``wait_timeout`` (seconds); a machine's
address is ``node``; ``cluster`` is the cluster spec and ``cluster_name`` its name.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.basic import env_fallback

TIMEOUT = dict(type="float", default=30.0)


def talos_connection():
    """The Talos API connection (doc fragment maesh.ichor.talos); the content is no_log."""
    return dict(
        talosconfig=dict(type="path", fallback=(env_fallback, ["TALOSCONFIG"])),
        talosconfig_content=dict(type="str", no_log=True),
        context=dict(type="str"),
        endpoint=dict(type="str"),
        timeout=dict(TIMEOUT),
    )


def kube_connection():
    """The Kubernetes API connection (doc fragment maesh.ichor.kubernetes); the content is no_log."""
    return dict(
        kubeconfig=dict(type="path", fallback=(env_fallback, ["KUBECONFIG"])),
        kubeconfig_content=dict(type="str", no_log=True),
        kube_context=dict(type="str"),
        timeout=dict(TIMEOUT),
    )


def spec(options, talos=False, kube=False):
    """``options`` with the connection options of the APIs the module uses."""
    merged = {}
    if talos:
        merged.update(talos_connection())
    if kube:
        merged.update(kube_connection())
    merged.update(options)
    return merged


def wait(timeout):
    """``wait`` (whether to wait) and ``wait_timeout`` (how long, seconds; doc fragment maesh.ichor.wait)."""
    return dict(wait=dict(type="bool", default=True), wait_timeout=dict(type="float", default=float(timeout)))


def machines():
    """The rollout's machines (doc fragment maesh.ichor.rollout), validated by their suboptions."""
    return dict(type="list", elements="dict", required=True, options=dict(
        name=dict(type="str", required=True),
        node=dict(type="str", required=True),
        role=dict(type="str", required=True, choices=["controlplane", "worker"]),
    ))


def rollout(**extra):
    """The options of the rollout's modules: machines, cluster (spec), secrets, both connections."""
    options = dict(machines=machines(), cluster=dict(type="dict"), secrets=dict(type="path"))
    options.update(extra)
    return spec(options, talos=True, kube=True)
