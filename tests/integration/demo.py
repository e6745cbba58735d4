"""The README's first command: start a simulated Talos cluster and run maesh.ichor against it.

The lab's machines start from real Talos configs (the lab's default case). Its files, a talosconfig
among them, live in a private temporary directory that is removed at the end; with
ICHOR_DEMO_KEEP=1 it is kept and its path printed.
"""

import os
import shutil
import subprocess
import sys
import tempfile

from tests import collection_path

collection_path.ensure()

from tests.integration.ansible_env import ansible_env, write_inventory  # noqa: E402  pylint: disable=wrong-import-position
from tests.lab.__main__ import DEFAULT_CASE  # noqa: E402  pylint: disable=wrong-import-position
from tests.lab.process import LabProcess  # noqa: E402  pylint: disable=wrong-import-position


def main():
    keep = os.environ.get("ICHOR_DEMO_KEEP") == "1"
    work = tempfile.mkdtemp(prefix="ichor-demo-")  # mode 0700: it will hold the lab's talosconfig
    print("== starting a simulated Talos cluster (3 control planes, 2 workers) from the real Talos configs of "
          "case %s" % DEFAULT_CASE)
    lab = LabProcess(os.path.join(work, "lab"), controlplanes=3, workers=2, case=DEFAULT_CASE)
    try:
        lab.start()
        state = lab.control.state()
        for m in state["machines"]:
            print("   %-9s %-13s %s" % (m["name"], m["address"], m["role"]))
        inventory = write_inventory(state, os.path.join(work, "inventory.yml"))
        print("== ansible-playbook -i inventory.yml maesh.ichor.facts (callbacks_enabled = maesh.ichor.plan)")
        exe = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
        return subprocess.call([exe, "-i", inventory, "maesh.ichor.facts"], env=ansible_env())
    finally:
        lab.stop()
        if keep:
            print("== kept %s (inventory.yml, lab/talosconfig: a credential of the lab; remove it when done)" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
            print("== removed %s (the lab's talosconfig and inventory); ICHOR_DEMO_KEEP=1 keeps them" % work)


if __name__ == "__main__":
    sys.exit(main())
