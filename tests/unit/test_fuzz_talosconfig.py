"""Fuzz the talosconfig parser (issue 12): every mutation of a valid talosconfig is read or refused with one
TalosConfigError line that holds no key material; the endpoints it returns split cleanly (as the client
splits them). Budget and the maintainer's command: tests/unit/conftest.py.

Targets: ``talosconfig`` (talos.talosconfig.parse: read, then select), ``talosconfig-file`` (talos.talosconfig.load
from a file)."""

import base64
import json

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, talosconfig
from tests.unit.conftest import mutate_bytes, mutate_tree

# The key's PEM body: what must never reach a message.
KEY_BODY = "MC4CAQAwBQYDK2VwBCIEIICHORfuzzMARKERkeyMATERIAL0vGq7sW2xY9zQ4uT1pLk8"


def _pem(label, body):
    return "-----BEGIN %s-----\n%s\n-----END %s-----\n" % (label, body, label)


def _b64(text):
    return base64.b64encode(text.encode()).decode()


KEY_VALUE = _b64(_pem("ED25519 PRIVATE KEY", KEY_BODY))
# base64 of the PEM header is not secret; what follows it is
SECRETS = [KEY_BODY, KEY_VALUE[48:]]


def valid():
    return {
        "context": "prod",
        "contexts": {
            "prod": {"endpoints": ["10.0.0.1", "10.0.0.2:50001", "[fd00::1]:50000"], "nodes": ["10.0.0.11"],
                     "ca": _b64(_pem("CERTIFICATE", "Q0EtY2VydA==")), "crt": _b64(_pem("CERTIFICATE", "Q1JULWNlcnQ=")),
                     "key": KEY_VALUE},
            "staging": {"endpoints": "10.1.0.1", "ca": _b64(_pem("CERTIFICATE", "Q0EtY2VydA=="))},
        },
    }


def _text(tree):
    try:
        return yaml.safe_dump(tree, allow_unicode=True)
    except (yaml.YAMLError, RecursionError, TypeError):  # TypeError: keys of several types to sort
        return json.dumps(tree, default=str)  # JSON is YAML


def _read(given, context):
    ctx = talosconfig.parse(given, context=context)
    for endpoint in ctx.endpoints:
        talosconfig.split_endpoint(endpoint)  # what TalosClient does with each
    assert all(isinstance(n, str) for n in ctx.endpoints + ctx.nodes)
    return ctx


def test_fuzz_talosconfig(fuzz, fresh_redaction):
    run = fuzz("talosconfig")
    base = _text(valid()).encode()
    contexts = [None, None, "prod", "staging", "nope", "", KEY_VALUE[:60]]
    for index, rng in run.cases():
        fresh_redaction()
        if rng.random() < 0.5:
            given = _text(mutate_tree(valid(), rng))
        else:
            given = mutate_bytes(base, rng)
            if rng.random() < 0.5:
                given = given.decode("utf-8", "surrogateescape")  # what a module option can carry
        context = rng.choice(contexts)
        run.check(lambda: _read(given, context), index, (given, context), SECRETS)


def test_fuzz_talosconfig_file(fuzz, fresh_redaction, tmp_path):
    """The same through a file (load), where the bytes are read from disk."""
    run = fuzz("talosconfig-file", count=300, seconds=3.0)
    base = _text(valid()).encode()
    path = tmp_path / "talosconfig"
    for index, rng in run.cases():
        fresh_redaction()
        given = mutate_bytes(base, rng)
        path.write_bytes(given)
        run.check(lambda: talosconfig.load(path=str(path)), index, given, SECRETS)


# Found with --fuzz-seed 12: case 3 (flow nesting: RecursionError), 29 and 258 (a mapping or a list as the
# current context: TypeError), 217 and 604 (block nesting: RecursionError), 1219 and 1463 (messages of thousands
# of characters), 2774 (a huge endpoint quoted whole); the others are their kin.
FOUND = [
    ("contexts: {a: {endpoints: [x]}}\ncontext: [a]\n", None, "talosconfig field 'context' must be a context name"),
    ("contexts: {a: {endpoints: [x]}}\ncontext: {a: 1}\n", None, "talosconfig field 'context' must be a context name"),
    ("contexts: {a: {ca: [1]}}\n", None, "field 'ca' must be base64 PEM text"),
    ("contexts: {a: {endpoints: [x]}}\nb:\n" + "- " * 5000 + "x\n", None, "not valid YAML"),
    ("contexts: {a: {endpoints: [x]}}\nb: " + "{a: " * 5000 + "x" + "}" * 5000 + "\n", None, "not valid YAML"),
    ("contexts: {a: {endpoints: [x], port: " + "9" * 5000 + "}}\n", None, "not valid YAML"),
    ("contexts: {a: {endpoints: [x], at: !!timestamp 2001-99-99}}\n", None, "not valid YAML"),
    ("contexts: {a: {endpoints: [x], at: !!timestamp x}}\n", None, "not valid YAML"),
    ("contexts: {a: {endpoints: [x], at: !!bool ''}}\n", None, "not valid YAML"),
    ("contexts: {a: {endpoints: [x], at: !!float ''}}\n", None, "not valid YAML"),
    ("contexts: {a: {endpoints: [x]}}\n# \udcff\n", None, "is not UTF-8 text"),
    (b"contexts: {a: {endpoints: [x]}}\n# \xff\n", None, "is not UTF-8 text"),
    ("contexts: {%s: {endpoints: [x]}}\n" % KEY_VALUE, "nope", "has no context 'nope'; it has: (a name of 188 characters)"),
    ("contexts: {%s}\n" % ", ".join("k%d: {}" % i for i in range(5000)), "nope", "k1, k10, k100, k1000, k1001"),
    ("contexts: {a: {endpoints: [x]}}\n", "prod- " + "- " * 1000, "has no context (a name of 2006 characters)"),
    ("contexts: {a: {endpoints: ['x:%s']}}\n" % ("9" * 10000), None, "endpoint (of 10002 characters) has an invalid port"),
    ("contexts: {a: {endpoints: ['x:\u00b2']}}\n", None, "has an invalid port"),
]


@pytest.mark.parametrize("given, context, expected", FOUND, ids=["found-%d" % i for i in range(len(FOUND))])
def test_found_by_fuzzing(given, context, expected, fresh_redaction):
    """Inputs the fuzzer found (and their kin) that failed with a traceback or quoted too much."""
    fresh_redaction()
    with pytest.raises(errors.TalosConfigError) as exc:
        _read(given, context)
    assert expected in exc.value.message
    assert len(exc.value.message) < 500
    assert KEY_BODY not in exc.value.message and KEY_VALUE[48:72] not in exc.value.message


def test_huge_file_refused_before_parsing(tmp_path):
    path = tmp_path / "talosconfig"
    path.write_bytes(b"contexts: {a: {endpoints: [x]}}\n" + b"#" * (talosconfig.MAX_SIZE + 1))
    with pytest.raises(errors.TalosConfigError) as exc:
        talosconfig.load(path=str(path))
    assert "is larger than" in exc.value.message


def test_file_that_is_not_utf8_is_refused(tmp_path):
    path = tmp_path / "talosconfig"
    path.write_bytes(b"contexts: {a: {endpoints: [x]}}\n# \xff\n")
    with pytest.raises(errors.TalosConfigError) as exc:
        talosconfig.load(path=str(path))
    assert "is not UTF-8 text (byte 35)" in exc.value.message
