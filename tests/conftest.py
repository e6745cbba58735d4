"""Shared pytest setup: the collection import path and the lab fixtures."""

from tests import collection_path

collection_path.ensure()

pytest_plugins = ["tests.lab.fixtures", "tests.lab.kube.fixtures", "tests.lab.cluster_fixtures"]


def pytest_configure(config):
    """Under pytest-xdist each worker gets its own TMPDIR (inherited by every ansible-playbook and helm it starts), so
    a test that checks no temporary directory is left behind sees only its own worker's."""
    import os
    import tempfile
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        path = os.path.join(tempfile.gettempdir(), "maesh-ichor-%s-%d" % (worker, os.getpid()))
        os.makedirs(path, mode=0o700, exist_ok=True)
        os.environ["TMPDIR"] = path
        tempfile.tempdir = None
