# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one error type of the config engine: one line, no secret material."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ConfigError(Exception):
    """A one-line error for the user: what was wrong with the input and what to do."""

    def __init__(self, message):
        message = " ".join(str(message).split())
        super(ConfigError, self).__init__(message)
        self.message = message

    def __str__(self):
        return self.message
