# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: missing_files
short_description: The connection files a play names that are not there, each as the line that refuses the run
version_added: 0.1.0
description:
  - Reads the variables its terms name (C(ichor_talosconfig), C(ichor_kubeconfig), C(ichor_secrets), ...) and returns
    one line for each that is set and names no file - given empty, or naming nothing that exists once C(~) and
    C($VARS) are expanded (as the modules' path options expand them), or a directory.
  - A role asserts that the list is empty before anything is read, so that a file the play names and that is missing
    is refused, never replaced by what the environment names (E(KUBECONFIG), C(~/.kube/config), E(TALOSCONFIG)). A
    variable that is not set is not checked; the modules then fall back to the environment, as C(kubectl) and
    C(talosctl) do.
author:
  - maesh.ichor developers (@maesh-ichor)
options:
  _terms:
    description: The names of the variables that hold paths.
    required: true
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Refuse a connection file that is named but missing
  ansible.builtin.assert:
    that: query('maesh.ichor.missing_files', 'ichor_talosconfig', 'ichor_kubeconfig') | length == 0
    fail_msg: "{{ query('maesh.ichor.missing_files', 'ichor_talosconfig', 'ichor_kubeconfig') | join('; ') }}"
    quiet: true
"""

RETURN = r"""
_raw:
  description:
    - >-
      One line per variable that is set and names no file, in the order of the names, for example
      C(ichor_kubeconfig names ~/clusters/prod/kubeconfig (/home/me/clusters/prod/kubeconfig), which does not exist:
      correct the path (nothing was read or sent)); empty when each names a file.
  type: list
  elements: str
"""

from ansible.plugins.loader import lookup_loader
from ansible.plugins.lookup import LookupBase

from ansible_collections.maesh.ichor.plugins.module_utils.common.paths import missing_files


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        variables = variables or {}
        names = [name for name in terms if name in variables]
        # the values as ansible.builtin.vars gives them (templated), whatever ansible-core's version
        values = lookup_loader.get("ansible.builtin.vars", loader=self._loader, templar=self._templar).run(
            names, variables) if names else []
        return missing_files(dict(zip(names, values)))
