"""Fuzz the reader of the secrets bundle kept in the cluster (issue 26): every mutation of a valid Secret
ichor-system/ichor-secrets-bundle (the bundle file under data's key bundle.yaml, its base64 text, the Secret object)
is read as a bundle or as none, and what init and adopt's write phase do with it (this cluster's bundle, or a refusal)
holds none of the bundle's keys, tokens or secrets. Budget and the maintainer's command: tests/unit/conftest.py.

Target: ``bundle-secret`` (config.bundle_secret.stored_bundle, then bundle_secret's comparison)."""

import base64

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.config import secrets
from ansible_collections.maesh.ichor.plugins.module_utils.config import bundle_secret
from tests.unit.conftest import mutate_bytes, mutate_tree
from tests.unit.test_fuzz_secrets_bundle import SECRETS, VALID_TEXT

BUNDLE = secrets.parse(VALID_TEXT)


class Kube:
    """The Secret read back, and nothing else."""

    def __init__(self, live):
        self.live = live

    def get(self, api_version, kind, name, namespace=None):  # pylint: disable=unused-argument
        return self.live


def secret(value):
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": bundle_secret.BUNDLE_SECRET, "namespace": "ichor-system"},
            "data": {bundle_secret.BUNDLE_KEY: value}}


def b64(raw):
    return base64.b64encode(raw).decode("ascii")


def use(given):
    """Read the Secret, then what init and adopt do with it when it exists."""
    stored = bundle_secret.stored_bundle(given)
    if stored is not None:
        stored.fingerprint()
    result = {"plan": []}
    bundle_secret.bundle_secret(Kube(given), BUNDLE, result, True)
    return stored


def test_fuzz_bundle_secret(fuzz):
    run = fuzz("bundle-secret")
    for index, rng in run.cases():
        op = rng.random()
        if op < 0.4:  # the bundle file mutated as bytes
            given = secret(b64(mutate_bytes(VALID_TEXT, rng)))
        elif op < 0.6:  # the base64 text mutated
            given = secret(mutate_bytes(b64(VALID_TEXT).encode(), rng).decode("utf-8", "replace"))
        else:  # the Secret object itself (its data of any shape)
            given = mutate_tree(secret(b64(VALID_TEXT)), rng)
        run.check(lambda: use(given), index, given, SECRETS)


# The old reader raised TypeError or AttributeError when the Secret's data had another shape.
NONE = [secret(5), {"data": ["x"]}, {"data": None}, secret(["x"]), secret(""), secret("QUFB" * 10 ** 6),
        secret(b64(b"\xff\xfe")), secret("not base64 !"), "x", None, secret(b64(b"a: [" * 200))]


@pytest.mark.parametrize("given", NONE, ids=["none-%d" % i for i in range(len(NONE))])
def test_a_secret_without_a_readable_bundle_holds_none(given):
    assert bundle_secret.stored_bundle(given) is None


def test_the_bundle_written_reads_back():
    assert bundle_secret.stored_bundle(secret(b64(BUNDLE.to_yaml().encode()))).fingerprint() == BUNDLE.fingerprint()
