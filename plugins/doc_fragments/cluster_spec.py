# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment:
    # The cluster spec's fields (ansible_module.specs.cluster). A module documents the option itself
    # (description, required); its own keys win over these when Ansible merges the fragment.
    DOCUMENTATION = r"""
options:
  cluster:
    description: The cluster spec (field names in camelCase, as the TalosCluster resource names them).
    type: dict
    suboptions:
      name:
        description: The cluster name (required).
        type: str
      endpoint:
        description: The Kubernetes API endpoint, an C(https://) URL (required).
        type: str
      kubernetesVersion:
        description: The Kubernetes version C(X.Y.Z) (a C(v) prefix is accepted; required).
        type: str
      talosVersion:
        description:
          - The Talos version, for example V(v1.14.1); the installer image's tag when the machine spec gives no install image.
          - The spec needs this or O(cluster.versionContract).
        type: str
      versionContract:
        description:
          - The version contract to render (V(v1.12), V(v1.13) or V(v1.14)). Unset, it is probed from the live config
            (a machine in maintenance mode needs it set).
        type: str
      network:
        description: The cluster network.
        type: dict
        suboptions:
          dnsDomain:
            description: The cluster DNS domain (default C(cluster.local)).
            type: str
          podSubnets:
            description: Pod subnets (default C(10.244.0.0/16)).
            type: list
            elements: str
          serviceSubnets:
            description: Service subnets (default C(10.96.0.0/12)).
            type: list
            elements: str
      cni:
        description: The CNI (required).
        type: dict
        suboptions:
          preset:
            description:
              - V(cilium) (no Talos CNI; Ichor runs Cilium and owns the class B items) or V(unmanaged).
            type: str
          kubeProxy:
            description: V(enabled) (the default) or V(replaced) (kube-proxy disabled in Talos).
            type: str
          unmanaged:
            description: Only with C(preset=unmanaged).
            type: dict
            suboptions:
              talosCNI:
                description: The CNI Talos applies, V(default) (flannel, the default), V(none) or V(custom).
                type: str
              urls:
                description: The manifest URLs of C(talosCNI=custom).
                type: list
                elements: str
      kubePrism:
        description: KubePrism.
        type: dict
        suboptions:
          enabled:
            description: Whether KubePrism runs (default true).
            type: bool
          port:
            description: Its port (default 7445).
            type: int
      registries:
        description:
          - Registry mirrors, and registry credentials by reference. The credentials themselves and TLS are never part
            of the spec.
        type: list
        elements: dict
        suboptions:
          host:
            description: The registry the mirror is for (for example C(docker.io)).
            type: str
          endpoints:
            description: The mirror endpoints.
            type: list
            elements: str
          overridePath:
            description: Whether the endpoints' path replaces C(/v2).
            type: bool
          skipFallback:
            description: Whether to skip the upstream registry when the mirrors fail.
            type: bool
          authSecretRef:
            description:
              - The registry's credentials - a Secret in C(ichor-system) with the keys C(username) and C(password), or
                C(auth), or C(identityToken). Read when a config is rendered, written into it (C(RegistryAuthConfig)
                at contract v1.14), never shown; an entry may have this and no endpoints.
            type: dict
            suboptions:
              name:
                description: The Secret's name.
                type: str
                required: true
      certSANs:
        description: Extra SANs, for C(machine.certSANs) and the API server's SANs (one list).
        type: list
        elements: str
      sysctls:
        description: Sysctls, rendered as a patch (C(SysctlConfig) or C(machine.sysctls)).
        type: dict
      kernelModules:
        description: Kernel modules, rendered as a patch (C(KernelModuleConfig) or C(machine.kernel.modules)).
        type: list
        elements: str
      inlineManifests:
        description: Inline manifests (control planes only); a Cilium entry is Ichor-owned (class B).
        type: list
        elements: dict
        suboptions:
          name:
            description: The manifest's name.
            type: str
            required: true
          contents:
            description: The manifest.
            type: str
            required: true
      discovery:
        description: Accepted and ignored; the renderer writes discovery settings itself.
        type: raw
      apiServer:
        description: kube-apiserver's settings (control planes).
        type: dict
        suboptions:
          extraArgs:
            description:
              - Extra command-line arguments, one string value per flag. At contract v1.14 Talos refuses the
                authentication and authorization flags (C(oidc-*), C(anonymous-auth), C(authorization-*)).
            type: dict
      controllerManager:
        description: kube-controller-manager's settings (control planes).
        type: dict
        suboptions:
          extraArgs:
            description: Extra command-line arguments, one string value per flag.
            type: dict
      scheduler:
        description: kube-scheduler's settings (control planes).
        type: dict
        suboptions:
          extraArgs:
            description: Extra command-line arguments, one string value per flag.
            type: dict
      auditPolicy:
        description:
          - The API server's audit policy (an C(audit.k8s.io/v1) C(Policy)); unset, Talos's default (C(Metadata) for
            everything); C({}) for none.
        type: dict
      admissionControl:
        description:
          - The API server's admission plugin configurations; unset, Talos's default (C(PodSecurity), enforcing
            C(baseline)); C([]) for none.
        type: list
        elements: dict
        suboptions:
          name:
            description: The admission plugin (for example C(PodSecurity)).
            type: str
            required: true
          configuration:
            description: Its configuration (for C(PodSecurity) a C(PodSecurityConfiguration)).
            type: dict
            required: true"""
