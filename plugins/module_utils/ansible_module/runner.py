# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a module's flow and turn what it returns or raises into the task's result.

A module's action plugin validates the task's options and calls ``result_of(call, params, diff)``, where ``call``
takes the ``Connections`` of the module's options and returns the result dict. ``diff`` is returned only in diff
mode; ``warnings`` become Ansible warnings. An ``IchorError`` (an expected failure: bad input, a refusal, a machine
that did not answer) fails with its one line and the result it carries; any other exception is a bug: it fails with
its type and redacted text, and its redacted traceback for -vvv.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import traceback

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.common.redact import redact_lines, redact_text
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import client as kube_client
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import kubeconfig
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as talos_client
from ansible_collections.maesh.ichor.plugins.module_utils.talos import talosconfig


class Connections:
    """The clients a module's connection options describe; the Kubernetes one made once, all closed at the end."""

    def __init__(self, params):
        self.params = params
        self._opened = []
        self._kube = None

    def talos(self, maintenance=False, dial_only=None):
        """A new TalosClient (the talosconfig is read each time: a machine may have moved to another CA)."""
        if not talos_client.HAS_DEPS:
            raise IchorError(missing_required_lib("protobuf and PyYAML"))
        p = self.params
        context = None
        if not maintenance:
            context = talosconfig.load(path=p.get("talosconfig"), content=p.get("talosconfig_content"),
                                       context=p.get("context"))
        client = talos_client.TalosClient(context=context, endpoint=p.get("endpoint"), dial_only=dial_only,
                                          maintenance=maintenance, timeout=p.get("timeout"))
        self._opened.append(client)
        return client

    def talos_context(self):
        """The talosconfig context the Talos client uses (its credentials stay Secrets)."""
        p = self.params
        return talosconfig.load(path=p.get("talosconfig"), content=p.get("talosconfig_content"),
                                context=p.get("context"))

    def kubeconfig_user(self):
        """The kubeconfig user the Kubernetes client uses (a dict; empty when it names none)."""
        return self._kubeconfig().user

    def kubeconfig_path(self):
        """The kubeconfig file the Kubernetes client reads (what its relative paths are relative to); None for
        content, or several files of KUBECONFIG merged."""
        return self._kubeconfig().path

    def has_kube(self):
        return bool(self.params.get("kubeconfig") or self.params.get("kubeconfig_content"))

    def kube(self):
        """The KubeClient of the kubeconfig options (made once)."""
        if self._kube is None:
            if not kube_client.HAS_KUBERNETES:
                raise IchorError(missing_required_lib("kubernetes"))
            self._kube = kube_client.KubeClient(loaded=self._kubeconfig(), timeout=self.params.get("timeout"))
        return self._kube

    def _kubeconfig(self):
        p = self.params
        return kubeconfig.load(kubeconfig=p.get("kubeconfig"), kubeconfig_content=p.get("kubeconfig_content"),
                               context=p.get("kube_context"))

    def close(self):
        for client in self._opened:
            client.close()
        self._opened = []
        if self._kube is not None:
            self._kube.close()
            self._kube = None


def _shown(result, diff):
    """The result as Ansible shows it: ``diff`` only in diff mode, ``warnings`` a list of lines."""
    result = dict(result)
    if not diff:
        result.pop("diff", None)
    warnings = list(result.pop("warnings", None) or ())
    if warnings:
        result["warnings"] = warnings
    return result


def result_of(call, params, diff, conn=None):
    """``call(conn)`` -> the task's result: the flow's dict, or ``failed`` with one redacted line (an IchorError
    keeps the result it carries; anything else is a bug and keeps its redacted traceback for -vvv)."""
    conn = conn or Connections(params)
    try:
        result = dict(call(conn), failed=False)
    except IchorError as exc:
        result = dict(exc.result or {}, failed=True, msg=redact_text(exc.message))
    except Exception as exc:  # pylint: disable=broad-except
        # a bug, not bad input: keep the traceback for -vvv, through the same redaction as every message
        result = dict(failed=True, msg="unexpected error (a bug; rerun with -vvv for the traceback): %s: %s" % (
            type(exc).__name__, redact_text(exc)), exception=redact_lines(traceback.format_exc()))
    finally:
        conn.close()
    result.setdefault("changed", False)
    return _shown(result, diff)
