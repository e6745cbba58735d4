"""Where the collection's code is imported (issue 28): once per ``ansible-playbook`` run, in its main process, never
in the worker process Ansible forks for each host and task.

Ansible's linear and free strategies load a task's action plugin in the main process before they fork its workers,
so what an action plugin imports at its top is imported once, and every worker finds it imported already. An import
deferred into a function instead happens in each worker: once per host and task, the cost the modules paid when each
ran in its own process. This test runs ``ansible-playbook`` over 5 hosts with a recorder of every import
(sitecustomize: an audit hook that notes the process and the module each time Python loads a module not imported
yet) and asserts that no module of the collection, of ``kubernetes`` or of ``h2`` is first imported in a
worker. The same recorder must see a worker's own import, made by a playbook-adjacent action plugin, so a recorder
that saw nothing would fail here.
"""

import os
import subprocess
import sys
import textwrap

import yaml

from tests import collection_path
from tests.lab import pki

WATCHED = ("ansible_collections.maesh", "kubernetes", "h2")
HOSTS = 5

RECORDER = textwrap.dedent('''\
    import os, sys
    _LOG = os.environ["ICHOR_IMPORT_LOG"]
    with open(_LOG, "a") as _out:
        _out.write("main %d\\n" % os.getpid())

    def _record(event, args):
        # Python raises "import" each time it loads a module that is not imported yet, whichever finder loads it
        if event == "import":
            with open(_LOG, "a") as out:
                out.write("%d %s\\n" % (os.getpid(), args[0]))

    sys.addaudithook(_record)
    ''')

# a task of the test's own that imports a module in the worker: what the recorder must see as a worker's import
WORKER_IMPORT = "wave"
PROBE = textwrap.dedent('''\
    from ansible.plugins.action import ActionBase

    class ActionModule(ActionBase):
        _requires_connection = False

        def run(self, tmp=None, task_vars=None):
            import %s  # noqa: F401  pylint: disable=unused-import,import-outside-toplevel
            return dict(changed=False)
    ''' % WORKER_IMPORT)

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: lab, cluster: {server: "https://127.0.0.1:9", insecure-skip-tls-verify: true}}]
users: [{name: someone, user: {token: not-a-secret}}]
contexts: [{name: lab, context: {cluster: lab, user: someone}}]
current-context: lab
"""


def _talosconfig(tmp_path):
    """A talosconfig whose endpoint refuses connections: the flows run until they dial."""
    ca = pki.new_ca()
    path = str(tmp_path / "talosconfig")
    pki.write_talosconfig(path, {"lab": {"endpoints": ["127.0.0.1:9"], "nodes": [], "ca": ca,
                                         "client": pki.issue_client(ca)}}, "lab")
    return path


def _run(tmp_path):
    (tmp_path / "recorder").mkdir()
    (tmp_path / "recorder" / "sitecustomize.py").write_text(RECORDER)
    (tmp_path / "action_plugins").mkdir()
    (tmp_path / "action_plugins" / "import_in_worker.py").write_text(PROBE)
    hosts = "".join("h%d ansible_host=127.0.0.%d\n" % (i, i + 1) for i in range(HOSTS))
    (tmp_path / "inventory").write_text("[lab]\n" + hosts)
    talos = dict(talosconfig=_talosconfig(tmp_path), timeout=2)
    kube = dict(kubeconfig_content=KUBECONFIG, timeout=2)
    tasks = [
        {"name": "Talos", "maesh.ichor.talos_facts": dict(talos, node="127.0.0.1"), "ignore_errors": True},
        {"name": "Kubernetes", "maesh.ichor.cluster_facts": kube, "ignore_errors": True},
        {"name": "Both", "maesh.ichor.release_check": dict(talos, **kube, machines=[
            {"name": "cp-1", "node": "127.0.0.1", "role": "controlplane"}]), "ignore_errors": True},
        {"name": "Control", "import_in_worker": {}},
    ]
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{"hosts": "lab", "gather_facts": False, "tasks": tasks}]))
    log = tmp_path / "imports.log"
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collection_path.collections_root(), ICHOR_IMPORT_LOG=str(log),
               PYTHONPATH=os.pathsep.join([str(tmp_path / "recorder"), collection_path.collections_root()]),
               ANSIBLE_FORKS=str(HOSTS))
    playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    done = subprocess.run([playbook, "-i", str(tmp_path / "inventory"), str(tmp_path / "play.yml")], env=env,
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    main, seen = None, []
    for line in log.read_text().splitlines():
        pid, name = line.split(" ", 1)
        if pid == "main":
            assert main is None, "one main process"
            main = int(name)
        else:
            seen.append((int(pid), name))
    return main, seen, done.stdout


def _watched(name):
    return any(name == w or name.startswith(w + ".") for w in WATCHED)


def test_the_collection_kubernetes_and_h2_are_imported_once_in_the_main_process_never_in_a_worker(tmp_path):
    main, seen, out = _run(tmp_path)  # the play ran to its end: _run checks its exit code
    assert "h%d" % (HOSTS - 1) in out
    in_worker = sorted(set(name for pid, name in seen if pid != main and _watched(name)))
    assert in_worker == [], "imported in a worker, once per host and task (import it at the top of its file): %s" % (
        ", ".join(in_worker))
    # what the check sees: the action plugins and the clients they run, in the main process; a worker's own import
    in_main = set(name for pid, name in seen if pid == main)
    assert {"ansible_collections.maesh.ichor.plugins.module_utils.k8s.client", "kubernetes",
            "ansible_collections.maesh.ichor.plugins.module_utils.talos.client"} <= in_main
    workers = set(pid for pid, name in seen if pid != main and name == WORKER_IMPORT)
    assert len(workers) == HOSTS, "the recorder sees each worker's own import"
