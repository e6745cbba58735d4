"""The README's first command: start a simulated Talos cluster and run maesh.ichor against it."""

import os
import subprocess
import sys
import tempfile

from tests import collection_path

collection_path.ensure()

from tests.integration.ansible_env import ansible_env, write_inventory  # noqa: E402  pylint: disable=wrong-import-position
from tests.lab.fixtures import LabProcess  # noqa: E402  pylint: disable=wrong-import-position


def main():
    work = tempfile.mkdtemp(prefix="ichor-demo-")
    print("== starting a simulated Talos cluster (3 control planes, 2 workers, Talos v1.14.1, Ed25519 CA) in %s" % work)
    lab = LabProcess(os.path.join(work, "lab"), controlplanes=3, workers=2).start()
    try:
        state = lab.control.state()
        for m in state["machines"]:
            print("   %-9s %-13s %s" % (m["name"], m["address"], m["role"]))
        inventory = write_inventory(state, os.path.join(work, "inventory.yml"))
        print("== ansible-playbook -i %s maesh.ichor.facts (callbacks_enabled = maesh.ichor.plan)" % inventory)
        exe = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
        rc = subprocess.call([exe, "-i", inventory, "maesh.ichor.facts"], env=ansible_env())
        return rc
    finally:
        lab.stop()


if __name__ == "__main__":
    sys.exit(main())
