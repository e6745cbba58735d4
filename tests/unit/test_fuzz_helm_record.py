"""Fuzz the reader of Helm release records (issue 26): every mutation of a valid record Secret of Cilium's release
(its base64 text, the gzip inside it, the JSON inside that, the release's tree and the Secret object) is read or
refused with one CiliumError line that quotes none of it, and a record that expands without end is refused before it
is expanded whole. Budget and the maintainer's command: tests/unit/conftest.py.

Target: ``helm-record`` (cilium.record.decode, then the Record's release, config, chart version and summary)."""

import base64
import gzip
import json

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.cilium import record
from ansible_collections.maesh.ichor.plugins.module_utils.cilium.errors import CiliumError
from tests.unit.conftest import mutate_bytes, mutate_tree
from tests import helm_record

MARKER = "ICHORfuzzHELMmarker0123456789abcdefXYZ"


def valid_release():
    return {"name": "cilium", "namespace": "kube-system", "version": 3,
            "info": {"status": "deployed", "description": "Upgrade complete"},
            "chart": {"metadata": {"name": "cilium", "version": "1.19.5"},
                      "templates": [{"name": "templates/agent.yaml", "data": "a2luZDogRGFlbW9uU2V0Cg=="}],
                      "values": {"debug": {"enabled": False}, "ipam": {"mode": "kubernetes"}}},
            "config": {"debug": {"enabled": True}, "kubeProxyReplacement": True, "note": MARKER},
            "manifest": "---\nkind: DaemonSet\n"}


def secret(data_release):
    return {"metadata": {"name": record.secret_name("cilium", 3), "namespace": "kube-system", "uid": "u3",
                         "labels": {"name": "cilium", "owner": "helm", "status": "deployed", "version": "3"}},
            "type": record.TYPE, "data": {"release": data_release}}


def twice(raw):
    return base64.b64encode(base64.b64encode(raw)).decode("ascii")


def use(given):
    """Read the record as the release's readers do (of Secrets the API server lists: each an object)."""
    if not isinstance(given, dict):
        return None
    rec = record.Record(given)
    release = rec.release
    assert isinstance(release, dict)
    assert isinstance(rec.config, dict)
    assert rec.chart_version is None or isinstance(rec.chart_version, str)
    rec.summary()
    assert rec.status in record.STATUSES or rec.status == rec.label_status
    return release


# A record of gzip that expands to 40 MB (from 40 kB).
BOMB = twice(gzip.compress(b'{"config": "' + b"A" * (40 * 1024 * 1024) + b'"}'))


def test_fuzz_helm_record(fuzz):
    run = fuzz("helm-record")
    text = json.dumps(valid_release()).encode()
    for index, rng in run.cases():
        op = rng.random()
        if op < 0.25:  # the release's JSON, mutated as bytes, gzipped or not
            raw = mutate_bytes(text, rng)
            given = secret(twice(gzip.compress(raw, mtime=0) if rng.random() < 0.7 else raw))
        elif op < 0.5:  # valid JSON of a mutated release
            try:
                given = secret(helm_record.encode(mutate_tree(valid_release(), rng)))
            except (ValueError, TypeError, RecursionError):
                given = secret(twice(b"{"))
        elif op < 0.65:  # the gzip bytes mutated (truncated, flipped, trailing data)
            given = secret(twice(mutate_bytes(gzip.compress(text, mtime=0), rng)))
        elif op < 0.8:  # the base64 text mutated
            given = secret(mutate_bytes(helm_record.encode(valid_release()).encode(), rng).decode("utf-8", "replace"))
        elif op < 0.805:  # rare: each costs a tenth of a second
            given = secret(BOMB)
        else:  # the Secret object itself, its name and namespace as the API server has them (in every message)
            given = mutate_tree(secret(helm_record.encode(valid_release())), rng)
            if isinstance(given, dict) and isinstance(given.get("metadata"), dict):
                given["metadata"].update(name=record.secret_name("cilium", 3), namespace="kube-system")
        run.check(lambda: use(given), index, given, [MARKER, helm_record.encode(valid_release())])


def _deep(depth):
    return b"[" * depth + b"]" * depth


REF = "the Helm record kube-system/sh.helm.release.v1.cilium.v3 "
NOT_HELM = REF + "is not a Helm release (base64, base64, gzip, JSON)"
FOUND = [
    # the old reader: RecursionError on deep JSON, and gzip expanded without a limit
    (secret(twice(_deep(100000))), REF + "is not a Helm release (its JSON nests too deep)"),
    (secret(twice(b'{"config": %s}' % _deep(100))),
     REF + "is not a Helm release (its JSON nests deeper than 64 levels)"),
    (secret(BOMB), REF + "expands to more than 33554432 bytes; it is not a Helm release"),
    (secret("QUFB" * 10 ** 6), REF + "is larger than 2097152 bytes"),
    (secret(5), REF + "is not text (a int)"),
    (secret(twice(gzip.compress(b'{"a": 1}')[:-6])), NOT_HELM),
    (secret(twice(gzip.compress(b'{"a": 1}') + b"more")), NOT_HELM),
    (secret(helm_record.encode({"config": ["debug"]})), REF + "is not a Helm release (its config is not a mapping)"),
    (dict(secret(""), data=["release"]), REF + "has no data.release"),
]


@pytest.mark.parametrize("given, expected", FOUND, ids=["found-%d" % i for i in range(len(FOUND))])
def test_found_by_probing(given, expected):
    with pytest.raises(CiliumError) as exc:
        use(given)
    assert exc.value.message == expected


def test_a_valid_record_reads_and_the_chart_version_of_another_shape_is_none():
    assert use(secret(helm_record.encode(valid_release()))) == valid_release()
    rec = record.Record(dict(secret(helm_record.encode({"chart": {"metadata": "1.19.5"}})), metadata="x"))
    assert (rec.chart_version, rec.config, rec.ref, rec.revision) == (None, {}, "None/None", 0)
