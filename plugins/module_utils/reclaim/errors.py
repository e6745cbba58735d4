# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Why a reclaim stopped."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError


class ReclaimError(IchorError):
    """A one-line reason the reclaim stopped; ``sent`` says whether the reset went out, ``hint`` what to do."""

    def __init__(self, message, sent=False, hint=None, result=None):
        super(ReclaimError, self).__init__(message, result=result)
        self.sent = sent
        self.hint = hint
