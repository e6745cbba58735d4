# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Version contracts v1.12 to v1.14 and what machinery emits for each.

Observed in configs machinery v1.12.7, v1.13.9 and v1.14.1 generated (tests/configgen/README.md):
v1.12 and v1.13 write the legacy v1alpha1 document plus HostnameConfig and RegistryMirrorConfig
documents, and differ only in v1.12's ``machine.network: {}``; v1.14 moves almost everything into
typed documents.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.common import versions
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError

SUPPORTED = ("v1.12", "v1.13", "v1.14")
OLDEST = SUPPORTED[0]
NEWEST = SUPPORTED[-1]


class Contract:
    """One version contract and the form it emits."""

    __slots__ = ("name", "major", "minor")

    def __init__(self, major, minor):
        self.major = major
        self.minor = minor
        self.name = "v%d.%d" % (major, minor)

    def __repr__(self):
        return "Contract(%s)" % self.name

    def __str__(self):
        return self.name

    def __eq__(self, other):
        return isinstance(other, Contract) and (self.major, self.minor) == (other.major, other.minor)

    def __hash__(self):
        return hash((self.major, self.minor))

    def __lt__(self, other):
        return (self.major, self.minor) < (other.major, other.minor)

    def at_least(self, minor):
        return (self.major, self.minor) >= (1, minor)

    @property
    def multidoc_kubernetes(self):
        """KubeletConfig, Kube*Config, UnattendedInstallConfig, SysctlConfig, ... (v1.14 and later)."""
        return self.at_least(14)

    @property
    def legacy_network_placeholder(self):
        """v1.12 writes ``machine.network: {}``; v1.13 and later do not."""
        return not self.at_least(13)


def parse_version(text):
    """(major, minor, patch) of a Talos version or contract string, or a ConfigError."""
    stated = versions.read(str(text or ""))
    if stated is None:
        raise ConfigError("%r is not a Talos version (expected vX.Y or vX.Y.Z)" % (text,))
    return stated.numbers


def get(text):
    """The Contract for 'v1.13', '1.13' or a Talos version such as 'v1.13.9'; refuses out of range."""
    major, minor = parse_version(text)[:2]
    contract = Contract(major, minor)
    if contract < Contract(1, 12):
        raise ConfigError("contract %s is older than the oldest supported (%s); upgrade Talos first" % (contract.name, OLDEST))
    if Contract(1, 14) < contract:
        raise ConfigError("contract %s is newer than the newest supported (%s)" % (contract.name, NEWEST))
    return contract


def probe_order(running_version):
    """Contracts to try, from the running Talos version's down to v1.12 (never below)."""
    major, minor = parse_version(running_version)[:2]
    if (major, minor) < (1, 12):
        raise ConfigError("Talos %s is older than the oldest version supported (v1.12); upgrade Talos first" % running_version)
    top = min((major, minor), (1, 14))
    return [get(name) for name in reversed(SUPPORTED) if parse_version(name)[:2] <= top]
