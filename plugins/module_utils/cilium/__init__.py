# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cilium as the collection's own Helm release: taking over a running Cilium, then keeping the release.

``helm`` runs the real helm binary (v3.18 or later 3.x) with the run's kubeconfig, written 0600 into a private
temporary directory that is removed afterwards, and resolves the chart (a path, a .tgz, an OCI reference or the
Cilium repository, at the release set's version only, with an optional digest); ``pipeline`` is the one pipeline
of the two flows (read, preconditions, gate, act) and what they share (the options, the plan, a record deleted by
UID, the readiness wait); ``record`` is the Helm release-record codec (the Secret's data is base64 twice, then
gzip, then JSON; the user values are its field ``config``); ``values`` holds the owned keys (IPAM ``kubernetes``,
tunnel, ``kubeProxyReplacement`` against the detected kube-proxy mode, ``k8sServiceHost``/``k8sServicePort`` on
KubePrism, the Talos guide's capability and cgroup keys, ``namespaceOverride``), the operator-replica rule and
the user's values minus the owned keys; ``live`` reads the running Cilium (version, configuration, foreign
records, health: the DaemonSet and the operator Ready on every node) and the version rule (the live minor equals
the chart's or is one lower, else refused: upgrade it with the tool that installed it first); ``machines`` reads
the machines' side (a Cilium inline manifest in the control planes' configs, KubePrism on every machine);
``gate`` is the diff gate (``helm template --kube-version`` of the chart with the effective values, each object
server-side dry-run applied and compared with the live one, volatile fields and generated certificate data
ignored, per object and path); ``orphans`` finds what the foreign release owned and the chart does not render
(kept and recorded, or with consent backed up, read back and deleted by UID); ``takeover`` is the pipeline's
variant for the module ``cilium_takeover`` (the hand-over); ``release`` is its variant for ``cilium_release``
(the release kept at the set: values changes and one-minor upgrades, install at init); ``errors`` holds their
refusals."""

# what another feature package may import from this one (module_utils/__init__.py)
INTERFACE = ("live", "record", "errors", "gate", "helm")
