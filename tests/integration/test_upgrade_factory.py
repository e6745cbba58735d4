"""An upgrade keeps the machine's Image Factory image and system extensions (issue 44), through ansible-playbook
maesh.ichor.upgrade against the lab (real Talos v1.13.9 configs; the simulator reports extensions as Talos does):

* a machine installed from a factory image of two extensions, one step behind the set: the plan (``--check``) names
  the factory installer of its schematic at the set's version and its extensions before and after; the run pulls and
  installs that image (what the machine received), and afterwards the machine reports the same extensions; its
  machine config is left as it was, as Talos leaves it; the plain machines get the plain installer;
* a machine running an extension its installer cannot carry (its config names the plain installer) is refused by the
  plan and by the run, naming it, the extension and ichor_upgrade_installer_image, before anything is sent to any
  machine; talos_upgrade alone refuses one whose config names no install image, and takes the image the operator
  names.
"""

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as tc
from ansible_collections.maesh.ichor.plugins.module_utils.talos import machine, talosconfig
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res
from ansible_collections.maesh.ichor.plugins.module_utils.talos.proto import machine_image_pb2, machine_lifecycle_pb2

from tests import versions
from tests.integration.ansible_env import ansible_playbook
from tests.integration.test_upgrade import TALOS_UPGRADE_PLAY, V113_K8S_135, _inventory, _record, _upgrade, _versions
from tests.lab.talos_sim import extensions as simext

pytestmark = pytest.mark.lab

TWO = ("iscsi-tools", "qemu-guest-agent")
SCHEMATIC = simext.schematic_id(TWO)
FACTORY = "factory.talos.dev/installer/%s" % SCHEMATIC
WRITES = {"Pull", "Upgrade", "Reboot", "ApplyConfiguration"}


def _reported(lab, name):
    """(name, version) of each ExtensionStatus the machine serves, read as the collection reads them."""
    with tc.TalosClient(talosconfig.load(lab.talosconfig)) as client:
        items = client.run(machine.list_resources(client, res.EXTENSION_STATUSES, lab.address(name)))
    return [(i["spec"]["metadata"]["name"], i["spec"]["metadata"]["version"]) for i in items]


def _plan_line(stdout, name):
    """The Talos step's plan line of one machine."""
    lines = [line.strip().strip('",') for line in stdout.splitlines() if "upgrade Talos from" in line
             and line.strip().strip('"').startswith(name + " (")]
    assert lines, stdout
    return lines[0]


def _install_image(lab, name):
    return [line.split("#", 1)[0].strip() for line in lab.machine(name)["machine_config"].splitlines()
            if line.strip().startswith("image: ") and "installer" in line]


def test_a_factory_machine_is_upgraded_to_its_schematic_at_the_sets_version_and_keeps_its_extensions(
        talos_kube_lab, tmp_path):
    lab = talos_kube_lab(case=V113_K8S_135, controlplanes=1, workers=2, version="v1.13.9",
                         overrides=[{"name": "worker-1", "install_image": "%s:v1.13.9" % FACTORY}])
    _record(lab, V113_K8S_135)
    inv = _inventory(lab, tmp_path)
    before = _reported(lab, "worker-1")
    assert before == [("iscsi-tools", "v0.2.0"), ("qemu-guest-agent", "10.1.2"), ("schematic", SCHEMATIC)]
    assert _reported(lab, "cp-1") == []

    proc = _upgrade(inv, "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = _plan_line(proc.stdout, "worker-1")
    assert "upgrade Talos from v1.13.9 to %s with %s:%s, reboot" % (release.TALOS, FACTORY, release.TALOS) in line, line
    assert line.endswith("system extensions iscsi-tools, qemu-guest-agent -> kept (schematic %s)" % SCHEMATIC), line
    for plain in ("cp-1", "worker-2"):
        line = _plan_line(proc.stdout, plain)
        assert "with %s, reboot" % release.installer_image() in line and line.endswith("system extensions: none"), line
    assert set(_versions(lab).values()) == {"v1.13.9"}

    for m in lab.machines:
        lab.control.reset_requests(m["name"])
    proc = _upgrade(inv)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert set(_versions(lab).values()) == {release.TALOS}
    # what the machine received: the factory installer of its schematic at the set's version, pulled and installed
    sent = lab.control.requests("worker-1")
    pull = machine_image_pb2.ImageServicePullRequest.FromString(sent["/machine.ImageService/Pull"])
    assert pull.image_ref == "%s:%s" % (FACTORY, release.TALOS)
    upgrade = machine_lifecycle_pb2.LifecycleServiceUpgradeRequest.FromString(sent["/machine.LifecycleService/Upgrade"])
    assert upgrade.source.image_name.startswith(FACTORY + "@sha256:"), upgrade
    for plain in ("cp-1", "worker-2"):
        pull = machine_image_pb2.ImageServicePullRequest.FromString(
            lab.control.requests(plain)["/machine.ImageService/Pull"])
        assert pull.image_ref == release.installer_image(), plain
    # the same extensions after the upgrade, reported by the machine; its config left as it was, as Talos leaves it
    assert _reported(lab, "worker-1") == before
    assert _reported(lab, "cp-1") == _reported(lab, "worker-2") == []
    assert _install_image(lab, "worker-1") == ["image: %s:v1.13.9" % FACTORY]

    proc = _upgrade(inv, "--check")  # the Talos step is done: the next is the config step
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "next step: config" in proc.stdout and "upgrade Talos from" not in proc.stdout, proc.stdout


def _refused_before_anything_is_sent(lab, proc, said):
    assert proc.returncode != 0, proc.stdout
    assert said in proc.stdout, proc.stdout[-4000:]
    assert "nothing was sent" in proc.stdout.split(said, 1)[1].split("\n", 1)[0], proc.stdout[-4000:]
    for m in lab.machines:  # not one write reached any machine
        assert not set(lab.control.calls(m["name"])) & WRITES, (m["name"], lab.control.calls(m["name"]))
    assert set(_versions(lab).values()) == {"v1.13.9"}


def test_a_machine_running_extensions_its_installer_does_not_carry_is_refused_before_anything_is_sent(
        talos_kube_lab, tmp_path):
    """Its config names the plain installer, which carries no extension: they were installed some other way, and the
    installer that carries them cannot be known. The plan refuses, and so does the run, before its first write."""
    lab = talos_kube_lab(case=V113_K8S_135, controlplanes=1, workers=2, version="v1.13.9",
                         overrides=[{"name": "worker-1", "install_image": "%s:v1.13.9" % FACTORY},
                                    {"name": "worker-2", "extensions": "iscsi-tools"}])
    _record(lab, V113_K8S_135)
    inv = _inventory(lab, tmp_path)
    assert _install_image(lab, "worker-2") == ["image: %s" % versions.installer("v1.13.9")]
    assert _reported(lab, "worker-2") == [("iscsi-tools", "v0.2.0")]
    said = ("worker-2 runs the system extension iscsi-tools, but its machine config names the plain installer "
            "(ghcr.io/siderolabs/installer), which carries none: they were installed another way: an upgrade with the "
            "plain installer would drop them; name the installer that carries them for the set's Talos %s in "
            "ichor_upgrade_installer_image" % release.TALOS)
    for m in lab.machines:
        lab.control.reset_calls(m["name"])
    for extra in (("--check",), ()):
        _refused_before_anything_is_sent(lab, _upgrade(inv, *extra), said)
    assert _reported(lab, "worker-2") == [("iscsi-tools", "v0.2.0")]


def test_talos_upgrade_refuses_a_machine_whose_config_names_no_install_image(talos_kube_lab, tmp_path):
    """The module alone: a machine running extensions whose config names no install image is refused before anything
    is sent to it; the operator naming the image is the override."""
    lab = talos_kube_lab(case=V113_K8S_135, controlplanes=1, workers=1, version="v1.13.9",
                         overrides=[{"name": "worker-1", "install_image": "none", "extensions": "drbd"}])
    _record(lab, V113_K8S_135)
    inv = _inventory(lab, tmp_path)
    assert _install_image(lab, "worker-1") == []
    play = tmp_path / "talos_upgrade.yml"
    play.write_text(TALOS_UPGRADE_PLAY.replace('image: "{{ image }}"', 'image: "{{ image | default(omit) }}"'))
    lab.control.reset_calls("worker-1")
    proc = ansible_playbook("-i", inv, str(play), "--limit", "worker-1")
    said = ("worker-1 runs the system extension drbd, but its machine config names no install image, so the installer "
            "it runs cannot be known")
    _refused_before_anything_is_sent(lab, proc, said)
    assert "ichor_upgrade_installer_image (e.g. factory.talos.dev/installer/<schematic-id>:%s)" % release.TALOS in \
        proc.stdout
    named = "registry.local/talos/installer-drbd:%s" % release.TALOS
    proc = ansible_playbook("-i", inv, str(play), "--limit", "worker-1", "--check", "-e", "image=" + named)
    assert proc.returncode == 0, proc.stdout
    assert "with %s, reboot, wait for it and its Node; system extensions drbd -> not verified" % named in proc.stdout
    assert not set(lab.control.calls("worker-1")) & WRITES
