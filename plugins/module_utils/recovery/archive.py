# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One backup as one archive: a tar stream of its parts (the etcd snapshot, the secrets bundle, the cluster record,
each machine's live config) and, last, ``manifest.json`` (what the parts are, with the sha256 of each), encrypted to
age recipients with pyrage, so that ``age -d -i key.txt archive.tar.age | tar x`` alone opens it, as talos-backup's
archives open.

Written and read as streams: the tar writer feeds the encryption through a pipe (and the decryption feeds the tar
reader), so a snapshot of gigabytes is never held whole, and nothing unencrypted reaches the destination: the archive
is written to a new 0600 file renamed over the target once whole. A read checks every part against the manifest; an
archive that is truncated, altered, opened with another key or missing its manifest is one line of ArchiveError.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import io
import json
import os
import tarfile
import threading

try:
    import pyrage
    HAS_PYRAGE = True
except ImportError:
    HAS_PYRAGE = False

from ansible_collections.maesh.ichor.plugins.module_utils.common import files
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError

MANIFEST = "manifest.json"
FORMAT = 1  # the manifest's "format": what a reader of this archive expects
_CHUNK = 1 << 20
_RECIPIENT_PREFIX = "age1"
_IDENTITY_PREFIX = "AGE-SECRET-KEY-1"


class ArchiveError(IchorError):
    """An archive that cannot be written or read as one, or recipients and identities that are not age keys."""


def _need_pyrage():
    if not HAS_PYRAGE:
        raise ArchiveError("the pyrage Python package is needed for encrypted backups (pip install 'pyrage>=1.2.1,<2'; "
                           "the execution environment carries it)")


def recipients(values):
    """age X25519 recipients (``age1...``, one per value: what ``age-keygen -y`` prints) for pyrage; ArchiveError
    naming the first that is not one (shown when it looks like a public key, else by its number)."""
    _need_pyrage()
    out = []
    for number, value in enumerate(values or [], 1):
        text = value.strip() if isinstance(value, str) else ""
        try:
            if not text.startswith(_RECIPIENT_PREFIX):
                raise ValueError(number)
            out.append(pyrage.x25519.Recipient.from_str(text))
        except (ValueError, pyrage.RecipientError):
            # shown only when it has a recipient's shape: anything else (an identity pasted here) may be a secret
            shown = repr(text) if text.startswith(_RECIPIENT_PREFIX) and len(text) < 100 else "number %d" % number
            raise ArchiveError("recipients: %s is not an age recipient (age1..., as age-keygen -y prints it)" % shown)
    if not out:
        raise ArchiveError("recipients: give at least one age recipient (age1...): the archive is encrypted to them")
    return out


def identities(text, source="the identity file"):
    """The age X25519 identities of an identity file's text (``AGE-SECRET-KEY-1...`` lines; ``#`` comments and
    blank lines skipped). ArchiveError without showing any line: they are secrets."""
    _need_pyrage()
    out = []
    for number, line in enumerate((text or "").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            if not line.startswith(_IDENTITY_PREFIX):
                raise ValueError(number)
            out.append(pyrage.x25519.Identity.from_str(line))
        except (ValueError, pyrage.IdentityError):
            raise ArchiveError("%s: line %d is not an age identity (AGE-SECRET-KEY-1..., as age-keygen writes it)"
                               % (source, number))
    if not out:
        raise ArchiveError("%s holds no age identity (AGE-SECRET-KEY-1...)" % source)
    return out


class Part:
    """One part of an archive: its name in the tar, its size, and ``open()`` giving a binary reader of it."""

    def __init__(self, name, size, opener):
        self.name, self.size, self.open = name, size, opener

    @classmethod
    def of_bytes(cls, name, data):
        return cls(name, len(data), lambda: io.BytesIO(data))

    @classmethod
    def of_file(cls, name, path):
        return cls(name, os.path.getsize(path), lambda: open(path, "rb"))


class _Hashing:
    """A reader that hashes what passes through it."""

    def __init__(self, raw):
        self.raw, self.digest, self.size = raw, hashlib.sha256(), 0

    def read(self, size=-1):
        data = self.raw.read(size)
        self.digest.update(data)
        self.size += len(data)
        return data


class _Counting:
    """A writer that hashes and counts what passes through it (the archive as it reaches its destination)."""

    def __init__(self, raw):
        self.raw, self.digest, self.size = raw, hashlib.sha256(), 0

    def write(self, data):
        self.digest.update(data)
        self.size += len(data)
        return self.raw.write(data)

    def flush(self):
        self.raw.flush()


def _member(name, size):
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o600, 0
    return info


def _pipe_thread(work):
    """Run ``work()`` in a thread; a function that joins it and raises what it raised."""
    outcome = {}

    def run():
        try:
            work()
        except BaseException as exc:  # handed to the caller's thread below
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def join():
        thread.join()
        if "error" in outcome:
            raise outcome["error"]
    return join


def _write_tar(out, parts, facts):
    """The tar stream of ``parts`` then the manifest (``facts`` with the format and each part's size and sha256) into
    ``out``; returns {name: sha256}."""
    hashes = {}
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for part in parts:
            with part.open() as raw:
                reader = _Hashing(raw)
                tar.addfile(_member(part.name, part.size), reader)
            if reader.size != part.size:
                raise ArchiveError("%s changed while it was archived (%d bytes, %d expected)" % (
                    part.name, reader.size, part.size))
            hashes[part.name] = reader.digest.hexdigest()
        manifest = dict(facts, format=FORMAT, parts=dict(
            (p.name, {"size": p.size, "sha256": hashes[p.name]}) for p in parts))
        data = json.dumps(manifest, indent=2, sort_keys=True).encode("utf-8") + b"\n"
        tar.addfile(_member(MANIFEST, len(data)), io.BytesIO(data))
    return hashes


def write(path, keys, parts, facts):
    """Write ``parts`` (Part) and the manifest into ``path`` (a new 0600 file, renamed over it once whole), encrypted
    to ``keys`` (recipients()); the manifest is ``facts`` (the cluster, the time, the snapshot's revision, ...) with
    ``format`` and ``parts`` {name: {size, sha256}}. Returns {"size", "sha256" (of the encrypted archive), "parts"
    {name: sha256}}."""
    _need_pyrage()
    names = [p.name for p in parts]
    if MANIFEST in names or len(set(names)) != len(names):
        raise ArchiveError("archive parts: each name once, and not %s" % MANIFEST)

    def fill(handle):
        sink = _Counting(handle)
        read_fd, write_fd = os.pipe()
        with os.fdopen(read_fd, "rb", buffering=_CHUNK) as plain_in:
            def tar_into_pipe():
                with os.fdopen(write_fd, "wb", buffering=_CHUNK) as plain_out:
                    written["parts"] = _write_tar(plain_out, parts, facts)
            written = {}
            join = _pipe_thread(tar_into_pipe)
            try:
                pyrage.encrypt_io(plain_in, sink, keys)
            except BaseException:
                plain_in.close()  # a tar writer still writing gets a broken pipe, not a hang
                try:
                    join()
                except BaseException:  # a broken pipe that follows from the error raised below
                    pass
                raise
            join()  # the tar writer's own error (a part that could not be read) fails the archive
        return {"size": sink.size, "sha256": sink.digest.hexdigest(), "parts": written["parts"]}

    try:
        return files.write_private_with(path, fill)
    except pyrage.EncryptError as exc:
        raise ArchiveError("the archive could not be encrypted: %s" % exc)


def read(source, keys, on_part=None):
    """Decrypt and read the archive ``source`` (a binary reader) with ``keys`` (identities()), checking each part
    against the manifest. ``on_part(name, reader)`` may consume each part as it streams past (a drill restores the
    snapshot from it); what it leaves is read and hashed anyway. Returns the manifest; ArchiveError for an archive
    that does not decrypt, is not a whole tar, lacks its manifest, or whose parts disagree with it."""
    _need_pyrage()
    read_fd, write_fd = os.pipe()
    hashes, found = {}, {}

    def decrypt_into_pipe():
        with os.fdopen(write_fd, "wb", buffering=_CHUNK) as plain_out:
            pyrage.decrypt_io(source, plain_out, keys)

    join = _pipe_thread(decrypt_into_pipe)
    unread = None
    try:
        with os.fdopen(read_fd, "rb", buffering=_CHUNK) as plain_in:
            _read_tar(plain_in, hashes, found, on_part)
            while plain_in.read(_CHUNK):  # what follows the tar's end: the decryption must finish to be judged
                pass
    except ArchiveError as exc:  # the pipe is closed: a decryption still writing stops
        unread = exc
    try:
        join()
    except pyrage.DecryptError as exc:  # the first cause: a tar cut short by a failed decryption says less
        raise ArchiveError("the archive cannot be decrypted with the identity given: a wrong key, or an archive "
                           "truncated or altered (%s)" % exc)
    except Exception:  # a write into the pipe the reader closed: the reader's error says why
        if unread is None:
            raise
    if unread is not None:
        raise unread
    return _judge(found.get("manifest"), hashes)


def _read_tar(plain_in, hashes, found, on_part):
    try:
        with tarfile.open(fileobj=plain_in, mode="r|") as tar:
            for member in tar:
                if not member.isfile() or member.name in hashes:
                    raise ArchiveError("the archive holds %s, which is not a part of a backup" % member.name)
                reader = _Hashing(tar.extractfile(member))
                if member.name == MANIFEST:
                    found["manifest"] = reader.read()
                elif on_part is not None:
                    on_part(member.name, reader)
                while reader.read(_CHUNK):
                    pass
                hashes[member.name] = reader.digest.hexdigest()
    except (tarfile.TarError, EOFError) as exc:
        raise ArchiveError("the archive is not a whole backup (truncated or altered): %s" % exc)


def _judge(manifest_bytes, hashes):
    if manifest_bytes is None:
        raise ArchiveError("the archive has no %s: it is not a whole backup" % MANIFEST)
    try:
        manifest = json.loads(manifest_bytes.decode("utf-8"))
    except ValueError:
        raise ArchiveError("the archive's %s is not JSON" % MANIFEST)
    listed = manifest.get("parts") if isinstance(manifest, dict) else None
    if not isinstance(listed, dict) or manifest.get("format") != FORMAT:
        raise ArchiveError("the archive's %s is not one this collection writes (format %s)" % (MANIFEST, FORMAT))
    held = dict((name, digest) for name, digest in hashes.items() if name != MANIFEST)
    missing = sorted(set(listed) - set(held))
    extra = sorted(set(held) - set(listed))
    wrong = sorted(name for name in set(listed) & set(held) if (listed[name] or {}).get("sha256") != held[name])
    problems = (["missing: %s" % ", ".join(missing)] if missing else []) + \
        (["not in the manifest: %s" % ", ".join(extra)] if extra else []) + \
        (["sha256 differs: %s" % ", ".join(wrong)] if wrong else [])
    if problems:
        raise ArchiveError("the archive's parts disagree with its manifest: %s" % "; ".join(problems))
    return manifest
