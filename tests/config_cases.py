"""The cluster and machine spec of a machinery config case (tests/fixtures/configs/*/case.json): the options
``talosctl gen config`` was given, read as the spec the config engine renders from (only tests need it)."""

from ansible_collections.maesh.ichor.plugins.module_utils.config import spec
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
    machine_spec = {"install": {"disk": case.get("install_disk"), "image": case.get("install_image"), "wipe": bool(case.get("install_wipe"))}}
    return cluster_spec, machine_spec
