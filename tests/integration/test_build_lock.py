"""The lab's build scripts when another build holds their lock (issue 26 section 7: the first `make demo` on a machine
where another build ran printed nothing for ten minutes, then "built in 625s" though it built nothing):

* tests/lab/kube/build.sh says at once that it waits, and for what (the lock, its path); once the other build has
  finished, that it made the binaries and nothing is left to build, and builds nothing;
* the kube_lab fixture's closing line says whether this run built anything (tests/lab/kube/fixtures.py).
"""

import fcntl
import os
import queue
import shutil
import subprocess
import threading

import pytest

from tests.lab.kube.cluster import BUILD_SH, binaries
from tests.lab.kube.fixtures import Progress

pytestmark = pytest.mark.lab


def _lines(stream, into):
    for line in stream:
        into.put(line)
    into.put(None)


def test_a_build_waiting_for_the_lock_says_so_then_that_the_other_build_made_the_binaries(tmp_path):
    real = binaries(build=False, names=("helm",))["helm"]  # the lab's helm, built and fresh
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    with open(str(bin_dir / ".build.lock"), "a") as lock:  # another build holds the lock
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = subprocess.Popen(["bash", BUILD_SH, "helm"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                universal_newlines=True, env=dict(os.environ, MAESH_ICHOR_KUBE_BIN=str(bin_dir)))
        said = queue.Queue()
        threading.Thread(target=_lines, args=(proc.stderr, said), daemon=True).start()
        try:
            first = said.get(timeout=30)
        except queue.Empty:
            proc.kill()
            raise AssertionError("build.sh said nothing while it waited for the lock")
        assert first.startswith("kube-lab build: another build holds %s/.build.lock: waiting for it to finish" % bin_dir), first
        assert proc.poll() is None  # it waits
        # the other build finishes: it made helm, then lets the lock go
        os.symlink(real, str(bin_dir / os.path.basename(real)))
        shutil.copy(real + ".key", str(bin_dir / (os.path.basename(real) + ".key")))
        fcntl.flock(lock, fcntl.LOCK_UN)
    out = proc.stdout.read()
    assert proc.wait(timeout=60) == 0
    rest = []
    while True:
        line = said.get(timeout=30)
        if line is None:
            break
        rest.append(line)
    assert len(rest) == 1 and rest[0].startswith("kube-lab build: the other build finished after "), rest
    assert rest[0].rstrip().endswith("; helm are built: nothing to build"), rest
    assert out == "helm=%s\n" % (bin_dir / os.path.basename(real))
    assert not (bin_dir / ".build.lock.holder").exists()


class _Sink:
    def __init__(self):
        self.text = ""

    def write(self, text):
        self.text += text

    def flush(self):
        pass


@pytest.mark.parametrize("said, summary", [
    (["kube-lab build: building kube-apiserver kubectl (kubernetes module) ...\n",
      "kube-lab build: built kube-apiserver kubectl in 540s\n"], "kube lab: built in 600s"),
    (["kube-lab build: another build holds /c/bin/.build.lock: waiting for it to finish (a cold build takes about ten "
      "minutes on 2 cores)\n",
      "kube-lab build: the other build finished after 598s; kube-apiserver are built: nothing to build\n"],
     "kube lab: ready after 600s: another build held the lock and made the binaries; this one built nothing"),
])
def test_the_fixture_says_whether_this_run_built_the_binaries(said, summary):
    sink = _Sink()
    progress = Progress(sink)
    for line in said:
        progress.write(line)
    assert sink.text == "".join(said)  # the progress itself is passed on
    assert progress.summary(600.2) == summary
