"""What a test means by a version, asked of the release set (issue 43).

plugins/module_utils/common/release.py is the one place the collection writes its versions. A test that means
"the set's Talos", "one minor behind it" or "a Kubernetes the set's Talos does not support" asks this module,
which derives the answer from the set; moving the set then changes release.py, and the tests that must change
are the ones whose meaning changes.

What is NOT the set's stays literal in the tests, because it is a fact of a fixture:

* tests/fixtures/configs/<contract>/<generator>/<case>: configs real Talos machinery made, at contracts v1.12,
  v1.13 and v1.14 by machinery v1.12.7, v1.13.9 and v1.14.1 (tests/configgen builds one binary per contract);
  each case's Kubernetes (k8s-older: 1.35.4 at v1.13, 1.36.3 at v1.14; machinery v1.14.1's default 1.37.0) is
  in its configs. A case path names its generator, so a test reading a case writes that version out.
* the kube lab's binaries (kube-apiserver v1.36.3, tests/lab/kube/cluster.py KUBE_VERSION) and the Cilium charts
  the lab packages (tests/lab/cilium/charts.py: the set's minor is repackaged as the set's chart version, the
  foreign ones keep theirs, e.g. 1.19.5).
* a parser's or a support table's own example ("v1.2.3", the Talos v1.14 row of release.TALOS_KUBERNETES).

Versions are written as release.py writes them: Talos and Kubernetes with a ``v``, Cilium without one.
"""

from tests import collection_path

collection_path.ensure()

from ansible_collections.maesh.ichor.plugins.module_utils.common import release  # noqa: E402  pylint: disable=wrong-import-position

TALOS = release.TALOS
CONTRACT = release.CONTRACT
KUBERNETES = release.KUBERNETES
CILIUM = release.CILIUM


def _text(numbers, like):
    """(major, minor, patch) written as ``like`` is: with a leading ``v`` or not."""
    return ("v" if like.startswith("v") else "") + "%d.%d.%d" % numbers


def bare(version):
    """The version without its ``v``: ``v1.36.6`` -> ``1.36.6`` (a spec's kubernetesVersion, an image map)."""
    return version.lstrip("v")


def minor(version):
    """``v1.14.5`` -> ``v1.14``: the version's minor, as a contract is written (``1.20.4`` -> ``1.20``)."""
    return _text(release.parse(version), version).rsplit(".", 1)[0]


def patch_ahead(version):
    """The next patch of the same minor: ``v1.14.5`` -> ``v1.14.6``, newer than ``version``."""
    major, minor_, patch = release.parse(version)
    return _text((major, minor_, patch + 1), version)


def patch_behind(version):
    """The patch before ``version`` in its minor: ``v1.14.5`` -> ``v1.14.4``. A .0 has none (a test that needs
    one must then say what it means instead)."""
    major, minor_, patch = release.parse(version)
    if patch == 0:
        raise ValueError("%s is the first patch of its minor: no patch is behind it" % version)
    return _text((major, minor_, patch - 1), version)


def minor_ahead(version, minors=1):
    """The first patch ``minors`` minors after ``version``: ``v1.36.6`` -> ``v1.37.0``."""
    major, minor_, unused_patch = release.parse(version)
    return _text((major, minor_ + minors, 0), version)


def minor_behind(version, minors=1):
    """The first patch ``minors`` minors before ``version``: ``v1.14.5`` -> ``v1.13.0``, ``v1.36.6`` (2) ->
    ``v1.34.0``. Any patch of that minor means the same to the rollout; tests use the .0, which always exists."""
    major, minor_, unused_patch = release.parse(version)
    return _text((major, minor_ - minors, 0), version)


def installer(version=None):
    """The installer image of a Talos version (the set's by default)."""
    return release.installer_image(version)


# The set's Talos and what is one step from it.
TALOS_NEWER = patch_ahead(TALOS)  # a Talos newer than the set's: rollout refuses to go down
TALOS_BEHIND = minor_behind(TALOS)  # a Talos one minor behind the set's: the rollout's usual start
CONTRACT_BEHIND = minor(TALOS_BEHIND)  # the contract of TALOS_BEHIND, one before the set's
# The oldest Talos minor adopt and the rollout take (release.MINIMUM_TALOS), and a Talos below it.
OLDEST_TALOS = "v%d.%d" % release.MINIMUM_TALOS
BELOW_OLDEST_TALOS = minor_behind(OLDEST_TALOS + ".0")

# Kubernetes: one minor behind is the rollout's step, two minors behind is refused, a newer one too.
KUBERNETES_NEWER = minor_ahead(KUBERNETES)
KUBERNETES_BEHIND = minor_behind(KUBERNETES)
KUBERNETES_TWO_BEHIND = minor_behind(KUBERNETES, 2)
# The newest Kubernetes minor below the range the set's Talos supports (release.TALOS_KUBERNETES).
_LOWEST = release.kubernetes_range_for_talos(TALOS)[0]
KUBERNETES_UNSUPPORTED = _text((_LOWEST[0], _LOWEST[1] - 1, 0), KUBERNETES)

# Cilium: the lab keys its charts by minor ("1.20"), the set's and the foreign ones before it.
CILIUM_MINOR = minor(CILIUM)
CILIUM_BEHIND = minor_behind(CILIUM)
CILIUM_MINOR_BEHIND = minor(CILIUM_BEHIND)
