# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The base class of every failure we expect (bad input, a refusal, an unreachable machine, a step
that did not finish). The Ansible glue turns one of these into a clean one-line failure; anything
else is a bug and keeps its traceback."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.common.redact import redact_text


class IchorError(Exception):
    """One line for the user: what was found and what to do. ``result`` is returned with the failure."""

    def __init__(self, message, result=None):
        super(IchorError, self).__init__(redact_text(message))
        self.result = result

    @property
    def message(self):
        return self.args[0]
