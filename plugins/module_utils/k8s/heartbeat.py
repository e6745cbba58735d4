# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster lock's heartbeat: a small process that renews a run's lock (``k8s.lock``) every third of its duration
for as long as the playbook's process lives, and stops the moment that process is gone, whatever ended it.

``start`` launches it (once per holder: a second start while one beats for that holder does nothing) with the run's
kubeconfig options on its standard input, never in its arguments, environment or a file. It watches the playbook's
process (pid and start time) every second rather than trusting signals: Ansible's workers start sessions of their own
(setsid), so no signal sent to the playbook's process group reaches it. It ignores SIGINT, so an operator's Ctrl-C
does not drop the lock while the playbook gives it back. It never takes a lock: it renews the Lease only while it names its holder (a write
conditional on what it read), and ends when the lock is given back, broken or taken by another run. It never gives the
lock back either: a run killed mid-write leaves it to lapse, or to be taken at once by the next run on the same
controller, which sees the holder's process gone.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time

from ansible_collections.maesh.ichor.plugins.module_utils.common import processes

# the directory that holds ansible_collections/: what the heartbeat's interpreter needs on its path to import this
_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 6))
_MAIN = ("import sys; sys.path.insert(0, sys.argv[1]); "
         "from ansible_collections.maesh.ichor.plugins.module_utils.k8s import heartbeat; heartbeat.main()")
WATCH_EVERY = 1.0  # seconds between two looks at the playbook's process
_started = []


def _name(holder):
    """The heartbeat's abstract socket name (Linux): bound while it beats, gone with its process."""
    return "\0maesh-ichor-heartbeat-" + holder


def beating(holder):
    """Whether a heartbeat renews ``holder``'s lock now (False where that cannot be told: one is started)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # never blocking: the heartbeat never accepts, so once a renewal or two have probed, its queue is full and a
    # blocking connect would wait for ever (a join renewing the lock before its third machine hung there)
    probe.setblocking(False)
    try:
        probe.connect(_name(holder))
        return True
    except BlockingIOError:  # someone listens under that name, its queue full: it beats
        return True
    except (OSError, ValueError):
        return False
    finally:
        probe.close()


def _claim(holder):
    """The socket that says this process beats for ``holder`` (None on a system without abstract sockets: macOS);
    False when another heartbeat already does."""
    claim = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        claim.bind(_name(holder))
        claim.listen(1)
        return claim
    except OSError as exc:
        claim.close()
        return False if exc.errno == errno.EADDRINUSE else None


def start(connection, holder, duration, playbook):
    """Launch the heartbeat of ``holder``'s lock (taken for ``duration`` s) for the playbook whose process is
    ``playbook`` (processes.playbook()); ``connection``: the kubeconfig options (kubeconfig, kubeconfig_content,
    kube_context, timeout). Returns at once."""
    if beating(holder):
        return
    order = dict(connection=connection, holder=holder, duration=duration, playbook=playbook)
    proc = subprocess.Popen([sys.executable, "-c", _MAIN, _ROOT], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, close_fds=True)
    proc.stdin.write(json.dumps(order).encode("utf-8"))
    proc.stdin.close()
    # not waited for: it outlives the task (init reaps it then); in a process that lives on, the ended ones are reaped
    _started[:] = [p for p in _started if p.poll() is None] + [proc]


def beat(kube, holder, duration, alive, clock=time.time, sleep=time.sleep):
    """Renew ``holder``'s lock every third of ``duration`` while ``alive()``; returns why it stopped."""
    from ansible_collections.maesh.ichor.plugins.module_utils.k8s import lock  # pylint: disable=import-outside-toplevel
    every = max(1.0, duration / 3.0)
    due = clock() + every
    while True:
        if not alive():
            return "the playbook's process has ended"
        if clock() >= due:
            try:
                lock.keep(kube, holder)  # refused once the Lease names another holder, or none
                due = clock() + every
            except lock.LockError:
                return "the lock is no longer this run's"
            except Exception:  # pylint: disable=broad-except
                due = clock() + 1.0  # the API server did not answer: try again soon, the lock lasts two more tries
        sleep(min(WATCH_EVERY, max(0.0, due - clock())))


def main():
    """The heartbeat process: its order on standard input."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    order = json.loads(sys.stdin.read())
    claim = _claim(order["holder"])
    if claim is False:
        return
    from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient  # pylint: disable=import-outside-toplevel
    connection = order["connection"]
    try:
        kube = KubeClient(kubeconfig=connection.get("kubeconfig"), kubeconfig_content=connection.get(
            "kubeconfig_content"), context=connection.get("kube_context"), timeout=connection.get("timeout") or 10)
    except Exception:  # pylint: disable=broad-except
        return  # the run's own client was made from the same options: nothing to say here, the lock lapses
    playbook = order["playbook"]
    beat(kube, order["holder"], order["duration"], lambda: not processes.ended(playbook))
    del claim
    os._exit(0)  # nothing of the client's to clean up: its key files are in memory
