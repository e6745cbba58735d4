# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Files that hold what only their owner may read (a secrets bundle, an etcd snapshot): written as a new 0600 file
in the target's directory and renamed over the target, so whatever was there (its mode, a link) is replaced, never
written through; a directory others can write, or that belongs to another user, is refused."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat
import tempfile

from ansible_collections.maesh.ichor.plugins.module_utils.common import keyfiles
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError


def others_can_replace(what, directory, st):
    """Why someone other than this user or root could replace ``what`` (a file, as a message names it) in
    ``directory`` (``st``: its os.stat), or None."""
    mode = stat.S_IMODE(st.st_mode)
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        return ("refusing %s: its directory %s is writable by others (mode %04o); choose a directory only its owner "
                "can write" % (what, directory, mode))
    if st.st_uid not in (0, os.geteuid()):
        return "refusing %s: its directory %s belongs to uid %d, not to this user (uid %d) or root" % (
            what, directory, st.st_uid, os.geteuid())
    return None


def private_directory(path):
    """The directory of ``path``, made 0700 when missing; IchorError when others could swap the file in it."""
    directory = os.path.dirname(os.path.abspath(os.path.expanduser(path)))
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o700)
    problem = others_can_replace(path, directory, os.stat(directory))
    if problem:
        raise IchorError(problem)
    return directory


def write_private(path, chunks):
    """Write ``chunks`` (bytes, or an iterable of bytes) to ``path`` as a new 0600 file; returns the bytes written."""
    def fill(handle):
        written = 0
        for chunk in ([chunks] if isinstance(chunks, bytes) else chunks):
            handle.write(chunk)
            written += len(chunk)
        return written

    return write_private_with(path, fill)


def write_private_with(path, fill):
    """``fill(handle)`` writes ``path``'s new content into a new 0600 file (binary), renamed over ``path`` once
    ``fill`` returned (its result is returned); removed, and ``path`` left as it was, when ``fill`` raises."""
    path = os.path.abspath(os.path.expanduser(path))
    directory = private_directory(path)
    fd, temp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            out = fill(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, 0o600)
        os.rename(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise
    return out


def load_cert_chain(ctx, crt_pem, key_pem):
    """Load a client certificate and key held in memory (PEM bytes) into the ssl context ``ctx``.

    ssl only loads a certificate chain from files: they are in-memory files (common.keyfiles), gone as soon as
    OpenSSL has read them. Raises ssl.SSLError when they do not match or do not load."""
    with keyfiles.reading(crt_pem, "crt") as crt, keyfiles.reading(key_pem, "key") as key:
        ctx.load_cert_chain(crt, key)
