# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which process runs the playbook, on which controller, and whether it still lives: what lets the cluster lock tell
a live holder from a dead one.

A process is written ``<controller> <pid> <start>``: the controller is the host name and, on Linux, the kernel's boot
id (two containers may share a host name, never a boot id and a pid namespace... and a reboot changes the boot id);
``start`` is when the process started (Linux: clock ticks since boot, field 22 of /proc/PID/stat), so that a pid the
kernel gave to another process since is not taken for the holder.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import multiprocessing
import os
import signal
import socket

try:
    import ctypes
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl  # resolved here: a child between fork and exec only calls it
except (ImportError, OSError, AttributeError):  # not Linux
    _PRCTL = None

_BOOT_ID = "/proc/sys/kernel/random/boot_id"
_PR_SET_PDEATHSIG = 1


def _read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return ""


def controller():
    """This controller: its host name, and its boot id where the kernel has one."""
    boot = _read(_BOOT_ID).strip()[:8]
    return "%s/%s" % (socket.gethostname(), boot) if boot else socket.gethostname()


def started(pid):
    """When process ``pid`` started (Linux: clock ticks since boot, as text), or "" where that cannot be read."""
    stat = _read("/proc/%d/stat" % pid)
    # the command name (field 2) is in parentheses and may hold spaces: the fields after its last ")" are plain
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else ""


def playbook_pid():
    """The process of the playbook this code runs for: Ansible forks a worker per task from ``ansible-playbook``
    (multiprocessing's fork), so its parent; this process when it is no such worker."""
    parent = multiprocessing.parent_process()
    return parent.pid if parent is not None and parent.pid else os.getpid()


def playbook():
    """``<controller> <pid> <start>`` of the playbook's process."""
    pid = playbook_pid()
    return "%s %d %s" % (controller(), pid, started(pid) or "-")


def parse(text):
    """(controller, pid, start) of a process as ``playbook()`` writes it; None when it is not one."""
    parts = str(text or "").split()
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    return parts[0], int(parts[1]), "" if parts[2] == "-" else parts[2]


def ended(text):
    """Whether the process ``text`` names (as ``playbook()`` writes it) ran on this controller and has ended; False
    when it is another controller's (nothing here can tell) or it may still run."""
    process = parse(text)
    if process is None or process[0] != controller():
        return False
    pid, start = process[1], process[2]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process: alive
        pass
    return bool(start) and started(pid) not in ("", start)


def die_with_parent():
    """Have the kernel SIGKILL this process the moment its parent ends (Linux' parent-death signal; elsewhere
    nothing). Safe between fork and exec (``preexec_fn``): a helm a task runs ends with the task's worker."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def stop_with_playbook():
    """In a task's worker: end with ``ansible-playbook``, however it ends. A SIGKILL of ansible-playbook alone (the
    OOM killer's pick) otherwise leaves its workers, which start sessions of their own, finishing their tasks and
    writing on after the lock, whose holder's process has ended, is free for the next run. Nothing outside a worker."""
    parent = multiprocessing.parent_process()
    if parent is None or not parent.pid:
        return
    die_with_parent()
    if os.getppid() != parent.pid:  # it ended before the signal was asked for: nobody waits for this task
        os._exit(1)
