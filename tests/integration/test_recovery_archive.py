"""A backup archive against the reference age tools (filippo.io/age, built by tests/lab/age/build.sh: a peer that
shares none of the collection's code, which encrypts with pyrage, a binding of the Rust implementation): a key from
age-keygen, an archive the collection writes to its recipient, opened by `age -d -i key.txt` alone into a tar that
`tar` lists and extracts; and the other way, an archive the age tool encrypted is read back and checked."""

import hashlib
import io
import json
import os
import subprocess
import tarfile

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.recovery import archive

pytestmark = pytest.mark.lab

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(HERE, "..", "lab", "age", "build.sh")


@pytest.fixture(scope="module")
def age_tools():
    out = subprocess.run(["bash", BUILD], capture_output=True, text=True, check=True, timeout=900)
    directory = out.stdout.strip().splitlines()[-1]
    return os.path.join(directory, "age"), os.path.join(directory, "age-keygen")


@pytest.fixture()
def keyfile(age_tools, tmp_path):
    path = str(tmp_path / "key.txt")
    subprocess.run([age_tools[1], "-o", path], capture_output=True, check=True)
    recipient = subprocess.run([age_tools[1], "-y", path], capture_output=True, text=True, check=True).stdout.strip()
    return path, recipient


def test_the_age_tool_alone_opens_an_archive_the_collection_wrote(age_tools, keyfile, tmp_path):
    path, recipient = keyfile
    target = str(tmp_path / "prod-20261207T030405Z.tar.age")
    parts = [archive.Part.of_bytes("etcd.snapshot", os.urandom(300000)),
             archive.Part.of_bytes("record.json", b'{"talos": "v1.14.5"}')]
    out = archive.write(target, archive.recipients([recipient]), parts, {"cluster": {"name": "prod"}})
    plain = subprocess.run([age_tools[0], "-d", "-i", path, target], capture_output=True, check=True).stdout
    listing = subprocess.run(["tar", "-tf", "-"], input=plain, capture_output=True, check=True).stdout.decode()
    assert listing.split() == ["etcd.snapshot", "record.json", archive.MANIFEST]
    extracted = tmp_path / "x"
    extracted.mkdir()
    subprocess.run(["tar", "-xf", "-", "-C", str(extracted)], input=plain, check=True)
    assert (extracted / "record.json").read_bytes() == b'{"talos": "v1.14.5"}'
    assert (extracted / "etcd.snapshot").read_bytes() == parts[0].open().read()
    manifest = json.loads((extracted / archive.MANIFEST).read_text())
    assert manifest["parts"]["etcd.snapshot"]["sha256"] == out["parts"]["etcd.snapshot"]
    # and the collection reads it back with the identity file age-keygen wrote
    with open(path) as handle, open(target, "rb") as source:
        assert archive.read(source, archive.identities(handle.read()))["cluster"] == {"name": "prod"}


def test_the_collection_reads_what_the_age_tool_encrypted(age_tools, keyfile, tmp_path):
    path, recipient = keyfile
    data = b"snapshot bytes"
    part = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    manifest = {"format": archive.FORMAT, "parts": {"etcd.snapshot": part}}
    plain = io.BytesIO()
    with tarfile.open(fileobj=plain, mode="w") as tar:
        for name, body in (("etcd.snapshot", data), (archive.MANIFEST, json.dumps(manifest).encode())):
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    target = str(tmp_path / "a.tar.age")
    subprocess.run([age_tools[0], "-r", recipient, "-o", target], input=plain.getvalue(), check=True)
    seen = {}
    with open(path) as handle, open(target, "rb") as source:
        archive.read(source, archive.identities(handle.read()), lambda name, reader: seen.update({name: reader.read()}))
    assert seen == {"etcd.snapshot": data}
