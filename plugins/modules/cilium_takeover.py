#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: cilium_takeover
short_description: Take over a running Cilium as the collection's own Helm release
version_added: 0.1.0
description:
  - Runs every precondition of taking over a running Cilium, read-only, and plans the takeover.
    The Cilium may have been installed with C(helm install), the Cilium CLI (a Helm record), C(helm template | kubectl
    apply) or a Talos inline manifest (no record).
  - The chart is the release set's Cilium (the lookup C(maesh.ichor.release_set)) and no other version; it comes from
    O(chart) (a directory, a C(.tgz) or an C(oci://) reference) or from the Cilium Helm repository, with an optional
    O(chart_digest). The real C(helm) binary (3.18 or a later 3.x) renders it; a kubeconfig given as content is written
    0600 into a private temporary directory that is removed afterwards.
  - Version. The running minor (the tag of the DaemonSet C(kube-system/cilium)'s agent image) equals the chart's, or is
    exactly one lower (the takeover is then an upgrade and the plan says so); anything else is refused, with "upgrade it
    with the tool that installed it first".
  - Owned keys. IPAM must be C(kubernetes) (C(cluster-pool) is refused, never accepted); the tunnel (C(vxlan),
    C(geneve) or C(native) routing) is kept as it runs; C(kubeProxyReplacement) must match the detected kube-proxy mode
    (the kube-proxy DaemonSet in kube-system, and O(kube_proxy) when given), the two inconsistent
    combinations are refused; C(k8sServiceHost)/C(k8sServicePort) point at KubePrism when kube-proxy is replaced;
    the Talos guide's capability and cgroup keys are made to match it; C(namespaceOverride) keeps every object in
    kube-system. Changing C(k8sServiceHost)/C(k8sServicePort) on the running data plane needs O(accept_cilium_changes).
  - Values. The user's values are lifted from the newest foreign Helm record of the release that installed the
    DaemonSet (and of C(cilium) in kube-system) minus the owned keys, or taken from O(cilium_values) for a Cilium
    without a record. A cluster with one Node runs one operator replica unless the user's values say otherwise.
  - Health. The DaemonSet is ready on every Node and the operator's replicas are ready. With O(machines), KubePrism
    answers on every machine; its config enables it on O(kubeprism_port) and Talos's KubePrism controller reports the
    balancer healthy on that port (the resource C(KubePrismStatuses) C(k8s-loadbalancer), read over each machine's
    Talos API; the controller cannot dial a machine's localhost itself). Without O(machines) KubePrism is not checked
    and the plan says so.
  - The inline manifest. With O(machines), the control planes' machine configs are read for a Cilium inline manifest
    entry (C(cluster.inlineManifests) or a C(KubeInlineManifestConfig) document), found by content (a manifest holding
    the DaemonSet C(cilium) in kube-system), not by name. Its name goes into the cluster record with the hand-over
    (key C(cilium.inlineManifests)), that is only after the release is deployed and Cilium is ready; the next config
    step (M(maesh.ichor.config_upgrade)) then renders the machine configs without it. This module never writes to a
    machine. A cluster already taken over whose entry is not recorded yet gets only the record written.
  - The diff gate. The chart is rendered with the effective values (C(helm template --kube-version) of the API server,
    with its API versions), and each rendered object is compared with the live one through server-side apply dry runs,
    so nothing the API server defaults is reported; volatile fields, the annotations kubectl and Helm manage, and the
    certificate data C(helm template) generates anew are ignored. Each difference is a line per object and path
    (C(--diff) shows the objects); a non-empty gate needs O(accept_cilium_diff).
  - Orphans. The gate also lists every object of the foreign release that the chart does not render (the objects the
    manifests of the foreign records list, live and still carrying that release's C(meta.helm.sh) annotations, minus
    the rendered ones), for example the C(hubble-generate-certs) Job, which the chart names after a hash of its spec,
    or a component the user's values enabled and the takeover's values do not. Helm's take-ownership never touches
    them, so once the foreign records are retired they are owned by no release. Without O(delete_orphans) they stay
    as they are, the plan and the result list them, and the cluster record lists them (key C(cilium.orphans)).
    With it, after the hand-over (the record deployed, Cilium ready) and before the foreign records are retired,
    each is copied whole into its own Secret C(ichor-cilium-orphan.<kind>.<group>.<namespace>.<name>) in
    C(ichor-system), read back, and deleted only while it is still the object that was checked (UID precondition);
    when a delete fails, the objects this run deleted before it are created again from their backups and the run
    fails with the foreign records kept. An object whose annotation C(helm.sh/resource-policy) is C(keep) is never
    deleted.
  - The takeover. C(helm upgrade --install --take-ownership) stores the release in C(ichor-system) and keeps every
    object in kube-system (never C(--atomic), never an uninstall, so that a failed install cannot delete the running CNI).
    Once the record is C(deployed) and the DaemonSet and operator are ready on every Node, the user's values, the tunnel
    and the kube-proxy mode go into the cluster record (ConfigMap C(ichor-cluster) in C(ichor-system), key C(cilium)),
    and each foreign record Secret is copied into its own backup Secret C(ichor-cilium-prior.<namespace>.<name>) in
    C(ichor-system) (one per record, as a record is about 500 KB), read back, compared byte for byte, and deleted only if
    it is still the same Secret (UID precondition). The plan announces each deletion, and running the module is the consent.
  - A rerun after a run was stopped repairs a C(pending-install) or C(pending-upgrade) record of the collection's
    release at once (it deletes that record, UID precondition) and completes; a release already deployed with foreign
    records left only finishes the hand-over; a second run changes nothing.
  - Check mode runs every precondition and the gate and writes nothing (all its API calls are reads and dry runs).
author:
  - maesh.ichor developers (@maesh-ichor)
extends_documentation_fragment:
  - maesh.ichor.kubernetes
  - maesh.ichor.cilium_chart
  - maesh.ichor.talos
  - maesh.ichor.machines
attributes:
  check_mode:
    support: full
    description: Reads and dry runs only; the plan, the owned keys and the gate are returned.
  diff_mode:
    support: full
    description: >-
      Each object the gate finds different, live before and the chart's after (Secret data masked); each orphan that
      O(delete_orphans) deletes.
options:
  machines:
    description:
      - The cluster's machines, usually built from the inventory groups with the C(maesh.ichor.machines) filter. When
        given, their Talos API is read (the Talos connection options); the control planes' configs for the Cilium
        inline manifest and every machine's KubePrism. The talosconfig needs the C(os:admin) role (a machine config is
        a sensitive resource).
    required: false
  kube_proxy:
    description:
      - The kube-proxy mode the cluster is meant to run, usually the cluster spec's C(cni.kubeProxy) (C(ichor_cluster)).
        When given it must be the mode detected in kube-system (C(enabled) when the kube-proxy DaemonSet runs, else
        C(replaced)).
    type: str
    choices: [enabled, replaced]
  cilium_values:
    description:
      - The values the Cilium was rendered with, for a Cilium without a Helm record (C(helm template | kubectl apply),
        a Talos inline manifest). Refused when a foreign record exists (its values are lifted).
      - Owned keys in them are set by the collection and reported.
    type: dict
  accept_cilium_changes:
    description:
      - Accept changing an owned value on the running data plane (C(k8sServiceHost)/C(k8sServicePort)). IPAM and the
        tunnel are never changed. Roles map C(ichor_accept_cilium_changes) to it.
    type: bool
    default: false
  accept_cilium_diff:
    description:
      - Accept a non-empty diff gate (the live objects differ from the chart's). Review the gate's lines and C(--diff)
        first. Roles map C(ichor_accept_cilium_diff) to it.
    type: bool
    default: false
  delete_orphans:
    description:
      - Delete the objects of the foreign release that the chart does not render (the gate lists them), after the
        hand-over, each backed up and read back first. Without it they are kept, owned by no release, and listed in
        the cluster record. The adopt role maps C(ichor_adopt_delete_cilium_orphans) to it.
    type: bool
    default: false
  wait:
    description:
      - Wait after helm until the DaemonSet and the operator are ready on every Node before retiring the foreign
        records. With V(false), they are retired only if Cilium is ready at once; otherwise a warning says to rerun.
    type: bool
    default: true
  wait_timeout:
    description: Seconds to wait for that; the foreign records are kept and the run fails when it passes.
    type: float
    default: 600
notes:
  - The flow of this module is C(plugins/module_utils/cilium/takeover.py) with
    C(plugins/module_utils/cilium/pipeline.py), run in the controller by its action plugin
    C(plugins/action/cilium_takeover.py).
  - Adopt calls this module in its third phase; it also runs on its own, for a cluster already adopted.
  - The kubeconfig's user needs get on DaemonSets, Deployments, ConfigMaps and the chart's objects, list on Secrets of
    the foreign release's namespace and of C(ichor-system) and on Nodes, and patch (server-side apply, dry run) on every
    kind the chart renders; with O(delete_orphans), delete on the kinds of the orphans the plan lists and create,
    get and update on Secrets in C(ichor-system) (their backups).
"""

EXAMPLES = r"""
- name: Check that the running Cilium can be taken over (reads and dry runs only)
  maesh.ichor.cilium_takeover:
    kubeconfig: "{{ ichor_kubeconfig }}"
    chart: /srv/charts/cilium-1.20.4.tgz
    chart_digest: sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef   # sha256sum of the .tgz
    kube_proxy: replaced   # the mode the cluster runs: maesh.ichor.adopt_plan returns it as kube_proxy
    accept_cilium_changes: "{{ ichor_accept_cilium_changes }}"
    accept_cilium_diff: "{{ ichor_accept_cilium_diff }}"
  check_mode: true
  diff: true
  register: ichor_cilium_plan

- name: Take it over (the plan above announced the foreign records it deletes)
  maesh.ichor.cilium_takeover:
    kubeconfig: "{{ ichor_kubeconfig }}"
    chart: /srv/charts/cilium-1.20.4.tgz
    kube_proxy: replaced
    accept_cilium_diff: "{{ ichor_accept_cilium_diff }}"
    wait_timeout: 900

- name: A Cilium from a Talos inline manifest, with the values it was rendered with; the machines are read
  maesh.ichor.cilium_takeover:
    kubeconfig: "{{ ichor_kubeconfig }}"
    talosconfig: "{{ ichor_talosconfig }}"
    machines: "{{ groups | maesh.ichor.machines(hostvars) }}"
    chart: /srv/charts/cilium-1.20.4.tgz
    cilium_values: "{{ lookup('file', 'cilium-values.yaml') | from_yaml }}"
    accept_cilium_diff: "{{ ichor_accept_cilium_diff }}"

- name: Take it over and delete what the old release owned and the chart no longer renders (the plan lists them)
  maesh.ichor.cilium_takeover:
    kubeconfig: "{{ ichor_kubeconfig }}"
    chart: /srv/charts/cilium-1.20.4.tgz
    accept_cilium_diff: "{{ ichor_accept_cilium_diff }}"
    delete_orphans: true

- name: A Cilium installed with helm template | kubectl apply, with the values it was rendered with
  maesh.ichor.cilium_takeover:
    cilium_values: "{{ lookup('file', 'cilium-values.yaml') | from_yaml }}"
  check_mode: true
"""

RETURN = r"""
plan:
  description: What was found and what the takeover does, one line each; refusals end with a C(refused:) line.
  returned: always, also on failure
  type: list
  elements: str
  sample: ["chart: cilium 1.20.4 (/srv/charts/cilium-1.20.4.tgz), helm 3.21.4", "diff gate: empty (25 objects rendered, every one as it runs)"]
step:
  description: C(takeover) (same minor), C(upgrade) (one minor lower) or C(none) (nothing to take over).
  returned: always
  type: str
  sample: takeover
cilium:
  description: The running Cilium.
  returned: always
  type: dict
  contains:
    version:
      description: The agent image's version tag.
      returned: when a Cilium runs
      type: str
      sample: 1.19.5
    image:
      description: The agent image.
      returned: when a Cilium runs
      type: str
      sample: quay.io/cilium/cilium:v1.19.5
    chart:
      description: The chart's version (the release set's).
      returned: when a Cilium runs
      type: str
      sample: 1.20.4
    kube_proxy:
      description: The detected kube-proxy mode, C(enabled) or C(replaced).
      returned: when the owned keys were checked
      type: str
    tunnel:
      description: The tunnel as it runs, C(vxlan), C(geneve) or C(native); kept.
      returned: when the owned keys were checked
      type: str
    ipam:
      description: The IPAM mode as it runs.
      returned: when the owned keys were checked
      type: str
    nodes:
      description: The number of Nodes (every Node, Ready or not).
      returned: when the values were made
      type: int
records:
  description: The foreign Helm records found (the release that installed the DaemonSet, and C(cilium) in kube-system).
  returned: always
  type: list
  elements: dict
  contains:
    namespace:
      description: The record's namespace.
      returned: always
      type: str
    name:
      description: The record Secret's name.
      returned: always
      type: str
      sample: sh.helm.release.v1.cilium.v1
    release:
      description: The release name.
      returned: always
      type: str
    revision:
      description: The revision.
      returned: always
      type: int
    status:
      description: The record's status (C(deployed), C(superseded), C(failed), C(pending-install), ...).
      returned: always
      type: str
    chart:
      description: The chart version the record holds.
      returned: always
      type: str
values_source:
  description: Where the user's values came from, C(record), C(cilium_values) or C(defaults) (none).
  returned: when the values were made
  type: str
user_values:
  description: The user's values without the owned keys, a mapping of Helm values (free-form, as the user wrote them).
  returned: always
  type: raw
  sample: {"debug": {"enabled": true}, "cluster": {"name": "prod"}}
values:
  description: The effective values the chart is rendered with (preset < user's values < owned keys); the user's keys besides these.
  returned: always
  type: dict
  contains:
    ipam:
      description: IPAM mode C(kubernetes).
      returned: when the owned keys were checked
      type: dict
      contains:
        mode:
          description: C(kubernetes).
          returned: always
          type: str
    routingMode:
      description: C(tunnel) or C(native), as it runs.
      returned: when the owned keys were checked
      type: str
    tunnelProtocol:
      description: C(vxlan) or C(geneve), as it runs; absent with native routing.
      returned: when the tunnel is not native
      type: str
    kubeProxyReplacement:
      description: Whether Cilium replaces kube-proxy (the detected mode is C(replaced)).
      returned: when the owned keys were checked
      type: bool
    k8sServiceHost:
      description: C(localhost) (KubePrism), when kube-proxy is replaced.
      returned: when kube-proxy is replaced
      type: str
    k8sServicePort:
      description: The KubePrism port, when kube-proxy is replaced.
      returned: when kube-proxy is replaced
      type: int
    namespaceOverride:
      description: C(kube-system); every object stays there while the record is stored in C(ichor-system).
      returned: when the owned keys were checked
      type: str
    securityContext:
      description: The Talos guide's C(capabilities.ciliumAgent) and C(capabilities.cleanCiliumState) lists.
      returned: when the owned keys were checked
      type: raw
    cgroup:
      description: The Talos guide's C(autoMount.enabled=false) and C(hostRoot=/sys/fs/cgroup).
      returned: when the owned keys were checked
      type: raw
    operator:
      description: C(replicas=1) on a cluster with one Node unless the user values set it; else the user values.
      returned: when set
      type: raw
owned:
  description: The owned keys, as they run and as the collection sets them.
  returned: always
  type: list
  elements: dict
  contains:
    key:
      description: The values key.
      returned: always
      type: str
      sample: k8sServicePort
    running:
      description: Its value as the running Cilium has it (null when unset).
      returned: always
      type: raw
    chart:
      description: The value the collection sets.
      returned: always
      type: raw
    action:
      description: C(keep), C(match) (made to match the Talos guide, no consent needed) or C(change) (needs O(accept_cilium_changes)).
      returned: always
      type: str
inline_manifests:
  description: The Cilium inline manifest entries found in the control planes' configs (with O(machines)).
  returned: always
  type: list
  elements: dict
  contains:
    machine:
      description: The control plane whose config holds it.
      returned: always
      type: str
    name:
      description: The entry's name.
      returned: always
      type: str
      sample: cilium
    in:
      description: Where, C(cluster.inlineManifests) (legacy form) or C(KubeInlineManifestConfig).
      returned: always
      type: str
health:
  description: The DaemonSet's and the operator's readiness, one line each, and KubePrism's per machine.
  returned: always
  type: list
  elements: str
gate:
  description: The diff gate's differences, per object and path (empty when every rendered object runs as rendered).
  returned: always
  type: list
  elements: dict
  contains:
    object:
      description: The object, C(Kind namespace/name).
      returned: always
      type: str
      sample: DaemonSet kube-system/cilium
    path:
      description: The field's path (list items by name), or null for the whole object.
      returned: always
      type: str
      sample: spec.template.spec.containers[cilium-agent].args
    change:
      description: >-
        C(differs), C(missing live) (the chart adds it), C(live only, kept) or C(live only, dropped) (what the takeover
        leaves), C(absent live: Helm creates it), or C(invalid) (the API server refuses the chart's object).
      returned: always
      type: str
    live:
      description: The live value (Secret data masked), or the API server's message for C(invalid).
      returned: always
      type: raw
    chart:
      description: The chart's value as the API server would store it.
      returned: always
      type: raw
orphans:
  description:
    - The objects of the foreign release that the chart does not render, live and still that release's (Helm's
      take-ownership leaves them owned by no release); empty when there are none or no foreign record.
  returned: always
  type: list
  elements: dict
  contains:
    object:
      description: The object, C(Kind namespace/name).
      returned: always
      type: str
      sample: Job kube-system/hubble-generate-certs-8def919bf5
    apiVersion:
      description: Its API version, as the foreign release's manifest names it.
      returned: always
      type: str
      sample: batch/v1
    uid:
      description: Its UID when it was read (the delete's precondition).
      returned: always
      type: str
    release:
      description: The foreign release that owns it, C(namespace/name).
      returned: always
      type: str
      sample: kube-system/cilium
    action:
      description: >-
        C(keep) (it stays, owned by no release, and is listed in the cluster record) or C(delete) (O(delete_orphans):
        backed up, read back and deleted after the hand-over).
      returned: always
      type: str
orphan_backups:
  description: The orphans deleted (O(delete_orphans)), each with its backup.
  returned: when the takeover deleted orphans
  type: list
  elements: dict
  contains:
    object:
      description: The object deleted, C(Kind namespace/name).
      returned: always
      type: str
    backup:
      description: The Secret holding it whole, as it was read, C(ichor-system/ichor-cilium-orphan...).
      returned: always
      type: str
    uid:
      description: The deleted object's UID.
      returned: always
      type: str
backups:
  description: The foreign records retired, each with its backup.
  returned: when the takeover retired records
  type: list
  elements: dict
  contains:
    record:
      description: The foreign record, C(namespace/name) (deleted).
      returned: always
      type: str
      sample: kube-system/sh.helm.release.v1.cilium.v1
    backup:
      description: Its byte-identical copy, C(ichor-system/ichor-cilium-prior.<namespace>.<name>).
      returned: always
      type: str
    uid:
      description: The deleted record's UID.
      returned: always
      type: str
diff:
  description: >-
    Per object with differences, the live object and the chart's (Secret data masked); with O(delete_orphans), each
    orphan, live before and nothing after.
  returned: in diff mode
  type: list
  elements: dict
  contains:
    before_header:
      description: The object, live.
      returned: always
      type: str
    after_header:
      description: The object, as the chart renders it.
      returned: always
      type: str
    before:
      description: The live object (YAML), empty when it does not exist.
      returned: always
      type: str
    after:
      description: The chart's object as the API server would store it (YAML).
      returned: always
      type: str
"""
