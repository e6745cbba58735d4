"""The guides' commands, run as written against the lab, print what the guides say (issue 44): a test per guide.

Each guide marks the blocks the lab can run (``<!-- lab -->``, see tests/integration/guide_blocks.py); a test runs
every marked block of its guide in order, with bash, as an operator would paste it, and compares what it prints with
the output the guide quotes. Only the lab's side is substituted: the operator's home is a directory of the test's
(so ``~/clusters/prod/...`` is real), the lab's loopback addresses, UUIDs, cluster IDs and Talos hostnames are shown
as the guide's (``10.5.0.11`` for the inventory's ``cp-1``, whatever the simulated machine is called), and the lab's
kubectl, helm and etcdutl are on PATH. Nothing else: no callback, no KUBECONFIG or TALOSCONFIG unless a block sets
them.

Cost: one lab per guide, and the guides that follow each other on one cluster share it, as the guides' examples do
(troubleshooting, adopt, upgrade, status, restore-snapshot, remove: a flannel cluster of five machines behind the
release set, adopted unmanaged, its etcd snapshot a real one); the checks are ``--check`` runs where the guide's
command is one. The tests of that cluster depend on their order (pytest keeps the file's order; xdist's loadfile keeps
a file on one worker).
"""

import asyncio
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.cilium import takeover
from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record, lock
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient
from ansible_collections.maesh.ichor.plugins.module_utils.talos import transport, wire

from tests.integration import guide_blocks
from tests.integration.ansible_env import REPO, ansible_env
from tests.integration.test_adopt_plan import Workloads
from tests.integration.test_cilium_takeover import Conn, _params as takeover_params
from tests.integration.test_wire_grpc_go import etcd_over_tls, field, fields
from tests.lab.agent import LabAgent
from tests.lab.cilium import fixtures as cilium_fixtures
from tests.lab.cilium.fixtures import TALOS_VALUES, merged
from tests.lab.process import LabProcess

pytestmark = pytest.mark.lab

cilium_charts = cilium_fixtures.cilium_charts
cilium_lab = cilium_fixtures.cilium_lab

DOCS = os.path.join(REPO, "docs")
FLANNEL_CASE = "v1.13/v1.13.9/k8s-older"  # adopt.md's example: machinery v1.13.9's configs, Kubernetes 1.35.4
LOCK_HOLDER = "maesh-ichor-20261207T101500Z-5f2a9c0e7b1d"  # the stale run of docs/stale-lock.md


# The Talos hostnames (and so the Node names) the guides show for the inventory's machines: Talos names a machine
# talos-xxx-yyy unless told otherwise, and nothing makes it equal the inventory's name. Where a lab machine's hostname
# is not its inventory name (and for every machine of a second cluster), the guide's name for it is shown instead.
GUIDE_HOSTNAMES = ({"cp-1": "talos-6a2-6c4", "cp-2": "talos-af3-036", "cp-3": "talos-de8-1a9", "worker-1": "talos-1c9-4e2",
                    "worker-2": "talos-7d0-b83"},
                   {"cp-1": "talos-0b7-5d2", "worker-1": "talos-e41-9a8"})  # a second cluster's


def guide_address(name, second=False):
    """The address a guide shows for an inventory name: cp-N is 10.5.0.1N, worker-N 10.5.0.2N (10.5.1.x: a second
    cluster)."""
    role, number = re.match(r"^(cp|worker)-(\d)$", name).groups()
    return "10.5.%d.%d%s" % (1 if second else 0, 1 if role == "cp" else 2, number)


class Home:
    """The operator's side of the lab: a home with ``~/clusters/<name>/``, ``~/charts/``, the lab's tools on PATH, and
    what is shown as the guide shows it (lab value -> guide value)."""

    def __init__(self, root, kube_lab, charts=None):
        self.home = os.path.join(str(root), "home")
        self.tools = os.path.join(str(root), "tools")
        os.makedirs(os.path.join(self.home, "charts"), exist_ok=True)
        os.makedirs(self.tools, exist_ok=True)
        for name in ("kubectl", "helm", "etcdutl"):
            os.symlink(kube_lab.bins[name], os.path.join(self.tools, name))
        for entry in (charts or {}).values():
            os.symlink(entry["chart"], os.path.join(self.home, "charts", "cilium-%s.tgz" % entry["version"]))
        self.kube_lab = kube_lab
        self.shown = []  # (lab value, guide value): in commands (guide -> lab) and in output (lab -> guide)
        self.shown_only = []  # (lab value, guide value) in output only: a Talos hostname is shown as the inventory name
        self.outputs = []

    def path(self, *parts):
        return os.path.join(self.home, *parts)

    def cluster(self, name, lab=None, kubeconfig=True, inventory=None, second=False):
        """~/clusters/<name>/: the lab's talosconfig, the kube lab's admin kubeconfig, an inventory (``inventory``: the
        guide's, its addresses and UUIDs the guide's; else one in the layout of inventory.example.yml)."""
        folder = self.path("clusters", name)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        if lab is not None:
            shutil.copy(lab.talosconfig, os.path.join(folder, "talosconfig"))
        if kubeconfig:
            shutil.copy(self.kube_lab.kubeconfig, os.path.join(folder, "kubeconfig"))
        machines = lab.machines if lab is not None else []
        for machine in machines:
            self.shown.append((machine["address"], guide_address(machine["name"], second)))
            # a second cluster has no inventory here (reclaim dials it by address): its names are all hostnames
            if machine.get("hostname") and (second or machine["hostname"] != machine["name"]):
                self.shown_only.append((machine["hostname"], GUIDE_HOSTNAMES[second][machine["name"]]))
        if inventory is None:
            groups = {"controlplane": {"hosts": {}}, "worker": {"hosts": {}}}
            for machine in machines:
                group = "controlplane" if machine["role"] == "controlplane" else "worker"
                groups[group]["hosts"][machine["name"]] = {"ansible_host": machine["address"]}
            inventory = {"all": {"vars": {"ichor_talosconfig": "~/clusters/%s/talosconfig" % name,
                                          "ichor_kubeconfig": "~/clusters/%s/kubeconfig" % name},
                                 "children": groups}}
            if lab is None:
                inventory = {"all": {"vars": {"ichor_kubeconfig": "~/clusters/%s/kubeconfig" % name}}}
            text = yaml.safe_dump(inventory, sort_keys=False)
        else:
            text = self.to_lab(inventory)
        with open(os.path.join(folder, "inventory.yml"), "w") as handle:
            handle.write(text)
        return folder

    def show(self, lab_value, guide_value, output_only=False):
        (self.shown_only if output_only else self.shown).append((lab_value, guide_value))

    def to_lab(self, text):
        for lab_value, guide_value in sorted(self.shown, key=lambda pair: -len(pair[1])):
            text = re.sub(r"(?<![\w.-])%s(?![\w-]|\.\d)" % re.escape(guide_value), lab_value.replace("\\", r"\\"),
                          text)
        return text

    def to_guide(self, text):
        text = text.replace(self.home, "~")
        for lab_value, guide_value in sorted(self.shown + self.shown_only, key=lambda pair: -len(pair[0])):
            text = re.sub(r"(?<![\w.-])%s(?![\w-]|\.\d)" % re.escape(lab_value), guide_value.replace("\\", r"\\"),
                          text)
        return text

    def env(self):
        env = ansible_env()
        for name in ("ANSIBLE_CALLBACKS_ENABLED", "KUBECONFIG", "TALOSCONFIG"):  # only what a block sets itself
            env.pop(name, None)
        env.update(HOME=self.home, USER="root", LOGNAME="root",
                   PATH=os.pathsep.join([self.tools, os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
        return env

    def run(self, block):
        """Run one block; assert its status and the output it quotes. Returns the output as the guide shows it."""
        started = time.monotonic()
        proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", self.to_lab(block.script)], cwd=self.home,
                              env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=600, check=False)
        output = self.to_guide(proc.stdout)
        self.outputs.append((block, round(time.monotonic() - started, 1)))
        where = "docs/%s:%d" % (block.guide, block.line)
        assert "Traceback" not in output, "%s printed a traceback:\n%s" % (where, output[-6000:])
        assert proc.returncode == block.rc, "%s exited %d, the guide says %d:\n%s" % (
            where, proc.returncode, block.rc, output[-6000:])
        if block.expected is not None:
            missing = guide_blocks.unmatched(block.expected, output)
            assert missing is None, "%s does not print, where the guide quotes it:\n    %s\nit printed:\n%s" % (
                where, missing, output[-8000:])
        return output

    def run_guide(self, guide, first=0, last=None):
        """Every lab block of a guide (``first`` to ``last``, by index), in order; their outputs."""
        found = guide_blocks.blocks(read(guide), guide)[first:last]
        assert found, "docs/%s has no block marked for the lab" % guide
        return [self.run(block) for block in found]


def read(guide):
    with open(os.path.join(DOCS, guide)) as handle:
        return handle.read()


def _forget(kube_lab):
    """The API server is shared by the session: a guide's cluster starts without a record, a bundle Secret or a lock."""
    kube = KubeClient(kubeconfig=kube_lab.kubeconfig)
    for api_version, kind, name in (("v1", "ConfigMap", cluster_record.NAME), ("v1", "Secret", "ichor-secrets-bundle"),
                                    (lock.API_VERSION, "Lease", lock.NAME)):
        if kube.get(api_version, kind, name, "ichor-system") is not None:
            kube.delete(api_version, kind, name, "ichor-system")


@pytest.fixture
def forget(kube_lab):
    _forget(kube_lab)
    yield
    _forget(kube_lab)


# -- the installer and the lock: the API server alone -----------------------------------------------------------------

def test_install_guide(kube_lab, tmp_path, forget):
    home = Home(tmp_path, kube_lab)
    home.cluster("prod")
    home.run_guide("install.md")


def test_stale_lock_guide(kube_lab, tmp_path, forget):
    """A lock an hour long, taken on a controller that is gone: refused, read, a wrong id refused, broken."""
    assert LOCK_HOLDER in read("stale-lock.md")
    home = Home(tmp_path, kube_lab)
    home.cluster("prod")
    kube = KubeClient(kubeconfig=kube_lab.kubeconfig)
    if kube.get("v1", "Namespace", lock.NAMESPACE) is None:
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": lock.NAMESPACE}})
    now = time.time()
    stale = lock._lease(LOCK_HOLDER, 3600, now, process="ci-runner-7/3f9a1c2e 31337 918273")
    kube.create(stale)
    outputs = home.run_guide("stale-lock.md")
    assert kube.get(lock.API_VERSION, "Lease", lock.NAME, lock.NAMESPACE) is None  # the breaking run gave it back
    assert "broken as asked (ichor_lock_break)" in outputs[-1]


# -- init: machines in maintenance mode --------------------------------------------------------------------------------

def test_init_guide(talos_lab, kube_lab, cilium_charts, tmp_path):
    """The plan of five machines in maintenance mode, the guide's inventory (its UUIDs the lab's machines')."""
    lab = talos_lab(controlplanes=3, workers=2, mode="maintenance", bootstrapped=False, version=release.TALOS)
    home = Home(tmp_path, kube_lab, charts={"1.20": cilium_charts["1.20"]})
    os.makedirs(home.path("bin"))
    os.symlink(kube_lab.bins["helm"], home.path("bin", "helm"))
    text = read("init.md")
    inventory = yaml.safe_load(text.split("The inventory:\n\n```yaml\n", 1)[1].split("```", 1)[0])
    hosts = dict((name, host) for group in inventory["all"]["children"].values() for name, host in group["hosts"].items())
    for machine in lab.machines:
        home.show(machine["uuid"], hosts[machine["name"]]["ichor_uuid"])
        home.show(machine["address"], guide_address(machine["name"]))
    home.cluster("prod", kubeconfig=False, inventory=yaml.safe_dump(inventory, sort_keys=False))
    home.run_guide("init.md")
    assert not os.path.exists(home.path("clusters", "prod", "secrets.yaml"))  # a plan writes nothing


# -- reclaim: a managed cluster and another one -----------------------------------------------------------------------

def test_reclaim_guide(talos_kube_lab, talos_lab, kube_lab, tmp_path, forget):
    """The plan of reclaiming the worker of a second cluster, ``old``, into ``prod`` (its inventory the guide's)."""
    prod = talos_kube_lab(controlplanes=3, workers=1, version="v1.14.1", name="prod")
    old = talos_lab(controlplanes=1, workers=1, version="v1.14.1", name="old")
    text = read("reclaim.md")
    inventory = text.split("The managed cluster's inventory:\n\n```yaml\n", 1)[1].split("```", 1)[0]
    home = Home(tmp_path, kube_lab)
    home.cluster("old", old, kubeconfig=False, second=True)
    for machine in prod.machines:
        home.show(machine["address"], guide_address(machine["name"]))
    home.cluster("prod", prod, inventory=inventory)
    worker = old.machine("worker-1")
    home.show(worker["uuid"], re.search(r"UUID ([0-9a-f-]{36}) \(%s, worker\)" % GUIDE_HOSTNAMES[1]["worker-1"],
                                        text).group(1))
    home.show(worker["cluster_id"], re.search(r'cluster \\"old\\" \(ID ([^)]+)\)', text).group(1), output_only=True)
    home.run_guide("reclaim.md")
    assert old.machine("worker-1")["mode"] == "configured"  # a plan sends nothing


# -- undo a takeover: Cilium on the API server, real helm and the real chart ------------------------------------------

def test_undo_takeover_guide(cilium_lab, cilium_charts, kube_lab, tmp_path):
    """A Cilium 1.19 from `helm install`, taken over (and upgraded to 1.20.4) as adopt's phase 3 does; the guide gives
    it back to its release without a pod template changing, and no release is left in ichor-system."""
    lab = cilium_lab(nodes=2)
    lab.helm_install("1.19", merged(TALOS_VALUES, {"debug": {"enabled": True}}))
    lab.wait_ready()
    params = dict(takeover_params(kube_lab, cilium_charts), wait=True, wait_timeout=60.0, accept_cilium_diff=True)
    taken = takeover.run(params, Conn(params["kubeconfig"]), False)
    assert taken["changed"] is True
    before = lab.apps.read_namespaced_daemon_set("cilium", "kube-system").metadata.generation
    home = Home(tmp_path, kube_lab, charts=cilium_charts)
    home.cluster("prod")
    home.run_guide("undo-takeover.md")
    assert [s.metadata.labels["version"] for s in lab.records("kube-system")] == ["1", "2"]
    assert lab.records("ichor-system") == []
    ds = lab.apps.read_namespaced_daemon_set("cilium", "kube-system")
    assert ds.metadata.annotations["meta.helm.sh/release-namespace"] == "kube-system"
    assert ds.metadata.generation == before  # the values it had render the same pods


# -- one cluster, as the guides' examples follow each other ------------------------------------------------------------

def _real_snapshot(work):
    """A snapshot of a real etcd (the lab's etcd binary, one key written), as Talos streams it: what adopt keeps."""
    path = os.path.join(work, "etcd.db")

    async def save(port, context):
        channel = wire.Channel("127.0.0.1", port, transport.client_context(context.credentials))
        try:
            key, value = b"/registry/guides/example", b"adopted"
            await channel.call("/etcdserverpb.KV/Put", field(1, key) + field(2, value), timeout=30)
            call = await channel.start("/etcdserverpb.Maintenance/Snapshot", b"")
            with open(path, "wb") as handle:
                while True:
                    message = await asyncio.wait_for(call.next(), 30)
                    if message is None:
                        break
                    handle.write(dict(fields(message)).get(3, b""))
        finally:
            channel.close()
    folder = os.path.join(work, "etcd")
    os.makedirs(folder)
    with etcd_over_tls(folder) as (port, context):
        asyncio.run(save(port, context))
    return path


class Cluster:
    def __init__(self, lab, home, kube_lab):
        self.lab, self.home, self.kube_lab = lab, home, kube_lab
        self.adoption = None  # adopt's output, for the snapshot it names


def _never_installed(kube_lab):
    """The API server as a cluster someone else built has it: nothing of the collection's (the installer's objects
    other tests of the session applied go, as docs/remove.md removes them)."""
    label = "ichor.maesh.dev/installed-by=ichor-installer"
    kube_lab.kubectl("delete", "clusterrolebinding,clusterrole", "-l", label, "--ignore-not-found")
    # in every namespace: other tests on this API server leave some on purpose (test_installer keeps a labelled
    # ServiceAccount outside its namespace), and remove.md's check lists them all
    kube_lab.kubectl("delete", "rolebinding,role,serviceaccount", "--all-namespaces", "-l", label, "--ignore-not-found")
    kube_lab.kubectl("delete", "namespace", "ichor-system", "cilium-secrets", "--ignore-not-found", "--timeout=120s")


@pytest.fixture(scope="module")
def prod(kube_lab, tmp_path_factory):
    """Five machines from real Talos v1.13.9 configs (flannel, kube-proxy, Kubernetes 1.35.4), Nodes and the
    DaemonSets flannel and kube-proxy on the real API server, which holds nothing of the collection; cp-1's etcd
    snapshot a real etcd's."""
    _never_installed(kube_lab)
    work = str(tmp_path_factory.mktemp("guides"))
    snapshot = _real_snapshot(work)
    lab = LabProcess(os.path.join(work, "lab"), controlplanes=3, workers=2, case=FLANNEL_CASE, version="v1.13.9",
                     name="prod")
    lab.start()
    agent = workloads = None
    try:
        lab.control.settings(kubeconfig_path=kube_lab.kubeconfig)
        lab.control.set_faults("cp-1", etcd_snapshot_file=snapshot)
        agent = LabAgent(kube_lab.api_client(), talos_lab=lab, owner="guides")
        agent.sync_once()
        agent.start()
        workloads = Workloads(kube_lab)
        workloads.flannel()
        workloads.kube_proxy()
        home = Home(work, kube_lab)
        home.cluster("prod", lab)
        yield Cluster(lab, home, kube_lab)
    finally:
        if agent is not None:
            agent.stop()
        lab.stop()
        if workloads is not None:
            workloads.cleanup()
        _forget(kube_lab)


def test_troubleshooting_guide(prod):
    """Before the adoption: no record, a missing kubeconfig, flannel without the flag."""
    assert not cluster_record.read(KubeClient(kubeconfig=prod.kube_lab.kubeconfig)).exists
    prod.home.run_guide("troubleshooting.md")


def test_adopt_guide(prod):
    outputs = prod.home.run_guide("adopt.md")
    prod.adoption = "\n".join(outputs)
    record = cluster_record.read(KubeClient(kubeconfig=prod.kube_lab.kubeconfig))
    assert record.exists and not record.get("held")


def test_upgrade_guide(prod):
    prod.home.run_guide("upgrade.md")


def test_status_guide(prod):
    prod.home.run_guide("status.md")
    assert os.path.exists(prod.home.path("clusters", "prod", "status.md"))


def test_restore_snapshot_guide(prod):
    folder = prod.home.path("clusters", "prod", "etcd")
    (name,) = os.listdir(folder)
    with open(os.path.join(folder, name), "rb") as handle:
        digest = hashlib.sha256(handle.read()).hexdigest()
    # the file is the one adopt's plan named, and the digest sha256sum prints below is that one
    assert prod.adoption and "sha256 %s)" % digest in prod.adoption
    outputs = prod.home.run_guide("restore-snapshot.md")
    assert digest in outputs[0]


def test_remove_guide(prod):
    prod.home.run_guide("remove.md")
    kube = KubeClient(kubeconfig=prod.kube_lab.kubeconfig)
    assert kube.get("v1", "Namespace", "ichor-system") is None and kube.get("v1", "Namespace", "cilium-secrets") is None
    with open(prod.home.path("clusters", "prod", "secrets-from-cluster.yaml")) as handle:
        assert yaml.safe_load(handle)["certs"]["os"]["crt"]  # the bundle kept before the namespace went
