"""The cluster and machine spec of a machinery config case (tests/fixtures/configs/*/case.json): the options
``talosctl gen config`` was given, read as the spec the config engine renders from (only tests need it)."""

from ansible_collections.maesh.ichor.plugins.module_utils.config import render, spec
from ansible_collections.maesh.ichor.plugins.module_utils.talos import KUBEPRISM_PORT


def spec_of_case(case):
    """(cluster spec, machine spec without role) from ``talosctl gen config`` options.

    ``case`` has the keys of tests/fixtures/configs/*/case.json: cluster_name, endpoint,
    kubernetes_version, talos_version, contract, install_disk/image/wipe, cert_sans,
    registry_mirrors ({host: {endpoints, override_path, skip_fallback}}), sysctls, kernel_modules,
    kubeprism ({enabled, port}), kube_proxy_disabled, cni ({name: flannel|none|custom, urls}),
    inline_manifests, pod_subnets, service_subnets, dns_domain. A Cilium inline manifest on
    ``cni: none`` with KubePrism on 7445 is read as the managed preset; everything else as unmanaged.
    """
    cni_name = (case.get("cni") or {}).get("name") or "flannel"
    manifests = [{"name": item["name"], "contents": item["contents"]} for item in case.get("inline_manifests") or []]
    prism = case.get("kubeprism") or {"enabled": True, "port": KUBEPRISM_PORT}
    cilium = (cni_name == "none" and any(spec.is_cilium_manifest(item["contents"]) for item in manifests)
              and prism.get("enabled") and int(prism.get("port") or 0) == KUBEPRISM_PORT)
    cni = {"preset": "cilium" if cilium else "unmanaged", "kubeProxy": "replaced" if case.get("kube_proxy_disabled") else "enabled"}
    if not cilium:
        cni["unmanaged"] = {"talosCNI": {"flannel": "default"}.get(cni_name, cni_name)}
        if cni_name == "custom":
            cni["unmanaged"]["urls"] = list((case.get("cni") or {}).get("urls") or [])
    registries = []
    for host, entry in sorted((case.get("registry_mirrors") or {}).items()):
        registries.append({"host": host, "endpoints": list(entry.get("endpoints") or []),
                           "overridePath": bool(entry.get("override_path")), "skipFallback": bool(entry.get("skip_fallback"))})
    cluster_spec = {
        "name": case["cluster_name"],
        "endpoint": case["endpoint"],
        "kubernetesVersion": case["kubernetes_version"],
        "talosVersion": case.get("talos_version"),
        "versionContract": case.get("contract"),
        "network": {"dnsDomain": case.get("dns_domain") or "cluster.local",
                    "podSubnets": list(case.get("pod_subnets") or []), "serviceSubnets": list(case.get("service_subnets") or [])},
        "cni": cni,
        "kubePrism": {"enabled": bool(prism.get("enabled")), "port": int(prism.get("port") or 0) or None},
        "registries": registries,
        "certSANs": list(case.get("cert_sans") or []),
        "sysctls": dict(case.get("sysctls") or {}),
        "kernelModules": list(case.get("kernel_modules") or []),
        "inlineManifests": manifests,
    }
    cluster_spec.update(case.get("cluster_fields") or {})
    machine_spec = {"install": {"disk": case.get("install_disk"), "image": case.get("install_image"), "wipe": bool(case.get("install_wipe"))}}
    if case.get("machine_fields"):
        machine_spec[ROLES_KEY] = dict((role, _beyond_role(role, case["contract"], fields))
                                       for role, fields in case["machine_fields"].items())
    return cluster_spec, machine_spec


# Where spec_of_case keeps a case's per-role machine fields (tests/configgen/src/cases_fields.go): for_role() applies
# them; the config engine refuses the key, so a spec used without for_role() fails loudly.
ROLES_KEY = "_roles"


def for_role(machine_spec, role):
    """The machine spec of ``role``: the case's install, the role's own fields (network, labels, ...) and the role."""
    out = dict((key, value) for key, value in machine_spec.items() if key != ROLES_KEY)
    out.update((machine_spec.get(ROLES_KEY) or {}).get(role) or {})
    out["role"] = role
    return out


def _beyond_role(role, contract, fields):
    """case.json's node labels and taints are the config's, with those the generator gives the role: the spec states
    what a machine carries beyond them."""
    form = "typed" if contract == "v1.14" else "legacy"
    fields = dict(fields)
    for key, defaults in (("nodeLabels", render.DEFAULT_LABELS), ("nodeTaints", render.DEFAULT_TAINTS)):
        if key in fields:
            own = defaults[form][role]
            fields[key] = dict((name, value) for name, value in fields[key].items() if own.get(name) != value)
    return fields
