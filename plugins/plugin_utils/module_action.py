# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The action plugin every module of the collection runs as: the module's flow runs in the controller's process.

Ansible loads an action plugin in its main process before it forks the worker that runs the task, so what this
file imports (the collection's code, the Kubernetes client, protobuf) is imported once per ``ansible-playbook``
run; the worker validates the task's options against the module's argument spec (module_utils/ansible_module/
catalog.py), runs the flow with the task's check mode and diff mode, and returns its result and its ``invocation``
with every value of a no_log option masked, as AnsibleModule did. Nothing connects to the host: the flows dial the Talos and Kubernetes
APIs themselves.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.common.parameters import remove_values
from ansible.plugins.action import ActionBase

from ansible_collections.maesh.ichor.plugins.module_utils.ansible_module import catalog, runner, specs
from ansible_collections.maesh.ichor.plugins.module_utils.common import keyfiles, processes

ASYNC = ("%s runs in the controller's own process and returns when it is done: async is not supported; remove "
         "async and poll from the task (each module bounds its own waits with wait_timeout)")


class ModuleAction(ActionBase):
    """The module ``MODULE`` of the catalog, run in the controller's process."""

    MODULE = None
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        if self._task.async_val:
            return dict(failed=True, changed=False, msg=ASYNC % ("maesh.ichor." + self.MODULE))
        result = super(ModuleAction, self).run(tmp, task_vars)
        del tmp  # nothing is sent to the host
        processes.stop_with_playbook()  # a worker whose playbook is gone writes nothing more
        entry = catalog.MODULES[self.MODULE]
        params, no_log, problem = specs.validate(entry.argument_spec(), self._task.args, **entry.constraints)
        if problem:
            result.update(failed=True, changed=False, msg="maesh.ichor.%s: %s" % (self.MODULE, problem))
        else:
            check_mode = bool(self._task.check_mode)
            try:
                result.update(runner.result_of(lambda conn: entry.run(params, conn, check_mode), params,
                                               diff=bool(self._task.diff)))
            finally:
                keyfiles.forget()  # the task's key files: gone with it (in memory they would be with its process)
        # the options as the flow got them, shown from -vvv as a module's are (no_log values masked below)
        result["invocation"] = dict(module_args=params)
        return remove_values(result, no_log)
