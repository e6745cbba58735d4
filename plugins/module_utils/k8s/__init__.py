# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes API from a kubeconfig: the client (objects as dicts, dry runs, preconditions, one
timeout for every request; ``client``), the cluster record ConfigMap (``cluster_record``), the
cluster lock (``lock``) and its heartbeat (``heartbeat``), the one Node-Ready rule (``nodes``), CNI detection
(``cni``) and the metadata the API server sets, dropped before objects are compared (``metadata``)."""
