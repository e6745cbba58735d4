# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the user gave of a nested option: Ansible fills every suboption not given with None, and a spec
merged over another (the cluster spec over what the live configs state) must not take those Nones for values."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def given(value):
    """``value`` without the mapping keys whose value is None, at every level (lists kept, their items cleaned)."""
    if isinstance(value, dict):
        return dict((key, given(item)) for key, item in value.items() if item is not None)
    if isinstance(value, list):
        return [given(item) for item in value]
    return value
