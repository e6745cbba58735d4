"""Shared pytest setup: the collection import path and the lab fixtures."""

from tests import collection_path

collection_path.ensure()

pytest_plugins = ["tests.lab.fixtures", "tests.lab.kube.fixtures", "tests.lab.cluster_fixtures"]
