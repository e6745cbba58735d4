"""A task's worker ends with its ansible-playbook, however that ends (``processes.stop_with_playbook``, called by the
collection's action plugin before each task), and a helm it runs ends with the worker (``processes.die_with_parent``).
Found by the fault campaign: ansible-playbook SIGKILLed alone left its worker finishing reclaim's wait and writing the
cluster record 9.7 s later, while the next run, which took the dead run's place at once, wrote too."""

import os
import signal
import subprocess
import sys
import time

import pytest

# ansible-playbook's part: fork a worker as Ansible does (multiprocessing's fork), which asks to end with it, starts a
# child as helm would be started, and prints both pids; then wait
_PLAYBOOK = r'''
import multiprocessing, subprocess, sys, time
from ansible_collections.maesh.ichor.plugins.module_utils.common import processes

def worker():
    processes.stop_with_playbook()
    helm = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], preexec_fn=processes.die_with_parent)
    print(multiprocessing.current_process().pid, helm.pid, flush=True)
    time.sleep(60)

if __name__ == "__main__":
    multiprocessing.get_context("fork").Process(target=worker).start()
    time.sleep(60)
'''


def _alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_worker_and_its_helm_end_the_moment_ansible_playbook_is_killed_alone():
    playbook = subprocess.Popen([sys.executable, "-c", _PLAYBOOK], stdout=subprocess.PIPE, text=True,
                                env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    worker = helm = None
    try:
        worker, helm = (int(pid) for pid in playbook.stdout.readline().split())
        assert _alive(worker) and _alive(helm)
        playbook.send_signal(signal.SIGKILL)
        playbook.wait(10)
        deadline = time.monotonic() + 5
        while (_alive(worker) or _alive(helm)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(worker), "the worker outlived its ansible-playbook"
        assert not _alive(helm), "helm outlived its worker"
    finally:
        for pid in (worker, helm):
            if pid and _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if playbook.poll() is None:
            playbook.kill()


def test_outside_a_worker_nothing_is_asked():
    from ansible_collections.maesh.ichor.plugins.module_utils.common import processes
    processes.stop_with_playbook()  # the test's own process: no parent to end with, nothing happens
