# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Key material that a library insists on reading from a path never reaches a file system.

OpenSSL's ``load_cert_chain``, the kubernetes client (a kubeconfig's ``client-key-data``, which it would write to a
temporary file removed only at interpreter exit: never, in Ansible's forked workers) and helm (its kubeconfig and
values files) read files. Each such file is, on Linux, an anonymous in-memory file (``os.memfd_create``) read
through ``/proc/self/fd/N``: it lives in the process's memory and vanishes with the process however it ends (a
SIGKILL runs no ``finally`` and no exit handler). A child process (helm) reads it through the same path when the
descriptor is passed to it (``descriptor``, subprocess's ``pass_fds``).

Only where the controller has no memfd (macOS) are the files written, 0600 into one private 0700 directory that
``forget`` removes: the action plugin calls it in each task's ``finally``. A task killed there with SIGKILL leaves
that directory behind (docs/README.md says so).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import atexit
import contextlib
import hashlib
import os
import shutil
import tempfile

_PROC_FD = "/proc/self/fd"
# digest of the content -> (descriptor or None, path): one file for each distinct content, held until forget()
_held = {}
_directory = []


def in_memory():
    """Whether this controller keeps such files in memory (memfd) rather than in a private directory."""
    return hasattr(os, "memfd_create") and os.path.isdir(_PROC_FD)


def _memfd(content, name):
    fd = os.memfd_create("maesh-ichor-" + name, getattr(os, "MFD_CLOEXEC", 1))
    view = memoryview(content)
    while view:
        view = view[os.write(fd, view):]
    return fd, "%s/%d" % (_PROC_FD, fd)


def _private_file(content, name):
    if not _directory:
        _directory.append(tempfile.mkdtemp(prefix="maesh-ichor-keys-"))  # 0700
        atexit.register(forget)
    fd, path = tempfile.mkstemp(prefix=name + ".", dir=_directory[0])  # 0600
    with os.fdopen(fd, "wb") as handle:
        handle.write(content)
    return None, path


def _new(content, name):
    content = content.encode("utf-8") if isinstance(content, str) else bytes(content)
    return _memfd(content, name) if in_memory() else _private_file(content, name)


def path(content, name="key"):
    """A path that reads as ``content`` (bytes or text) for as long as this process lives or until ``forget``; the
    same content gives the same path."""
    digest = hashlib.sha256(content.encode("utf-8") if isinstance(content, str) else bytes(content)).hexdigest()
    if digest not in _held:
        _held[digest] = _new(content, name)
    return _held[digest][1]


def descriptor(where):
    """The descriptor behind an in-memory file's path (None for a file on disk): what a child process that reads the
    path must inherit (subprocess's ``pass_fds``), under the same number."""
    head, number = os.path.split(where)
    return int(number) if head == _PROC_FD and number.isdigit() else None


@contextlib.contextmanager
def reading(content, name="key"):
    """``with reading(pem) as path:`` a path to ``content`` for a library that reads it at once; gone after."""
    fd, where = _new(content, name)
    try:
        yield where
    finally:
        if fd is not None:
            os.close(fd)
        else:
            os.unlink(where)


def forget():
    """Close every in-memory file held and remove the private directory: the end of a task."""
    for fd, unused_path in _held.values():
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
    _held.clear()
    if _directory:
        shutil.rmtree(_directory.pop(), ignore_errors=True)
