"""common.versions: the one reader of version strings, and what its callers accept of what it reads."""

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.common import versions
from ansible_collections.maesh.ichor.plugins.module_utils.config import contracts, images
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cni
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import talos_step
from ansible_collections.maesh.ichor.plugins.module_utils.talos import inventory


@pytest.mark.parametrize("text, numbers, patch, v, suffix", [
    ("v1.14.5", (1, 14, 5), True, True, ""),
    ("1.36.6", (1, 36, 6), True, False, ""),
    ("v1.14", (1, 14, 0), False, True, ""),
    (" v1.20.4 ", (1, 20, 4), True, True, ""),
    ("v1.15.0-alpha.0-12-gabcdef", (1, 15, 0), True, True, "-alpha.0-12-gabcdef"),
    ("v1.36.3+k3s1", (1, 36, 3), True, True, "+k3s1"),
    ("v1.36.3-rc.1+build.5", (1, 36, 3), True, True, "-rc.1+build.5"),
])
def test_what_a_version_states(text, numbers, patch, v, suffix):
    stated = versions.read(text)
    assert (stated.numbers, stated.patch_written, stated.v, stated.suffix) == (numbers, patch, v, suffix)
    assert versions.numbers(text) == numbers


@pytest.mark.parametrize("text", ["", "v", "1", "v1.", "1.2.3.4", "latest", "v1.2.x", "1.2.3-", "1.2.3+", "vv1.2.3",
                                  "1.2.3 4", None, 1.2, b"1.2.3", "\u0661.2.3"])
def test_what_is_not_a_version(text):
    assert versions.read(text) is None and versions.numbers(text) is None


def test_each_reader_takes_what_it_needs_of_the_one_pattern():
    assert release.parse("v1.14.5-rc.1") == (1, 14, 5) and contracts.parse_version("v1.13") == (1, 13, 0)
    assert images.tag_version("ghcr.io/siderolabs/kubelet:v1.36.3@sha256:" + "a" * 64) == "v1.36.3"
    assert images.tag_version("ghcr.io/siderolabs/kubelet:v1.36.3-rc.1") is None  # a component's version is full
    assert cni.image_version("quay.io/cilium/cilium:v1.20.4-rc.1") == "1.20.4"
    assert cni.image_version("quay.io/cilium/cilium:latest") is None
    assert talos_step.image_version("ghcr.io/siderolabs/installer:v1.14.5-beta.0") == "v1.14.5-beta.0"
    with pytest.raises(Exception, match="not a Talos version"):
        talos_step.image_version("ghcr.io/siderolabs/installer:1.14.5")  # Talos tags begin with v
    assert inventory.os_version("Talos (v1.14.1)") == "v1.14.1" and inventory.os_version("Ubuntu 24.04") is None
