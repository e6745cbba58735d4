# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Cilium concern's expected failures; each is one line for the user (``common.errors.IchorError``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError


class CiliumError(IchorError):
    """A step that failed: helm could not run, a record cannot be read, the chart is not the set's."""


class HelmError(CiliumError):
    """helm exited non-zero; the message quotes its last lines (redacted)."""


class Refused(CiliumError):
    """A precondition refused the takeover before anything was written; ``result`` holds the plan so far."""
