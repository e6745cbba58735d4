"""Image references (common.images): every form users write parses into registry, path, tag and digest as
containerd and Talos read it (github.com/distribution/reference), and every malformed one is one clear line.
The Talos step's target is the tag (rollout.talos_step.image_version); CNI detection reads the tag's version."""

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.common import images
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cni
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import talos_step

D64 = "sha256:" + "0123456789abcdef" * 4


@pytest.mark.parametrize("text, registry, path, tag, digest", [
    ("installer", None, "installer", None, None),
    ("installer:v1.14.5", None, "installer", "v1.14.5", None),
    ("siderolabs/installer:v1.14.5", None, "siderolabs/installer", "v1.14.5", None),  # a path on the default registry
    ("docker.io/x", "docker.io", "x", None, None),
    ("docker.io/library/busybox:1.36", "docker.io", "library/busybox", "1.36", None),
    ("ghcr.io/siderolabs/installer:v1.14.5", "ghcr.io", "siderolabs/installer", "v1.14.5", None),
    ("registry:5000/a/b/installer:v1.14.5", "registry:5000", "a/b/installer", "v1.14.5", None),
    ("registry:5000/installer", "registry:5000", "installer", None, None),  # the port is no tag
    ("localhost:5000/installer", "localhost:5000", "installer", None, None),
    ("localhost/installer:v1.14.5", "localhost", "installer", "v1.14.5", None),
    ("10.5.0.1:5000/siderolabs/installer:v1.14.5", "10.5.0.1:5000", "siderolabs/installer", "v1.14.5", None),
    ("[fd00::1]:5000/installer:v1.14.5", "[fd00::1]:5000", "installer", "v1.14.5", None),
    ("factory.talos.dev/installer/376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba:v1.14.5",
     "factory.talos.dev", "installer/376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba", "v1.14.5", None),
    ("ghcr.io/siderolabs/installer:v1.14.5@" + D64, "ghcr.io", "siderolabs/installer", "v1.14.5", D64),
    ("registry:5000/a/installer:v1.14.5@" + D64, "registry:5000", "a/installer", "v1.14.5", D64),
    ("ghcr.io/siderolabs/installer@" + D64, "ghcr.io", "siderolabs/installer", None, D64),
    ("quay.io/cilium/cilium:v1.20.4@sha512:" + "ab" * 64, "quay.io", "cilium/cilium", "v1.20.4", "sha512:" + "ab" * 64),
    ("GHCR.IO/siderolabs/installer:v1.14.5", "GHCR.IO", "siderolabs/installer", "v1.14.5", None),  # DNS: any case
    ("Registry/installer:v1.14.5", "Registry", "installer", "v1.14.5", None),  # capitals make it a registry
    ("a__b/c-d.e_f/g---h:V1.X_y-z", None, "a__b/c-d.e_f/g---h", "V1.X_y-z", None),
])
def test_every_form_users_write(text, registry, path, tag, digest):
    ref = images.parse(text)
    assert (ref.registry, ref.path, ref.tag, ref.digest) == (registry, path, tag, digest)
    assert str(ref) == text
    name = text.split("@", 1)[0]
    assert ref.repository == (name[:-len(tag) - 1] if tag else name)


FORM = "[registry[:port]/]path[:tag][@sha256:<64 hex digits>]"


@pytest.mark.parametrize("text, problem", [
    ("ghcr.io/Siderolabs/installer:v1.14.5", "the repository name must be lowercase"),
    ("ghcr.io/siderolabs/installer:v1.14.5 ", "it has leading or trailing whitespace"),
    ("ghcr.io/siderolabs/installer:v1.14.5\n", "it has leading or trailing whitespace"),
    ("installer:", "the tag '' is not 1 to 128 letters, digits, '_', '.' or '-' (not starting with '.' or '-')"),
    ("installer:.v1", "the tag '.v1' is not 1 to 128 letters, digits, '_', '.' or '-' (not starting with '.' or '-')"),
    ("installer:v1:v2", "the tag 'v1:v2' is not 1 to 128 letters, digits, '_', '.' or '-' (not starting with '.' or '-')"),
    ("installer:v1.14.5@sha256:abc", "the digest 'sha256:abc' is not algorithm:hex (sha256:<64 hex digits>)"),
    ("installer@", "the digest '' is not algorithm:hex (sha256:<64 hex digits>)"),
    ("installer@md5:" + "a" * 32, "unsupported digest algorithm 'md5' (sha256, sha384 or sha512)"),
    ("installer@sha256:" + "a" * 63, "a sha256 digest has 64 hex digits, this one 63"),
    ("installer@sha256:" + "A" * 64, "the digest's hex digits must be lowercase"),
    ("installer:v1.14.5@sha256:%s@sha256:%s" % ("a" * 64, "a" * 64),
     "the digest 'sha256:%s@sha256:%s' is not algorithm:hex (sha256:<64 hex digits>)" % ("a" * 64, "a" * 64)),
    ("-installer", "not a reference of the form " + FORM),
    ("ghcr.io//installer", "not a reference of the form " + FORM),
    ("ghcr.io/installer/", "not a reference of the form " + FORM),
    ("https://ghcr.io/installer", "not a reference of the form " + FORM),
    ("ghcr.io:port/installer", "not a reference of the form " + FORM),
    ("gh cr.io/installer", "not a reference of the form " + FORM),
    ("ghcr.io/inställer:v1", "not a reference of the form " + FORM),
])
def test_a_malformed_reference_is_one_clear_line(text, problem):
    with pytest.raises(images.ImageRefError) as exc:
        images.parse(text)
    assert exc.value.message == "image reference %r: %s" % (text, problem)
    assert "\n" not in exc.value.message


@pytest.mark.parametrize("value, message", [
    ("", "the image reference is empty; expected " + FORM),
    (None, "an image reference must be a string (%s), not NoneType" % FORM),
    (["ghcr.io/x"], "an image reference must be a string (%s), not list" % FORM),
])
def test_an_empty_or_non_string_reference(value, message):
    with pytest.raises(images.ImageRefError) as exc:
        images.parse(value)
    assert exc.value.message == message


def test_an_overlong_name_is_refused_and_the_quote_is_cut():
    text = "registry.example/" + "a" * 300 + ":v1.14.5"
    with pytest.raises(images.ImageRefError) as exc:
        images.parse(text)
    assert exc.value.message.endswith("...': the repository name is longer than 255 characters")
    assert len(exc.value.message) < 300


@pytest.mark.parametrize("image, version", [
    ("ghcr.io/siderolabs/installer:v1.14.5", "v1.14.5"),
    ("ghcr.io/siderolabs/installer:v1.14.5@" + D64, "v1.14.5"),  # issue 12: not the digest
    ("registry:5000/a/b/installer:v1.14.5", "v1.14.5"),
    ("registry:5000/a/b/installer:v1.14.5@" + D64, "v1.14.5"),
    ("factory.talos.dev/installer/376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba:v1.14.5", "v1.14.5"),
    ("ghcr.io/siderolabs/installer:v1.15.0-beta.1", "v1.15.0-beta.1"),
])
def test_the_talos_step_target_is_the_tag(image, version):
    assert talos_step.image_version(image) == version


@pytest.mark.parametrize("image", [
    "ghcr.io/siderolabs/installer@" + D64,  # the version cannot be known before the upgrade
    "registry:5000/installer",
    "ghcr.io/siderolabs/installer:latest",
    "ghcr.io/siderolabs/installer:1.14.5",
    "ghcr.io/siderolabs/installer:v1.14",
    "ghcr.io/siderolabs/installer:v1.14.5:x",
])
def test_the_talos_step_refuses_an_image_without_a_version_tag(image):
    with pytest.raises(images.ImageRefError) as exc:
        talos_step.image_version(image)
    assert "\n" not in exc.value.message and exc.value.message


@pytest.mark.parametrize("image, version", [
    ("quay.io/cilium/cilium:v1.20.4@sha256:" + "ab" * 32, "1.20.4"),
    ("quay.io/cilium/cilium:v1.20.4", "1.20.4"),
    ("registry:5000/cilium/cilium:1.20.4", "1.20.4"),
    ("registry:5000/cilium/cilium", None),  # the port is no version
    ("docker.io/flannel/flannel:v0.27.4-rc1", "0.27.4"),
    ("quay.io/cilium/cilium:latest", None),
    ("quay.io/cilium/cilium@sha256:" + "ab" * 32, None),
    ("", None),
    (None, None),
    ("not an image", None),
])
def test_cni_detection_reads_the_tag(image, version):
    assert cni.image_version(image) == version
