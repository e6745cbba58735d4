# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The flows of the modules that act on Talos machines: a machine's facts (``facts``, ``talos_facts``) and every
machine of a cluster read at once (``cluster_read``), one machine's config rendered, compared and applied
(``machine_config``, ``talos_machine_config``), the secrets bundle file and the admin talosconfig
(``secrets``, ``talos_secrets``), etcd bootstrapped once (``bootstrap``, ``talos_bootstrap``), the admin kubeconfig
(``kubeconfig``, ``talos_kubeconfig``) and the etcd snapshot (``etcd_snapshot``)."""

# what another feature package may import from this one (module_utils/__init__.py)
INTERFACE = ("facts", "cluster_read", "machine_config", "etcd_snapshot")
