"""The README's first command: start a lab cluster and run maesh.ichor's main job against it.

A real kube-apiserver with etcd (built from their Go modules on the first run, about ten minutes on 2 cores, with
the build's progress printed) and simulated Talos machines started from real Talos configs of a cluster behind the
release set (contract v1.13, Kubernetes 1.35.4, Talos's flannel). Then, as a platform engineer would run them:
``maesh.ichor.adopt --check --diff`` (the plan), the adoption (its CNI left alone: flannel is never migrated), and
the rollout plan that follows (``maesh.ichor.upgrade --check``). The lab's files (a talosconfig and a kubeconfig
among them) live in a private temporary directory that is removed at the end; ICHOR_DEMO_KEEP=1 keeps it.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

import yaml

from tests import collection_path

collection_path.ensure()

from kubernetes import client as k8s  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.maesh.ichor.plugins.module_utils.common import release  # noqa: E402  pylint: disable=wrong-import-position
from tests.integration.ansible_env import REPO, ansible_env, write_inventory  # noqa: E402  pylint: disable=wrong-import-position
from tests.lab.agent import LabAgent  # noqa: E402  pylint: disable=wrong-import-position
from tests.lab.kube.cluster import KubeLab, KubeLabError, binaries  # noqa: E402  pylint: disable=wrong-import-position
from tests.lab.process import LabProcess  # noqa: E402  pylint: disable=wrong-import-position

CASE = "v1.13/v1.13.9/k8s-older"  # machinery v1.13.9's configs: contract v1.13, Kubernetes 1.35.4, flannel
TALOS = "v1.13.9"


def _daemonsets(api):
    """What Talos deploys on such a cluster and the lab does not run: its flannel and kube-proxy DaemonSets."""
    apps = k8s.AppsV1Api(api)
    for name, image, labels in (("kube-flannel", "ghcr.io/siderolabs/flannel:v0.27.4", {"k8s-app": "flannel"}),
                                ("kube-proxy", "registry.k8s.io/kube-proxy:v1.35.4", {"k8s-app": "kube-proxy"})):
        apps.create_namespaced_daemon_set("kube-system", {
            "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "kube-system",
                                                                       "labels": labels},
            "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                "containers": [{"name": name, "image": image}]}}}})


def _play(exe, inventory, *args):
    print("== ansible-playbook -i inventory.yml %s" % " ".join(args), flush=True)
    return subprocess.call([exe, "-i", inventory] + list(args), env=ansible_env())


def main():
    keep = os.environ.get("ICHOR_DEMO_KEEP") == "1"
    work = tempfile.mkdtemp(prefix="ichor-demo-")  # mode 0700: it will hold the lab's credentials
    kube = lab = agent = None
    try:
        try:
            bins = binaries(build=False)
        except KubeLabError:
            print("== building kube-apiserver, kube-controller-manager, kubectl, etcd and helm from their Go modules "
                  "(once; about ten minutes on 2 cores; the build's progress follows)", flush=True)
            start = time.monotonic()
            bins = binaries(build=True, stream=sys.stdout)
            print("== built in %.0fs" % (time.monotonic() - start), flush=True)
        print("== starting the lab's Kubernetes API server (etcd, kube-apiserver with RBAC, kube-controller-manager)",
              flush=True)
        kube = KubeLab.start(workdir=os.path.join(work, "kube"), bins=bins)
        print("== starting a simulated Talos cluster (1 control plane, 2 workers) from machinery's configs of case %s, "
              "Talos %s: behind the release set (Talos %s, Kubernetes %s)" % (CASE, TALOS, release.TALOS,
                                                                              release.KUBERNETES), flush=True)
        lab = LabProcess(os.path.join(work, "lab"), controlplanes=1, workers=2, case=CASE, version=TALOS)
        lab.start()
        agent = LabAgent(kube.api_client(), talos_lab=lab, owner="demo")  # a Node per machine
        agent.sync_once()
        agent.start()
        _daemonsets(kube.api_client())
        state = lab.control.state()
        for m in state["machines"]:
            print("   %-9s %-13s %s" % (m["name"], m["address"], m["role"]))
        inventory = write_inventory(state, os.path.join(work, "inventory.yml"))
        _kubeconfig_into(inventory, kube.kubeconfig)
        exe = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
        adopt = ["maesh.ichor.adopt", "-e", "ichor_adopt_recover_from=cp-1", "-e", "ichor_cni_unmanaged=true",
                 "-e", "ichor_adopt_etcd_snapshot_dir=%s" % os.path.join(work, "etcd")]
        for args in ([*adopt, "--check", "--diff"], [*adopt, "-e", "ichor_adopt_confirm=true"],
                     ["maesh.ichor.upgrade", "--check", "--diff"]):
            code = _play(exe, inventory, *args)
            if code:
                return code
        return 0
    finally:
        if agent is not None:
            agent.stop()
        if lab is not None:
            lab.stop()
        if kube is not None:
            kube.stop()
        if keep:
            print("== kept %s (inventory.yml, the lab's talosconfig and kubeconfig: credentials of the lab; remove it "
                  "when done)" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
            print("== removed %s (the lab's credentials and inventory); ICHOR_DEMO_KEEP=1 keeps them" % work)


def _kubeconfig_into(inventory, kubeconfig):
    with open(inventory) as handle:
        data = yaml.safe_load(handle)
    data["all"]["vars"]["ichor_kubeconfig"] = kubeconfig
    with open(inventory, "w") as handle:
        yaml.safe_dump(data, handle)


if __name__ == "__main__":
    os.chdir(REPO)
    sys.exit(main())
