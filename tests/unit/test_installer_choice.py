"""The installer image each machine is upgraded with (rollout.installer): the Image Factory installer of the
schematic it runs, its config's own repository, or the plain installer only when it runs no extension; refused,
naming the machine, what it would lose and ichor_upgrade_installer_image, when what carries its extensions cannot be
known; an image the operator names is used as named. Properties over generated references (seeded, bounded)."""

import random

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.common import images, release
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import installer, talos_step

SEED = 4404
CASES = 400
D64 = "sha256:" + "0123456789abcdef" * 4
S1 = "a" * 64
S2 = "4a0d65c669d46663f377e7161e50cfd570c401f26fd9e7bda34a0216b6f1922b"
FACTORY = "factory.talos.dev/installer/%s" % S2
NAMES = ("iscsi-tools", "qemu-guest-agent", "drbd", "util-linux-tools", "intel-ucode", "nvidia-container-toolkit-lts")


def _installed(declared="", extensions=(), schematic=""):
    return installer.Installed(declared, tuple(extensions), schematic)


def _rng():
    return random.Random(SEED)


def _schematic(rng):
    return "%064x" % rng.getrandbits(256)


def _suffix(rng, version="v1.13.9"):
    """The forms a reference's end takes: a tag, a tag and a digest, a digest alone."""
    return rng.choice([":" + version, ":%s@%s" % (version, D64), "@" + D64])


def _factory_repo(rng, schematic):
    registry = rng.choice(["factory.talos.dev", "registry.local:5000/factory", "10.0.0.1:5000/mirror/factory.talos.dev",
                           "localhost/f"])
    flavor = rng.choice(["installer", "metal-installer", "installer-secureboot", "aws-installer",
                         "metal-installer-secureboot"])
    return "%s/%s/%s" % (registry, flavor, schematic)


def _other_repo(rng):
    return rng.choice(["registry.local:5000/talos/installer-iscsi", "ghcr.io/example/talos-installer",
                       "10.0.0.1:5000/siderolabs/installer", "localhost/installer"])


def _extensions(rng, at_least=0):
    return rng.sample(NAMES, rng.randint(at_least, 3))


# -- what a machine runs --------------------------------------------------------------------------------------------

def test_the_declared_image_is_read_from_either_config_form():
    legacy = {"version": "v1alpha1", "machine": {"type": "worker", "install": {"image": FACTORY + ":v1.13.9"}}}
    typed = {"apiVersion": "v1alpha1", "kind": "UnattendedInstallConfig", "installer": {"image": FACTORY + ":v1.14.1"}}
    assert installer.declared_image([legacy]) == FACTORY + ":v1.13.9"
    assert installer.declared_image([{"version": "v1alpha1", "machine": {"type": "worker"}}, typed]) == \
        FACTORY + ":v1.14.1"
    assert installer.declared_image([{"version": "v1alpha1", "machine": {"install": {"disk": "/dev/sda"}}}]) == ""
    assert installer.declared_image([{"machine": {"install": {"image": 7}}}, "text", None]) == ""
    assert installer.declared_image(None) == ""


def test_extensions_are_read_with_the_schematic_apart():
    items = [{"id": "0", "spec": {"image": "000.iscsi-tools.sqsh", "metadata": {"name": "iscsi-tools", "version": "v0.2.0"}}},
             {"id": "1", "spec": {"image": "001.qemu-guest-agent.sqsh", "metadata": {"name": "qemu-guest-agent"}}},
             {"id": "2", "spec": {"image": "002.schematic.sqsh",
                                  "metadata": {"name": "schematic", "version": S2, "author": "Image Factory"}}},
             {"id": "3", "spec": None}, "not a resource"]
    got = installer.installed([], items)
    assert got == installer.Installed("", ("iscsi-tools", "qemu-guest-agent"), S2)


def test_schematic_of_reads_only_a_schematic_id():
    assert installer.schematic_of(FACTORY + ":v1.14.5") == S2
    assert installer.schematic_of("factory.talos.dev/metal-installer/%s@%s" % (S2, D64)) == S2
    assert installer.schematic_of(release.installer_image()) == ""
    assert installer.schematic_of("factory.talos.dev/installer/%s:v1" % S2.upper()) == ""  # not a reference
    assert installer.schematic_of("factory.talos.dev/installer/%s:v1" % S2[:63]) == ""
    assert installer.schematic_of("") == ""


# -- the choice, case by case ---------------------------------------------------------------------------------------

def test_a_factory_machine_keeps_its_schematic_at_the_sets_version():
    machine = _installed(FACTORY + ":v1.13.9", ["iscsi-tools", "qemu-guest-agent"], S2)
    choice = installer.choose("worker-1", machine)
    assert choice.image == "%s:%s" % (FACTORY, release.TALOS)
    assert (choice.source, choice.after) == ("schematic", "kept")
    assert installer.describe(choice) == "system extensions iscsi-tools, qemu-guest-agent -> kept (schematic %s)" % S2
    assert installer.result(choice) == {"image": choice.image, "source": "schematic", "extensions": {
        "before": ["iscsi-tools", "qemu-guest-agent"], "schematic": S2, "declared": FACTORY + ":v1.13.9",
        "after": "kept"}}


def test_a_plain_machine_gets_the_plain_installer():
    for declared in (release.installer_image("v1.13.9"), "", "ghcr.io/siderolabs/installer@" + D64):
        choice = installer.choose("cp-1", _installed(declared))
        assert choice.image == release.installer_image()
        assert installer.describe(choice) == "system extensions: none"
    # the default schematic customises nothing: nothing is lost without it
    choice = installer.choose("cp-1", _installed(release.installer_image("v1.13.9"), (), installer.DEFAULT_SCHEMATIC))
    assert choice.image == release.installer_image()


@pytest.mark.parametrize("declared, why", [
    ("", "its machine config names no install image"),
    ("not a reference!", "its machine config names an install image that is not a reference"),
    (release.installer_image("v1.13.9"), "its machine config names the plain installer (ghcr.io/siderolabs/installer), "
                                         "which carries none"),
])
def test_a_machine_whose_extensions_cannot_be_kept_is_refused_with_the_way_forward(declared, why):
    machine = _installed(declared, ["iscsi-tools", "qemu-guest-agent"], S2)
    with pytest.raises(installer.Refused) as exc:
        installer.choose("worker-2", machine)
    text = str(exc.value)
    assert text.startswith("worker-2 runs the system extensions iscsi-tools, qemu-guest-agent (Image Factory schematic "
                           "%s), but %s" % (S2, why)), text
    assert "ichor_upgrade_installer_image (e.g. factory.talos.dev/installer/%s:%s); nothing was sent" % (
        S2, release.TALOS) in text
    assert "\n" not in text


def test_a_config_naming_another_schematic_than_the_one_running_is_refused():
    machine = _installed("factory.talos.dev/installer/%s:v1.13.9" % S1, ["drbd"], S2)
    with pytest.raises(installer.Refused, match="worker-1: its machine config names the installer of Image Factory "
                                                "schematic %s, but it runs Image Factory schematic %s" % (S1, S2)):
        installer.choose("worker-1", machine)
    with pytest.raises(installer.Refused, match="but it runs no Image Factory image \\(system extensions: none\\)"):
        installer.choose("worker-1", _installed("factory.talos.dev/installer/%s:v1.13.9" % S1))


def test_an_operator_named_image_is_used_as_named():
    machine = _installed("", ["iscsi-tools"], S2)  # refused without it
    named = "registry.local/talos/installer:v1.14.5"
    choice = installer.choose("worker-1", machine, named=named)
    assert (choice.image, choice.source, choice.after) == (named, "operator", "named")
    assert installer.describe(choice) == \
        "system extensions iscsi-tools -> not verified (the image ichor_upgrade_installer_image names)"
    choice = installer.choose("worker-1", machine, named=FACTORY + ":v1.14.5")
    assert installer.describe(choice) == "system extensions iscsi-tools -> kept (schematic %s)" % S2
    assert installer.choose("worker-1", _installed(), named=named).after == "none"


def test_a_repository_of_the_operators_own_is_kept_and_said_unverified():
    machine = _installed("registry.local:5000/talos/installer-iscsi:v1.13.9", ["iscsi-tools"])
    choice = installer.choose("worker-1", machine)
    assert choice.image == "registry.local:5000/talos/installer-iscsi:%s" % release.TALOS
    assert installer.describe(choice) == ("system extensions iscsi-tools -> as registry.local:5000/talos/installer-iscsi "
                                          "carries them (not an Image Factory installer: not verified)")


def test_a_name_a_machine_reports_is_quoted_when_it_is_not_plain():
    machine = _installed("", ["ok-name", "bad\nname"], "")
    with pytest.raises(installer.Refused) as exc:
        installer.choose("w", machine)
    assert "'bad\\nname'" in str(exc.value) and "\n" not in str(exc.value)


# -- properties over generated machines -----------------------------------------------------------------------------

def test_property_a_factory_machine_always_keeps_its_schematic_and_repository():
    rng = _rng()
    for _case in range(CASES):
        schematic = _schematic(rng)
        repo = _factory_repo(rng, schematic)
        machine = _installed(repo + _suffix(rng), _extensions(rng), schematic)
        choice = installer.choose("m", machine)
        assert choice.image == "%s:%s" % (repo, release.TALOS), machine
        assert installer.schematic_of(choice.image) == schematic
        assert talos_step.image_version(choice.image) == release.TALOS
        assert images.parse(choice.image).repository == repo
        assert choice.after == "kept"


def test_property_a_machine_without_extensions_is_never_refused_and_goes_to_the_sets_version():
    rng = _rng()
    for _case in range(CASES):
        declared = rng.choice(["", release.installer_image(rng.choice(["v1.12.7", "v1.13.9"])),
                               _other_repo(rng) + _suffix(rng), "garbage ref", "ghcr.io/siderolabs/installer@" + D64])
        schematic = rng.choice(["", installer.DEFAULT_SCHEMATIC])
        choice = installer.choose("m", _installed(declared, (), schematic))
        assert talos_step.image_version(choice.image) == release.TALOS
        assert choice.after == "none" or (schematic and choice.source == "repository"), choice
        if installer.repository_of(declared):
            assert images.parse(choice.image).repository == installer.repository_of(declared)
        else:
            assert choice.image == release.installer_image()


def test_property_extensions_with_no_known_carrier_are_always_refused_naming_each():
    rng = _rng()
    for _case in range(CASES):
        names = _extensions(rng, at_least=1)
        schematic = rng.choice(["", _schematic(rng)])
        declared = rng.choice(["", "no such reference", release.installer_image("v1.13.%d" % rng.randint(0, 9)),
                               "ghcr.io/siderolabs/installer@" + D64])
        machine = _installed(declared, names, schematic)
        with pytest.raises(installer.Refused) as exc:
            installer.choose("machine-%d" % rng.randint(1, 9), machine)
        text = str(exc.value)
        assert text.startswith("machine-") and "\n" not in text
        assert all(name in text for name in names)
        assert "ichor_upgrade_installer_image" in text and text.endswith("nothing was sent")


def test_property_a_named_image_always_wins_and_never_refuses():
    rng = _rng()
    for _case in range(CASES):
        named = rng.choice([_factory_repo(rng, _schematic(rng)), _other_repo(rng), release.INSTALLER]) + \
            ":" + release.TALOS
        machine = _installed(rng.choice(["", "bad ref", release.installer_image("v1.13.9")]), _extensions(rng),
                             rng.choice(["", _schematic(rng)]))
        choice = installer.choose("m", machine, named=named)
        assert (choice.image, choice.source) == (named, "operator")
        assert choice.after in ("named", "none", "kept")
        assert choice.after != "none" or not (machine.extensions or machine.schematic)
