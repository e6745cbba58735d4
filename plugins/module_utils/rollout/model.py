# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Machine configs in the rollout: the config and Kubernetes steps render whole configs.

Each machine's config is rendered by the config engine from the cluster's secrets bundle, the cluster
spec and the machine spec. The spec's fields not given (all of them, without an inventory spec) are read
from the running configs the way adopt reads them (class A mapping), and without a bundle file the
bundle is recovered from a control plane's config, so a cluster whose configs the engine represents can
be rolled before it has a stored spec.

* ``form``: the contract a machine's config is in now: the render at that contract, with the component
  images it runs now, equals the live config. A machine in no form is refused before anything is
  written: a whole-config render would change what no spec field covers.
* ``config_pending``: the machines whose form is not the release set's contract (``upgrade.ConfigPending``), or
  whose config still carries a Cilium inline manifest entry the cluster record says was handed over.
* handed over: once ``cilium_takeover`` has recorded a Cilium inline manifest entry with the completed hand-over,
  the model reads each config as if that entry were gone (spec and form) and every render leaves it out, so the
  next whole-config apply removes it from the machine (Talos deletes nothing it applied; the objects stay).
* ``kubernetes_phases``: control planes (API server, controller manager, scheduler), kube-proxy, kubelets;
  each phase's render moves its components to the target and keeps the later ones as they run.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.config import adopt, contracts, documents, drift, registry_auth, render, secrets
from ansible_collections.maesh.ichor.plugins.module_utils.config import spec as specs
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.config.images import component_versions

PHASES = (
    ("control plane", ("kube-apiserver", "kube-controller-manager", "kube-scheduler")),
    ("kube-proxy", ("kube-proxy",)),
    ("kubelet", ("kubelet",)),
)
_SHOWN = 6  # differing paths named in a refusal


class Machine:
    """One machine's live config and what the engine reads from it."""

    def __init__(self, name, node, role, talos, text, objects=None, node_name=None):
        """``objects``: ``text`` already read as YAML (``yamlio.load_all``), else it is parsed here; ``node_name``:
        the Node Talos reports for it (its name when not given)."""
        self.name = name
        self.node = node  # its Talos API address
        self.node_name = node_name or name  # its Kubernetes Node, as Talos names it
        self.role = role
        self.talos = talos
        if not text:
            raise ConfigError("%s has no machine config (is it in maintenance mode?)" % name)
        try:
            self.docs = documents.parse(text) if objects is None else documents.from_objects(objects)
        except ConfigError as exc:
            raise ConfigError("%s: its live config cannot be read: %s" % (name, exc))
        # {component: "X.Y.Z"} as the images in the config name them
        self.images = dict((component, version.lstrip("v"))
                           for component, version in component_versions(self.docs).items())
        if "kubelet" not in self.images:
            raise ConfigError("%s: its live config names no kubelet image" % name)
        self.spec = None  # machine spec
        self.form = None  # contract name the config is in
        self.dropped = []  # names of the handed-over inline entries its config still carries

    @property
    def compared(self):
        """What the spec and the form are read from: the docs without the handed-over inline entries."""
        return without_inline(self.docs, self.dropped) if self.dropped else self.docs

    @property
    def controlplane(self):
        return self.role == "controlplane"

    def images_for(self, moved, target):
        """The images it runs, with the components moved so far at target."""
        out = dict(self.images)
        for component in moved:
            if component in out:  # a worker's config names no control-plane image
                out[component] = target
        return out


class Model:
    """The secrets bundle, the cluster spec and each machine's spec, for rendering whole configs."""

    def __init__(self, bundle, cluster, machines, unmapped=()):
        self.bundle = bundle
        self.cluster = cluster
        self.machines = machines
        self.unmapped = list(unmapped)  # spec fields the machines disagree on: their drift is class C

    def render(self, machine, contract, images):
        """Documents for machine at contract with the component images {component: X.Y.Z}."""
        cluster = dict(self.cluster, kubernetesVersion=images["kubelet"], versionContract=contract)
        return render.render(self.bundle, cluster, machine.spec, contract, images)

    def drift(self, rendered, live_docs, contract):
        return drift.drift(rendered, live_docs, self.cluster, contract, self.unmapped)


def inline_names(docs):
    """The names of the inline manifest entries a config carries (either form)."""
    names = [doc.name for doc in docs if doc.kind == "KubeInlineManifestConfig"]
    for doc in docs:
        if doc.kind == documents.LEGACY:
            names += [item.get("name") for item in documents.get_path(doc.body, "cluster.inlineManifests") or []
                      if isinstance(item, dict)]
    return [name for name in names if isinstance(name, str)]


def without_inline(docs, names):
    """The documents without the inline manifest entries named (either form); the others unchanged."""
    out = []
    for doc in docs:
        if doc.kind == "KubeInlineManifestConfig" and doc.name in names:
            continue
        items = documents.get_path(doc.body, "cluster.inlineManifests") if doc.kind == documents.LEGACY else None
        if isinstance(items, list) and any(isinstance(i, dict) and i.get("name") in names for i in items):
            cluster = dict(doc.body["cluster"])
            kept = [i for i in items if not (isinstance(i, dict) and i.get("name") in names)]
            if kept:
                cluster["inlineManifests"] = kept
            else:
                del cluster["inlineManifests"]
            doc = documents.Document(doc.kind, doc.name, dict(doc.body, cluster=cluster))
        out.append(doc)
    return out


def _paths(found):
    paths = [diff.path for diff in found.differences]
    return ", ".join(paths[:_SHOWN]) + (" and %d more" % (len(paths) - _SHOWN) if len(paths) > _SHOWN else "")


def model(machines, cluster=None, bundle=None, handed_over=(), auth_refs=None, kube=None):
    """A Model over the machines (Machine objects); each machine's form is found, or ConfigError.

    cluster: the cluster spec (inventory's ichor_cluster), whole or in part; the fields it does not give are
    read from the live configs;
    bundle: a loaded secrets bundle or None to recover it from a control plane's live config;
    handed_over: names of Cilium inline manifest entries whose hand-over the cluster record says is complete:
    read and rendered as gone.
    """
    if not machines:
        raise ConfigError("no machines")
    handed_over = set(handed_over or ())
    for m in machines:
        m.dropped = sorted(set(inline_names(m.docs)) & handed_over)
    if bundle is None:
        cps = [m for m in machines if m.controlplane]
        if not cps:
            raise ConfigError("no control plane to recover the secrets bundle from")
        bundle = secrets.from_config(cps[0].docs)
    bundle = secrets.validate(bundle)
    for m in machines:
        other = secrets.same_cluster(bundle, m.docs)
        if other:
            raise ConfigError("%s: %s" % (m.name, other))
    # each field from the machines that carry it, whatever their order; fields they disagree on are unmapped
    adopted = adopt.read([(m.name, m.compared, m.talos) for m in machines])
    # the given spec's fields over what the live configs state (an inventory may give only some, e.g. the name)
    merged = dict(adopted.cluster)
    merged.update(cluster or {})
    if handed_over:  # a spec given in full may still list the entry
        merged["inlineManifests"] = [item for item in merged.get("inlineManifests") or []
                                     if not (isinstance(item, dict) and item.get("name") in handed_over)]
    merged["versionContract"] = release.CONTRACT  # each render names its own contract and images
    if auth_refs:  # the registry credentials the cluster record names: read from their Secrets for the renders
        merged["registries"] = registry_auth.with_refs(merged.get("registries"), auth_refs)
    cluster_spec = specs.cluster(merged)
    registry_auth.attach(bundle, kube, cluster_spec)
    for m, machine_spec in zip(machines, adopted.machines):
        m.spec = specs.machine(machine_spec, cluster_spec)
    result = Model(bundle, cluster_spec, machines, adopted.unmapped_besides(cluster))
    for m in machines:
        find_form(result, m)
    return result


def find_form(model_, m):
    """Set m.form: the highest contract from the set's down to v1.12 whose render equals the live config.

    Not capped at the machine's own Talos: a machine mid-rollout (still on an older Talos) can carry a config
    made for a newer contract, and that form is what it is (a v1.13-form config lacks v1.12's empty
    machine.network, so it equals no v1.12 render)."""
    contracts.probe_order(m.talos)  # a Talos older than v1.12 is refused here
    best = None
    for contract in contracts.probe_order(release.TALOS):
        try:
            rendered = model_.render(m, contract.name, m.images)
        except ConfigError:
            continue
        found = model_.drift(rendered, m.compared, contract.name)
        if found.zero:
            m.form = contract.name
            return
        if best is None or len(found.differences) < len(best[1].differences):
            best = (contract.name, found)
    if best is None:
        raise ConfigError("%s: no contract from %s down to v1.12 renders its spec" % (m.name, release.CONTRACT))
    contract, found = best
    raise ConfigError(
        "%s: its live config is not what the cluster's spec renders at any contract (nearest %s: %d differing paths: "
        "%s); the rollout renders whole configs and would change them: bring the machine to its spec first "
        "(maesh.ichor.talos_machine_config shows the drift in check mode)" % (
            m.name, contract, len(found.differences), _paths(found)))


def config_pending(model_):
    """Machines whose config is not yet in the release set's contract form, or still carries a handed-over
    Cilium inline entry, control planes first."""
    return [m for m in ordered(model_.machines) if m.form != release.CONTRACT or m.dropped]


def lowest_form(model_):
    return min((m.form for m in model_.machines), key=release.parse)


def ordered(machines):
    return sorted(machines, key=lambda m: (not m.controlplane, m.name))


def kubernetes_phases(model_, target):
    """[(phase, [(machine, images, rendered)])]: what each phase applies, machines in phase order.

    Only machines whose render changes in that phase are listed; every machine must already be in the
    release set's contract form (the config step comes first).
    """
    target = target.lstrip("v")
    behind = [m.name for m in model_.machines if m.form != release.CONTRACT]
    if behind:
        raise ConfigError("the config of %s is not yet in the %s form: run the config step first" % (
            ", ".join(sorted(behind)), release.CONTRACT))
    current = dict((m.name, dict(m.images)) for m in model_.machines)
    out = []
    moved = []
    for phase, components in PHASES:
        moved.extend(components)
        work = []
        group = [m for m in ordered(model_.machines) if m.controlplane or phase == "kubelet"]
        for m in group:
            images = m.images_for(moved, target)
            if images == current[m.name]:
                continue
            current[m.name] = images
            work.append((m, images, model_.render(m, release.CONTRACT, images)))
        out.append((phase, work))
    return out


def masked_text(docs):
    return documents.emit(drift.mask_docs(docs))
