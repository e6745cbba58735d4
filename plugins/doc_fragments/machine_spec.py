# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The machine spec's fields (config.spec.machine_options), for both options that take them. ansible-test's yamllint
# reads a fragment's attributes as literal strings, so the fields are written twice; validate-modules holds each copy to
# the one argument spec. A module gives the option's description and required, never its suboptions (a module's
# suboptions would replace these whole when ansible-doc merges the fragment).


class ModuleDocFragment:
    # talos_machine_config's machine
    DOCUMENTATION = r"""
options:
  machine:
    type: dict
    suboptions:
      role:
        description: V(controlplane) or V(worker) (required).
        type: str
      hostname:
        description: The hostname; unset, Talos picks a stable one (C(HostnameConfig) C(auto=stable)).
        type: str
      install:
        description: Where and what Talos installs.
        type: dict
        suboptions:
          disk:
            description: The install disk (default C(/dev/sda)).
            type: str
          image:
            description: The installer image (default C(ghcr.io/siderolabs/installer) at the cluster's Talos version).
            type: str
          wipe:
            description: Whether to wipe the disk (default false).
            type: bool
      network:
        description:
          - The machine's network, rendered as C(machine.network) at contracts v1.12 and v1.13 and as C(LinkConfig),
            C(BondConfig), C(VLANConfig), C(Layer2VIPConfig) and C(ResolverConfig) documents at v1.14.
          - DHCP, device selectors, bridges and other link settings have no field (adoption classes them C).
        type: dict
        suboptions:
          interfaces:
            description: The links, in order.
            type: list
            elements: dict
            suboptions:
              name:
                description: The link (C(eth0)), or the bond's own name (C(bond0)) when it has a C(bond).
                type: str
                required: true
              addresses:
                description: Its addresses with their prefix length (C(10.5.0.2/24)).
                type: list
                elements: str
              routes:
                description: Its routes.
                type: list
                elements: dict
                suboptions:
                  network:
                    description: The destination (C(0.0.0.0/0) or C(::/0) is the default route).
                    type: str
                    required: true
                  gateway:
                    description: The gateway.
                    type: str
                  metric:
                    description: The metric.
                    type: int
              mtu:
                description: The MTU.
                type: int
              vip:
                description: A Layer 2 VIP on it (control planes only; the API endpoint of an HA cluster).
                type: str
              bond:
                description: Makes the link a bond of other links.
                type: dict
                suboptions:
                  interfaces:
                    description: The bond's links.
                    type: list
                    elements: str
                    required: true
                  mode:
                    description: The bond mode (for example C(802.3ad), C(active-backup)).
                    type: str
                    required: true
                  lacpRate:
                    description: The LACP rate (C(slow), C(fast)).
                    type: str
                  xmitHashPolicy:
                    description: The transmit hash policy (for example C(layer3+4)).
                    type: str
                  miimon:
                    description: The MII link monitoring interval in milliseconds.
                    type: int
                  updelay:
                    description: Milliseconds before a link that came up is used.
                    type: int
                  downdelay:
                    description: Milliseconds before a link that went down is dropped.
                    type: int
              vlans:
                description: VLANs on the link, each named C(<name>.<id>).
                type: list
                elements: dict
                suboptions:
                  id:
                    description: The VLAN ID.
                    type: int
                    required: true
                  addresses:
                    description: Its addresses with their prefix length (C(10.5.0.2/24)).
                    type: list
                    elements: str
                  routes:
                    description: Its routes.
                    type: list
                    elements: dict
                    suboptions:
                      network:
                        description: The destination (C(0.0.0.0/0) or C(::/0) is the default route).
                        type: str
                        required: true
                      gateway:
                        description: The gateway.
                        type: str
                      metric:
                        description: The metric.
                        type: int
                  mtu:
                    description: The MTU.
                    type: int
                  vip:
                    description: A Layer 2 VIP on it (control planes only; the API endpoint of an HA cluster).
                    type: str
          nameservers:
            description: The DNS servers.
            type: list
            elements: str
      timeServers:
        description: The NTP servers (C(machine.time.servers), or C(TimeSyncConfig) at contract v1.14).
        type: list
        elements: str
      nodeLabels:
        description:
          - Node labels beyond those Talos gives the role (a value given for one of those replaces it).
        type: dict
      nodeTaints:
        description:
          - Node taints (C(key) to C(value:Effect)) beyond the control plane's own C(NoSchedule).
        type: dict
      kubelet:
        description: The kubelet's settings.
        type: dict
        suboptions:
          extraArgs:
            description: Extra command-line arguments, one string value per flag.
            type: dict
          extraMounts:
            description:
              - Extra mounts; contracts v1.12 and v1.13 only (Talos v1.14's multi-document config has none).
            type: list
            elements: dict
            suboptions:
              destination:
                description: Where the mount is in the kubelet's container.
                type: str
                required: true
              type:
                description: The mount type (for example C(bind)).
                type: str
              source:
                description: The host path.
                type: str
              options:
                description: Mount options (for example C(bind), C(rshared), C(rw)).
                type: list
                elements: str
          nodeIPSubnets:
            description: The subnets the kubelet picks the Node IP from (C(nodeIP.validSubnets)).
            type: list
            elements: str
"""

    # init_plan's machines, with the identity init checks
    INIT_MACHINES = r"""
options:
  machines:
    type: list
    elements: dict
    suboptions:
      name:
        description: The inventory name.
        type: str
        required: true
      node:
        description: Its address.
        type: str
        required: true
      role:
        description: Its role.
        type: str
        required: true
        choices: [controlplane, worker]
      uuid:
        description: The UUID it must answer with (optional).
        type: str
      hostname:
        description: The hostname; unset, Talos picks a stable one (C(HostnameConfig) C(auto=stable)).
        type: str
      install:
        description: Where and what Talos installs.
        type: dict
        suboptions:
          disk:
            description: The install disk (default C(/dev/sda)).
            type: str
          image:
            description: The installer image (default C(ghcr.io/siderolabs/installer) at the cluster's Talos version).
            type: str
          wipe:
            description: Whether to wipe the disk (default false).
            type: bool
      network:
        description:
          - The machine's network, rendered as C(machine.network) at contracts v1.12 and v1.13 and as C(LinkConfig),
            C(BondConfig), C(VLANConfig), C(Layer2VIPConfig) and C(ResolverConfig) documents at v1.14.
          - DHCP, device selectors, bridges and other link settings have no field (adoption classes them C).
        type: dict
        suboptions:
          interfaces:
            description: The links, in order.
            type: list
            elements: dict
            suboptions:
              name:
                description: The link (C(eth0)), or the bond's own name (C(bond0)) when it has a C(bond).
                type: str
                required: true
              addresses:
                description: Its addresses with their prefix length (C(10.5.0.2/24)).
                type: list
                elements: str
              routes:
                description: Its routes.
                type: list
                elements: dict
                suboptions:
                  network:
                    description: The destination (C(0.0.0.0/0) or C(::/0) is the default route).
                    type: str
                    required: true
                  gateway:
                    description: The gateway.
                    type: str
                  metric:
                    description: The metric.
                    type: int
              mtu:
                description: The MTU.
                type: int
              vip:
                description: A Layer 2 VIP on it (control planes only; the API endpoint of an HA cluster).
                type: str
              bond:
                description: Makes the link a bond of other links.
                type: dict
                suboptions:
                  interfaces:
                    description: The bond's links.
                    type: list
                    elements: str
                    required: true
                  mode:
                    description: The bond mode (for example C(802.3ad), C(active-backup)).
                    type: str
                    required: true
                  lacpRate:
                    description: The LACP rate (C(slow), C(fast)).
                    type: str
                  xmitHashPolicy:
                    description: The transmit hash policy (for example C(layer3+4)).
                    type: str
                  miimon:
                    description: The MII link monitoring interval in milliseconds.
                    type: int
                  updelay:
                    description: Milliseconds before a link that came up is used.
                    type: int
                  downdelay:
                    description: Milliseconds before a link that went down is dropped.
                    type: int
              vlans:
                description: VLANs on the link, each named C(<name>.<id>).
                type: list
                elements: dict
                suboptions:
                  id:
                    description: The VLAN ID.
                    type: int
                    required: true
                  addresses:
                    description: Its addresses with their prefix length (C(10.5.0.2/24)).
                    type: list
                    elements: str
                  routes:
                    description: Its routes.
                    type: list
                    elements: dict
                    suboptions:
                      network:
                        description: The destination (C(0.0.0.0/0) or C(::/0) is the default route).
                        type: str
                        required: true
                      gateway:
                        description: The gateway.
                        type: str
                      metric:
                        description: The metric.
                        type: int
                  mtu:
                    description: The MTU.
                    type: int
                  vip:
                    description: A Layer 2 VIP on it (control planes only; the API endpoint of an HA cluster).
                    type: str
          nameservers:
            description: The DNS servers.
            type: list
            elements: str
      timeServers:
        description: The NTP servers (C(machine.time.servers), or C(TimeSyncConfig) at contract v1.14).
        type: list
        elements: str
      nodeLabels:
        description:
          - Node labels beyond those Talos gives the role (a value given for one of those replaces it).
        type: dict
      nodeTaints:
        description:
          - Node taints (C(key) to C(value:Effect)) beyond the control plane's own C(NoSchedule).
        type: dict
      kubelet:
        description: The kubelet's settings.
        type: dict
        suboptions:
          extraArgs:
            description: Extra command-line arguments, one string value per flag.
            type: dict
          extraMounts:
            description:
              - Extra mounts; contracts v1.12 and v1.13 only (Talos v1.14's multi-document config has none).
            type: list
            elements: dict
            suboptions:
              destination:
                description: Where the mount is in the kubelet's container.
                type: str
                required: true
              type:
                description: The mount type (for example C(bind)).
                type: str
              source:
                description: The host path.
                type: str
              options:
                description: Mount options (for example C(bind), C(rshared), C(rw)).
                type: list
                elements: str
          nodeIPSubnets:
            description: The subnets the kubelet picks the Node IP from (C(nodeIP.validSubnets)).
            type: list
            elements: str
"""
