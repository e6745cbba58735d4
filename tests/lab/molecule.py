"""``python -m tests.lab.molecule``: the lab of one Molecule scenario (extensions/molecule/<scenario>), in the background.

    python -m tests.lab.molecule up --scenario adopt --workdir DIR --inventory FILE
    python -m tests.lab.molecule down --workdir DIR --inventory FILE

``up`` starts, as one background process (``serve``), what the scenario's role needs: the lab's Kubernetes API
server (``KubeLab``), for every scenario but ``installer`` simulated Talos machines (``LabProcess``) and the lab agent
(``LabAgent``: a Node per machine, workloads ready); then writes the Ansible inventory FILE and returns once all of it
answers. The process serves until SIGTERM. ``down`` stops it and removes DIR and FILE.

- ``adopt``: 1 control plane + 1 worker from machinery v1.13.9's configs (case v1.13/v1.13.9/k8s-older, Kubernetes
  1.35.4, Talos's flannel), with the flannel and kube-proxy DaemonSets Talos deploys;
- ``upgrade`` and ``status``: the same cluster, behind the release set;
- ``init``: 1 control plane + 1 worker in maintenance mode at the release set's Talos, the lab's Cilium chart and helm;
- ``installer``: the API server alone.

DIR is made 0700 and everything in it is written with umask 077 (the talosconfig, kubeconfigs and keys are the lab's
credentials); FILE (0600) holds paths only. Every server listens on loopback.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

if __package__ in (None, ""):  # pragma: no cover - run as a script
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    __package__ = "tests.lab"  # pylint: disable=redefined-builtin

from tests import collection_path  # noqa: E402  pylint: disable=wrong-import-position

collection_path.ensure()

import yaml  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.maesh.ichor.plugins.module_utils.common import release  # noqa: E402  pylint: disable=wrong-import-position
from tests.integration.ansible_env import write_inventory  # noqa: E402  pylint: disable=wrong-import-position
from tests.lab.process import REPO  # noqa: E402  pylint: disable=wrong-import-position

SCENARIOS = ("adopt", "init", "installer", "status", "upgrade")
# The cluster adopt and upgrade start from: machinery v1.13.9's configs (contract v1.13, Kubernetes 1.35.4, flannel).
CASE = "v1.13/v1.13.9/k8s-older"
CASE_TALOS = "v1.13.9"
CASE_KUBERNETES = "v1.35.4"

# the lab's own servers (KubeLab's, cached as <name>-<version>); the rest of the lab runs as python -m tests.lab...
LAB_SERVERS = (b"etcd", b"kube-apiserver", b"kube-controller-manager")
SERVE_JSON = "serve.json"  # pids of the serve process and of what it started
SERVE_LOG = "serve.log"
START_TIMEOUT = 300.0
STOP_TIMEOUT = 60.0


def _daemonset(name, image, labels):
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": "kube-system", "labels": labels},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": name, "image": image}]}}}}


# What Talos deploys on such a cluster and nothing runs in the lab (the lab agent marks them ready).
FLANNEL = _daemonset("kube-flannel", "ghcr.io/siderolabs/flannel:v0.27.4", {"k8s-app": "flannel"})


def _kube_proxy(version):
    return _daemonset("kube-proxy", "registry.k8s.io/kube-proxy:%s" % version, {"k8s-app": "kube-proxy"})


def _private_dir(path):
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def _write_private(path, text):
    tmp = "%s.%d.tmp" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


# --- serve: the lab itself ------------------------------------------------------------------------------------------

class _Lab:
    """The scenario's lab, started in this process; ``stop()`` stops what was started, in reverse."""

    def __init__(self, scenario, workdir):
        self.scenario = scenario
        self.workdir = workdir
        self.kube = self.talos = self.agent = None
        self.helm = None

    def start(self):
        # imported here: ``down`` needs none of it
        from tests.lab.agent import LabAgent  # pylint: disable=import-outside-toplevel
        from tests.lab.kube.cluster import KubeLab, binaries  # pylint: disable=import-outside-toplevel
        from tests.lab.process import LabProcess  # pylint: disable=import-outside-toplevel

        bins = binaries(build=False)
        self.helm = bins["helm"]
        self.kube = KubeLab.start(workdir=os.path.join(self.workdir, "kube"), bins=bins)
        if self.scenario == "installer":
            return self
        if self.scenario == "init":
            talos = LabProcess(os.path.join(self.workdir, "talos"), controlplanes=1, workers=1, mode="maintenance",
                               bootstrapped=False, version=release.TALOS, kubernetes_version=release.KUBERNETES)
            objects = [_kube_proxy(release.KUBERNETES)]  # Talos's bootstrap manifests deploy it
        else:
            talos = LabProcess(os.path.join(self.workdir, "talos"), controlplanes=1, workers=1, case=CASE,
                               version=CASE_TALOS)
            objects = [FLANNEL, _kube_proxy(CASE_KUBERNETES)]
        self.talos = talos.start()
        # a control plane's Kubeconfig call returns the lab API server's admin kubeconfig
        self.talos.control.settings(kubeconfig_path=self.kube.kubeconfig)
        self.agent = LabAgent(self.kube.api_client(), talos_lab=self.talos, owner="molecule")
        self.agent.sync_once()
        self.agent.start()
        self.kube.apply_objects(objects)
        return self

    def check(self):
        """Raise when a part of the lab has died."""
        self.kube.check()
        if self.talos is not None and self.talos.proc.poll() is not None:
            raise RuntimeError("the Talos lab simulator exited with %s:\n%s" % (
                self.talos.proc.returncode, self.talos.stderr()[-4000:]))

    def stop(self):
        if self.agent is not None:
            self.agent.stop(remove_nodes=False)  # the API server goes too
        if self.talos is not None:
            self.talos.stop()
        if self.kube is not None:
            self.kube.stop()

    def pids(self):
        pids = {"serve": os.getpid()}
        if self.kube is not None:
            pids.update(self.kube.describe()["pids"])
        if self.talos is not None and self.talos.proc is not None:
            pids["talos-lab"] = self.talos.proc.pid
        return pids

    def inventory(self):
        """The inventory the scenario's playbooks run with (docs/inventory.example.yml's layout)."""
        pki = os.path.join(self.kube.workdir, "pki")
        api = {"server": self.kube.server, "ca_file": self.kube.ca_file,
               "cert_file": os.path.join(pki, "admin.crt"), "key_file": os.path.join(pki, "admin.key")}
        if self.talos is None:
            data = {"all": {"vars": {}}}
        else:
            path = write_inventory(self.talos.state(), os.path.join(self.workdir, "inventory.yml"))
            with open(path) as handle:
                data = yaml.safe_load(handle)
            os.unlink(path)
        variables = data["all"]["vars"]
        # the lab's API server for the scenarios' verify (ansible.builtin.uri with the admin client certificate)
        variables["lab_kube_api"] = api
        if self.scenario == "init":
            # init makes the cluster's credentials; they go into a private directory of the lab
            keep = _private_dir(os.path.join(self.workdir, "keep"))
            del variables["ichor_talosconfig"]
            uuids = dict((m["name"], m["uuid"]) for m in self.talos.state()["machines"])
            for group in data["all"]["children"].values():
                for name, host in group["hosts"].items():
                    host["ichor_uuid"] = uuids[name]
            from tests.lab.cilium import charts  # pylint: disable=import-outside-toplevel
            variables.update({
                "ichor_init_cluster_name": "molecule",
                "ichor_init_secrets_file": os.path.join(keep, "secrets.yaml"),
                "ichor_init_talosconfig_file": os.path.join(keep, "talosconfig"),
                "ichor_init_kubeconfig_file": os.path.join(keep, "kubeconfig"),
                "ichor_init_cilium_chart": charts.ensure(self.helm)[".".join(release.CILIUM.split(".")[:2])]["chart"],
                "ichor_init_helm": self.helm,
            })
        else:
            variables["ichor_kubeconfig"] = self.kube.kubeconfig
        if self.scenario == "adopt":
            variables["ichor_adopt_etcd_snapshot_dir"] = os.path.join(self.workdir, "etcd-snapshots")
        return data


def serve(scenario, workdir, inventory):
    os.umask(0o077)
    stop = threading.Event()

    def _stop(_signum, _frame):
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    lab = _Lab(scenario, workdir)
    try:
        lab.start()
        _write_private(os.path.join(workdir, SERVE_JSON), json.dumps({"scenario": scenario, "pids": lab.pids()}))
        # written last: ``up`` returns once it exists
        _write_private(inventory, yaml.safe_dump(lab.inventory(), sort_keys=False))
        print("lab of scenario %s ready: %s" % (scenario, inventory), flush=True)
        while not stop.wait(1.0):
            lab.check()
        return 0
    finally:
        lab.stop()


# --- up / down ------------------------------------------------------------------------------------------------------

def _alive(pid):
    """Whether pid is a process of this lab (a python -m tests.lab... or one of the lab's servers)."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            argv = handle.read().split(b"\0")
        with open("/proc/%d/stat" % pid, "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    if state == b"Z" or not argv:
        return False
    program = os.path.basename(argv[0])
    return any(program == name or program.startswith(name + b"-v") for name in LAB_SERVERS) or \
        any(b"tests.lab" in a for a in argv)


def _tail(path, size=6000):
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - size))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def up(scenario, workdir, inventory):
    workdir, inventory = os.path.abspath(workdir), os.path.abspath(inventory)
    if os.path.exists(os.path.join(workdir, SERVE_JSON)):
        print("a lab already runs in %s: run down first" % workdir, file=sys.stderr)
        return 1
    _private_dir(workdir)
    os.makedirs(os.path.dirname(inventory), exist_ok=True)
    if os.path.exists(inventory):
        os.unlink(inventory)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([collection_path.collections_root(), REPO] + (
        [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    log_path = os.path.join(workdir, SERVE_LOG)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "ab") as log:
        proc = subprocess.Popen(  # pylint: disable=consider-using-with
            [sys.executable, "-m", "tests.lab.molecule", "serve", "--scenario", scenario, "--workdir", workdir,
             "--inventory", inventory], cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
    deadline = time.monotonic() + START_TIMEOUT
    while not os.path.exists(inventory):
        if proc.poll() is not None:
            print("the lab of scenario %s exited with %s before it was ready; %s says:\n%s" % (
                scenario, proc.returncode, log_path, _tail(log_path)), file=sys.stderr)
            _remove(workdir, inventory)
            return 1
        if time.monotonic() > deadline:
            print("the lab of scenario %s is not ready after %.0fs; %s says:\n%s" % (
                scenario, START_TIMEOUT, log_path, _tail(log_path)), file=sys.stderr)
            down(workdir, inventory)
            return 1
        time.sleep(0.1)
    print(inventory)
    return 0


def _remove(workdir, inventory):
    shutil.rmtree(workdir, ignore_errors=True)
    if os.path.exists(inventory):
        os.unlink(inventory)


def _wait_gone(pids, timeout):
    deadline = time.monotonic() + timeout
    while any(_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def down(workdir, inventory):
    workdir, inventory = os.path.abspath(workdir), os.path.abspath(inventory)
    try:
        with open(os.path.join(workdir, SERVE_JSON)) as handle:
            pids = json.load(handle)["pids"]
    except (OSError, ValueError, KeyError):
        pids = {}
    serve_pid = pids.get("serve")
    if serve_pid and _alive(serve_pid):
        os.kill(serve_pid, signal.SIGTERM)
    if not _wait_gone(list(pids.values()), STOP_TIMEOUT):
        # serve did not stop its servers in time: each of them, by its recorded id
        for name, pid in sorted(pids.items()):
            if _alive(pid):
                print("killing %s (pid %d): still running after %.0fs" % (name, pid, STOP_TIMEOUT), file=sys.stderr)
                os.kill(pid, signal.SIGKILL)
        _wait_gone(list(pids.values()), 10)
    _remove(workdir, inventory)
    return 0


def _parser():
    parser = argparse.ArgumentParser(prog="python -m tests.lab.molecule")
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name, text in (("up", "start the scenario's lab in the background and write its inventory"),
                       ("serve", "run the scenario's lab in this process until SIGTERM (what up starts)"),
                       ("down", "stop the lab and remove its files")):
        cmd = sub.add_parser(name, help=text)
        if name != "down":
            cmd.add_argument("--scenario", required=True, choices=SCENARIOS)
        cmd.add_argument("--workdir", required=True, help="the lab's private directory (made 0700)")
        cmd.add_argument("--inventory", required=True, help="the inventory file written for the scenario")
    return parser


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.cmd == "up":
        return up(args.scenario, args.workdir, args.inventory)
    if args.cmd == "serve":
        return serve(args.scenario, os.path.abspath(args.workdir), os.path.abspath(args.inventory))
    return down(args.workdir, args.inventory)


if __name__ == "__main__":
    sys.exit(main())
