# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster as its Kubernetes side shows it: which CNI runs, who installed it, kube-proxy and the Nodes
(``facts``, the ``cluster_facts`` module), the ``cluster_lock`` module's flow over the lock (``lock``), and whether a
run holds every machine the cluster record lists (``subset``, the ``maesh.ichor.missing_machines`` filter's rule)."""

# what another feature package may import from this one (module_utils/__init__.py)
INTERFACE = ("facts", "subset")
