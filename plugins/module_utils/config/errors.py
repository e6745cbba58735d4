# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one error type of the config engine: one line, no secret material."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError


class ConfigError(IchorError):
    """A one-line error for the user: what was wrong with the input and what to do."""
