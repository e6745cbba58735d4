"""Conformance of our protos and of the lab simulator, checked with the REAL Talos client.

tests/conformance is a Go program built against github.com/siderolabs/talos/pkg/machinery
(the library talosctl is made of). Its ``descriptors`` mode compares our FileDescriptorSet
with machinery's registered protos; its ``client`` mode drives simulated labs through
machinery's client (mTLS with the lab's Ed25519 or ECDSA talosconfig, typed COSI reads,
streams, upgrades, resets, maintenance mode). If the real client cannot talk to the
simulator, the simulator is wrong.

Its ``requests`` mode checks OUR client against machinery's: the Talos step upgrades a machine of the lab
(which records every request it receives), machinery's client upgrades another one the way talosctl 1.14
does, and the program decodes both sides' ImageService.Pull, LifecycleService.Upgrade and Reboot requests
with machinery's types and compares them.

Go is required: without it these tests FAIL (they are never skipped).
"""

import os
import subprocess

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import talos_step
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as tc
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, talosconfig

from tests.lab.talos_sim import extensions as simext

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
    for name in ("message machine.ListRequest", "enum machine.ListRequest.Type", "message machine.FileInfo",
                 "message machine.Xattr"):
        assert "ok " + name in result.stdout.splitlines(), _show(result)


def test_real_client_against_mixed_version_lab(conformance_bin, talos_lab):
    """3 control planes (v1.14.1), workers at v1.12.11 / v1.13.9 / v1.14.1, and maintenance
    machines at v1.12.11 and v1.14.1; Ed25519 CA. Every phase, strict (no check may be
    skipped for lack of a machine). Among them EtcdForfeitLeadership through machinery's client: "" on a member that
    does not lead, the new leader's etcd name (its hostname) from the leader, whose leadership every member then sees
    moved; Unimplemented on a worker, PermissionDenied to os:reader."""
    lab = talos_lab(controlplanes=3, workers=3, version="v1.14.1", mixed_versions=True,
                    extra_maintenance=True, ca="ed25519")
    result = _run(conformance_bin, "client", "--strict", "--lab", lab.lab_json)
    _assert_passed(result)
    for check in ("Bootstrap", "Kubeconfig", "legacy Upgrade", "LifecycleService.Upgrade",
                  "EtcdLeaveCluster", "EtcdRemoveMemberByID", "Reset",
                  "EtcdForfeitLeadership of a member that does not lead",
                  "EtcdForfeitLeadership of the leader moves the leadership to the member it names",
                  "EtcdForfeitLeadership on a worker is Unimplemented",
                  "EtcdForfeitLeadership as os:reader is PermissionDenied",
                  "ApplyConfiguration (insecure) installs and the machine returns",
                  "m-112 (v1.12.11) ApplyConfiguration (insecure) installs a fresh machine",
                  "m-114 (v1.14.1) ApplyConfiguration (insecure) installs a fresh machine"):
        assert any(line.startswith("ok ") and check in line for line in result.stdout.splitlines()), (
            "no passing %r check\n%s" % (check, _show(result)))


def test_real_client_reads_the_simulators_listing(conformance_bin, talos_lab):
    """talosctl ls /etc/cni/net.d with machinery's client (MachineService/List, streamed FileInfo): the root as
    ".", then the lab's CNI configs of each machine in lexical order, directly and through the endpoint, as
    admin and as os:reader; a missing directory is Unknown. One worker has two CNIs' configs, one has none.
    The same machines' system extensions (ExtensionStatuses, machinery's typed client): worker-1 runs an Image
    Factory image of two extensions (and the virtual "schematic" one), worker-2 an extension installed otherwise."""
    schematic = simext.schematic_id(("iscsi-tools", "qemu-guest-agent"))
    lab = talos_lab(controlplanes=1, workers=2, version="v1.14.1", overrides=[
        {"name": "worker-1", "install_image": "factory.talos.dev/installer/%s:v1.14.1" % schematic},
        {"name": "worker-2", "extensions": "drbd"}])
    w1, w2 = [m["name"] for m in lab.machines if m["role"] == "worker"]
    lab.control.set_cni_files(w1, {"10-calico.conflist": '{"name": "k8s-pod-network"}\n',
                                   "05-cilium.conflist": '{"name": "cilium"}\n'})
    lab.control.set_cni_files(w2, {})
    result = _run(conformance_bin, "client", "--phases", "read", "--lab", lab.lab_json)
    _assert_passed(result)
    ok = [line for line in result.stdout.splitlines() if line.startswith("ok ")]
    for name, count in (("cp-1", 0), ("worker-1", 3), ("worker-2", 1)):
        assert len(lab.machine(name)["extensions"]) == count
        assert any(line.startswith("ok read %s" % name) and line.endswith("COSI ExtensionStatuses") for line in ok), (
            "no passing ExtensionStatuses check of %s\n%s" % (name, _show(result)))
    for name in ("worker-1", "worker-2"):  # the machines that serve some: their YAML is what Talos writes
        assert "ok read %s [direct] COSI ExtensionStatuses.runtime.talos.dev yaml_spec == yaml(proto_spec)" % name \
            in ok, _show(result)
    passed = [line for line in result.stdout.splitlines() if line.startswith("ok ") and " ls " in line]
    for m in lab.machines:
        for via in ("direct", "via"):
            assert any(line.startswith("ok read %s [%s" % (m["name"], via)) and line.endswith("ls /etc/cni/net.d")
                       for line in passed), "no passing ls check of %s (%s)\n%s" % (m["name"], via, _show(result))


def test_real_client_against_unbootstrapped_ecdsa_lab(conformance_bin, talos_lab):
    """One control plane not bootstrapped yet (Bootstrap must succeed and etcd appear) and
    one worker; ECDSA CA instead of Ed25519."""
    lab = talos_lab(controlplanes=1, workers=1, version="v1.14.1", ca="ecdsa", bootstrapped=False)
    result = _run(conformance_bin, "client", "--lab", lab.lab_json)
    _assert_passed(result)
    assert any(line.startswith("ok ") and line.endswith(" Bootstrap")
               for line in result.stdout.splitlines()), _show(result)


PINNED = "registry.example:5000/siderolabs/installer:%s@sha256:" % release.TALOS + "0123456789abcdef" * 4
REQUESTS = ("/machine.ImageService/Pull", "/machine.LifecycleService/Upgrade", "/machine.MachineService/Reboot")


class _Conn:
    """What the runner's Connections gives talos_step.run: a Talos client per call; no kubeconfig."""

    def __init__(self, lab):
        self.lab = lab
        self.clients = []

    def talos(self, maintenance=False, dial_only=None):
        self.clients.append(tc.TalosClient(talosconfig.load(self.lab.talosconfig, context=self.lab.context), timeout=10))
        return self.clients[-1]

    def has_kube(self):
        return False

    def close(self):
        for client in self.clients:
            client.close()


def _requests(binary, lab, ours, image):
    return _run(binary, "requests", "--lab", lab.lab_json, "--ours", ours, "--reference", "worker-2", "--image", image)


def test_our_upgrade_requests_are_what_machinerys_client_sends(conformance_bin, talos_lab):
    """Issue 11: the Talos step's Pull / Upgrade / Reboot, decoded with machinery's types, equal talosctl 1.14's
    (containerd driver CRI, namespace NS_SYSTEM), the Upgrade naming the image as the Pull reported it; with an
    installer reference carrying a registry port, a tag and a digest (issue 12)."""
    lab = talos_lab(controlplanes=1, workers=2, version="v1.13.9")
    conn = _Conn(lab)
    try:
        params = dict(node=lab.address("worker-1"), name="worker-1", hostname=None, role="worker", image=PINNED,
                      wait=True, wait_timeout=30.0)
        result = talos_step.run(params, conn, False)
    finally:
        conn.close()
    assert result["changed"] is True and lab.machine("worker-1")["version"] == release.TALOS
    result = _requests(conformance_bin, lab, "worker-1", PINNED)
    _assert_passed(result)
    for path in REQUESTS:
        assert any(line.startswith("ok requests %s: ours = machinery's" % path) for line in result.stdout.splitlines()), (
            _show(result))
    assert "ok requests our containerd instance is talosctl upgrade's" in result.stdout, _show(result)


def test_the_simulator_refuses_the_round_1_request_as_talos_does_and_the_check_catches_it(conformance_bin, talos_lab):
    """The request round 1 sent (no containerd field): Talos's ctrhelper refuses an unset namespace, on Pull directly
    (InvalidArgument), inside Upgrade wrapped as Internal; the request comparison reports it."""
    lab = talos_lab(controlplanes=1, workers=2, version="v1.13.9")
    node = lab.address("worker-1")
    with tc.TalosClient(talosconfig.load(lab.talosconfig, context=lab.context), timeout=10) as client:
        with pytest.raises(errors.TalosCallError) as exc:
            client.call("ImagePull", tc.request_type("ImagePull")(image_ref=PINNED), node=node)
        assert (exc.value.code, exc.value.said) == ("INVALID_ARGUMENT", "invalid containerd namespace NS_UNKNOWN")
        upgrade = tc.request_type("LifecycleUpgrade")()
        upgrade.source.image_name = PINNED
        with pytest.raises(errors.TalosCallError) as exc:
            client.call("LifecycleUpgrade", upgrade, node=node)
        assert (exc.value.code, exc.value.said) == (
            "INTERNAL", "upgrade failed: rpc error: code = InvalidArgument desc = invalid containerd namespace NS_UNKNOWN")
        client.call("Reboot", node=node)
    recorded = lab.control.requests("worker-1")
    assert set(REQUESTS) <= set(recorded)
    result = _requests(conformance_bin, lab, "worker-1", PINNED)
    assert result.returncode == 1, _show(result)
    for check in ("FAIL requests /machine.ImageService/Pull: ours = machinery's",
                  "FAIL requests /machine.LifecycleService/Upgrade: ours = machinery's",
                  "FAIL requests our containerd instance is talosctl upgrade's"):
        assert any(line.startswith(check) for line in result.stdout.splitlines()), _show(result)
    assert any(line.startswith("ok requests /machine.MachineService/Reboot") for line in result.stdout.splitlines())


def _serve(binary, secret, directory):
    """Start ``serve`` and return (process, address) once it printed its ready line."""
    import selectors
    proc = subprocess.Popen([binary, "serve", "--secret", secret, "--dir", directory], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        ready = proc.stdout.readline() if selector.select(timeout=60) else ""
    if not ready.startswith("ready "):
        proc.kill()
        _out, err = proc.communicate(timeout=10)
        pytest.fail("serve printed %r, not its ready line; exit %s, stderr:\n%s" % (ready, proc.returncode, err))
    return proc, ready.split()[1]


def test_our_client_keeps_a_real_servers_status_message(conformance_bin, tmp_path):
    """Issue 11 §3: a peer that shares none of our code (machinery's generated MachineService server over grpc-go,
    mTLS from its own Ed25519 CA, machinery's client config format) refuses ApplyConfiguration as machined does:
    InvalidArgument with configloader's own text, which quotes the value of a misspelt key (here a secret). Our
    client keeps the status code and the server's message on one line with the registered secret redacted, and
    reads the etcd refusal of a worker (checkControlplane's wording) as "needs a control plane node"."""
    import uuid
    from ansible_collections.maesh.ichor.plugins.module_utils.common import redact

    secret = "tok-" + uuid.uuid4().hex[:16]
    proc, address = _serve(conformance_bin, secret, str(tmp_path))
    try:
        context = talosconfig.load(str(tmp_path / "talosconfig"))
        assert context.endpoints == [address]
        with tc.TalosClient(context, timeout=10) as client:
            with pytest.raises(errors.TalosCallError) as unregistered:
                client.call("ApplyConfiguration")
            # the server does quote it: proof that what follows is redaction, not a server that never said it
            assert secret in unregistered.value.said
            redact.Secret(secret)
            with pytest.raises(errors.TalosCallError) as refused:
                client.call("ApplyConfiguration")
            with pytest.raises(errors.TalosCallError) as worker:
                client.call("EtcdMemberList")
    finally:
        proc.terminate()
        _out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    said = "error decoding document /v1alpha1/ (line 1): unknown keys found during decoding: machine: tokn: <redacted>"
    assert (refused.value.code, refused.value.said) == ("INVALID_ARGUMENT", said)
    assert refused.value.message == (
        "%s: INVALID_ARGUMENT (ApplyConfiguration): the machine refused the request as invalid; the machine said: %s"
        % (address, said))
    assert (worker.value.code, worker.value.said) == ("UNIMPLEMENTED", "member list is only available on control plane nodes")
    assert worker.value.message == (
        "{0}: UNIMPLEMENTED (EtcdMemberList): EtcdMemberList needs a control plane node and {0} is not one; "
        "address a control plane; the machine said: member list is only available on control plane nodes".format(address))
    for error in (refused.value, worker.value):
        assert "\n" not in error.message and secret not in error.message and secret not in str(error)
