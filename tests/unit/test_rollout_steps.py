"""The rollout's module flows (rollout.check, talos_step, config_step, kubernetes_step, record) on a fake world:
Talos machines answering real protobuf replies from real Talos configs (tests/fixtures/configs), a fake Kubernetes
API and a fake clock, so every gate, wait and refusal runs without a lab."""

import asyncio
import hashlib
import json
import os

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.common import images, redact
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.config.images import component_versions
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeError
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import check, config_step, kubernetes_step, record
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import installer, talos_step
from ansible_collections.maesh.ichor.plugins.module_utils.rollout.errors import UpgradeFailed
from ansible_collections.maesh.ichor.plugins.module_utils.rollout.plan import Refused
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as tc
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res
from ansible_collections.maesh.ichor.plugins.module_utils.talos.proto import (
    cosi_resource_pb2, cosi_state_pb2, machine_image_pb2, machine_lifecycle_pb2, machine_pb2, spec_config_pb2)
from tests import versions

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "configs")
V113 = "v1.13/v1.13.9/k8s-older"  # contract v1.13, Kubernetes 1.35.4
V114 = "v1.14/v1.14.1/k8s-older"  # contract v1.14, Kubernetes 1.36.3
WRITES = ("ApplyConfiguration", "ImagePull", "LifecycleUpgrade", "Reboot", "Upgrade")
REBOOT_SECONDS = 30.0
APPLY = tc.request_type("ApplyConfiguration")


# --- the fake world ---------------------------------------------------------------------------------------------

class Clock:
    def __init__(self):
        self.now = 0.0

    def time(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


class Machine:
    def __init__(self, world, name, node, role, version, config):
        self.world = world
        self.name = name
        self.node = node
        # as Talos names it: not the play's name for it (its Node is registered under this one)
        self.hostname = "talos-" + name
        self.registered = True  # its kubelet registered its Node
        self.role = role
        self.version = version
        self.config = config
        self.down_until = None
        self.next_version = None
        self.etcd_errors = []
        self.needs_reboot = False  # Talos's answer to a dry run
        self.ignores_applies = False  # takes an apply and keeps its config (a read back differs)
        self.never_back = False
        self.pulled = {}  # name ImageService.Pull reported -> the reference pulled
        self.installer_exit_code = 0
        self.installer_output = ["validating install disk", "installing Talos"]
        self.extensions = []  # (name, version) of the system extensions it runs, as ExtensionStatuses list them

    @property
    def up(self):
        return self.down_until is None or (not self.never_back and self.world.clock.now >= self.down_until)

    def reboot(self):
        self.down_until = self.world.clock.now + REBOOT_SECONDS
        if self.next_version:
            self.version, self.next_version = self.next_version, None


def _tag(image):
    return image.split("@", 1)[0].rsplit(":", 1)[1]


def _pulled_name(ref):
    """What Talos's ImageService.Pull reports: the repository pinned by digest."""
    name, _at, digest = ref.partition("@")
    if not digest:
        digest = "sha256:" + hashlib.sha256(ref.encode()).hexdigest()
    last = name.rsplit("/", 1)[-1]
    return "%s@%s" % (name[:len(name) - len(last)] + last.split(":", 1)[0], digest)


def _progress(**field):
    return machine_lifecycle_pb2.LifecycleServiceUpgradeResponse(
        progress=machine_lifecycle_pb2.LifecycleServiceInstallProgress(**field))


def _extension_reply(index, name, version):
    """One ExtensionStatus as Talos lists it: id "0", "1", ..., its spec's YAML (extensions.Layer)."""
    spec = yaml.safe_dump({"image": "%03d.%s.sqsh" % (index, name), "metadata": {"name": name, "version": version}})
    return cosi_state_pb2.ListResponse(resource=cosi_resource_pb2.Resource(
        metadata={"type": res.EXTENSION_STATUSES.type, "id": str(index)}, spec={"yaml_spec": spec}))


class World:
    """Machines, Nodes, the kube-system DaemonSets, the cluster record and every write, in the order sent."""

    def __init__(self, case, versions, workers=1):
        self.clock = Clock()
        self.machines = {}
        self.writes = []
        self.requests = []  # (call, machine name, request) of every Talos write
        self.daemonsets = {}
        self.configmap = None
        self.metrics = ""
        self.metrics_error = None
        self.kube_writes = []
        self.while_installing = None
        names = [("cp-1", "controlplane")] + [("worker-%d" % i, "worker") for i in range(1, workers + 1)]
        for i, (name, role) in enumerate(names):
            with open(os.path.join(CONFIGS, case, "controlplane.conf" if role == "controlplane" else "worker.conf")) as f:
                node = "10.5.0.%d" % (i + 2)
                self.machines[node] = Machine(self, name, node, role, versions.get(name, versions.get("*")), f.read())

    def machine(self, name):
        return next(m for m in self.machines.values() if m.name == name)

    def params(self, **extra):
        params = dict(machines=[{"name": m.name, "node": m.node, "role": m.role} for m in self.machines.values()],
                      cluster=None, secrets=None, wait_timeout=900.0)
        params.update(extra)
        return params

    # Talos
    def answer(self, call, request, node):
        m = self.machines[node]
        if not m.up:
            raise errors.unreachable(node)
        if call in WRITES and not getattr(request, "dry_run", False):
            self.writes.append((call, m.name))
            self.requests.append((call, m.name, request))
        if call == "Version":
            return machine_pb2.VersionResponse(messages=[machine_pb2.Version(version={"tag": m.version})])
        if call == "Get":
            return self._resource(m, request)
        if call == "List" and request.type == res.EXTENSION_STATUSES.type:
            return [_extension_reply(i, name, version) for i, (name, version) in enumerate(m.extensions)]
        if call == "List":
            return []
        if call == "EtcdMemberList":
            members = [machine_pb2.EtcdMember(hostname=c.name, client_urls=["https://%s:2379" % c.node])
                       for c in self.machines.values() if c.role == "controlplane"]
            return machine_pb2.EtcdMemberListResponse(messages=[machine_pb2.EtcdMembers(members=members)])
        if call == "EtcdStatus":
            status = machine_pb2.EtcdMemberStatus(errors=m.etcd_errors)
            return machine_pb2.EtcdStatusResponse(messages=[machine_pb2.EtcdStatus(member_status=status)])
        if call == "ApplyConfiguration":
            return self._apply(m, request)
        if call in ("ImagePull", "LifecycleUpgrade") and request.containerd.namespace == 0:
            raise errors.call_error(node, "INVALID_ARGUMENT", "invalid containerd namespace NS_UNKNOWN", call=call)
        if call == "ImagePull":
            m.pulled[_pulled_name(request.image_ref)] = request.image_ref
            return [machine_image_pb2.ImageServicePullResponse(name=_pulled_name(request.image_ref))]
        if call == "LifecycleUpgrade":
            if self.while_installing is not None:  # what happens elsewhere while the installer runs
                self.while_installing()
            replies = [_progress(message=line) for line in m.installer_output]
            if m.installer_exit_code is not None:
                replies.append(_progress(exit_code=m.installer_exit_code))
            if m.installer_exit_code == 0:
                m.next_version = _tag(m.pulled[request.source.image_name])
            return replies
        if call == "Upgrade":  # the legacy call reboots by itself
            m.next_version = _tag(request.image)
            m.reboot()
            return machine_pb2.UpgradeResponse(messages=[machine_pb2.Upgrade(ack="Upgrade request received")])
        if call == "Reboot":
            m.reboot()
            return machine_pb2.RebootResponse(messages=[machine_pb2.Reboot(actor_id="1")])
        return []

    def _resource(self, m, request):
        resource = cosi_resource_pb2.Resource()
        resource.metadata.type = request.type
        resource.metadata.id = request.id
        if request.type == res.MACHINE_CONFIG.type:
            resource.spec.proto_spec = spec_config_pb2.MachineConfigSpec(
                yaml_marshalled=m.config.encode()).SerializeToString()
        elif request.type == res.HOSTNAME_STATUS.type:
            resource.spec.yaml_spec = "hostname: %s\n" % m.hostname
        elif request.type == res.NODENAME.type:
            resource.spec.yaml_spec = "nodename: %s\n" % m.hostname
        else:
            raise errors.call_error(m.node, "NOT_FOUND")
        return cosi_state_pb2.GetResponse(resource=resource)

    def _apply(self, m, request):
        if request.dry_run:
            mode = APPLY.REBOOT if m.needs_reboot else APPLY.NO_REBOOT
            return machine_pb2.ApplyConfigurationResponse(messages=[machine_pb2.ApplyConfiguration(mode=mode)])
        if not m.ignores_applies:
            m.config = request.data.decode()
        self.writes[-1] = ("ApplyConfiguration", m.name, component_versions(m.config).get("kube-apiserver"),
                           component_versions(m.config).get("kube-proxy"), component_versions(m.config)["kubelet"])
        if request.mode == APPLY.AUTO and m.needs_reboot:
            m.reboot()
        return machine_pb2.ApplyConfigurationResponse(messages=[machine_pb2.ApplyConfiguration(mode=request.mode)])

    # Kubernetes
    def node_object(self, m):
        conditions = [{"type": "Ready", "status": "True" if m.up else "False"}]
        return {"metadata": {"name": m.hostname}, "status": {"conditions": conditions, "nodeInfo": {
            "osImage": "Talos (%s)" % m.version, "kubeletVersion": component_versions(m.config)["kubelet"]}}}


class FakeTalos(tc.TalosClient):
    """The real client's calls, fan-out and reply unwrapping over the world's answers instead of gRPC."""

    def __init__(self, world):  # pylint: disable=super-init-not-called
        self.world = world
        self.timeout = 1.0
        self.dial_only = None
        self.maintenance = False
        self._loop = asyncio.new_event_loop()
        self._channels = {}

    async def _invoke(self, call, request, node=None, timeout=None):
        return self.world.answer(call, request, node)


class FakeKube:
    def __init__(self, world):
        self.world = world

    def get(self, api_version, kind, name, namespace=None):
        if kind == "Node":
            m = next((m for m in self.world.machines.values() if m.hostname == name and m.registered), None)
            return self.world.node_object(m) if m else None
        if kind == "DaemonSet":
            return self.world.daemonsets.get(name)
        if kind == "ConfigMap":
            return self.world.configmap
        return {"metadata": {"name": name}}  # the namespace

    def list(self, api_version, kind, namespace=None, label_selector=None):
        assert kind == "Node" and namespace is None and label_selector is None
        return [self.world.node_object(m) for m in self.world.machines.values() if m.registered]

    def raw_get(self, path):
        if self.world.metrics_error:
            raise self.world.metrics_error
        return self.world.metrics

    def apply(self, obj, field_manager, dry_run=False, force=True):
        self.world.kube_writes.append(("apply", obj["kind"], obj["metadata"]["name"]))
        self.world.writes.append(("DaemonSet", obj["spec"]["template"]["spec"]["containers"][0]["image"]))
        containers = self.world.daemonsets[obj["metadata"]["name"]]["spec"]["template"]["spec"]["containers"]
        for c in obj["spec"]["template"]["spec"]["containers"]:
            next(x for x in containers if x["name"] == c["name"])["image"] = c["image"]

    def _write(self, verb, obj, dry_run):
        self.world.kube_writes.append((verb, obj["kind"], obj["metadata"]["name"], dry_run))
        if not dry_run and obj["kind"] == "ConfigMap":
            version = int((self.world.configmap or {"metadata": {"resourceVersion": "0"}})["metadata"]["resourceVersion"])
            self.world.configmap = dict(obj, metadata=dict(obj["metadata"], resourceVersion=str(version + 1)))

    def create(self, obj, dry_run=False):
        self._write("create", obj, dry_run)

    def replace(self, obj, dry_run=False):
        self._write("replace", obj, dry_run)


class Conn:
    """The runner's Connections over the world: a new Talos client per call, one Kubernetes client."""

    def __init__(self, world, kube=True):
        self.world = world
        self.talos_clients = []
        self._kube = FakeKube(world) if kube else None

    def talos(self, maintenance=False, dial_only=None):
        self.talos_clients.append(FakeTalos(self.world))
        return self.talos_clients[-1]

    def has_kube(self):
        return self._kube is not None

    def kube(self):
        assert self._kube is not None, "no kubeconfig was given"
        return self._kube

    def close(self):
        for client in self.talos_clients:
            client.close()


@pytest.fixture
def conns():
    made = []

    def make(world, kube=True):
        made.append(Conn(world, kube))
        return made[-1]

    yield make
    for conn in made:
        conn.close()


def _record(**data):
    data["schema"] = 1
    return {"metadata": {"name": "ichor-cluster", "namespace": "ichor-system", "resourceVersion": "7"},
            "data": {"record": json.dumps(data)}}


def _talos_writes(world):
    return [w for w in world.writes if w[0] in WRITES]


# --- release_check --------------------------------------------------------------------------------------------

def test_check_plans_the_talos_step_of_a_behind_cluster(conns):
    world = World(V113, {"*": "v1.13.9"})
    result = check.run(dict(world.params(), desired={}), conns(world), True)
    assert result["components"] == {"talos": "behind", "contract": "behind", "kubernetes": "behind"}
    assert result["step"] == "talos" and [s["step"] for s in result["steps"]] == ["talos", "config", "kubernetes"]
    assert result["config_pending"] == [{"name": "cp-1", "form": "v1.13", "drop": []},
                                        {"name": "worker-1", "form": "v1.13", "drop": []}]
    assert "next step: talos" in result["plan"] and world.writes == [] and world.kube_writes == []


def test_check_plans_each_machine_with_the_node_talos_names_and_refuses_one_the_cluster_lacks(conns):
    world = World(V113, {"*": "v1.13.9"}, workers=2)
    talos = [s for s in check.run(dict(world.params(), desired={}), conns(world), True)["steps"]
             if s["step"] == "talos"][0]
    assert [line.split(":", 1)[0] for line in talos["lines"][:-1]] == [
        "cp-1 (10.5.0.2, Node talos-cp-1)", "worker-1 (10.5.0.3, Node talos-worker-1)",
        "worker-2 (10.5.0.4, Node talos-worker-2)"]
    world.machine("worker-1").registered = False
    world.machine("worker-2").registered = False
    with pytest.raises(check.plan.Refused) as exc:
        check.run(dict(world.params(), desired={}), conns(world), True)
    assert exc.value.message == (
        "worker-1 (10.5.0.3): Talos names its Node talos-worker-1 and the cluster has no Node of that name (its kubelet "
        "has not registered, or it registers under another name); worker-2 (10.5.0.4): Node talos-worker-2; nothing "
        "was sent: compare `kubectl get nodes -o wide` with `talosctl -n 10.5.0.3 get nodename`")
    assert world.writes == [] and world.kube_writes == []


def test_check_names_the_installer_image_of_the_talos_step_and_refuses_one_without_a_version(conns):
    world = World(V113, {"*": "v1.13.9"})
    mirror = "registry.example:5000/siderolabs/installer:" + release.TALOS
    result = check.run(dict(world.params(), desired={}, image=mirror), conns(world), True)
    talos = [s for s in result["steps"] if s["step"] == "talos"][0]
    assert all(" with %s, reboot, " % mirror in line for line in talos["lines"][:-1]), talos["lines"]
    with pytest.raises(images.ImageRefError) as exc:
        check.run(dict(world.params(), desired={}, image="registry.example:5000/siderolabs/installer"), conns(world), True)
    assert "has no tag" in exc.value.message and exc.value.result["plan"] == []
    assert world.writes == [] and world.kube_writes == []


@pytest.mark.parametrize("desired, message", [
    ({"cilium": release.CILIUM}, "desired: unknown field 'cilium' (talos, kubernetes, contract)"),
    ({"talos": "v1.14.1"}, "talos v1.14.1 is not the release set's %s; this collection manages only its release "
                           "set (no override)" % release.TALOS),
    ({"kubernetes": "v1.35.4", "talos": "v1.13.9"}, "talos v1.13.9 is not the release set's %s" % release.TALOS),
])
def test_check_refuses_a_desired_change_the_stored_versions_do_not_allow(conns, desired, message):
    world = World(V113, {"*": "v1.13.9"})
    world.configmap = _record(talos=release.TALOS, kubernetes="v1.35.4", contract="v1.13")
    with pytest.raises(Refused) as exc:
        check.run(dict(world.params(), desired=desired), conns(world), True)
    assert exc.value.message.startswith(message)
    # the result so far goes with the failure: the release set, no plan yet
    assert exc.value.result == {"changed": False, "release_set": release.release_set(), "plan": []}


def test_check_takes_an_unchanged_or_pinned_desired_value(conns):
    world = World(V113, {"*": "v1.13.9"})
    world.configmap = _record(talos="v1.13.9", kubernetes="v1.35.4", contract="v1.13")
    desired = {"talos": release.TALOS, "kubernetes": "v1.35.4", "contract": release.CONTRACT}
    assert check.run(dict(world.params(), desired=desired), conns(world), True)["step"] == "talos"


def test_check_refuses_a_newer_machine_with_the_table_unset(conns):
    world = World(V113, {"cp-1": "v1.13.9", "worker-1": versions.TALOS_NEWER})
    with pytest.raises(Refused) as exc:
        check.run(dict(world.params(), desired={}), conns(world), True)
    assert "Talos on worker-1 is %s, newer than the release set's %s" % (versions.TALOS_NEWER, release.TALOS) \
        in exc.value.message
    assert "versions" not in exc.value.result and exc.value.result["plan"] == []


# --- talos_upgrade --------------------------------------------------------------------------------------------

def _talos_params(world, name, **extra):
    m = world.machine(name)
    # as the upgrade role calls it: the inventory's name for the machine, no Node name (Talos names its Node)
    params = dict(node=m.node, name=name, hostname=None, role=m.role, image=None, wait=True, wait_timeout=900.0)
    params.update(extra)
    return params


def test_talos_step_skips_a_machine_at_the_target(conns):
    world = World(V113, {"*": release.TALOS})
    result = talos_step.run(_talos_params(world, "cp-1"), conns(world), False, clock=world.clock)
    assert result["changed"] is False
    assert result["plan"] == ["cp-1 (10.5.0.2, Node talos-cp-1): already at Talos %s, skipped" % release.TALOS]
    assert result["diff"] == {"before": "", "after": ""} and world.writes == []


def test_talos_step_waits_for_the_node_talos_names_not_the_inventory_name(conns):
    world = World(V113, {"*": "v1.13.9"})
    result = talos_step.run(_talos_params(world, "worker-1"), conns(world), False, clock=world.clock)
    # the Node it waited for is talos-worker-1: the run would time out on a Node named worker-1
    assert result["plan"][0].startswith("worker-1 (10.5.0.3, Node talos-worker-1): upgrade Talos from v1.13.9")
    assert world.machine("worker-1").version == release.TALOS


def test_talos_step_refuses_a_machine_whose_node_the_cluster_does_not_have(conns):
    world = World(V113, {"*": "v1.13.9"})
    world.machine("worker-1").registered = False
    for check_mode in (True, False):
        with pytest.raises(UpgradeFailed) as exc:
            talos_step.run(_talos_params(world, "worker-1"), conns(world), check_mode, clock=world.clock)
        assert exc.value.message == (
            "worker-1 (10.5.0.3): Talos names its Node talos-worker-1 and the cluster has no Node of that name (its "
            "kubelet has not registered, or it registers under another name); nothing was sent: compare `kubectl get "
            "nodes -o wide` with `talosctl -n 10.5.0.3 get nodename`")
    assert world.writes == []
    # a Node name given to the module (a kubelet registered under a name of its own) is the one waited for
    world.machine("worker-1").registered = True
    with pytest.raises(UpgradeFailed) as exc:
        talos_step.run(_talos_params(world, "worker-1", hostname="worker-1"), conns(world), True, clock=world.clock)
    assert "Talos names its Node worker-1 and the cluster has no Node" in exc.value.message


def test_talos_step_refuses_a_control_plane_while_etcd_is_unhealthy(conns):
    world = World(V113, {"*": "v1.13.9"})
    world.machine("cp-1").etcd_errors = ["NOSPACE"]
    with pytest.raises(UpgradeFailed) as exc:
        talos_step.run(_talos_params(world, "cp-1"), conns(world), False, clock=world.clock)
    assert exc.value.message == ("cp-1 is a control plane and etcd is not healthy (etcd on 10.5.0.2 reports errors); "
                                 "no upgrade was started")
    assert exc.value.result == {"plan": [], "before": "v1.13.9", "after": "v1.13.9"}
    assert world.writes == []


def test_talos_step_in_check_mode_plans_and_sends_nothing(conns):
    world = World(V113, {"*": "v1.13.9"})
    result = talos_step.run(_talos_params(world, "worker-1"), conns(world), True, clock=world.clock)
    assert result["changed"] is True and (result["before"], result["after"]) == ("v1.13.9", release.TALOS)
    assert result["plan"] == ["worker-1 (10.5.0.3, Node talos-worker-1): upgrade Talos from v1.13.9 to %s with %s, reboot, wait "
                              "for it and its Node; system extensions: none" % (release.TALOS, versions.installer())]
    assert result["installer"] == {"image": versions.installer(), "source": "plain", "extensions": {
        "before": [], "schematic": "", "declared": "ghcr.io/siderolabs/installer:v1.13.9", "after": "none"}}
    assert result["diff"] == {"before": "talos: v1.13.9\n", "after": "talos: %s\n" % release.TALOS}
    assert world.writes == []


def test_talos_step_starts_the_upgrade_and_waits_for_etcd_and_the_node(conns):
    world = World(V113, {"*": "v1.13.9"})
    result = talos_step.run(_talos_params(world, "cp-1"), conns(world), False, clock=world.clock)
    assert result["changed"] is True
    assert result["plan"][0].endswith("reboot, wait for it, its etcd member and its Node; system extensions: none")
    assert world.writes == [("ImagePull", "cp-1"), ("LifecycleUpgrade", "cp-1"), ("Reboot", "cp-1")]
    cp = world.machine("cp-1")
    assert cp.version == release.TALOS and cp.up and world.clock.now >= REBOOT_SECONDS


def test_talos_step_without_wait_returns_once_the_upgrade_is_sent(conns):
    world = World(V113, {"*": "v1.12.7"})
    result = talos_step.run(_talos_params(world, "worker-1", wait=False), conns(world), False, clock=world.clock)
    assert result["changed"] is True and result["plan"][0].endswith(
        "reboot, not waiting for it (wait: false); system extensions: none")
    assert world.writes == [("Upgrade", "worker-1")]  # a v1.12 machine takes the legacy call
    assert not world.machine("worker-1").up and world.clock.now == 0


SCHEMATIC = "4a0d65c669d46663f377e7161e50cfd570c401f26fd9e7bda34a0216b6f1922b"
FACTORY = "factory.talos.dev/installer/" + SCHEMATIC


def _factory(m, image="%s:v1.13.9" % FACTORY, extensions=(("iscsi-tools", "v0.2.0"), ("qemu-guest-agent", "10.1.2"))):
    """The machine was installed from ``image`` (its config says so) and runs ``extensions`` and its schematic."""
    m.config = m.config.replace("ghcr.io/siderolabs/installer:v1.13.9", image) if image else "\n".join(
        line for line in m.config.splitlines() if "image: ghcr.io/siderolabs/installer" not in line)
    m.extensions = list(extensions) + ([("schematic", SCHEMATIC)] if image and SCHEMATIC in image else [])


def test_talos_step_upgrades_a_factory_machine_to_its_schematic_at_the_sets_version(conns):
    world = World(V113, {"*": "v1.13.9"})
    _factory(world.machine("worker-1"))
    result = talos_step.run(_talos_params(world, "worker-1"), conns(world), False, clock=world.clock)
    target = "%s:%s" % (FACTORY, release.TALOS)
    assert result["plan"][0].endswith("with %s, reboot, wait for it and its Node; system extensions iscsi-tools, "
                                      "qemu-guest-agent -> kept (schematic %s)" % (target, SCHEMATIC)), result["plan"]
    assert [(call, getattr(request, "image_ref", None)) for call, _name, request in world.requests][:1] == \
        [("ImagePull", target)]
    assert result["installer"]["image"] == target and result["installer"]["source"] == "schematic"
    assert world.machine("worker-1").version == release.TALOS


def test_talos_step_refuses_a_machine_whose_extensions_no_known_installer_carries_and_sends_nothing(conns):
    world = World(V113, {"*": "v1.13.9"})
    _factory(world.machine("worker-1"), image=None, extensions=[("drbd", "9.2.14")])
    with pytest.raises(installer.Refused) as exc:
        talos_step.run(_talos_params(world, "worker-1"), conns(world), False, clock=world.clock)
    assert exc.value.message.startswith("worker-1 runs the system extension drbd, but its machine config names no "
                                        "install image"), exc.value.message
    assert exc.value.result == {"plan": [], "before": "v1.13.9", "after": ""}
    assert world.writes == []
    # named by the operator, the image is used as named
    named = "registry.local/talos/installer-drbd:%s" % release.TALOS
    result = talos_step.run(_talos_params(world, "worker-1", image=named), conns(world), True, clock=world.clock)
    assert result["plan"][0].endswith("with %s, reboot, wait for it and its Node; system extensions drbd -> not "
                                      "verified (the image ichor_upgrade_installer_image names)" % named)
    assert world.writes == []


def test_talos_step_names_what_it_waited_for_when_the_machine_does_not_come_back(conns):
    world = World(V113, {"*": "v1.13.9"})
    world.machine("worker-1").never_back = True
    with pytest.raises(UpgradeFailed) as exc:
        talos_step.run(_talos_params(world, "worker-1", wait_timeout=60.0), conns(world, kube=False), False,
                       clock=world.clock)
    assert exc.value.message == ("worker-1 (10.5.0.3) did not come back within 60s: waited for it to answer with Talos "
                                 "%s; the remaining machines were not touched; fix the machine and rerun, the "
                                 "rollout continues from it" % release.TALOS)
    assert exc.value.result == {"plan": [], "before": "v1.13.9", "after": ""}


def test_talos_step_sends_the_containerd_instance_talosctl_sends(conns):
    """talosctl 1.14 upgrade (--namespace system): driver CRI, namespace NS_SYSTEM on Pull and Upgrade; Talos refuses
    an unset namespace. The Upgrade names the image as the pull reported it (what the machine's store knows)."""
    world = World(V113, {"*": "v1.13.9"})
    talos_step.run(_talos_params(world, "worker-1"), conns(world, kube=False), False, clock=world.clock)
    sent = dict((call, request) for call, _name, request in world.requests)
    for call in ("ImagePull", "LifecycleUpgrade"):
        assert (sent[call].containerd.driver, sent[call].containerd.namespace) == (1, 1), call
    assert sent["ImagePull"].image_ref == versions.installer()
    assert sent["LifecycleUpgrade"].source.image_name == (
        "ghcr.io/siderolabs/installer@sha256:" + hashlib.sha256(versions.installer().encode()).hexdigest())
    assert world.machine("worker-1").version == release.TALOS


def test_talos_step_does_not_reboot_a_control_plane_whose_etcd_failed_while_its_installer_ran(conns):
    # the soak's seed 2939: another control plane went down unasked between the check and the reboot
    world = World(V113, {"*": "v1.13.9"})
    cp = world.machine("cp-1")
    world.while_installing = lambda: cp.etcd_errors.append("NOSPACE")
    with pytest.raises(UpgradeFailed) as exc:
        talos_step.run(_talos_params(world, "cp-1"), conns(world), False, clock=world.clock)
    assert exc.value.message == (
        "cp-1 is a control plane and etcd is no longer healthy (etcd on 10.5.0.2 reports errors); Talos %s is "
        "installed but the machine was not rebooted and still runs Talos v1.13.9; rerun once etcd is healthy"
        % release.TALOS)
    assert exc.value.result == {"plan": [], "before": "v1.13.9", "after": "v1.13.9"}
    assert world.writes == [("ImagePull", "cp-1"), ("LifecycleUpgrade", "cp-1")]  # no Reboot
    assert cp.up and cp.version == "v1.13.9"


def test_talos_step_judges_no_etcd_before_a_workers_reboot(conns):
    world = World(V113, {"*": "v1.13.9"})
    world.while_installing = lambda: world.machine("cp-1").etcd_errors.append("NOSPACE")
    talos_step.run(_talos_params(world, "worker-1"), conns(world), False, clock=world.clock)
    assert world.writes == [("ImagePull", "worker-1"), ("LifecycleUpgrade", "worker-1"), ("Reboot", "worker-1")]


PEM = "-----BEGIN ED25519 PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIHx1\n-----END ED25519 PRIVATE KEY-----"


@pytest.mark.parametrize("exit_code, output, what", [
    (7, ["validating install disk", "error: " + PEM, "failed to install bootloader: no space left on device"],
     'exited with code 7 (installation error), it said: "validating install disk / error: <redacted> / failed to '
     'install bootloader: no space left on device"'),
    (1, [], "exited with code 1 and said nothing"),
    (None, ["pulling installer image"], 'reported no exit code, it said: "pulling installer image"'),
])
def test_talos_step_stops_without_a_reboot_when_the_installer_fails(conns, exit_code, output, what):
    world = World(V113, {"*": "v1.13.9"})
    worker = world.machine("worker-1")
    worker.installer_exit_code, worker.installer_output = exit_code, output
    with pytest.raises(UpgradeFailed) as exc:
        talos_step.run(_talos_params(world, "worker-1"), conns(world), False, clock=world.clock)
    assert exc.value.message == (
        "worker-1 (10.5.0.3): the Talos installer (%s) %s; the machine was not "
        "rebooted and still runs Talos v1.13.9; fix the cause and rerun" % (versions.installer(), what))
    assert exc.value.result == {"plan": [], "before": "v1.13.9", "after": "v1.13.9"}
    assert world.writes == [("ImagePull", "worker-1"), ("LifecycleUpgrade", "worker-1")]  # no Reboot
    assert worker.up and worker.version == "v1.13.9"


def test_talos_step_quotes_the_installer_redacted_on_one_line_and_cut_from_the_front(conns):
    world = World(V113, {"*": "v1.13.9"})
    secret = redact.Secret("hunter2-installer-registry-password")
    worker = world.machine("worker-1")
    worker.installer_exit_code = 5
    worker.installer_output = ["x" * 400, "auth with\n%s failed" % secret.reveal()]
    with pytest.raises(UpgradeFailed) as exc:
        talos_step.run(_talos_params(world, "worker-1"), conns(world), False, clock=world.clock)
    said = exc.value.message.split('it said: "', 1)[1].split('"', 1)[0]
    assert said.startswith("[cut] x") and said.endswith("x / auth with <redacted> failed") and len(said) <= 306
    assert "\n" not in exc.value.message and "hunter2" not in exc.value.message
    assert "(dependency error)" in exc.value.message


def test_talos_step_takes_the_tag_of_an_image_pinned_by_digest_and_converges(conns):
    world = World(V113, {"*": "v1.13.9"})
    image = "registry.example:5000/siderolabs/installer:%s@sha256:" % release.TALOS + "0123456789abcdef" * 4
    result = talos_step.run(_talos_params(world, "worker-1", image=image), conns(world, kube=False), False,
                            clock=world.clock)
    assert result["changed"] is True and result["after"] == release.TALOS
    assert world.machine("worker-1").version == release.TALOS
    sent = dict((call, request) for call, _name, request in world.requests)
    assert sent["ImagePull"].image_ref == image
    assert sent["LifecycleUpgrade"].source.image_name == (
        "registry.example:5000/siderolabs/installer@sha256:" + "0123456789abcdef" * 4)
    world.writes = []
    result = talos_step.run(_talos_params(world, "worker-1", image=image), conns(world, kube=False), False,
                            clock=world.clock)
    assert result["changed"] is False and world.writes == []


@pytest.mark.parametrize("image, message", [
    ("ghcr.io/siderolabs/installer@sha256:" + "ab" * 32,
     "installer image 'ghcr.io/siderolabs/installer@sha256:%s' is pinned by digest only: the Talos version it installs "
     "cannot be known before the upgrade; name it with its tag too (ghcr.io/siderolabs/installer:vX.Y.Z@sha256:%s)"
     % ("ab" * 32, "ab" * 32)),
    ("localhost:5000/installer", "installer image 'localhost:5000/installer' has no tag: name the Talos version it "
                                 "installs (localhost:5000/installer:vX.Y.Z)"),
    ("ghcr.io/siderolabs/installer:latest", "installer image 'ghcr.io/siderolabs/installer:latest': its tag 'latest' is "
                                            "not a Talos version (vX.Y.Z): the upgrade's target is read from the tag"),
    ("ghcr.io/siderolabs/installer:1.14.5", "installer image 'ghcr.io/siderolabs/installer:1.14.5': its tag '1.14.5' is "
                                            "not a Talos version (vX.Y.Z): the upgrade's target is read from the tag"),
    ("ghcr.io/siderolabs/Installer:v1.14.5", "image reference 'ghcr.io/siderolabs/Installer:v1.14.5': the repository "
                                             "name must be lowercase"),
])
def test_talos_step_refuses_an_image_whose_version_is_unknown_before_anything_is_sent(conns, image, message):
    world = World(V113, {"*": "v1.13.9"})
    conn = conns(world)
    with pytest.raises(images.ImageRefError) as exc:
        talos_step.run(_talos_params(world, "worker-1", image=image), conn, True, clock=world.clock)
    assert exc.value.message == message
    assert exc.value.result == {"plan": [], "before": "", "after": ""}
    assert conn.talos_clients == [] and world.writes == []


# --- config_upgrade -------------------------------------------------------------------------------------------

def test_config_step_refuses_before_the_talos_step_is_done(conns):
    world = World(V113, {"cp-1": release.TALOS, "worker-1": "v1.13.9"})
    with pytest.raises(Refused) as exc:
        config_step.run(world.params(), conns(world), False, clock=world.clock)
    assert exc.value.message == "the talos step is not done: worker-1 runs Talos v1.13.9; the config step runs after it"
    assert exc.value.result == {"changed": False, "plan": [], "machines": []}
    assert world.writes == []


def test_config_step_with_nothing_pending(conns):
    world = World(V114, {"*": release.TALOS})
    result = config_step.run(world.params(), conns(world), False, clock=world.clock)
    assert result == {"changed": False, "plan": ["every machine's config is in the %s form; nothing to do" % release.CONTRACT],
                      "machines": []}
    assert world.writes == []


def test_config_step_in_check_mode_plans_what_talos_says_it_reboots(conns):
    world = World(V113, {"*": release.TALOS})
    world.machine("cp-1").needs_reboot = True
    result = config_step.run(world.params(), conns(world), True, clock=world.clock)
    assert result["changed"] is True
    assert result["plan"] == ["cp-1: config from the v1.13 form to %s (reboots)" % release.CONTRACT,
                              "worker-1: config from the v1.13 form to %s (no reboot)" % release.CONTRACT, "reboots: cp-1"]
    assert result["machines"] == [{"name": "cp-1", "from": "v1.13", "reboot": True, "drop": []},
                                  {"name": "worker-1", "from": "v1.13", "reboot": False, "drop": []}]
    assert [d["after_header"] for d in result["diff"]] == ["cp-1 (%s form)" % release.CONTRACT,
                                                           "worker-1 (%s form)" % release.CONTRACT]
    assert "KubeletConfig" in result["diff"][0]["after"] and "PRIVATE KEY" not in json.dumps(result)
    assert world.writes == []  # the dry runs are not writes


def test_config_step_refuses_a_control_plane_while_etcd_is_unhealthy(conns):
    world = World(V113, {"*": release.TALOS})
    world.machine("cp-1").etcd_errors = ["NOSPACE"]
    with pytest.raises(UpgradeFailed) as exc:
        config_step.run(world.params(), conns(world), False, clock=world.clock)
    assert exc.value.message == ("cp-1: etcd is not healthy (etcd on 10.5.0.2 reports errors); a control plane is not "
                                 "started while etcd is unhealthy: fix etcd and rerun")
    assert exc.value.result["plan"][-1] == "reboots: none"
    assert world.writes == []


def test_config_step_stops_when_the_read_back_differs(conns):
    world = World(V113, {"*": release.TALOS})
    world.machine("cp-1").ignores_applies = True
    with pytest.raises(UpgradeFailed) as exc:
        config_step.run(world.params(), conns(world), False, clock=world.clock)
    assert exc.value.message == ("cp-1: the config read back differs from the %s render; the remaining machines "
                                 "were not touched" % release.CONTRACT)
    assert [w[:2] for w in world.writes] == [("ApplyConfiguration", "cp-1")]


def test_config_step_waits_for_a_rebooted_machine_before_the_next(conns):
    world = World(V113, {"*": release.TALOS})
    world.machine("cp-1").needs_reboot = True
    conn = conns(world)
    result = config_step.run(world.params(wait_timeout=120.0), conn, False, clock=world.clock)
    assert result["plan"][-2:] == ["cp-1: now in the %s form, read back" % release.CONTRACT,
                                   "worker-1: now in the %s form, read back" % release.CONTRACT]
    assert [w[:2] for w in world.writes] == [("ApplyConfiguration", "cp-1"), ("ApplyConfiguration", "worker-1")]
    assert world.clock.now >= REBOOT_SECONDS  # worker-1 was applied after cp-1 was back
    assert len(conn.talos_clients) == 2  # a new client after the reboot
    assert all("KubeletConfig" in m.config for m in world.machines.values())


def test_config_step_gives_up_on_a_machine_that_does_not_come_back(conns):
    world = World(V113, {"*": release.TALOS})
    cp = world.machine("cp-1")
    cp.needs_reboot = cp.never_back = True
    with pytest.raises(UpgradeFailed) as exc:
        config_step.run(world.params(wait_timeout=60.0), conns(world), False, clock=world.clock)
    assert exc.value.message.startswith("cp-1 (10.5.0.2) did not come back within 60s")
    assert [w[:2] for w in world.writes] == [("ApplyConfiguration", "cp-1")]


# --- kubernetes_upgrade ---------------------------------------------------------------------------------------

METRICS = ('apiserver_requested_deprecated_apis{group="flowcontrol.apiserver.k8s.io",removed_release="1.32",'
           'resource="flowschemas",subresource="",version="v1beta3"} 1\n')


def _proxy(world, tag):
    world.daemonsets["kube-proxy"] = {"spec": {"template": {"spec": {"containers": [
        {"name": "kube-proxy", "image": "registry.k8s.io/kube-proxy:%s" % tag}]}}}}


def test_kubernetes_step_refuses_while_removed_apis_are_in_use(conns):
    world = World(V114, {"*": release.TALOS})
    world.metrics = METRICS
    with pytest.raises(UpgradeFailed) as exc:
        kubernetes_step.run(world.params(), conns(world), False, clock=world.clock)
    assert exc.value.message.startswith("removed APIs are still in use, Kubernetes %s no longer serves them: "
                                        "flowcontrol.apiserver.k8s.io/v1beta3 flowschemas (removed in 1.32)"
                                        % release.KUBERNETES)
    assert exc.value.result == {"changed": False, "plan": [],
                                "removed_apis": ["flowcontrol.apiserver.k8s.io/v1beta3 flowschemas (removed in 1.32)"]}
    assert world.writes == []


def test_kubernetes_step_needs_the_metrics_to_check(conns):
    world = World(V114, {"*": release.TALOS})
    world.metrics_error = KubeError("GET /metrics: 403 Forbidden", status=403)
    with pytest.raises(UpgradeFailed) as exc:
        kubernetes_step.run(world.params(), conns(world), False, clock=world.clock)
    assert exc.value.message == ("cannot read the API server's /metrics to check for removed APIs (GET /metrics: 403 "
                                 "Forbidden); the kubeconfig's user needs get on the non-resource URL /metrics")


def test_kubernetes_step_refuses_before_the_config_step(conns):
    world = World(V113, {"*": release.TALOS})
    with pytest.raises(ConfigError) as exc:
        kubernetes_step.run(world.params(), conns(world), False, clock=world.clock)
    assert exc.value.message == ("the config of cp-1, worker-1 is not yet in the %s form: run the config step "
                                 "first" % release.CONTRACT)
    assert exc.value.result == {"changed": False, "plan": [], "removed_apis": []} and world.writes == []


def test_kubernetes_step_moves_control_planes_then_kube_proxy_then_kubelets(conns):
    world = World(V114, {"*": release.TALOS}, workers=2)
    _proxy(world, "v1.36.3")
    check_mode = kubernetes_step.run(world.params(), conns(world), True, clock=world.clock)
    target = release.KUBERNETES
    # the first line names the component images every machine pulls before anything is applied
    assert check_mode["plan"][0] == (
        "pull before anything is applied (ImageService.Pull): registry.k8s.io/kube-apiserver:{0} (k8s.io namespace), "
        "registry.k8s.io/kube-controller-manager:{0} (k8s.io namespace), registry.k8s.io/kube-scheduler:{0} (k8s.io "
        "namespace) on 1 machine; ghcr.io/siderolabs/kubelet:{0} (system namespace) on 3 machines".format(target))
    assert check_mode["plan"][1:] == [
        "cp-1: control plane (kube-apiserver, kube-controller-manager, kube-scheduler) to %s (no reboot)" % target,
        "cp-1: kube-proxy to %s (no reboot)" % target, "cp-1 (Node talos-cp-1): kubelet to %s (no reboot)" % target,
        "worker-1 (Node talos-worker-1): kubelet to %s (no reboot)" % target,
        "worker-2 (Node talos-worker-2): kubelet to %s (no reboot)" % target,
        "kube-system/kube-proxy DaemonSet to %s" % target]
    assert [d["before_header"] for d in check_mode["diff"]] == ["cp-1", "worker-1", "worker-2"]
    assert world.writes == []

    result = kubernetes_step.run(world.params(), conns(world), False, clock=world.clock)
    assert result["plan"] == check_mode["plan"] and result["changed"] is True
    pulls = [w for w in world.writes if w[0] == "ImagePull"]
    assert pulls and world.writes[:len(pulls)] == pulls  # every pull before the first apply
    # each apply: (machine, kube-apiserver, kube-proxy, kubelet) as the config names them after it (the case: v1.36.3)
    assert world.writes[len(pulls):] == [
        ("ApplyConfiguration", "cp-1", target, "v1.36.3", "v1.36.3"),
        ("ApplyConfiguration", "cp-1", target, target, "v1.36.3"),
        ("DaemonSet", "registry.k8s.io/kube-proxy:" + target),
        ("ApplyConfiguration", "cp-1", target, target, target),
        ("ApplyConfiguration", "worker-1", None, None, target),
        ("ApplyConfiguration", "worker-2", None, None, target)]
    assert kubernetes_step.run(world.params(), conns(world), False, clock=world.clock) == {
        "changed": False, "plan": ["Kubernetes is at %s on every machine; nothing to do" % target], "removed_apis": []}


def test_kubernetes_step_moves_only_a_kube_proxy_daemonset_left_behind(conns):
    world = World(V114, {"*": release.TALOS})
    for m in world.machines.values():  # configs at the set already
        m.config = m.config.replace(":v1.36.3", ":" + release.KUBERNETES)
    _proxy(world, "v1.36.3")
    result = kubernetes_step.run(world.params(), conns(world), False, clock=world.clock)
    assert result["plan"] == ["kube-system/kube-proxy DaemonSet to %s" % release.KUBERNETES]
    assert world.writes == [("DaemonSet", "registry.k8s.io/kube-proxy:" + release.KUBERNETES)]


def test_kubernetes_step_refuses_a_machine_whose_node_the_cluster_does_not_have(conns):
    world = World(V114, {"*": release.TALOS}, workers=2)
    world.machine("worker-2").registered = False
    with pytest.raises(UpgradeFailed) as exc:
        kubernetes_step.run(world.params(), conns(world), False, clock=world.clock)
    assert exc.value.message.startswith("worker-2 (10.5.0.4): Talos names its Node talos-worker-2 and the cluster has "
                                        "no Node of that name")
    assert world.writes == []


def test_kubernetes_step_waits_for_each_kubelet(conns, monkeypatch):
    world = World(V114, {"*": release.TALOS})
    stale = world.node_object

    def kubelet_never_moves(m):
        node = stale(m)
        node["status"]["nodeInfo"]["kubeletVersion"] = "v1.36.3"
        return node

    monkeypatch.setattr(world, "node_object", kubelet_never_moves)
    with pytest.raises(UpgradeFailed) as exc:
        kubernetes_step.run(world.params(wait_timeout=30.0), conns(world), False, clock=world.clock)
    assert exc.value.message == ("the kubelet of cp-1 did not report %s and Ready on its Node talos-cp-1 within 30s; "
                                 "the remaining machines were not touched; rerun to continue" % release.KUBERNETES)
    assert [w[1] for w in world.writes if w[0] != "ImagePull"] == ["cp-1", "cp-1", "cp-1"]  # worker-1 untouched


# --- cluster_record -------------------------------------------------------------------------------------------

def test_record_moves_stored_versions_only_to_the_set(conns):
    world = World(V114, {"*": release.TALOS})
    world.configmap = _record(talos="v1.13.9")
    with pytest.raises(Refused) as exc:
        record.run({"update": {"talos": "v1.14.1"}}, conns(world), False)
    assert exc.value.message.startswith("talos v1.14.1 is not the release set's " + release.TALOS)
    assert exc.value.result == {"plan": []} and world.kube_writes == []
    result = record.run({"update": {"talos": release.TALOS, "note": None}}, conns(world), True)
    assert result["changed"] is True and result["plan"] == ["cluster record ichor-system/ichor-cluster: set talos=" + release.TALOS]
    assert world.kube_writes == [("replace", "ConfigMap", "ichor-cluster", True)]
    assert json.loads(result["diff"]["after"])["talos"] == release.TALOS
    assert record.run({"update": {}}, conns(world), False)["record"] == {"schema": 1, "talos": "v1.13.9"}


@pytest.mark.parametrize("image, moved", [
    ("registry.k8s.io/kube-proxy:v1.35.4", "registry.k8s.io/kube-proxy:v1.36.6"),
    ("registry.corp.example:5000/kube-proxy", "registry.corp.example:5000/kube-proxy:v1.36.6"),
    ("ghcr.io/x/kube-proxy:v1.35.4@sha256:" + "a" * 64, "ghcr.io/x/kube-proxy:v1.36.6"),
    ("registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10"),
    ("not a reference", "not a reference"),
])
def test_the_kube_proxy_daemonset_image_is_retagged_by_the_one_parser(image, moved):
    from ansible_collections.maesh.ichor.plugins.module_utils.rollout import kubernetes_step
    assert kubernetes_step._retagged(image, "v1.36.6") == moved  # pylint: disable=protected-access
