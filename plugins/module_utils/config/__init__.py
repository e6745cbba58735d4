# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The machine-config engine: documents (``documents``, ``yamlio``), version contracts and their gates
(``contracts``), the cluster and machine spec (``spec``), the secrets bundle (``secrets``) and its Secret in the
cluster (``bundle_secret``), the renderer (``render``), drift and its classes A/B/C (``drift``: rules over two configs), which contract made
a live config (``probing``: renders at each contract, judged by their drift), the one list of
secret paths (``secret_paths``), the Talos side of a live config (``talos_side``), the spec read back from live
configs (``adopt``) and the component images a config names (``images``)."""
