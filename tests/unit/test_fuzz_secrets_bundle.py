"""Fuzz the secrets bundle's reading and validation (issue 12): every mutation of a valid bundle file (as
``talosctl gen secrets`` writes it) is loaded and validated, or refused with one ConfigError line that holds
none of the bundle's keys, tokens or secrets. Budget and the maintainer's command: tests/unit/conftest.py.

Target: ``secrets-bundle`` (config.secrets.load, parse through config.yamlio's guard, validate)."""

import base64
import os

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.config import secrets
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from tests.unit.conftest import mutate_bytes, mutate_tree

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "configs", "v1.14",
                       "v1.14.1", "kitchen-sink", "secrets.yaml")
with open(FIXTURE, "rb") as _handle:
    VALID_TEXT = _handle.read()
VALID = yaml.safe_load(VALID_TEXT)


def _secret_values():
    """Every secret of the valid bundle in the forms a message could show: tokens and secrets as they are, each
    key's PEM body, each key's base64 past the PEM header (48 characters)."""
    values = [VALID["cluster"]["secret"], VALID["secrets"]["bootstraptoken"], VALID["trustdinfo"]["token"],
              VALID["secrets"]["secretboxencryptionsecret"]]
    pems = []
    for pair in VALID["certs"].values():
        pem = base64.b64decode(pair["key"]).decode()
        pems.append(pem)
        values.append("".join(line for line in pem.splitlines() if not line.startswith("-----")))
        values.append(pair["key"][48:])
    return values, pems


SECRETS, KEY_PEMS = _secret_values()
FORGET = KEY_PEMS + SECRETS[:4] + [VALID["cluster"]["id"]]


def _text(tree):
    try:
        return yaml.safe_dump(tree, allow_unicode=True).encode("utf-8", "surrogateescape")
    except (yaml.YAMLError, RecursionError, UnicodeError, TypeError):
        return repr(tree).encode("utf-8", "surrogateescape")


def _pem_with_der(pem, change):
    lines = pem.strip().splitlines()
    body = base64.b64encode(change(base64.b64decode("".join(lines[1:-1])))).decode()
    return "\n".join([lines[0]] + [body[i:i + 64] for i in range(0, len(body), 64)] + [lines[-1]]) + "\n"


def _with_der(name, field, change):
    """The valid bundle file with certs.<name>.<field>'s DER changed by ``change(der) -> der``."""
    tree = yaml.safe_load(VALID_TEXT)
    pem = base64.b64decode(tree["certs"][name][field]).decode()
    tree["certs"][name][field] = base64.b64encode(_pem_with_der(pem, change).encode()).decode()
    return yaml.safe_dump(tree).encode()


def _der_mutated(rng):
    """The bundle with one certificate or key whose DER is mutated (so that the crypto parsers see it)."""
    tree = yaml.safe_load(VALID_TEXT)
    name = rng.choice(sorted(tree["certs"]))
    field = rng.choice(sorted(tree["certs"][name]))
    if rng.random() < 0.7:
        return _with_der(name, field, lambda der: mutate_bytes(der, rng, rounds=1))

    def flip(der):
        spot = rng.randrange(len(der))
        return der[:spot] + bytes([der[spot] ^ (1 << rng.randrange(8))]) + der[spot + 1:]
    return _with_der(name, field, flip)


def read(path):
    return secrets.validate(secrets.load(str(path)), "v1.14")


def test_fuzz_secrets_bundle(fuzz, fresh_redaction, tmp_path):
    run = fuzz("secrets-bundle")
    path = tmp_path / "secrets.yaml"
    for index, rng in run.cases():
        fresh_redaction(forget=FORGET)
        op = rng.random()
        if op < 0.35:
            given = _text(mutate_tree(VALID, rng))
        elif op < 0.7:
            given = mutate_bytes(VALID_TEXT, rng)
        else:
            given = _der_mutated(rng)
        path.write_bytes(given)
        run.check(lambda: read(path), index, given, SECRETS)


P256 = bytes.fromhex("2a8648ce3d030107")  # the OID 1.2.840.10045.3.1.7 (prime256v1), inside DER
ED25519 = bytes.fromhex("06032b6570")  # the OID 1.3.101.112, inside DER
CA_TRUE = bytes.fromhex("30030101ff")  # BasicConstraints {cA: TRUE}, inside its extension's OCTET STRING

# Found with --fuzz-seed 12 by the DER mutations (the old validate let cryptography's exceptions through):
# cases 169 and 621 (an unknown key type in a certificate), 184 (an invalid key in a certificate), 464, 637 and
# 2943 (an extension's DER short or with bytes left over), 1826 and 1868 (an unknown curve), 2240 (an unknown key
# type in a key); and, before the DER mutations, case 1046 (a YAML tag that cannot be built, here !!int on a key:
# the cause was config/yamlio.py's load_all, since fixed there).
FOUND = [
    (_with_der("k8s", "crt", lambda der: der.replace(P256, P256[:-3] + b"\x03\x09\x07")), "certs.k8s.crt is not a valid PEM"),
    (_with_der("os", "crt", lambda der: der.replace(ED25519, ED25519[:-2] + b"\x61\x70")), "certs.os.crt is not a valid PEM"),
    (_with_der("os", "key", lambda der: der.replace(ED25519, ED25519[:-2] + b"\x50\x70")), "certs.os.key is not a valid PEM"),
    (_with_der("etcd", "key", lambda der: der.replace(P256, P256[:-3] + b"\x03\x09\x07")), "certs.etcd.key is not a valid PEM"),
    (_with_der("etcd", "crt", lambda der: der.replace(CA_TRUE, b"\x30\x02\x01\x01\xff")), "certs.etcd.crt is not a valid PEM"),
    (_with_der("etcd", "crt", lambda der: der.replace(CA_TRUE, b"\x30\x03\x01\x02\xff")), "certs.etcd.crt is not a valid PEM"),
    (VALID_TEXT.replace(b"    key:", b"    !!int key:", 1), "the secrets bundle is not valid YAML"),
    # kin of the installer bundle's case 204 (!!timestamp x): PyYAML's constructors raise IndexError, KeyError and
    # AttributeError too (config/yamlio.py catches them since d156b71)
    (b"x: !!timestamp x\n" + VALID_TEXT, "the secrets bundle is not valid YAML"),
    (b"x: !!bool ''\n" + VALID_TEXT, "the secrets bundle is not valid YAML"),
    (b"x: !!int ''\n" + VALID_TEXT, "the secrets bundle is not valid YAML"),
]


@pytest.mark.parametrize("given, expected", FOUND, ids=["found-%d" % i for i in range(len(FOUND))])
def test_found_by_fuzzing(given, expected, tmp_path, fresh_redaction):
    fresh_redaction(forget=FORGET)
    path = tmp_path / "secrets.yaml"
    path.write_bytes(given)
    with pytest.raises(ConfigError) as exc:
        read(path)
    assert expected in exc.value.message


def test_the_valid_bundle_reads(tmp_path):
    path = tmp_path / "secrets.yaml"
    path.write_bytes(VALID_TEXT)
    assert read(path).fingerprint()
