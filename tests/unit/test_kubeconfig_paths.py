"""Issue 44: a connection file the play names is the one used, never what the environment names instead.

Three rules, each held here without a lab (tests/integration/test_init_paths.py holds init to them against two API
servers):

* expansion: a path the operator gives (``~/clusters/prod/kubeconfig``, ``$CLUSTERS/prod/kubeconfig``) is expanded
  before it is tested or passed, the one way a module's path option expands it; init's role tests and passes only
  the expanded paths;
* a file the play names and that is missing is refused, in one line, before anything is read: by the module
  (kubeconfig.load) and, first, by each role that needs it (lookup maesh.ichor.missing_files);
* no fallback when the play named a file: the option kubeconfig (or talosconfig) given empty - init's "no kubeconfig
  yet" - never becomes KUBECONFIG or ~/.kube/config (TALOSCONFIG, ~/.talos/config); only a task that names none
  falls back, as kubectl and kubernetes.core do, and an empty KUBECONFIG counts as unset there.
"""

import glob
import os
import re
import socket
import threading

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.ansible_module import runner, specs
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import helm
from ansible_collections.maesh.ichor.plugins.module_utils.cilium.errors import CiliumError
from ansible_collections.maesh.ichor.plugins.module_utils.common import paths
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import kubeconfig
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.errors import KubeError
from ansible_collections.maesh.ichor.plugins.module_utils.talos import talosconfig
from ansible_collections.maesh.ichor.plugins.module_utils.talos.errors import TalosConfigError
from tests import collection_path
from tests.integration.ansible_env import ansible_playbook
from tests.unit.test_guides import _strings

REPO = collection_path.REPO
INIT_TASKS = os.path.join(REPO, "roles", "init", "tasks")


def _write_kubeconfig(path, server, name="prod"):
    path = str(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": name,
                        "clusters": [{"name": name, "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
                        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
                        "users": [{"name": name, "user": {"token": "t0ken-of-" + name}}]}, handle)
    return path


def _write_talosconfig(path, name):
    path = str(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        yaml.safe_dump({"context": name, "contexts": {name: {"endpoints": ["10.5.0.11"], "ca": "", "crt": "", "key": ""}}},
                       handle)
    return path


class Listener:
    """A TCP port that counts who connects: the API server of 'the cluster the operator's default kubeconfig names'."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.server = "https://127.0.0.1:%d" % self.port
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self):
        while not self._stop.is_set():
            try:
                conn = self.sock.accept()[0]
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self):
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A HOME of the test's own whose ~/.kube/config, and a KUBECONFIG, both name another cluster (a listener that
    counts connections); ~/.talos/config and TALOSCONFIG another talosconfig."""
    home = tmp_path / "home"
    home.mkdir()
    listener = Listener()
    monkeypatch.setenv("HOME", str(home))
    default = _write_kubeconfig(home / ".kube" / "config", listener.server, name="default")
    monkeypatch.setenv("KUBECONFIG", _write_kubeconfig(tmp_path / "env" / "kubeconfig", listener.server, name="env"))
    _write_talosconfig(home / ".talos" / "config", "default")
    monkeypatch.setenv("TALOSCONFIG", _write_talosconfig(tmp_path / "env" / "talosconfig", "env"))
    listener.home = str(home)
    listener.default = default
    yield listener
    listener.close()


# -- expansion ----------------------------------------------------------------------------------------------------

def test_a_path_is_expanded_as_a_path_option_expands_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CLUSTERS", str(tmp_path / "clusters"))
    assert paths.expanded("~/clusters/prod/kubeconfig") == str(tmp_path / "clusters" / "prod" / "kubeconfig")
    assert paths.expanded("$CLUSTERS/prod/kubeconfig") == str(tmp_path / "clusters" / "prod" / "kubeconfig")
    assert paths.expanded("/etc/kubeconfig") == "/etc/kubeconfig"
    for given in ("~/clusters/prod/kubeconfig", "$CLUSTERS/prod/kubeconfig", "relative/kubeconfig"):
        options, unused_no_log, problem = specs.validate(specs.kube_connection(), {"kubeconfig": given})
        assert problem is None and options["kubeconfig"] == paths.expanded(given), given


def test_a_named_kubeconfig_with_a_tilde_is_that_file_and_not_the_environments(elsewhere):
    prod = _write_kubeconfig(os.path.join(elsewhere.home, "clusters", "prod", "kubeconfig"), "https://10.5.0.11:6443")
    options = specs.validate(specs.kube_connection(), {"kubeconfig": "~/clusters/prod/kubeconfig"})[0]
    loaded = kubeconfig.load(kubeconfig=options["kubeconfig"])
    assert (loaded.path, loaded.source.server) == (prod, "https://10.5.0.11:6443")
    # helm is handed the same file, never KUBECONFIG
    with helm.Helm("helm", kubeconfig=options["kubeconfig"], run_process=lambda *a, **k: (0, "", "")) as h:
        assert h.env()["KUBECONFIG"] == prod


def test_init_tests_and_passes_only_the_expanded_paths():
    """The role's three paths are read raw only where they are checked for being given and where they are expanded;
    every test (``is exists``) and every module argument takes the expanded ``*_path``."""
    raw = re.compile(r"\bichor_init_(secrets|talosconfig|kubeconfig)_file\b")
    expansions = {}
    for path in sorted(glob.glob(os.path.join(INIT_TASKS, "*.yml"))):
        for text in _strings(yaml.safe_load(open(path))):
            defined = re.fullmatch(r"\{\{ (ichor_init_(\w+)_file) \| expandvars \| expanduser \}\}", text)
            if defined:
                expansions[defined.group(1)] = text
                continue
            for tested in re.findall(r"(\w+) is (?:not )?exists", text):
                assert tested.endswith("_path"), "%s: %r tests an unexpanded path" % (os.path.basename(path), text)
            # a quoted name ('ichor_init_secrets_file': the variable's name in a message) is not its value
            if raw.search(re.sub(r"'ichor_init_\w+_file'", "", text)):
                assert re.fullmatch(r"ichor_init_\w+_file \| length > 0", text) or text.startswith("init needs "), (
                    "%s: %r uses a path as the operator gave it (~ not expanded)" % (os.path.basename(path), text))
    assert sorted(expansions) == ["ichor_init_kubeconfig_file", "ichor_init_secrets_file",
                                  "ichor_init_talosconfig_file"]
    main = yaml.safe_load(open(os.path.join(INIT_TASKS, "main.yml")))[0]
    assert main["vars"]["ichor_init_kubeconfig_path"] == expansions["ichor_init_kubeconfig_file"]
    # the Kubernetes connection: init's own kubeconfig once it exists, else "" (none), never left out (a fallback)
    assert main["module_defaults"]["group/maesh.ichor.k8s"] == {
        "kubeconfig": "{{ ichor_init_kubeconfig_path if ichor_init_kubeconfig_path is exists else '' }}"}
    assert main["module_defaults"]["group/maesh.ichor.talos"]["talosconfig"] == "{{ ichor_init_talosconfig_path }}"


# -- a named file that is missing is refused ------------------------------------------------------------------------

def test_missing_files_names_each_variable_that_names_no_file(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    _write_kubeconfig(tmp_path / "clusters" / "prod" / "kubeconfig", "https://10.5.0.11:6443")
    (tmp_path / "adir").mkdir()
    assert paths.missing_files({"ichor_kubeconfig": "~/clusters/prod/kubeconfig", "ichor_secrets": None}) == []
    assert paths.missing_files({}) == []
    assert paths.missing_files({
        "ichor_kubeconfig": "~/clusters/prod/kubeconfig.old", "ichor_talosconfig": "", "ichor_secrets": str(tmp_path / "adir"),
    }) == [
        "ichor_kubeconfig names ~/clusters/prod/kubeconfig.old (%s/clusters/prod/kubeconfig.old), which does not exist: "
        "correct the path (nothing was read or sent)" % tmp_path,
        "ichor_secrets names %s/adir, which is a directory, not a file: correct the path (nothing was read or sent)"
        % tmp_path,
        "ichor_talosconfig is empty: name the file, or leave ichor_talosconfig unset (nothing was read or sent)",
    ]


def test_a_named_kubeconfig_that_is_missing_is_refused_not_replaced(elsewhere, tmp_path):
    missing = str(tmp_path / "clusters" / "prod" / "kubeconfig")
    with pytest.raises(KubeError) as exc:
        kubeconfig.load(kubeconfig=missing)
    assert str(exc.value) == "the kubeconfig %s does not exist; check the option kubeconfig" % missing


@pytest.mark.parametrize("playbook,extra", [
    ("status", ()),                   # a role's own assert (status, adopt, upgrade the same way)
    ("install", ()),                  # the installer role, the kubeconfig given with -e
    ("reclaim", ("-e", "ichor_reclaim_node=10.5.0.7", "-e", "ichor_reclaim_cluster_name=prod")),  # the playbook's
])
def test_a_playbook_refuses_a_named_file_that_is_missing_before_it_reads_anything(elsewhere, tmp_path, playbook, extra):
    talos = _write_talosconfig(os.path.join(elsewhere.home, "clusters", "prod", "talosconfig"), "prod")
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"vars": {
        "ichor_talosconfig": "~/clusters/prod/talosconfig", "ichor_kubeconfig": "~/clusters/prod/kubeconfig"},
        "children": {"controlplane": {"hosts": {"cp-1": {"ansible_host": "127.0.0.1"}}}}}}))
    proc = ansible_playbook("-i", str(inventory), "maesh.ichor." + playbook, *extra,
                            env={"HOME": elsewhere.home, "KUBECONFIG": os.environ["KUBECONFIG"],
                                 "TALOSCONFIG": os.environ["TALOSCONFIG"]})
    said = proc.stdout + proc.stderr
    assert proc.returncode == 2, said[-4000:]
    assert ("ichor_kubeconfig names ~/clusters/prod/kubeconfig (%s/clusters/prod/kubeconfig), which does not exist: "
            "correct the path (nothing was read or sent)" % elsewhere.home) in said, said[-4000:]
    assert os.path.exists(talos) and "ichor_talosconfig names" not in said  # the one that exists passes
    assert elsewhere.connections == 0, "the cluster of KUBECONFIG and ~/.kube/config was dialled"


# -- no fallback when the play named a file -------------------------------------------------------------------------

def test_an_empty_kubeconfig_names_none_and_never_falls_back(elsewhere):
    with pytest.raises(KubeError) as exc:
        kubeconfig.load(kubeconfig="")
    assert str(exc.value) == kubeconfig.EMPTY
    assert str(exc.value).startswith("the option kubeconfig is empty: this task has no Kubernetes connection")
    # KUBECONFIG unset: not ~/.kube/config either
    with pytest.raises(KubeError):
        kubeconfig.load(kubeconfig="", environ={})
    # what a module's connection layer makes of it: no connection where one is optional, the refusal where needed
    options = specs.validate(specs.kube_connection(), {"kubeconfig": ""})[0]
    assert options["kubeconfig"] == ""
    conn = runner.Connections(options)
    assert conn.has_kube() is False
    with pytest.raises(KubeError) as exc:
        conn.kube()
    assert str(exc.value) == kubeconfig.EMPTY
    # and helm, which would read KUBECONFIG, ~/.kube/config or a pod's own cluster
    with pytest.raises(CiliumError) as exc:
        with helm.Helm("helm", kubeconfig="", run_process=lambda *a, **k: (0, "", "")):
            pass
    assert str(exc.value) == kubeconfig.EMPTY
    assert elsewhere.connections == 0


def test_an_empty_talosconfig_names_none_and_never_falls_back(elsewhere):
    with pytest.raises(TalosConfigError) as exc:
        talosconfig.load(path="")
    assert str(exc.value) == talosconfig.EMPTY
    options = specs.validate(specs.talos_connection(), {"talosconfig": ""})[0]
    with pytest.raises(TalosConfigError):
        runner.Connections(options).talos_context()


def test_only_a_task_that_names_no_kubeconfig_falls_back_and_an_empty_variable_is_unset(elsewhere, monkeypatch):
    # KUBECONFIG set: a task that names none gets it (the kubernetes.core convention)
    options = specs.validate(specs.kube_connection(), {})[0]
    assert options["kubeconfig"] == os.environ["KUBECONFIG"]
    assert kubeconfig.load(kubeconfig=options["kubeconfig"]).source.context == "env"
    # KUBECONFIG set empty is unset, as kubectl reads it: ~/.kube/config, never the empty option that means "none"
    monkeypatch.setenv("KUBECONFIG", "")
    options = specs.validate(specs.kube_connection(), {})[0]
    assert options["kubeconfig"] is None
    loaded = kubeconfig.load(kubeconfig=options["kubeconfig"])
    assert (loaded.path, loaded.source.context) == (elsewhere.default, "default")
    monkeypatch.setenv("TALOSCONFIG", "")
    options = specs.validate(specs.talos_connection(), {})[0]
    assert options["talosconfig"] is None


def test_a_task_told_no_kubeconfig_does_not_dial_the_environments_cluster(elsewhere, tmp_path):
    """Through ansible-playbook and the action plugins, as init's tasks run before its kubeconfig exists."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "Read the cluster", "maesh.ichor.cluster_facts": {"kubeconfig": ""}, "ignore_errors": True},
        {"name": "Take the lock", "maesh.ichor.cluster_lock": {"kubeconfig": ""}, "ignore_errors": True},
        {"name": "Read it as a group default", "module_defaults": {"group/maesh.ichor.k8s": {"kubeconfig": ""}},
         "block": [{"name": "Read the record", "maesh.ichor.cluster_record": {}, "ignore_errors": True}]},
    ]}]))
    proc = ansible_playbook("-i", "localhost,", str(playbook), env={
        "HOME": elsewhere.home, "KUBECONFIG": os.environ["KUBECONFIG"]})
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "ignored=3" in said, said[-4000:]
    assert said.count(kubeconfig.EMPTY) >= 3, said[-4000:]
    assert elsewhere.connections == 0, "the cluster of KUBECONFIG and ~/.kube/config was dialled"
