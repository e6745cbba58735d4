"""The release set: one place, consistent with the compatibility it relies on, and the README agrees."""

import os
import re

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from tests import versions

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


# an earlier patch of the set's minor, when the set's Talos is not its minor's first
EARLIER_PATCH = [(versions.patch_behind(versions.TALOS), "behind")] if release.parse(versions.TALOS)[2] else []


@pytest.mark.parametrize("running,state", [(versions.TALOS, "up_to_date"), (versions.TALOS_BEHIND, "behind"),
                                           (versions.TALOS_NEWER, "newer"), (versions.minor_ahead(versions.TALOS), "newer")]
                         + EARLIER_PATCH)
def test_judge(running, state):
    assert release.judge(running, release.TALOS) == state


def test_validate_change():
    behind = versions.TALOS_BEHIND
    assert release.validate_change("talos", behind, behind) is None  # unchanged, even when behind
    assert release.validate_change("talos", behind, release.TALOS) is None
    assert "not the release set's" in release.validate_change("talos", behind, versions.TALOS_NEWER)
    assert "not the release set's" in release.validate_change("kubernetes", None, versions.KUBERNETES_NEWER)
    assert release.validate_change("contract", versions.CONTRACT_BEHIND, release.CONTRACT) is None


def test_bad_version():
    with pytest.raises(release.VersionError):
        release.parse("latest")


def test_readme_table_matches_release_py():
    text = open(README).read()
    rows = dict(re.findall(r"^\| (Talos|Version contract|Kubernetes|Cilium chart) \| `([^`]+)` \|", text, re.M))
    assert rows == {"Talos": release.TALOS, "Version contract": release.CONTRACT,
                    "Kubernetes": release.KUBERNETES, "Cilium chart": release.CILIUM}
