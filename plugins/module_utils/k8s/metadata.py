# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The metadata the API server sets on an object, or that names one incarnation of it: what is dropped before two
objects are compared or one is written back (a restore, a backup's object, a diff)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

SERVER_SET = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink",
              "deletionTimestamp", "deletionGracePeriodSeconds")


def without(meta, fields=SERVER_SET):
    """``meta`` (an object's metadata, a dict) with ``fields`` dropped, in place; returns it."""
    for key in fields:
        meta.pop(key, None)
    return meta
