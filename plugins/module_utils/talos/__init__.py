# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Talos API, as talosctl speaks it: the talosconfig (``talosconfig``), mTLS (``transport``), the
gRPC client with node targeting and fan-out (``client``), our wire-compatible protos (``proto``), COSI
resource names and their specs (``resources``), machine reads and the one config apply (``machine``), the etcd
member list and the one etcd health check (``etcd``), the kubeconfig a control plane gives (``kubeconfig``), the
version gate (``version_gate``), inventory rows from members (``inventory``) and the one-line errors every Talos
failure becomes (``errors``)."""

# KubePrism: the port Talos serves the in-cluster load balancer of the Kubernetes API on, on every machine, when a
# config enables it without one (machinery's default); the collection's Cilium reaches the API server through it.
KUBEPRISM_PORT = 7445
