"""config/yamlio.py, the one YAML entry point for machine configs and bundles (issue 16): libyaml's loader where
PyYAML has it, the pure-Python one otherwise, and from either the same data and the same one-line errors (kind and
position, never the text); and release_check reads each machine config once."""

import collections
import os

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.common import yamlload
from ansible_collections.maesh.ichor.plugins.module_utils.config import yamlio
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.config.images import component_versions
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import check
from tests.unit import test_rollout_steps as world

MARKER = "SECRETMARKERQ7ZK"
C_LOADER = getattr(yaml, "CSafeLoader", None)
LOADERS = [pytest.param(yaml.SafeLoader, id="pure")] + (
    [pytest.param(C_LOADER, id="libyaml")] if C_LOADER is not None else [])

# text -> (kind, position) the one line must name
BROKEN = [
    ("a: b\x07%s\n" % MARKER, "a character YAML does not allow at character 5"),
    ("key: %s\n\tb: 'x\n" % MARKER, "a token that cannot be read at line 2, column 1"),
    ("a: '%s\n" % MARKER, "a token that cannot be read at line 2, column 1"),
    ("a: [1, %s\n" % MARKER, "a structure that cannot be parsed at line 2, column 1"),
    ("- a\nb: %s\n" % MARKER, "a structure that cannot be parsed at line 2, column 1"),
    ("a: *%s\n" % MARKER, "an anchor or alias that cannot be resolved at line 1, column 4"),
    ("a: !!python/object %s\n" % MARKER, "a value or tag that cannot be constructed at line 1, column 4"),
    ("a: !!int %s\n" % MARKER, "a value or tag that cannot be constructed"),
    ("? [a, b]\n: %s\n" % MARKER, "a value or tag that cannot be constructed at line 1, column 3"),
    (b"a: \xff " + MARKER.encode(), "bytes that are not UTF-8 at byte 3"),
]


@pytest.fixture
def loader_on(monkeypatch):
    def use(base):
        monkeypatch.setattr(yamlio, "_Loader", yamlload.text_dates(base))
    return use


def test_the_c_loader_where_pyyaml_has_it():
    assert issubclass(yamlio._Loader, C_LOADER or yaml.SafeLoader)  # pylint: disable=protected-access


@pytest.mark.parametrize("base", LOADERS)
@pytest.mark.parametrize("text, said", BROKEN)
def test_a_yaml_error_is_one_line_with_kind_and_position_and_no_text(loader_on, base, text, said):
    loader_on(base)
    with pytest.raises(ConfigError) as caught:
        yamlio.load_all(text, what="the machine config")
    message = str(caught.value)
    assert message == "the machine config is not valid YAML: %s" % said
    assert MARKER not in message and "\n" not in message


@pytest.mark.parametrize("base", LOADERS)
def test_nesting_too_deep_is_one_line_from_either_loader(loader_on, base):
    loader_on(base)
    with pytest.raises(ConfigError) as caught:
        yamlio.load_all("a: " + "[" * 20000 + MARKER)
    assert str(caught.value).startswith("the machine config is not valid YAML: ") and MARKER not in str(caught.value)


def test_both_loaders_read_a_machine_config_alike(loader_on):
    # the fallback is not a different parser of our data: same objects, timestamps kept as text by both
    text = open(os.path.join(world.CONFIGS, world.V114, "controlplane.conf")).read() + "---\nwhen: 2026-01-01\n"
    read = []
    for param in LOADERS:
        loader_on(param.values[0])
        read.append(yamlio.load_all(text))
    assert all(r == read[0] for r in read) and read[0][-1] == {"when": "2026-01-01"}


def test_component_versions_from_the_text_or_from_what_was_read():
    text = open(os.path.join(world.CONFIGS, world.V114, "controlplane.conf")).read()
    versions = component_versions(text)
    assert versions["kubelet"] == versions["kube-apiserver"] == "v1.36.3"
    assert component_versions(yamlio.load_all(text)) == versions


def test_release_check_reads_each_machine_config_once(monkeypatch):
    the_world = world.World(world.V113, {"*": "v1.13.9"}, workers=2)
    # the fake's own reads of its configs (its Nodes' kubelet versions) are not the module's
    cached = dict((m.config, component_versions(m.config)) for m in the_world.machines.values())
    monkeypatch.setattr(world, "component_versions", lambda text: dict(cached[text]))
    parsed = collections.Counter()
    load_all = yamlio.load_all

    def counting(text, what="the machine config"):
        parsed[text] += 1
        return load_all(text, what)

    monkeypatch.setattr(yamlio, "load_all", counting)
    monkeypatch.setattr(yaml, "safe_load_all", None)  # nothing reads a config around yamlio
    conn = world.Conn(the_world)
    try:
        result = check.run(dict(the_world.params(), desired={}), conn, True)
    finally:
        conn.close()
    assert result["step"] == "talos"
    configs = [m.config for m in the_world.machines.values()]
    assert sum(parsed[c] for c in set(configs)) == len(configs), "parses per config: %s" % sorted(parsed.values())
