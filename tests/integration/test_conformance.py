"""Conformance of our protos and of the lab simulator, checked with the REAL Talos client.

tests/conformance is a Go program built against github.com/siderolabs/talos/pkg/machinery
(the library talosctl is made of). Its ``descriptors`` mode compares our FileDescriptorSet
with machinery's registered protos; its ``client`` mode drives simulated labs through
machinery's client (mTLS with the lab's Ed25519 or ECDSA talosconfig, typed COSI reads,
streams, upgrades, resets, maintenance mode). If the real client cannot talk to the
simulator, the simulator is wrong.

Go is required: without it these tests FAIL (they are never skipped).
"""

import os
import subprocess

import pytest

pytestmark = pytest.mark.lab

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFORMANCE = os.path.join(REPO, "tests", "conformance")
DESCRIPTOR_SET = os.path.join(REPO, "tests", "fixtures", "talos-api.binpb")

BUILD_TIMEOUT = 1500  # a cold build (module download + compile) takes ~1-3 min on 2 cores
RUN_TIMEOUT = 600


def _show(result):
    return "exit %s\n--- stdout ---\n%s\n--- stderr ---\n%s" % (
        result.returncode, result.stdout, result.stderr)


@pytest.fixture(scope="module")
def conformance_bin():
    """Path of the built program (cached by tests/conformance/build.sh)."""
    result = subprocess.run(["bash", os.path.join(CONFORMANCE, "build.sh")],
                            capture_output=True, text=True, timeout=BUILD_TIMEOUT,
                            stdin=subprocess.DEVNULL, check=False)
    assert result.returncode == 0, "building tests/conformance failed (is Go installed?)\n" + _show(result)
    path = result.stdout.strip().splitlines()[-1]
    assert os.access(path, os.X_OK), "build.sh printed %r, not an executable" % path
    return path


def _run(binary, *args):
    return subprocess.run([binary] + list(args), capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL, check=False)


def _summary(result):
    lines = [line for line in result.stdout.splitlines() if line.startswith("summary ")]
    return lines[-1] if lines else "(no summary line)"


def _assert_passed(result):
    failures = [line for line in result.stdout.splitlines() if line.startswith("FAIL ")]
    assert result.returncode == 0 and not failures, (
        "%s\n%d failing checks:\n%s\n\nfull output:\n%s"
        % (_summary(result), len(failures), "\n".join(failures), _show(result)))


def test_descriptors_match_machinery(conformance_bin):
    assert os.path.exists(DESCRIPTOR_SET), "%s is missing: run scripts/gen-protos" % DESCRIPTOR_SET
    result = _run(conformance_bin, "descriptors", "--set", DESCRIPTOR_SET)
    _assert_passed(result)
    # it compared something
    assert "ok service machine.MachineService" in result.stdout, _show(result)
    assert "ok service cosi.resource.State" in result.stdout, _show(result)


def test_real_client_against_mixed_version_lab(conformance_bin, talos_lab):
    """3 control planes (v1.14.1), workers at v1.12.11 / v1.13.9 / v1.14.1, and maintenance
    machines at v1.12.11 and v1.14.1; Ed25519 CA. Every phase, strict (no check may be
    skipped for lack of a machine)."""
    lab = talos_lab(controlplanes=3, workers=3, version="v1.14.1", mixed_versions=True,
                    extra_maintenance=True, ca="ed25519")
    result = _run(conformance_bin, "client", "--strict", "--lab", lab.lab_json)
    _assert_passed(result)
    for check in ("Bootstrap", "Kubeconfig", "legacy Upgrade", "LifecycleService.Upgrade",
                  "EtcdLeaveCluster", "EtcdRemoveMemberByID", "Reset",
                  "ApplyConfiguration (insecure) installs and the machine returns",
                  "m-112 (v1.12.11) ApplyConfiguration (insecure) installs a fresh machine",
                  "m-114 (v1.14.1) ApplyConfiguration (insecure) installs a fresh machine"):
        assert any(line.startswith("ok ") and check in line for line in result.stdout.splitlines()), (
            "no passing %r check\n%s" % (check, _show(result)))


def test_real_client_against_unbootstrapped_ecdsa_lab(conformance_bin, talos_lab):
    """One control plane not bootstrapped yet (Bootstrap must succeed and etcd appear) and
    one worker; ECDSA CA instead of Ed25519."""
    lab = talos_lab(controlplanes=1, workers=1, version="v1.14.1", ca="ecdsa", bootstrapped=False)
    result = _run(conformance_bin, "client", "--lab", lab.lab_json)
    _assert_passed(result)
    assert any(line.startswith("ok ") and line.endswith(" Bootstrap")
               for line in result.stdout.splitlines()), _show(result)
