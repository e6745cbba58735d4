"""Key material a library reads by path: in memory (memfd) where the controller has it, else in one private
directory removed at the end of the task (common.keyfiles); and the process identity the cluster lock records
(common.processes)."""

import os
import ssl
import stat
import subprocess
import sys

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.common import files, keyfiles, processes

# the runtime dependencies' floors (h2, hpack, hyperframe, protobuf, kubernetes, PyYAML) run these too
pytestmark = pytest.mark.floor

MARKER = b"-----BEGIN PRIVATE KEY-----\nKEYFILES-MARKER-6c1d\n-----END PRIVATE KEY-----\n"


@pytest.fixture(autouse=True)
def _forgotten():
    yield
    keyfiles.forget()


def test_a_key_is_an_in_memory_file_read_by_its_path_held_until_forgotten():
    assert keyfiles.in_memory()  # the controllers CI runs on (Linux) have memfd
    path = keyfiles.path(MARKER)
    assert path.startswith("/proc/self/fd/") and keyfiles.path(MARKER.decode()) == path  # one file per content
    assert os.readlink(path).startswith("/memfd:maesh-ichor-")
    with open(path, "rb") as handle:
        assert handle.read() == MARKER
    fd = keyfiles.descriptor(path)
    assert fd == int(path.rsplit("/", 1)[1]) and keyfiles.descriptor("/tmp/x") is None
    # a child process reads it by the same path when it inherits the descriptor, and only then
    read = [sys.executable, "-c", "import sys; sys.stdout.write(open(sys.argv[1]).read())", path]
    assert subprocess.run(read, pass_fds=(fd,), capture_output=True, check=False).stdout == MARKER
    assert subprocess.run(read, capture_output=True, check=False).returncode != 0
    keyfiles.forget()
    assert not os.path.exists(path) or not os.readlink(path).startswith("/memfd:maesh-ichor-")


def test_reading_closes_its_file_when_the_library_has_read_it():
    with keyfiles.reading(MARKER, "key") as path:
        with open(path, "rb") as handle:
            assert handle.read() == MARKER
    assert not os.path.exists(path) or not os.readlink(path).startswith("/memfd:maesh-ichor-")


def test_without_memfd_the_files_are_0600_in_one_0700_directory_that_forget_removes(monkeypatch):
    monkeypatch.setattr(keyfiles, "in_memory", lambda: False)
    path = keyfiles.path(MARKER)
    directory = os.path.dirname(path)
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700 and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with keyfiles.reading(b"other", "crt") as other:
        assert os.path.dirname(other) == directory
    assert not os.path.exists(other)
    keyfiles.forget()
    assert not os.path.exists(directory)


def test_a_bad_certificate_chain_is_an_ssl_error_and_leaves_nothing_open():
    before = set(os.listdir("/proc/self/fd"))
    with pytest.raises(ssl.SSLError):
        files.load_cert_chain(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), b"not a certificate", MARKER)
    assert set(os.listdir("/proc/self/fd")) <= before


def test_the_playbook_process_is_this_one_outside_ansible_and_a_dead_one_on_this_controller_has_ended():
    me = processes.playbook()
    assert processes.parse(me) == (processes.controller(), os.getpid(), processes.started(os.getpid()))
    assert not processes.ended(me)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    dead = "%s %d %s" % (processes.controller(), child.pid, "1")
    assert processes.ended(dead)
    # the pid given since to another process: its start time differs
    assert processes.ended("%s %d %s" % (processes.controller(), os.getpid(), "1"))
    # another controller's process: nothing here can tell, so it may still run
    assert not processes.ended("elsewhere/00000000 %d -" % child.pid)
    for text in (None, "", "a b", "host x 1", "host 1 2 3"):
        assert processes.parse(text) is None and not processes.ended(text)
