# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Adopt's first phase: read the whole cluster once and make the plan; nothing is written.

Order: every machine read at once over the Talos API (its facts and live config), the
versions judged against the release set (Talos below v1.12 or newer than the set, Kubernetes newer than the
set: refused), the Kubernetes side (``cluster.facts``), the CNI row and its mode, kube-proxy, KubePrism,
the secrets bundle (a given file, or recovered from one named control plane) checked against every config,
the version contract probed per machine and settled for the cluster (an override may name only the set's),
each machine's drift by class with its paths and hints at that contract, the class B consent list, what the
write phase would record, and the CA-rotation advice. A refusal fails with its one line and the plan so far.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.adopt import rules
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.config import adopt as mapping
from ansible_collections.maesh.ichor.plugins.module_utils.config import contracts, documents, drift, probing, registry_auth, render, secrets
from ansible_collections.maesh.ichor.plugins.module_utils.config import spec as specs
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.config.images import component_versions
from ansible_collections.maesh.ichor.plugins.module_utils.installer import policies
from ansible_collections.maesh.ichor.plugins.module_utils.cluster import facts as cluster_facts
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from ansible_collections.maesh.ichor.plugins.module_utils.machine import cluster_read
from ansible_collections.maesh.ichor.plugins.module_utils.talos import version_gate


def options():
    """The module's own options (machines and both connections are added by ansible_module.specs)."""
    return dict(
        secrets=dict(type="path"),
        recover_from=dict(type="str"),
        cni_unmanaged=dict(type="bool", default=False),
        version_contract=dict(type="str"),
        registry_auth=dict(type="dict"),
    )


def run(params, conn, check_mode=True):
    """The plan (a result dict); IchorError with the result so far when adopt must not go on. Read-only in every
    mode: ``check_mode`` changes nothing."""
    return inspect(params, conn)[0]


def inspect(params, conn):
    """(the plan, the secrets bundle it was made with: never part of a result)."""
    result = dict(changed=False, plan=[])
    try:
        bundle = _inspect(params, conn, result)
    except rules.Refusal as exc:
        result["plan"].append("refused: %s" % exc)
        raise IchorError(str(exc), result=result)
    except ConfigError as exc:
        result["plan"].append("refused: %s" % exc)
        raise IchorError(str(exc), result=result)
    except IchorError as exc:
        exc.result = result
        raise
    return result, bundle


def _network_policies(k8s, mode):
    """The network-policy gate as the installer of phase 2 will find it; with no CNI yet, the installer runs again
    after phase 3 has installed Cilium (the gate follows what runs, read live)."""
    applied, why = policies.of_facts(k8s)
    if mode == rules.INSTALL:
        why += "; the installer runs again after phase 3 has installed Cilium, and applies them once its CRD exists"
    return dict(applied=applied, reason=why)


def _inspect(params, conn, result):
    plan = result["plan"]
    found = cluster_read.read_cluster(conn.talos(), params["machines"], with_config_text=True)
    plan.extend(found.plan)
    if found.warnings:
        result["warnings"] = found.warnings
    if found.unread:
        raise IchorError("%d of %d machines could not be read: %s" % (
            len(found.unread), len(params["machines"]), "; ".join(found.unread)))
    read = [facts for unused_m, facts in found.read]
    _versions(result, read)
    unreadable = ["%s (%s)" % (f["name"], f["config_unread"]) for f in read if f["config"] is None]
    if unreadable:
        raise rules.Refusal("adopt reads every machine's config, and it cannot read that of %s" % ", ".join(unreadable))
    docs = dict((name, documents.parse(text)) for name, text in found.texts.items())
    controlplanes = [f for f in read if _role(f) == "controlplane"]
    if not controlplanes:
        raise rules.Refusal("no control plane among the machines given: adopt reads the cluster from its control "
                            "planes; give them all")

    kube = conn.kube()
    k8s = cluster_facts.gather(kube)
    _kubernetes_versions(result, k8s, [(f["name"], docs[f["name"]]) for f in controlplanes])
    existing = cluster_record.read(kube)
    outcome = rules.cni_outcome(k8s, dict((f["name"], f["config"]["cni"]["name"]) for f in controlplanes),
                                dict((f["name"], f["cni_configs"]) for f in read), params["cni_unmanaged"],
                                (existing.data.get("cilium") or {}).get("release"))
    plan.extend(outcome["lines"])
    mode = outcome["mode"]
    kube_proxy, line = rules.kube_proxy_mode(mode, _talos_kube_proxy(controlplanes),
                                             k8s["kube_proxy"]["present"], _replacement(k8s))
    plan.append(line)
    plan.append(rules.kubeprism(mode, dict((f["name"], f["config"]["kubeprism"]) for f in read)))
    agents = k8s["cni"]["daemonsets"] or [{}]  # one CNI here: two were refused
    result["cni"] = {"row": outcome["row"], "mode": mode, "preset": outcome["preset"], "talos_cni": outcome["talos_cni"],
                     "names": k8s["cni"]["names"], "evidence": k8s["cni"]["evidence"],
                     "version": (k8s["cilium"] or {}).get("version") or agents[0].get("version")}
    result["kube_proxy"] = kube_proxy
    result["network_policies"] = _network_policies(k8s, mode)
    plan.append(result["network_policies"]["reason"])

    bundle = _bundle(params, read, docs)
    plan.append("secrets bundle: %s; it is this cluster's (the Talos CA of every machine config)" % (
        "the given file" if params.get("secrets") else "recovered in memory from %s" % params["recover_from"]))
    entries = _drift(params, result, read, docs, bundle, outcome["preset"], kube_proxy, kube)
    result["machines"] = entries
    _consent(result, entries)
    result["record"] = _record(result, outcome, kube_proxy, existing)
    plan.append(rules.CA_ADVICE)
    result["advice"] = rules.CA_ADVICE
    return bundle


def _role(facts):
    """The machine's role from its discovery member, else its config's machine.type."""
    return facts["role"] or (facts["config"] or {}).get("config_role") or ""


def _versions(result, read):
    verdict = version_gate.judge([(f["name"], f["version"]) for f in read])
    result["versions"] = verdict
    result["plan"].append(cluster_read.versions_line(verdict))
    if verdict["refused"]:
        raise rules.Refusal(verdict["message"])


def _kubernetes_versions(result, k8s, controlplane_docs):
    """Kubernetes newer than the set is refused: every kubelet, and the control planes' component images; so is a
    cluster whose components run more than one minor (rules.kubernetes_split)."""
    by_component = dict(((n["name"], "kubelet"), n["kubelet_version"]) for n in k8s["nodes"] if n["kubelet_version"])
    for name, docs in controlplane_docs:
        for component, version in sorted(component_versions(docs).items()):
            if component.startswith("kube-"):
                by_component[(name, component)] = version
    running = dict(("%s %s" % key, version) for key, version in by_component.items())
    newer = sorted(source for source, version in running.items() if release.judge(version, release.KUBERNETES) == "newer")
    result["kubernetes"] = [{"source": source, "version": version} for source, version in sorted(running.items())]
    if newer:
        raise rules.Refusal("Kubernetes on %s is newer than the release set's %s; this collection cannot manage it" % (
            ", ".join("%s (%s)" % (source, running[source]) for source in newer), release.KUBERNETES))
    lowest = sorted(set(running.values()), key=release.parse)
    result["plan"].append("Kubernetes: %s (release set %s)" % (", ".join(lowest) or "no version read", release.KUBERNETES))
    rules.kubernetes_split(by_component)


def _talos_kube_proxy(controlplanes):
    states = sorted(set(f["config"]["kube_proxy"]["enabled"] for f in controlplanes))
    if len(states) > 1:
        raise rules.Refusal("kube-proxy is enabled in the machine configs of %s and disabled in those of %s: make "
                            "them agree first" % tuple(", ".join(sorted(f["name"] for f in controlplanes
                                                                        if f["config"]["kube_proxy"]["enabled"] == s))
                                                       for s in (True, False)))
    return states[0]


def _replacement(k8s):
    cilium = k8s["cilium"]
    return None if cilium is None else cilium["kube_proxy_replacement"]


def _bundle(params, read, docs):
    """The secrets bundle: exactly one source (a given file, or recovery from a named control plane), validated,
    and the same cluster's as every live config."""
    given, source = params.get("secrets"), params.get("recover_from")
    if bool(given) == bool(source):
        raise rules.Refusal("the secrets bundle: give exactly one of secrets (a bundle file) or recover_from (a control "
                            "plane to recover it from)")
    if given:
        bundle = secrets.load(given)
    else:
        named = [f for f in read if source in (f["name"], f["node"])]
        if not named or _role(named[0]) != "controlplane":
            raise rules.Refusal("recover_from %s: not a control plane among the machines given" % source)
        bundle = secrets.from_config(docs[named[0]["name"]])
    bundle = secrets.validate(bundle)
    for f in read:
        other = secrets.same_cluster(bundle, docs[f["name"]])
        if other:
            raise rules.Refusal("%s: %s" % (f["name"], other))
    return bundle


def _probe_all(bundle, cluster_spec, specs_by_name, read, docs, unmapped):
    probed = {}
    for f in read:
        try:
            probed[f["name"]] = probing.probe(bundle, cluster_spec, specs_by_name[f["name"]], docs[f["name"]],
                                              f["version"], unmapped)
        except ConfigError as exc:
            raise rules.Refusal("%s: %s" % (f["name"], exc))
    return probed


def _cluster_contract(probed, settled):
    """One contract for the cluster: the one the machines settled on; when they differ, the contract every machine
    renders at with the fewest class C paths in all (then the highest)."""
    chosen = sorted(set(settled.values()), key=contracts.parse_version)
    if len(chosen) == 1:
        return chosen[0]
    common = set.intersection(*[set(results) for unused_chosen, results in probed.values()])
    return min(common, key=lambda name: (sum(results[name].counts()["C"] for unused_c, results in probed.values()),
                                         [-part for part in contracts.parse_version(name)]))


def _drift(params, result, read, docs, bundle, preset, kube_proxy, kube=None):
    """Each machine's drift at the cluster's contract, with the plan lines; every machine is held."""
    plan = result["plan"]
    adoption = mapping.read([(f["name"], docs[f["name"]], f["version"]) for f in read], preset=preset)
    base = dict(adoption.cluster)
    base["cni"] = dict(base["cni"], kubeProxy=kube_proxy)
    refs = dict((str(host), str(name)) for host, name in (params.get("registry_auth") or {}).items())
    if refs:  # the operator names the Secrets that hold the registry credentials the machines carry
        base["registries"] = registry_auth.with_refs(base["registries"], refs)
    # judged against what phase 4 applies: it renders without inline manifests (a managed Cilium's entry is handed
    # to the Helm release by the takeover; adoption maps no other), so the entry leaving a control plane's config is
    # the class B change the plan lists for consent
    cluster_spec = specs.cluster(dict(base, versionContract=release.CONTRACT, inlineManifests=[]))
    specs_by_name = dict((f["name"], specs.machine(spec, cluster_spec)) for f, spec in zip(read, adoption.machines))
    registry_auth.attach(bundle, kube, cluster_spec)
    for host, name in sorted(refs.items()):
        plan.append("registry %s: credentials from Secret %s/%s (read; compared, never shown)" % (host, registry_auth.NAMESPACE, name))
    override = rules.contract_override(params.get("version_contract"))
    probed = _probe_all(bundle, cluster_spec, specs_by_name, read, docs, adoption.unmapped)
    settled, tie_lines = probing.settle(probed)
    contract = override or _cluster_contract(probed, settled)
    plan.append("version contract: %s (%s)" % (contract, "the operator's override" if override else "probed: " + "; ".join(
        "%s %s" % (name, ", ".join("%s C=%d" % (c, d.counts()["C"]) for c, d in sorted(
            results.items(), key=lambda item: contracts.parse_version(item[0]), reverse=True)))
        for name, (unused_chosen, results) in sorted(probed.items()))))
    plan.extend(tie_lines)
    result["contract"] = contract
    result["cluster_spec"] = _shown_spec(dict(base, versionContract=contract))
    if adoption.unmapped:
        plan.append("not mapped (the machines disagree; their paths are class C): %s" % ", ".join(
            "spec." + field for field in adoption.unmapped))
    entries = []
    for f in read:
        name = f["name"]
        results = probed[name][1]
        if contract in results:
            found = results[contract]
        else:
            spec_at = dict(cluster_spec, versionContract=contract)
            found = drift.drift(render.render(bundle, spec_at, specs_by_name[name], contract), docs[name], spec_at,
                                contract, adoption.unmapped)
        counts = found.counts()
        entry = {"name": name, "node": f["node"], "role": _role(f), "uuid": f["uuid"], "talos": f["version"],
                 "probed": settled.get(name), "contract": contract, "drift": found.to_dict(), "held": True,
                 "spec": specs_by_name[name]}
        if found.blocked:
            entry["reason"] = "class C: " + "; ".join(g["hint"] for g in found.hints())
        elif found.of_class("B"):
            entry["reason"] = "class B needs consent (ichor_accept_changes)"
        else:
            entry["reason"] = "released in phase 4 once its drift is zero after class A"
        entries.append(entry)
        summary = "zero drift" if found.zero else "drift A=%d B=%d C=%d" % (counts["A"], counts["B"], counts["C"])
        plan.append("%s: %s at %s; held (%s)" % (name, summary, contract, entry["reason"]))
        plan.extend("%s: %s" % (name, line) for line in found.lines())
    return entries


def _shown_spec(spec):
    """The cluster spec as the plan shows it: inline manifests by name and size, never their contents."""
    shown = dict(spec)
    shown["inlineManifests"] = [{"name": item.get("name"), "size": len(item.get("contents") or "")}
                                for item in spec.get("inlineManifests") or []]
    return shown


def _consent(result, entries):
    consent = ["%s: %s %s" % (e["name"], d["change"], d["path"]) for e in entries for d in e["drift"]["B"]]
    result["consent"] = consent
    blocked = [e["name"] for e in entries if e["drift"]["C"]]
    result["plan"].append("class B consent (ichor_accept_changes): %s" % ("; ".join(consent) if consent else "nothing"))
    result["plan"].append("blocked by class C (stay held, nothing applied to them): %s" % (
        ", ".join(blocked) if blocked else "none"))


def _record(result, outcome, kube_proxy, existing):
    """What the write phase would store in the cluster record (ConfigMap ichor-system/ichor-cluster)."""
    cni = {"preset": outcome["preset"], "kubeProxy": kube_proxy}
    if outcome["preset"] == "unmanaged":
        cni["unmanaged"] = {"talosCNI": outcome["talos_cni"]}
    talos = min((m["talos"] for m in result["machines"]), key=release.parse)
    kubernetes = min((k["version"] for k in result["kubernetes"]), key=release.parse) if result["kubernetes"] else None
    record = {"adopted": True, "contract": result["contract"], "talos": talos, "kubernetes": kubernetes, "cni": cni,
              "detected": {"cni": outcome["row"], "version": result["cni"]["version"]},
              "held": [e["name"] for e in result["machines"]]}
    result["plan"].append("phase 2 would write: the cluster record ichor-system/ichor-cluster (%s; preset %s, "
                          "kubeProxy %s, every machine held), the secrets bundle Secret ichor-system/ichor-secrets-bundle, "
                          "the installer bundle" % ("it exists: updated" if existing.exists else "new",
                                                    outcome["preset"], kube_proxy))
    if outcome["mode"] == rules.TAKEOVER:
        result["plan"].append("phase 3: the Cilium takeover (maesh.ichor.cilium_takeover; its check mode plans its "
                              "preconditions and diff gate)")
    elif outcome["mode"] == rules.INSTALL:
        result["plan"].append("phase 3: the collection's Cilium installed (maesh.ichor.cilium_release install)")
    return record
