# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The installer's expected failures; each is one line for the user (``common.errors.IchorError``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError


class BundleError(IchorError):
    """A bundle that cannot be applied: one line naming the file and what is wrong."""


class InstallerError(IchorError):
    """A failed step of a run: one line saying what happened (and whether the cluster was restored)."""


class RunFailed(InstallerError):
    """A failed stage; ``result`` holds what the module returns with the failure."""

    def __init__(self, message, result):
        super(RunFailed, self).__init__(message, result=result)
