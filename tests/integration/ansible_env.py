"""Run the collection through real ansible-playbook / ansible-runner against a lab."""

import json
import os
import subprocess
import sys

import yaml

from tests import collection_path

REPO = collection_path.REPO


def write_inventory(lab_state, path, talosconfig=None, context=None):
    """A static inventory of the lab's machines in the documented layout (docs/inventory.example.yml): ``ansible_host``
    and no connection variable, so a playbook that tried to reach a machine over SSH would fail (nothing listens on
    port 22 of the lab's addresses): every playbook run against the lab shows that none does."""
    groups = {"controlplane": {"hosts": {}}, "worker": {"hosts": {}}}
    for machine in lab_state["machines"]:
        group = "controlplane" if machine["role"] == "controlplane" else "worker"
        groups[group]["hosts"][machine["name"]] = {"ansible_host": machine["address"]}
    data = {"all": {
        "vars": {
            "ichor_talosconfig": talosconfig or lab_state["talosconfig"],
        },
        "children": groups,
    }}
    if context:
        data["all"]["vars"]["ichor_talos_context"] = context
    with open(path, "w") as handle:
        yaml.safe_dump(data, handle, sort_keys=False)
    return path


def ansible_env(extra=None):
    """Environment for ansible-playbook: this checkout as maesh.ichor, the plan callback on."""
    env = dict(os.environ)
    env.update({
        "ANSIBLE_COLLECTIONS_PATH": collection_path.collections_root(),
        "ANSIBLE_CALLBACKS_ENABLED": "maesh.ichor.plan",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_HOST_KEY_CHECKING": "0",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "ANSIBLE_LOCAL_TEMP": os.path.join(REPO, ".cache", "ansible-tmp"),
    })
    env.pop("TALOSCONFIG", None)
    env.update(extra or {})
    return env


def ansible_playbook(*args, env=None, cwd=None, timeout=300):
    """Run ansible-playbook of the current interpreter's environment; returns CompletedProcess."""
    exe = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    return subprocess.run([exe] + list(args), env=ansible_env(env), cwd=cwd or REPO, capture_output=True,
                          text=True, timeout=timeout, check=False)


if __name__ == "__main__":  # python -m tests.integration.ansible_env LAB_JSON INVENTORY
    with open(sys.argv[1]) as f:
        write_inventory(json.load(f), sys.argv[2])
