"""pytest fixtures for the lab's real Kubernetes control plane.

Register from tests/conftest.py with::

    pytest_plugins = ["tests.lab.fixtures", "tests.lab.kube.fixtures"]

``kube_lab`` (session scope): one ``KubeLab`` (etcd + kube-apiserver v1.36.3 with RBAC and the
audit log + kube-controller-manager) for the whole session, the binaries built by
``tests/lab/kube/build.sh`` first when they are not cached (its progress is printed; when another build holds its
lock, it says so, waits, and the line after it says that this run built nothing). No Go, a failed build or an API
server that does not come up make the tests that use it fail (never skip), with the build
output or the log tail. ``ICHOR_KUBE_LAB=DIR/kube.json`` uses a lab started by hand
(``python -m tests.lab.kube up --workdir DIR``) instead.

``kube_namespace`` (function scope): a fresh namespace named after the test, deleted after it.
"""

import contextlib
import os
import sys
import time

import pytest

from .cluster import KubeLab, KubeLabError, binaries

_FAILED = {}


@contextlib.contextmanager
def _uncaptured(config):
    capman = config.pluginmanager.getplugin("capturemanager")
    if capman is None:
        yield
        return
    with capman.global_and_fixture_disabled():
        yield


def _say(config, text):
    with _uncaptured(config):
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


class Progress:
    """build.sh's progress passed on to ``stream``, and what it says it did: built something, or waited for another
    build (its lock) that made everything."""

    BUILT = "kube-lab build: built "
    WAITED = "kube-lab build: another build"

    def __init__(self, stream):
        self.stream = stream
        self.built = self.waited = False

    def write(self, text):
        for line in text.splitlines():
            self.built = self.built or line.startswith(self.BUILT)
            self.waited = self.waited or line.startswith(self.WAITED)
        self.stream.write(text)

    def flush(self):
        self.stream.flush()

    def summary(self, seconds):
        """The line after the build: what took the time."""
        if self.built:
            return "kube lab: built in %.0fs" % seconds
        if self.waited:
            return "kube lab: ready after %.0fs: another build held the lock and made the binaries; this one built " \
                   "nothing" % seconds
        return "kube lab: ready after %.0fs; nothing was built" % seconds


@pytest.fixture(scope="session")
def kube_lab(request, tmp_path_factory):
    """A running KubeLab (session scope)."""
    if "error" in _FAILED:
        pytest.fail(_FAILED["error"], pytrace=False)
    attach = os.environ.get("ICHOR_KUBE_LAB")
    if attach:
        yield KubeLab.attach(attach)
        return
    try:
        bins = binaries(build=False)
    except KubeLabError:
        bins = None
    if bins is None:
        _say(request.config, "kube lab: building kube-apiserver, kube-controller-manager, kubectl,"
                             " etcd and helm (tests/lab/kube/build.sh; cold: about 10 minutes"
                             " on 2 cores)")
        start = time.monotonic()
        progress = Progress(sys.stderr)
        try:
            with _uncaptured(request.config):  # build.sh's progress goes to the terminal
                bins = binaries(build=True, stream=progress)
        except KubeLabError as e:
            _FAILED["error"] = "kube lab: building the binaries failed: %s" % e
        if "error" in _FAILED:
            pytest.fail(_FAILED["error"], pytrace=False)
        _say(request.config, progress.summary(time.monotonic() - start))
    workdir = str(tmp_path_factory.mktemp("kube-lab"))
    lab = None
    try:
        lab = KubeLab.start(workdir=workdir, bins=bins)
    except KubeLabError as e:
        _FAILED["error"] = "kube lab did not start (workdir %s): %s" % (workdir, e)
    if lab is None:
        pytest.fail(_FAILED["error"], pytrace=False)
    try:
        yield lab
    finally:
        lab.stop()


@pytest.fixture
def kube_namespace(kube_lab, request):
    """A fresh namespace (its name) for this test; deleted afterwards (not waited for)."""
    name = kube_lab.new_namespace(request.node.name[:40])
    yield name
    try:
        kube_lab.delete_namespace(name)
    except Exception:  # pylint: disable=broad-except
        pass
