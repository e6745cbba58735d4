"""pytest fixtures for the simulated Talos lab.

Register from tests/conftest.py with::

    pytest_plugins = ["tests.lab.fixtures"]

``talos_lab`` (function scope) is a factory: ``lab = talos_lab(controlplanes=1, workers=1,
version="v1.14.1", mode="configured", ca="ed25519", latency_ms=0, overrides=[...],
additions=[...], case=None)``; every lab it made is stopped at teardown.

``case``: a config fixture case directory (absolute, relative to the cwd or the checkout, or
relative to tests/fixtures/configs, e.g. ``"v1.13/v1.13.9/k8s-older"``). Every machine added in
configured mode starts with the case's ``controlplane.conf`` / ``worker.conf`` bytes unchanged
(cluster id / name / etcd membership follow them; no hostname in them: the lab name stays), and
the lab's OS CA is the case's (``secrets.yaml`` ``certs.os``), so the talosconfig it writes is
accepted. ``kubernetes_version`` and ``ca`` are then ignored; ``version`` still sets Talos. ``talos_cluster`` (session scope)
is a ready 3 control planes + 2 workers, v1.14.1, configured, Ed25519 lab for read-only tests.
"""

import sys

import pytest

from .process import LabProcess


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


def _failed(request):
    for when in ("setup", "call"):
        rep = getattr(request.node, "rep_" + when, None)
        if rep is not None and rep.failed:
            return True
    return False


@pytest.fixture
def talos_lab(request, tmp_path):
    """Factory: start a lab subprocess; all are stopped at teardown."""
    labs = []

    def factory(**kwargs):
        n = len(labs)
        workdir = kwargs.pop("workdir", None) or str(tmp_path / ("lab%d" % n))
        start_timeout = kwargs.pop("start_timeout", 30.0)
        lab = LabProcess(workdir, **kwargs)
        labs.append(lab)
        lab.start(timeout=start_timeout)
        return lab

    yield factory
    failed = _failed(request)
    for lab in labs:
        lab.stop()
        if failed:
            sys.stderr.write("\n--- lab simulator stderr (%s) ---\n%s\n"
                             % (lab.workdir, lab.stderr()[-20000:]))


@pytest.fixture(scope="session")
def talos_cluster(tmp_path_factory):
    """A shared lab: 3 control planes + 2 workers, v1.14.1, configured, Ed25519. Read-only use."""
    workdir = str(tmp_path_factory.mktemp("talos-cluster"))
    lab = LabProcess(workdir, controlplanes=3, workers=2, version="v1.14.1",
                     mode="configured", ca="ed25519")
    lab.start()
    try:
        yield lab
    finally:
        lab.stop()
