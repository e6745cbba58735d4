# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment:
    # The cluster as the rollout's modules see it: its machines, and what the config engine renders from.
    DOCUMENTATION = r"""
options:
  cluster:
    description:
      - The cluster spec (see M(maesh.ichor.talos_machine_config)), usually the inventory's C(ichor_cluster), whole
        or in part; the fields it does not give are read from the live configs, as adopt reads them.
      - Its version fields are not used; the rollout renders with the versions each step moves to.
    type: dict
  secrets:
    description:
      - Path of the cluster's secrets bundle. Omitted, the bundle is recovered in memory from a control plane's live
        config; it is never returned or written.
    type: path
"""
