# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: plan
type: aggregate
short_description: Print one consolidated plan at the end of a run
version_added: 0.1.0
description:
  - Gathers the C(plan) lines that maesh.ichor modules return and prints them at the end of the run, machine by
    machine, each machine's lines in the order its tasks ran.
  - An aggregate callback, so it runs beside whatever stdout callback is in use (AWX and ansible-runner force
    their own). Enable it with C(callbacks_enabled = maesh.ichor.plan) in C(ansible.cfg) or
    E(ANSIBLE_CALLBACKS_ENABLED).
  - In check mode (C(--check)) the header says that nothing was written.
requirements:
  - enabled in C(callbacks_enabled)
author:
  - maesh.ichor developers (@maesh-ichor)
"""

from ansible import context
from ansible.plugins.callback import CallbackBase

PLAN_KEY = "plan"


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "maesh.ichor.plan"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._lines = {}

    def _gather(self, result, failed=False):
        lines = result._result.get(PLAN_KEY)  # pylint: disable=protected-access
        if not lines:
            return
        if isinstance(lines, str):
            lines = [lines]
        host = result._host.get_name()  # pylint: disable=protected-access
        bucket = self._lines.setdefault(host, [])
        for line in lines:
            bucket.append(("FAILED: %s" % line) if failed else str(line))

    def v2_runner_on_ok(self, result):
        self._gather(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._gather(result, failed=not ignore_errors)

    def v2_runner_item_on_ok(self, result):
        self._gather(result)

    def v2_runner_item_on_failed(self, result):
        self._gather(result, failed=True)

    def render(self):
        """The consolidated plan text (empty when no module returned plan lines)."""
        if not self._lines:
            return ""
        check = bool(context.CLIARGS.get("check")) if context.CLIARGS else False
        out = ["PLAN (check mode: nothing was written)" if check else "PLAN"]
        for host in sorted(self._lines):
            out.append("%s:" % host)
            out.extend("  - %s" % line for line in self._lines[host])
        return "\n".join(out)

    def v2_playbook_on_stats(self, stats):
        text = self.render()
        if text:
            self._display.display("\n" + text)
