"""The release set: one place, consistent with the compatibility it relies on, and the README agrees."""

import os
import re

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.common import release

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def test_the_sets_kubernetes_is_supported_by_its_talos_and_its_cilium():
    assert release.talos_supports(release.TALOS, release.KUBERNETES)
    assert release.cilium_supports(release.CILIUM, release.KUBERNETES)
    assert release.CONTRACT == "v%d.%d" % release.minor(release.TALOS)


def test_compatibility_tables():
    assert release.kubernetes_range_for_talos("v1.14.0") == ((1, 33), (1, 37))
    assert release.kubernetes_range_for_cilium("1.18.16") == ((1, 30), (1, 33))
    assert release.kubernetes_range_for_cilium("1.19.10") == ((1, 32), (1, 35))
    assert not release.talos_supports("v1.12.7", "v1.36.6")
    assert release.talos_supports("v1.13.9", "v1.36.6")
    assert release.one_minor_step("v1.35.4", "v1.36.6") and not release.one_minor_step("v1.34.0", "v1.36.6")


@pytest.mark.parametrize("running,state", [("v1.14.5", "up_to_date"), ("v1.14.1", "behind"), ("v1.13.9", "behind"),
                                           ("v1.14.6", "newer"), ("v1.15.0", "newer")])
def test_judge(running, state):
    assert release.judge(running, release.TALOS) == state


def test_validate_change():
    assert release.validate_change("talos", "v1.13.9", "v1.13.9") is None  # unchanged, even when behind
    assert release.validate_change("talos", "v1.13.9", release.TALOS) is None
    assert "not the release set's" in release.validate_change("talos", "v1.13.9", "v1.14.1")
    assert "not the release set's" in release.validate_change("kubernetes", None, "v1.37.0")
    assert release.validate_change("contract", "v1.13", "v1.14") is None


def test_bad_version():
    with pytest.raises(release.VersionError):
        release.parse("latest")


def test_readme_table_matches_release_py():
    text = open(README).read()
    rows = dict(re.findall(r"^\| (Talos|Version contract|Kubernetes|Cilium chart) \| `([^`]+)` \|", text, re.M))
    assert rows == {"Talos": release.TALOS, "Version contract": release.CONTRACT,
                    "Kubernetes": release.KUBERNETES, "Cilium chart": release.CILIUM}
