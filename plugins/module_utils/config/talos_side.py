# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one live machine config says about the Talos side, as ``talos_facts`` reports it (read-only, raw).

Unlike config.adopt (which maps a config to the cluster spec and folds what has no field), this says what
the config states, as it states it, in either form (the legacy v1alpha1 fields or the typed documents):
KubePrism, kube-proxy, the CNI selection (``cluster.network.cni``, the flannel document, the custom CNI's
manifests), the other external manifests, inline manifests (names and whether each holds Cilium's
DaemonSet; never their contents), install, registry mirrors (hosts and endpoints; credentials and TLS only
as the hosts that have them, never their values) and cert SANs.

The CNI's ``name`` is ``flannel``, ``custom`` or ``none``, or ``""`` when the config states none: a
contract v1.14 worker's config carries no CNI document (the control planes' say it for the cluster).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.config import documents
from ansible_collections.maesh.ichor.plugins.module_utils.config import spec as specs
from ansible_collections.maesh.ichor.plugins.module_utils.talos import KUBEPRISM_PORT


def _map(value):
    return value if isinstance(value, dict) else {}


def _list(value):
    return value if isinstance(value, list) else []


def _strings(value):
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _text(value):
    return value if isinstance(value, str) else ""


def _port(value, enabled):
    """The port a config states; unstated: Talos's default while KubePrism is on, 0 (none) while it is off."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return KUBEPRISM_PORT if enabled else 0


def _body(docs, kind, name=None):
    doc = documents.find(docs, kind, name)
    return _map(doc.body) if doc is not None else None


def _manifest(name, contents):
    return {"name": name, "cilium": specs.is_cilium_manifest(contents),
            "size": len(contents.encode("utf-8")) if isinstance(contents, str) else 0}


def _registries(docs, legacy):
    get = documents.get_path
    mirrors = {}
    for host, entry in _map(get(legacy, "machine.registries.mirrors")).items():
        entry = _map(entry)
        mirrors[str(host)] = {"host": str(host), "endpoints": _strings(entry.get("endpoints")),
                              "skip_fallback": entry.get("skipFallback") is True}
    for doc in documents.find_all(docs, "RegistryMirrorConfig"):
        if doc.name:
            items = doc.body.get("endpoints") if isinstance(doc.body.get("endpoints"), list) else []
            mirrors[doc.name] = {"host": doc.name,
                                 "endpoints": [_text(item.get("url")) for item in items if isinstance(item, dict)],
                                 "skip_fallback": doc.body.get("skipFallback") is True}
    auth = set(str(host) for host, entry in _map(get(legacy, "machine.registries.config")).items()
               if isinstance(entry, dict) and entry.get("auth"))
    tls = set(str(host) for host, entry in _map(get(legacy, "machine.registries.config")).items()
              if isinstance(entry, dict) and entry.get("tls"))
    auth.update(doc.name for doc in documents.find_all(docs, "RegistryAuthConfig") if doc.name)
    tls.update(doc.name for doc in documents.find_all(docs, "RegistryTLSConfig") if doc.name)
    return {"mirrors": [mirrors[host] for host in sorted(mirrors)], "auth": sorted(auth), "tls": sorted(tls)}


def facts(docs):
    """The Talos-side facts of one live config (text or documents). Raises ConfigError when it is not a config."""
    if isinstance(docs, (str, bytes)):
        docs = documents.parse(docs)
    get = documents.get_path
    legacy_doc = documents.find(docs, documents.LEGACY)
    legacy = _map(legacy_doc.body) if legacy_doc is not None else {}
    typed = documents.find(docs, "KubeletConfig") is not None  # contract v1.14: Kubernetes in typed documents

    externals = []
    for doc in documents.find_all(docs, "KubeExternalManifestConfig"):
        if doc.name:
            externals.append({"name": doc.name, "url": _text(doc.body.get("url"))})
    externals.extend({"name": "", "url": url} for url in _strings(get(legacy, "cluster.extraManifests")))

    if typed:
        prism_doc = _body(docs, "KubePrismConfig")
        kube_prism = {"enabled": prism_doc is not None, "port": _port(_map(prism_doc).get("port"), prism_doc is not None)}
        proxy_doc = _body(docs, "KubeProxyConfig")
        kube_proxy = {"enabled": not (proxy_doc is not None and proxy_doc.get("enabled") is False),
                      "mode": _text(_map(proxy_doc).get("mode"))}
        custom = [item for item in externals if item["name"] == "custom-cni"]
        if documents.find(docs, "KubeFlannelCNIConfig") is not None:
            cni = {"name": "flannel", "urls": [], "flannel_document": True}
        elif custom:
            cni = {"name": "custom", "urls": [item["url"] for item in custom], "flannel_document": False}
        elif _text(get(legacy, "machine.type")) in ("controlplane", "init"):
            cni = {"name": "none", "urls": [], "flannel_document": False}
        else:
            cni = {"name": "", "urls": [], "flannel_document": False}
        inline = [_manifest(doc.name, doc.body.get("manifest")) for doc in documents.find_all(docs, "KubeInlineManifestConfig")
                  if doc.name]
        api_sans = _strings(_map(_body(docs, "KubeAPIServerConfig")).get("certExtraSANs"))
    else:
        prism = _map(get(legacy, "machine.features.kubePrism"))
        kube_prism = {"enabled": prism.get("enabled") is True, "port": _port(prism.get("port"), prism.get("enabled") is True)}
        kube_proxy = {"enabled": get(legacy, "cluster.proxy.disabled") is not True,
                      "mode": _text(get(legacy, "cluster.proxy.mode"))}
        # no cluster.network.cni: Talos runs its default, flannel
        cni = {"name": _text(get(legacy, "cluster.network.cni.name")) or "flannel",
               "urls": _strings(get(legacy, "cluster.network.cni.urls")), "flannel_document": False}
        inline = [_manifest(_text(item.get("name")), item.get("contents"))
                  for item in _list(get(legacy, "cluster.inlineManifests")) if isinstance(item, dict)]
        api_sans = _strings(get(legacy, "cluster.apiServer.certSANs"))

    install_doc = _body(docs, "UnattendedInstallConfig")
    if install_doc is not None:
        selector = get(install_doc, "provisioning.diskSelector.match")
        install = {"disk": "", "disk_selector": _text(selector), "image": _text(get(install_doc, "installer.image")),
                   "wipe": get(install_doc, "provisioning.wipe") is True}
    else:
        selector = get(legacy, "machine.install.diskSelector")
        selected = ", ".join("%s=%s" % pair for pair in sorted((str(k), str(v)) for k, v in selector.items())) \
            if isinstance(selector, dict) else ""
        install = {"disk": _text(get(legacy, "machine.install.disk")), "disk_selector": selected,
                   "image": _text(get(legacy, "machine.install.image")), "wipe": get(legacy, "machine.install.wipe") is True}

    return {
        "config_role": "controlplane" if _text(get(legacy, "machine.type")) == "init" else _text(get(legacy, "machine.type")),
        "form": "typed" if typed else "legacy",
        "kubeprism": kube_prism,
        "kube_proxy": kube_proxy,
        "cni": cni,
        "external_manifests": externals,
        "inline_manifests": inline,
        "install": install,
        "registries": _registries(docs, legacy),
        "cert_sans": {"machine": _strings(get(legacy, "machine.certSANs")), "api_server": api_sans},
    }
