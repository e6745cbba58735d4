#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: cilium_release
short_description: Apply the collection's Cilium Helm release (values changes, chart upgrades, the install at init)
version_added: 0.1.0
description:
  - Applies the collection's Helm release C(cilium), stored in C(ichor-system) with every object in C(kube-system)
    (C(namespaceOverride)), as M(maesh.ichor.cilium_takeover) made it, at the release set's chart. This is the
    upgrade rollout's C(cilium) step, a values change, and (with O(install)) the install of Cilium at init.
  - The chart is the release set's Cilium (the lookup C(maesh.ichor.release_set)) and no other version, from O(chart)
    (a directory, a C(.tgz) or an C(oci://) reference) or the Cilium Helm repository, with an optional O(chart_digest);
    the real C(helm) binary (3.18 or a later 3.x) runs on the controller with the run's kubeconfig.
  - One minor at a time. The release's chart (its newest deployed record) is the set's version (a values change), a
    lower patch of the same minor, or exactly one minor lower (an upgrade); a chart more than one minor lower (a skipped
    minor) and a newer chart (a downgrade) are refused.
  - Values. The user's values are O(cilium_values) when given (they then replace the cluster record's), else the
    cluster record's (ConfigMap C(ichor-cluster) in C(ichor-system), key C(cilium), written by the takeover), else the
    release record's. Owned keys in them are set by the collection instead and reported. The effective values, from
    lowest to highest, are the chart's defaults < the operator-replica rule < the user's values < the owned keys (IPAM
    C(kubernetes), the tunnel, C(kubeProxyReplacement) from the kube-proxy mode, C(k8sServiceHost)/C(k8sServicePort) on
    KubePrism when kube-proxy is replaced, the Talos guide's capability and cgroup keys, C(namespaceOverride)).
  - Operator replicas. One control plane in the spec (O(control_planes), workers
    included) or one Node gives C(operator.replicas=1); two or more Nodes leave the chart's default (2). Every Node
    counts, Ready or not.
  - "Refusals, before anything is written. The cluster record's spec says C(cni.preset=unmanaged) (\"the CNI is not
    managed by Ichor (spec.cni.preset: unmanaged)\"); no release of the collection exists (\"run cilium_takeover
    first\"), unless O(install) is set and no Cilium runs; the DaemonSet C(kube-system/cilium) belongs to another
    release; the kube-proxy mode given or recorded is not the detected one, or disagrees with the running Cilium's
    C(kubeProxyReplacement) (a kube-proxy switch is not a values change); a O(tunnel) other than the running one (the
    tunnel is immutable); a chart object the API server refuses (the gate)."
  - The plan, in check mode too. The chart is rendered with the effective values (C(helm template --kube-version)) and
    each object compared with the live one by server-side dry runs, as the takeover's diff gate does; the lines say
    per object and path what the apply changes. No consent is needed here (the takeover's gate is the one that does).
  - Whether anything is applied is decided by the release record. When its chart and values are the effective ones
    and it is C(deployed), nothing is applied (C(changed=false)) even if the gate shows live drift (reported as a
    warning line).
  - The apply. A C(pending-install), C(pending-upgrade) or C(pending-rollback) record of the collection's release,
    left by a run that was stopped, is deleted first (UID precondition). Then C(helm upgrade --reset-values) (or
    C(helm install --take-ownership) with O(install), which adopts what the installer bundle made for the chart, such as
    the C(cilium-secrets) Namespace); never C(--atomic), never an uninstall, no helm wait. A failed apply is retried
    6 times in all, waiting 5 s after the first failure and doubling the wait after each further one, capped at
    30 s (5, 10, 20, 30, 30 s); a pending record a failed attempt left is repaired before the next. Then the module
    waits for the DaemonSet and the operator to be ready on every Node, and writes the user's values, the chart, the
    tunnel and the kube-proxy mode into the cluster record (key C(cilium)).
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.kubernetes
  - maesh.ichor.cilium_chart
attributes:
  check_mode:
    support: full
    description: Reads and dry runs only; the plan, the effective values and the gate are returned.
  diff_mode:
    support: full
    description: The effective values before (the release record's) and after, and each object the gate finds different.
options:
  install:
    description:
      - Install the release when the collection has none and no Cilium runs (init). Without it, a cluster without the
        collection's release is refused ("run cilium_takeover first"). A running Cilium that is not the collection's
        release is refused either way (the takeover adopts it).
    type: bool
    default: false
  cilium_values:
    description:
      - The user's Helm values (free-form). Given, they replace the cluster record's after a successful apply; omitted,
        the cluster record's are applied (a run never resets them). Owned keys in them are set by the collection.
    type: dict
  kube_proxy:
    description:
      - The kube-proxy mode, usually the cluster spec's C(cni.kubeProxy). Omitted, the cluster record's, else the
        detected one (C(enabled) when the kube-proxy DaemonSet runs in kube-system, else C(replaced)). It must be the
        detected one.
    type: str
    choices: [enabled, replaced]
  tunnel:
    description:
      - The tunnel for an install (C(vxlan) when omitted). For a running Cilium it is read from it and is immutable; a
        different value is refused.
    type: str
    choices: [vxlan, geneve, native]
  control_planes:
    description:
      - The number of control planes in the cluster spec (the role passes the size of the inventory group
        C(controlplane)). One gives one operator replica whatever the Node count. Omitted, only the Nodes count.
    type: int
  wait:
    description:
      - Wait after helm until the DaemonSet and the operator are ready on every Node before the cluster record is
        updated. With V(false) the record is updated only if Cilium is ready at once; otherwise a warning says to rerun.
    type: bool
    default: true
  wait_timeout:
    description: Seconds to wait for that; the run fails when it passes (the cluster record is not updated).
    type: float
    default: 600
notes:
  - The flow of this module is C(plugins/module_utils/cilium/release.py) with
    C(plugins/module_utils/cilium/pipeline.py), run in the controller by its action plugin
    C(plugins/action/cilium_release.py).
  - Run M(maesh.ichor.cilium_takeover) once first on a cluster whose Cilium was installed another way.
  - The upgrade role passes C(ichor_upgrade_cilium_chart) as O(chart).
  - The kubeconfig's user needs what helm needs to upgrade every object of the chart (the installer bundle's Cilium
    roles), read on the Nodes and the kube-proxy DaemonSet, and read/write on the cluster record and the release
    records in C(ichor-system).
"""

EXAMPLES = r"""
- name: The rollout's cilium step (plan first with --check --diff)
  maesh.ichor.cilium_release:
    kubeconfig: "{{ ichor_kubeconfig }}"
    chart: /srv/charts/cilium-1.20.4.tgz
    chart_digest: sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef   # sha256sum of the .tgz
    control_planes: "{{ groups['controlplane'] | length }}"

- name: Change the user's values (they go into the cluster record)
  maesh.ichor.cilium_release:
    chart: /srv/charts/cilium-1.20.4.tgz
    cilium_values:
      debug:
        enabled: true
      hubble:
        relay:
          enabled: true

- name: Init - install Cilium on a new cluster without a CNI
  maesh.ichor.cilium_release:
    chart: /srv/charts/cilium-1.20.4.tgz
    install: true
    kube_proxy: replaced
    tunnel: vxlan
    control_planes: 3
"""

RETURN = r"""
plan:
  description: What was found and what the run does, one line each; refusals end with a C(refused:) line.
  returned: always, also on failure
  type: list
  elements: str
  sample: ["chart: cilium 1.20.4 (/srv/charts/cilium-1.20.4.tgz), helm 3.21.4", "upgrade: chart 1.19.5 -> 1.20.4"]
step:
  description: >-
    C(install), C(upgrade) (a newer chart), C(values) (the same chart, other values, or a repair), C(record) (only the
    cluster record is behind) or C(none) (nothing to do).
  returned: always
  type: str
  sample: upgrade
attempts:
  description: How many helm runs the apply took (1 when the first succeeded).
  returned: when helm was run
  type: int
cilium:
  description: The cluster's Cilium as this run saw it.
  returned: always
  type: dict
  contains:
    chart:
      description: The chart's version (the release set's).
      returned: when the chart was resolved
      type: str
      sample: 1.20.4
    version:
      description: The running agent image's version tag (null when no Cilium runs).
      returned: when the chart was resolved
      type: str
    image:
      description: The running agent image.
      returned: when the chart was resolved
      type: str
    nodes:
      description: The number of Nodes (every Node, Ready or not).
      returned: when the values were made
      type: int
    operator_replicas:
      description: C(1) by the operator-replica rule, or null for the chart's default.
      returned: when the values were made
      type: int
    kube_proxy:
      description: The kube-proxy mode, C(enabled) or C(replaced).
      returned: when the values were made
      type: str
    tunnel:
      description: The tunnel, C(vxlan), C(geneve) or C(native).
      returned: when the values were made
      type: str
release:
  description: The collection's release record (before the run, or after an apply).
  returned: when a release exists
  type: dict
  contains:
    revision:
      description: The revision.
      returned: always
      type: int
    status:
      description: Its status.
      returned: always
      type: str
    chart:
      description: Its chart version.
      returned: always
      type: str
values_source:
  description: Where the user's values came from, C(cilium_values), C(cluster_record), C(release) or C(defaults).
  returned: when the values were made
  type: str
user_values:
  description: The user's values without the owned keys, a mapping of Helm values (free-form).
  returned: always
  type: raw
  sample: {"debug": {"enabled": true}}
values:
  description: The effective values (free-form Helm values; the owned keys and the operator rule applied).
  returned: always
  type: raw
gate:
  description: The differences between the rendered chart and the live objects, per object and path (as cilium_takeover's).
  returned: always
  type: list
  elements: dict
  contains:
    object:
      description: The object, C(Kind namespace/name).
      returned: always
      type: str
    path:
      description: The field's path, or null for the whole object.
      returned: always
      type: str
    change:
      description: C(differs), C(missing live), C(live only, kept), C(live only, dropped), C(absent live...) or C(invalid).
      returned: always
      type: str
    live:
      description: The live value (Secret data masked).
      returned: always
      type: raw
    chart:
      description: The chart's value as the API server would store it.
      returned: always
      type: raw
diff:
  description: The effective values before and after, then each object with differences, live and as the chart renders it.
  returned: in diff mode
  type: list
  elements: dict
  contains:
    before_header:
      description: What the before side is.
      returned: always
      type: str
    after_header:
      description: What the after side is.
      returned: always
      type: str
    before:
      description: YAML.
      returned: always
      type: str
    after:
      description: YAML.
      returned: always
      type: str
"""
