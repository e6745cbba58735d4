"""The execution environment definition (meta/execution-environment.yml, issue 16) makes a valid build context.

``ansible-builder create`` writes the context; building the image needs a container engine this machine kind does
not have, so the stages that need none run here on the context itself: the galaxy stage's collection install
(offline: the collection is copied into the context) and the builder stage's introspection, with the scripts
ansible-builder put in the context. That shows which Python requirements and system packages the image gets.
"""

import os
import re
import subprocess
import sys

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.cilium import helm
from tests.lab.kube import cluster

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFINITION = os.path.join(REPO, "meta", "execution-environment.yml")
BIN = os.path.dirname(sys.executable)


def _lines(path):
    with open(path) as f:
        return [line.split("#", 1)[0].strip() for line in f if line.split("#", 1)[0].strip()]


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    where = str(tmp_path_factory.mktemp("ee") / "context")
    done = subprocess.run([os.path.join(BIN, "ansible-builder"), "create", "--file", DEFINITION, "--context", where,
                           "--output-filename", "Containerfile"], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return where


@pytest.fixture(scope="module")
def containerfile(context):
    with open(os.path.join(context, "Containerfile")) as f:
        return f.read()


def test_the_definition_is_ansible_builder_v3():
    with open(DEFINITION) as f:
        definition = yaml.safe_load(f)
    assert definition["version"] == 3


def test_the_containerfile_has_every_stage_and_the_pinned_tools(containerfile):
    stages = re.findall(r"^FROM \S+ AS (\w+)$", containerfile, re.M)
    assert stages == ["base", "galaxy", "builder", "final"]
    assert 'ARG EE_BASE_IMAGE="quay.io/centos/centos:stream9"' in containerfile
    assert 'ARG PYCMD="/usr/bin/python3.11"' in containerfile
    assert 'ARG ANSIBLE_INSTALL_REFS="ansible-core>=2.19,<2.20 ansible-runner>=2.4,<2.5"' in containerfile
    assert "ansible-galaxy collection install $ANSIBLE_GALAXY_CLI_COLLECTION_OPTS -r requirements.yml" in containerfile
    assert "introspect.py introspect" in containerfile and "/output/scripts/install-from-bindep" in containerfile


def test_helm_is_the_version_the_lab_tests_checked_against_its_sha256(containerfile):
    pinned = re.findall(r"^ARG HELM_VERSION=(v\S+)$", containerfile, re.M)
    assert pinned == [cluster.HELM_VERSION]
    version = tuple(int(x) for x in pinned[0].lstrip("v").split("."))
    assert helm.MINIMUM <= version < (4,), "cilium_takeover runs Helm %s or later 3.x" % ".".join(map(str, helm.MINIMUM))
    final = containerfile.split("AS final", 1)[1]
    step = next(line for line in final.splitlines() if "HELM_VERSION" in line and line.startswith("RUN "))
    assert "sha256sum -c -" in step and "install -m 0755" in step and step.endswith("helm version --short")
    assert final.index("ARG HELM_VERSION") < final.index(step) < final.index("USER 1000")


def test_the_context_holds_the_collection_without_its_tests(context):
    copied = os.path.join(context, "_build", "maesh.ichor")
    for name in ("requirements.txt", "bindep.txt", "galaxy.yml"):
        path = os.path.join(copied, name)
        assert os.path.isfile(path) and not os.path.islink(path), name
        with open(path, "rb") as ours, open(os.path.join(REPO, name), "rb") as theirs:
            assert ours.read() == theirs.read(), "%s in the context is not the checkout's" % name
    assert os.path.isfile(os.path.join(copied, "plugins", "modules", "talos_facts.py"))
    assert os.path.isfile(os.path.join(copied, "meta", "runtime.yml"))
    for absent in ("tests", "benchmarks", "scripts", os.path.join("meta", "execution-environment.yml")):
        assert not os.path.exists(os.path.join(copied, absent)), absent


@pytest.fixture(scope="module")
def installed(context, tmp_path_factory):
    """The galaxy stage, run here: its requirements.yml from its directory (the image's WORKDIR /build)."""
    collections = str(tmp_path_factory.mktemp("ee") / "collections")
    env = dict(os.environ, ANSIBLE_GALAXY_DISABLE_GPG_VERIFY="1")
    env.pop("ANSIBLE_COLLECTIONS_PATH", None)
    done = subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "install", "-r", "requirements.yml",
                           "--collections-path", collections], cwd=os.path.join(context, "_build"), env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return collections


def test_the_galaxy_stage_installs_the_collection_as_built(installed):
    root = os.path.join(installed, "ansible_collections", "maesh", "ichor")
    assert os.path.isfile(os.path.join(root, "MANIFEST.json"))
    assert os.path.isfile(os.path.join(root, "plugins", "modules", "talos_facts.py"))
    # galaxy.yml's build_ignore: this file would be read as the collection's own requirements (paths from its root)
    assert not os.path.exists(os.path.join(root, "meta", "execution-environment.yml"))


def test_the_builder_stage_finds_the_collections_requirements(context, installed, tmp_path):
    scripts = os.path.join(context, "_build", "scripts")
    pip, bindep = str(tmp_path / "pip.txt"), str(tmp_path / "bindep.txt")
    done = subprocess.run([sys.executable, os.path.join(scripts, "introspect.py"), "introspect", installed,
                           "--write-pip", pip, "--write-bindep", bindep], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    # every runtime requirement but those ansible-builder leaves to the image (ansible-core itself, and PyYAML,
    # which ansible-core requires)
    expected = [line for line in _lines(os.path.join(REPO, "requirements.txt"))
                if not re.match(r"(?i)(ansible-core|pyyaml)\b", line)]
    assert _lines(pip) == expected and "kubernetes>=30.1.0,<38" in expected
    assert _lines(bindep) == _lines(os.path.join(REPO, "bindep.txt")) and "ca-certificates" in _lines(bindep)


def test_the_readme_names_the_helm_the_image_gets():
    with open(os.path.join(REPO, "README.md")) as f:
        assert "helm **%s**" % cluster.HELM_VERSION in f.read()
