"""Every module runs as an action plugin in the controller's process (issue 28): what AnsibleModule did, the action
does. Each test runs ansible-playbook on this machine, no lab: the flows fail where they first dial.

* Every module, with a marked secret in each of its no_log options, in check mode: the marker is nowhere in the
  -vvvv output nor in the json callback's output, and every task reached its flow (no argument error).
* module_defaults of the action groups reach the actions; a task with ``async`` is refused in one line.
"""

import json
import os
import subprocess
import sys

import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.ansible_module import catalog
from tests import collection_path
from tests.unit.test_fuzz_module_options import CONTENT, MARKER, NO_LOG, _valid

# a callback that writes every task result as it receives it (what ansible-runner, and so AWX, makes its events of)
EVERY_RESULT = """
import json, os
from ansible.plugins.callback import CallbackBase

class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "every_result"
    CALLBACK_NEEDS_ENABLED = True

    def _write(self, status, result):
        with open(os.environ["ICHOR_RESULTS"], "a") as out:
            out.write(json.dumps([result.task_name, status, result._result], default=str) + "\\n")

    def v2_runner_on_ok(self, result):
        self._write("ok", result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._write("failed", result)
"""

NOT_RUN = ("Unsupported parameters", "missing required arguments", "unexpected error", "Traceback")


def _from_a_variable(options):
    """The options with each no_log value given as a variable, as a vaulted secret is: 2.19 shows the task's source
    lines with its errors, so a secret written in the playbook itself is the playbook's to keep out of logs."""
    return dict((name, "{{ secret_content }}" if name in NO_LOG else value) for name, value in options.items())


def test_no_module_shows_a_no_log_value_at_vvvv_or_in_the_json_callback(tmp_path):
    tasks = [{"name": module, "maesh.ichor." + module: _from_a_variable(_valid(module)), "ignore_errors": True}
             for module in sorted(catalog.MODULES)]
    assert sum("secret_content" in json.dumps(task) for task in tasks) == len(tasks), "every module has one"
    (tmp_path / "secrets.yml").write_text(yaml.safe_dump({"secret_content": CONTENT}))
    secrets = "@" + str(tmp_path / "secrets.yml")
    plays = [{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]
    verbose, results = _results(tmp_path, plays, "--check", "-vvvv", "-e", secrets)
    assert MARKER not in verbose
    assert MARKER not in json.dumps(results)
    assert [entry[0] for entry in results] == sorted(catalog.MODULES)
    for name, unused_status, result in results:
        assert not any(word in json.dumps(result) for word in NOT_RUN), (name, result)


def _results(tmp_path, plays, *args):
    """Every task result of a run of ``plays``, as the callbacks receive them: [(task name, ok or failed, result)]."""
    (tmp_path / "play.yml").write_text(yaml.safe_dump(plays))
    (tmp_path / "callback_plugins").mkdir(exist_ok=True)
    (tmp_path / "callback_plugins" / "every_result.py").write_text(EVERY_RESULT)
    log = tmp_path / "results.jsonl"
    if log.exists():
        log.unlink()
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collection_path.collections_root(),
               ANSIBLE_CALLBACKS_ENABLED="every_result", ICHOR_RESULTS=str(log))
    playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    done = subprocess.run([playbook, "-i", "localhost,", str(tmp_path / "play.yml")] + list(args), env=env,
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout + done.stderr, [json.loads(line) for line in log.read_text().splitlines()]


def test_module_defaults_reach_the_actions_and_async_is_refused(tmp_path):
    tasks = [{"name": "defaults", "maesh.ichor.cluster_facts": None, "ignore_errors": True},
             {"name": "async", "maesh.ichor.cluster_facts": None, "async": 10, "poll": 2, "ignore_errors": True}]
    plays = [{"hosts": "localhost", "gather_facts": False, "tasks": tasks,
              "module_defaults": {"group/maesh.ichor.k8s": {"kubeconfig": str(tmp_path / "nowhere")}}}]
    unused, results = _results(tmp_path, plays)
    defaults, refused = results[0][2], results[1][2]
    status = results[1][1]
    assert defaults["msg"] == "the kubeconfig %s does not exist; check the option kubeconfig" % (tmp_path / "nowhere")
    assert status == "failed" and "async is not supported" in refused["msg"] and "\n" not in refused["msg"]
