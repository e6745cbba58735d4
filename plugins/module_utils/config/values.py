# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The checks every spec field's value goes through (config/spec.py, config/network.py): one line on bad input."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError


def as_list(value, what):
    """A list (None: empty)."""
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise ConfigError("%s must be a list" % what)
    return list(value)


def as_mapping(value, what):
    """A mapping (None: empty)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError("%s must be a mapping" % what)
    return value


def only(raw, keys, what):
    """Refuse the fields of a mapping that are not keys."""
    unknown = set(raw) - set(keys)
    if unknown:
        raise ConfigError("%s has unknown fields: %s" % (what, ", ".join(sorted(unknown))))
