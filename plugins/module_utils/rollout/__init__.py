# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout to the release set, one step at a time: ``plan`` (the Versions table, refusals, the steps still
needed), ``state`` (what a running cluster runs, read from its machines, Nodes and record),
``model`` (the config engine's view of the cluster: each machine's contract form, the Kubernetes
phases), ``check`` (judge the cluster and plan the next step), one module per step: ``talos_step``,
``config_step``, ``kubernetes_step``, and ``record`` (the cluster record's guarded update). Each
module's flow is its ``run(params, conn, check_mode)``."""

# what another feature package may import from this one (module_utils/__init__.py)
INTERFACE = ("state", "check")
