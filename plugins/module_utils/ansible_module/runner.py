# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a module's backend and turn what it returns or raises into the module's result.

A module's ``main()`` builds its argument spec and calls ``run(module, call)``, where ``call`` takes
the ``Connections`` of the module's options and returns the result dict. ``diff`` is returned only in
diff mode; ``warnings`` become Ansible warnings. An ``IchorError`` (an expected failure: bad input, a
refusal, a machine that did not answer) fails with its one line and the result it carries; any other
exception is a bug: it fails with its type and redacted text, and its redacted traceback for -vvv.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import traceback

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.common.redact import redact_lines, redact_text
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as talos_client
from ansible_collections.maesh.ichor.plugins.module_utils.talos import talosconfig


class Connections:
    """The clients a module's connection options describe; the Kubernetes one made once, all closed at the end."""

    def __init__(self, params):
        self.params = params
        self._opened = []
        self._kube = None
        self._reader = None

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

    def has_kube(self):
        return bool(self.params.get("kubeconfig") or self.params.get("kubeconfig_content"))

    def kube(self):
        """The KubeClient of the kubeconfig options (made once)."""
        if self._kube is None:
            # imported here, not at the top: the kubernetes package costs a Talos-only module about a third of its
            # start-up (tests/unit/test_import_cost.py keeps it out of theirs)
            from ansible_collections.maesh.ichor.plugins.module_utils.k8s import client as kube_client
            if not kube_client.HAS_KUBERNETES:
                raise IchorError(missing_required_lib("kubernetes"))
            self._kube = kube_client.KubeClient(loaded=self._kubeconfig(), timeout=self.params.get("timeout"))
        return self._kube

    def kube_reader(self):
        """What reads a Node or the cluster record: a KubeReader when it speaks all the kubeconfig asks for (a module
        that runs once per machine then never imports the kubernetes package), else the KubeClient."""
        if self._kube is None and self._reader is None:
            from ansible_collections.maesh.ichor.plugins.module_utils.k8s import reader
            config = self._kubeconfig()
            if reader.covers(config):
                self._reader = reader.KubeReader(config, timeout=self.params.get("timeout"))
        return self._reader or self.kube()

    def _kubeconfig(self):
        from ansible_collections.maesh.ichor.plugins.module_utils.k8s import kubeconfig
        p = self.params
        return kubeconfig.load(kubeconfig=p.get("kubeconfig"), kubeconfig_content=p.get("kubeconfig_content"),
                               context=p.get("kube_context"))

    def close(self):
        for client in self._opened:
            client.close()
        self._opened = []
        if self._reader is not None:
            self._reader.close()
            self._reader = None


def _shown(module, result):
    result = dict(result)
    if not module._diff:  # pylint: disable=protected-access
        result.pop("diff", None)
    for warning in result.pop("warnings", None) or ():
        module.warn(warning)
    return result


def fail(module, error, **result):
    """Fail with the error's one line (redacted) and the result so far."""
    module.fail_json(msg=redact_text(error), **_shown(module, result))


def run(module, call, conn=None):
    """``call(conn)`` -> result dict; exit or fail the module with it."""
    conn = conn or Connections(module.params)
    try:
        result = call(conn)
    except IchorError as exc:
        fail(module, exc.message, **(exc.result or {}))
    except Exception as exc:  # pylint: disable=broad-except
        # a bug, not bad input: keep the traceback for -vvv, through the same redaction as every message
        module.fail_json(msg="unexpected error (a bug; rerun with -vvv for the traceback): %s: %s" % (
            type(exc).__name__, redact_text(exc)), exception=redact_lines(traceback.format_exc()))
    finally:
        conn.close()
    module.exit_json(**_shown(module, result))
