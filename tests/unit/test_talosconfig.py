"""talosconfig parsing: contexts, overrides, errors that name contexts and never key material."""

import base64
import json
import os

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.common import redact
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, talosconfig

MARKER = "ICHOR-MARKER-7f3a"


def _pem(label, body):
    return ("-----BEGIN %s-----\n%s\n-----END %s-----\n" % (label, body, label)).encode()


def _b64(data):
    return base64.b64encode(data).decode()


def config_text(current="prod", contexts=("prod", "staging")):
    data = {"context": current, "contexts": {}}
    for i, name in enumerate(contexts):
        data["contexts"][name] = {
            "endpoints": ["10.0.%d.1" % i, "10.0.%d.2:50001" % i],
            "nodes": ["10.0.%d.11" % i],
            "ca": _b64(_pem("CERTIFICATE", "Q0E" + MARKER)),
            "crt": _b64(_pem("CERTIFICATE", "Q1JU" + MARKER)),
            "key": _b64(_pem("ED25519 PRIVATE KEY", "S0VZ" + MARKER)),
        }
    return "# comment %s\n" % MARKER + yaml.safe_dump(data)


def test_current_context_is_used():
    ctx = talosconfig.parse(config_text())
    assert ctx.name == "prod"
    assert ctx.endpoints == ["10.0.0.1", "10.0.0.2:50001"]
    assert ctx.nodes == ["10.0.0.11"]
    assert ctx.credentials.key.reveal().startswith(b"-----BEGIN ED25519 PRIVATE KEY-----")


def test_context_override():
    assert talosconfig.parse(config_text(), context="staging").endpoints[0] == "10.0.1.1"


def test_unknown_context_names_the_existing_ones():
    with pytest.raises(errors.TalosConfigError) as exc:
        talosconfig.parse(config_text(), context="nope")
    assert "has no context 'nope'" in str(exc.value)
    assert "prod, staging" in str(exc.value)
    assert MARKER not in str(exc.value)


def test_several_contexts_without_current_must_be_chosen():
    with pytest.raises(errors.TalosConfigError) as exc:
        talosconfig.parse(config_text(current=""))
    assert "prod, staging" in str(exc.value)


def test_single_context_without_current_is_taken():
    assert talosconfig.parse(config_text(current="", contexts=("only",))).name == "only"


@pytest.mark.parametrize("text", ["::: not yaml [", "just a string", "contexts: {}", "context: x\n"])
def test_not_a_talosconfig(text):
    with pytest.raises(errors.TalosConfigError) as exc:
        talosconfig.parse(text + "\n# " + MARKER)
    assert "\n" not in str(exc.value)
    assert MARKER not in str(exc.value)


def test_bad_base64_does_not_echo_it():
    text = config_text().replace(_b64(_pem("CERTIFICATE", "Q0E" + MARKER)), "not-base64!" + MARKER)
    with pytest.raises(errors.TalosConfigError) as exc:
        talosconfig.parse(text)
    assert "'ca'" in str(exc.value)
    assert MARKER not in str(exc.value)


def test_unreadable_file(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(errors.TalosConfigError) as exc:
        talosconfig.load(path=str(missing))
    assert str(missing) in str(exc.value)
    assert "TALOSCONFIG" in str(exc.value)


def test_load_from_path_and_content(tmp_path):
    path = tmp_path / "talosconfig"
    path.write_text(config_text())
    assert talosconfig.load(path=str(path)).name == "prod"
    assert talosconfig.load(content=config_text(), context="staging").name == "staging"


def test_default_path_follows_talosctl():
    assert talosconfig.default_path({"TALOSCONFIG": "/x/cfg"}) == "/x/cfg"
    assert talosconfig.default_path({"TALOS_HOME": "/h"}) == os.path.join("/h", "config")
    assert talosconfig.default_path({}).endswith(os.path.join(".talos", "config"))


def test_credentials_redact_in_str_repr_and_json():
    ctx = talosconfig.parse(config_text())
    for text in (str(ctx), repr(ctx), str(ctx.credentials), repr(ctx.credentials.key),
                 json.dumps({"key": ctx.credentials.key, "crt": ctx.credentials.crt}, default=str)):
        assert MARKER not in text
    with pytest.raises(TypeError) as exc:
        json.dumps({"key": ctx.credentials.key})
    assert MARKER not in str(exc.value)


@pytest.mark.parametrize("endpoint,expected", [
    ("10.0.0.1", ("10.0.0.1", 50000)),
    ("10.0.0.1:50001", ("10.0.0.1", 50001)),
    ("[fd00::1]:50000", ("fd00::1", 50000)),
    ("fd00::1", ("fd00::1", 50000)),
    ("cp.example.com", ("cp.example.com", 50000)),
])
def test_split_endpoint(endpoint, expected):
    assert talosconfig.split_endpoint(endpoint) == expected


def test_redact_text_folds_and_hides_pem():
    text = "bad\n" + _pem("PRIVATE KEY", MARKER * 3).decode() + " and " + "Ab1" * 20
    out = redact.redact_text(text)
    assert MARKER not in out and "Ab1" * 20 not in out and "\n" not in out
