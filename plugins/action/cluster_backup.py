# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""maesh.ichor.cluster_backup runs here, in the controller's process (its documentation: plugins/modules/cluster_backup.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.plugin_utils.module_action import ModuleAction


class ActionModule(ModuleAction):
    MODULE = "cluster_backup"
