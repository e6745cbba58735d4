"""What a module imports when it loads (issue 16): a Talos-only module imports neither the Kubernetes client nor
anything else it never calls.

The Kubernetes client (the ``kubernetes`` package, urllib3 under it, and our ``module_utils.k8s``) was about half
of a Talos-only module's start-up, paid once per host per task. ``runner.Connections`` imports it when a module
first asks for its Kubernetes connection. Each module is imported in a fresh interpreter, as AnsiballZ runs it.

The Talos-only modules are those outside the action group ``maesh.ichor.k8s`` (``meta/runtime.yml``; test_shape.py
holds that group to exactly the modules that take the Kubernetes options). Each check is also run on an import that
must show the forbidden packages, so a check that sees nothing fails.
"""

import glob
import json
import os
import subprocess
import sys

import pytest
import yaml

from tests import collection_path

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTION = "ansible_collections.maesh.ichor."
MODULE_UTILS = COLLECTION + "plugins.module_utils."
MODULES = sorted(os.path.splitext(os.path.basename(p))[0]
                 for p in glob.glob(os.path.join(REPO, "plugins", "modules", "*.py")) if not p.endswith("__init__.py"))

# what only the Kubernetes side calls (urllib3: only k8s/client.py and the kubernetes package use it; requests and
# jmespath: nothing of ours); and the collection's packages a Talos-only module has no use for
KUBE_ONLY = ("kubernetes", "urllib3", MODULE_UTILS + "k8s")
# a general gRPC stack and the HTTP/2 library under it: the client speaks gRPC itself (talos/wire.py), and these
# were a fifth of every Talos module's start-up
GRPC_STACK = ("grpclib", "h2", "hpack", "hyperframe", "multidict")
FORBIDDEN = KUBE_ONLY + GRPC_STACK + ("requests", "jmespath") + tuple(
    MODULE_UTILS + package for package in ("installer", "cilium", "rollout", "reclaim"))

# a kubeconfig that makes a client without reaching any server (KubeClient dials nothing until the first call)
KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: lab, cluster: {server: "https://127.0.0.1:9", insecure-skip-tls-verify: true}}]
users: [{name: someone, user: {token: not-a-secret}}]
contexts: [{name: lab, context: {cluster: lab, user: someone}}]
current-context: lab
"""

# Run in a fresh interpreter: import the module, note what is loaded, then (if asked) open its Kubernetes connection
# the way runner.run does and note again.
PROBE = r"""
import importlib, json, sys
forbidden, module, kubeconfig = json.loads(sys.argv[1])

def loaded():
    return sorted(name for name in sys.modules if any(name == f or name.startswith(f + ".") for f in forbidden))

importlib.import_module("ansible_collections.maesh.ichor.plugins.modules." + module)
seen = {"import": loaded()}
if kubeconfig:
    from ansible_collections.maesh.ichor.plugins.module_utils.ansible_module import runner
    for how in ("kube_reader", "kube"):
        conn = runner.Connections(dict(kubeconfig_content=kubeconfig, timeout=5.0))
        getattr(conn, how)()
        conn.close()
        seen[how] = loaded()
print(json.dumps(seen))
"""


def _groups():
    with open(os.path.join(REPO, "meta", "runtime.yml")) as f:
        return dict((group, set(members)) for group, members in (yaml.safe_load(f).get("action_groups") or {}).items())


TALOS_ONLY = [m for m in MODULES if m not in _groups()["k8s"]]
KUBE_MODULES = sorted(_groups()["k8s"])


def probe(module, forbidden=FORBIDDEN, kubeconfig=None):
    env = dict(os.environ, PYTHONPATH=collection_path.collections_root())
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps([list(forbidden), module, kubeconfig])],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, "importing %s failed:\n%s" % (module, done.stderr)
    return json.loads(done.stdout.splitlines()[-1])


def _tops(names):
    """The forbidden names present, each given once (``kubernetes``, not its hundred submodules)."""
    return sorted(set(next(f for f in FORBIDDEN if n == f or n.startswith(f + ".")) for n in names))


def test_the_talos_only_modules_are_the_ones_without_kubernetes_options():
    # the set the checks below run on: never empty, and the two that take only the Talos options are in it
    assert {"talos_facts", "talos_secrets"} <= set(TALOS_ONLY)
    assert not set(TALOS_ONLY) & set(KUBE_MODULES)


def test_talos_machine_config_without_a_kubeconfig_imports_no_kubernetes_client():
    # it takes the Kubernetes options only to refuse a machine adopt holds: without them it is Talos-only
    assert "talos_machine_config" in KUBE_MODULES
    seen = probe("talos_machine_config", forbidden=KUBE_ONLY)
    assert not seen["import"], seen["import"]


@pytest.mark.parametrize("module", TALOS_ONLY)
def test_a_talos_only_module_imports_nothing_it_does_not_call(module):
    seen = probe(module)
    assert not seen["import"], "%s imports what it never calls: %s (import it where it is used)" % (
        module, ", ".join(_tops(seen["import"])))


def test_the_kubernetes_client_is_loaded_when_the_connection_is_made():
    # the same probe sees the Kubernetes client once a Talos-only module's Connections makes a Kubernetes client:
    # the lazy import works, and the check above would see it if it were there
    seen = probe("talos_facts", kubeconfig=KUBECONFIG)
    assert not seen["import"]
    assert set(_tops(seen["kube"])) >= set(KUBE_ONLY), seen["kube"]


@pytest.mark.parametrize("module", KUBE_MODULES)
def test_a_kubernetes_module_imports_no_grpc_stack(module):
    # the Talos-only modules are held to it above (FORBIDDEN)
    seen = probe(module, forbidden=GRPC_STACK)
    assert not seen["import"], "%s imports a gRPC stack: %s" % (module, seen["import"])


def test_the_probe_sees_a_grpc_stack_where_it_is_imported():
    env = dict(os.environ, PYTHONPATH=collection_path.collections_root())
    done = subprocess.run([sys.executable, "-c", "import grpclib.client, sys; print(sorted(sys.modules))"], env=env,
                          capture_output=True, text=True, timeout=60, check=True)
    assert all(name in done.stdout for name in ("'grpclib'", "'h2'", "'hpack'")), done.stdout[-300:]


@pytest.mark.parametrize("module", ["cluster_record", "installer_apply"])
def test_a_kubernetes_module_has_its_client_once_connected(module):
    assert module in KUBE_MODULES
    seen = probe(module, kubeconfig=KUBECONFIG)
    assert set(_tops(seen["kube"])) >= set(KUBE_ONLY), seen["kube"]


@pytest.mark.parametrize("module", ["talos_upgrade", "talos_machine_config"])
def test_a_per_machine_module_reads_without_the_kubernetes_package(module):
    # it reads only a Node and the cluster record (k8s/reader.py): paid once per machine of a rolling upgrade, the
    # kubernetes package would be about 0.2 s of each; KUBECONFIG's server and token are what the reader speaks
    assert module in KUBE_MODULES
    seen = probe(module, kubeconfig=KUBECONFIG)
    assert not {"kubernetes", "urllib3"} & set(_tops(seen["kube_reader"])), seen["kube_reader"]


# what a machine's reads have no use for: the config engine (only where a config is read), the release set and the
# version gate (the cluster-wide read and the rollout), the protobuf packages of the rollout's and reclaim's calls
READ_ONLY_FORBIDDEN = tuple(MODULE_UTILS + name for name in (
    "config", "common.release", "talos.version_gate", "machine.cluster_read", "talos.proto.storage_pb2", "talos.proto.machine_image_pb2",
    "talos.proto.machine_lifecycle_pb2"))


def test_talos_facts_imports_what_a_machine_read_needs_only():
    seen = probe("talos_facts", forbidden=READ_ONLY_FORBIDDEN)
    assert not seen["import"], "talos_facts imports what a machine's read never calls: %s" % seen["import"]
    # the same probe sees them where they are used
    seen = probe("talos_machine_config", forbidden=READ_ONLY_FORBIDDEN)
    assert {MODULE_UTILS + "config", MODULE_UTILS + "common.release"} <= set(seen["import"]), seen["import"]
