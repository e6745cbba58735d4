"""A job run the way AWX runs it, through ansible-runner: a private data dir with the project (a playbook that
imports the collection's), the inventory as a file, the credentials as the injectors of docs/awx/credential_types.yml
give them (0600 files, their paths in env/envvars or extravars), the survey's answers as !unsafe extravars beside
AWX's own variables, the plan callback enabled beside ansible-runner's stdout
callback. ``sweep`` reads every file the job left (artifacts included) for credential markers.

An execution environment's HOME is /runner, the private data dir itself (AWX drops HOME from a container group job's
environment, and ansible-builder's images set it so): ``home_in_job=True`` gives the job that HOME, so that ``~`` lies
inside what AWX removes. ``remove`` removes the private data dir as AWX does after a job (AWX_CLEANUP_PATHS), and
``inventory_update`` runs ``ansible-inventory`` the way an AWX inventory sync does (its ``args`` file, no extra
variables: AWX applies no credential's extra_vars to an inventory update)."""

import glob
import json
import os
import re
import shutil
import sys

import yaml

from tests.integration.ansible_env import REPO, ansible_env

CREDENTIAL_TYPES = os.path.join(REPO, "docs", "awx", "credential_types.yml")


class AwxJob:
    def __init__(self, private, playbook=None, home_in_job=False, project_playbook=None):
        self.private = str(private)
        self.playbook = playbook + ".yml" if playbook else None
        self.injected = []
        self.envvars = {}
        self.credential_vars = {}
        for sub in ("project", "env", "inventory"):
            os.makedirs(os.path.join(self.private, sub), exist_ok=True)
        if playbook:  # the project's playbook: one that imports the collection's, or the file project_playbook
            with open(os.path.join(self.private, "project", self.playbook), "w") as handle:
                if project_playbook:
                    with open(project_playbook) as source:
                        handle.write(source.read())
                else:
                    handle.write("---\n- name: The job template's playbook\n  ansible.builtin.import_playbook: "
                                 "maesh.ichor.%s\n" % playbook)
        env = ansible_env()
        self.envvars.update((k, env[k]) for k in ("ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_CALLBACKS_ENABLED",
                                                  "ANSIBLE_LOCAL_TEMP", "ANSIBLE_NOCOLOR"))
        self.envvars["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
        if home_in_job:  # the execution environment's HOME, /runner: ~/.kube/config, ~/.talos/config do not exist
            self.envvars["HOME"] = os.path.abspath(self.private)

    def inventory(self, data):
        """The inventory source, without any credential (those come from the injectors)."""
        group_vars = (data.get("all") or {}).get("vars") or {}
        for key in ("ichor_talosconfig", "ichor_kubeconfig", "ichor_talos_context", "ichor_kube_context"):
            group_vars.pop(key, None)
        with open(os.path.join(self.private, "inventory", "hosts.yml"), "w") as handle:
            yaml.safe_dump(data, handle)

    def credential_of_type(self, kind, inputs):
        """Inject a credential of a type docs/awx/credential_types.yml defines, as AWX does: each file injector's
        template written 0600 into the job's private dir, its env and extra_vars rendered with those files' paths
        (``tower.filename.<name>``) and the inputs. ``inputs`` maps each field to its value (file contents as
        text)."""
        with open(CREDENTIAL_TYPES) as handle:
            injectors = yaml.safe_load(handle)[kind]["injectors"]
        filenames = {}
        for key, template in (injectors.get("file") or {}).items():
            name = key.split(".", 1)[1]
            path = os.path.join(self.private, "env", "tmp_%s_%s" % (kind, name))
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(_render(template, inputs, filenames))
            filenames[name] = path
            self.injected.append(os.path.abspath(path))
        self.envvars.update((k, _render(v, inputs, filenames)) for k, v in (injectors.get("env") or {}).items())
        self.credential_vars.update((k, _render(v, inputs, filenames))
                                    for k, v in (injectors.get("extra_vars") or {}).items())

    def run(self, survey=None, cmdline=None, job_id=1):
        """(rc, stdout) of one job: the survey's answers as !unsafe extravars, as AWX passes them."""
        import ansible_runner
        with open(os.path.join(self.private, "env", "envvars"), "w") as handle:
            yaml.safe_dump(self.envvars, handle)
        with open(os.path.join(self.private, "env", "extravars"), "w") as handle:
            for key, value in (survey or {}).items():
                handle.write("%s: !unsafe %s\n" % (key, json.dumps(value)))
            for key, value in self.credential_vars.items():  # a credential's extra_vars, as its injector gives them
                handle.write("%s: %s\n" % (key, json.dumps(value)))
            handle.write("awx_user_name: alice\nawx_job_id: %d\n" % job_id)
        # ansible-runner keeps a cmdline it was given in env/cmdline for every later run: each job states its own
        cmdline_file = os.path.join(self.private, "env", "cmdline")
        if os.path.exists(cmdline_file):
            os.remove(cmdline_file)
        kwargs = dict(cmdline=cmdline) if cmdline else {}
        done = ansible_runner.run(private_data_dir=self.private, playbook=self.playbook, quiet=True, **kwargs)
        self.last = done  # its events: what AWX stores of the job (the set_stats artifacts among them)
        return done.rc, done.stdout.read()

    def inventory_update(self, source, update_id=1):
        """(rc, the inventory, stdout) of an inventory sync of ``source`` (a file of the project, given as its text), as
        AWX's RunInventoryUpdate runs it: ``ansible-inventory --list --export -i <source> --output
        artifacts/<id>/output.json --playbook-dir project`` as the runner's ``args``, AWX's inventory update
        environment, the credentials' env and files, and no extra variables (AWX gives an inventory update none)."""
        import ansible_runner
        path = os.path.join(self.private, "project", "talos.yml")
        with open(path, "w") as handle:
            handle.write(source)
        output = os.path.join(self.private, "artifacts", str(update_id), "output.json")
        envvars = dict(self.envvars, INVENTORY_SOURCE_ID="1", INVENTORY_UPDATE_ID=str(update_id),
                       ANSIBLE_INVENTORY_UNPARSED_FAILED="True", ANSIBLE_INVENTORY_EXPORT="True",
                       ANSIBLE_VERBOSE_TO_STDERR="True")
        with open(os.path.join(self.private, "env", "envvars"), "w") as handle:
            yaml.safe_dump(envvars, handle)
        for name in ("extravars", "cmdline"):
            if os.path.exists(os.path.join(self.private, "env", name)):
                os.remove(os.path.join(self.private, "env", name))
        exe = os.path.join(os.path.dirname(sys.executable), "ansible-inventory")
        with open(os.path.join(self.private, "args"), "w") as handle:
            handle.write(" ".join([exe, "--list", "--export", "-i", path, "--output", output,
                                   "--playbook-dir", os.path.dirname(path)]))
        done = ansible_runner.run(private_data_dir=self.private, ident=str(update_id), quiet=True)
        self.last = done
        found = None
        if done.rc == 0 and os.path.exists(output):
            with open(output) as handle:
                found = json.load(handle)
        return done.rc, found, done.stdout.read()

    def remove(self):
        """The private data dir removed, as AWX removes it once the job is done: [every file the job left there]."""
        left = sorted(os.path.join(root, name) for root, unused_dirs, names in os.walk(self.private) for name in names)
        shutil.rmtree(self.private)
        return left

    def artifacts(self):
        """The last job's artifacts, as AWX keeps them: set_stats data of the playbook's stats event."""
        stats = [e for e in self.last.events if e.get("event") == "playbook_on_stats"]
        return (stats[-1].get("event_data") or {}).get("artifact_data") or {} if stats else {}

    def sweep(self, markers, stdouts=()):
        """[(path, marker head)] for every marker found in a file the jobs left (the injected credentials aside) or
        in their stdout; asserts that the runner's artifacts were among the files read."""
        assert markers, "the sweep needs the secrets it looks for"
        texts = {}
        for path in glob.glob(os.path.join(self.private, "**", "*"), recursive=True):
            if os.path.isfile(path) and os.path.abspath(path) not in self.injected:
                with open(path, errors="replace") as handle:
                    texts[path] = handle.read()
        assert any(os.sep + "artifacts" + os.sep in path for path in texts), sorted(texts)
        texts.update(("stdout %d" % i, out) for i, out in enumerate(stdouts))
        return [(path, marker[:12]) for path, text in texts.items() for marker in markers if marker in text]


def _render(template, inputs, filenames):
    """An injector's template: ``{{ tower.filename.<name> }}`` is an injected file's path, ``{{ <field> }}`` an
    input's value (the only forms credential_types.yml uses)."""
    def value(match):
        name = match.group(1)
        if name.startswith("tower.filename."):
            return filenames[name.split(".", 2)[2]]
        return inputs[name]
    return re.sub(r"\{\{\s*([\w.]+)\s*\}\}", value, template)


def kubeconfig_markers(path):
    """The secrets of a kubeconfig (client keys, tokens), as long runs of their text."""
    with open(path) as handle:
        data = yaml.safe_load(handle)
    found = []
    for user in data.get("users") or []:
        for key, value in (user.get("user") or {}).items():
            if key in ("client-key-data", "token", "password") and isinstance(value, str):
                found.append(value[20:60] if len(value) > 60 else value)
    return [value for value in found if len(value) > 16]
