# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Adopting a running Talos cluster: the rules that decide what adopt may do (the CNI
table and its modes, the kube-proxy mapping, the KubePrism precondition, the contract override) in ``rules``,
and the inspection that reads the cluster and makes the plan (phase 1, nothing written) in ``inspection``."""

# what another feature package may import from this one (module_utils/__init__.py)
INTERFACE = ()
