# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: release_set
short_description: The release set this collection is tested with
version_added: 0.1.0
description:
  - Returns the one release set of maesh.ichor (the versions it installs and moves clusters to) as a dict with
    C(talos), C(contract), C(kubernetes) and C(cilium), or one of those values when a term names it.
author:
  - maesh.ichor developers (@maesh-ichor)
options:
  _terms:
    description: Optional component names (C(talos), C(contract), C(kubernetes), C(cilium)).
    required: false
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Show the release set
  ansible.builtin.debug:
    msg: "{{ lookup('maesh.ichor.release_set') }}"

- name: The Talos of the set
  ansible.builtin.debug:
    msg: "{{ lookup('maesh.ichor.release_set', 'talos') }}"
"""

RETURN = r"""
_raw:
  description: The set as a dict (no terms), or the named components' versions.
  type: list
  elements: raw
"""

from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase

from ansible_collections.maesh.ichor.plugins.module_utils.common.release import release_set


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        pinned = release_set()
        if not terms:
            return [pinned]
        unknown = [t for t in terms if t not in pinned]
        if unknown:
            raise AnsibleError("release_set: unknown component(s) %s; known: %s" % (
                ", ".join(unknown), ", ".join(sorted(pinned))))
        return [pinned[t] for t in terms]
