"""A backup archive (recovery/archive.py): its parts and manifest written as a tar stream encrypted to age recipients
and read back with their sha256 checked; each kind of bad archive one line (truncated, a byte flipped, another key,
a manifest that disagrees, none at all); recipients and identities that are not age keys refused without showing a
secret; a large part streamed, never held whole. On the floors too (pyrage 1.2.1)."""

import io
import json
import os
import random
import resource
import stat
import tarfile

import pyrage
import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.recovery import archive

pytestmark = pytest.mark.floor

FACTS = {"cluster": {"name": "prod", "uid": "5d3f"}, "etcd": {"revision": 42}}


@pytest.fixture(scope="module")
def key():
    identity = pyrage.x25519.Identity.generate()
    return {"identity": str(identity), "recipient": str(identity.to_public())}


def _parts():
    return [archive.Part.of_bytes("etcd.snapshot", b"snapshot" * 1000),
            archive.Part.of_bytes("secrets.yaml", b"cluster: {id: x}\n"),
            archive.Part.of_bytes("machines/cp-1.yaml", b"version: v1alpha1\n")]


def _write(tmp_path, key, parts=None, facts=None):
    path = str(tmp_path / "prod-20261207T030405Z.tar.age")
    out = archive.write(path, archive.recipients([key["recipient"]]), parts or _parts(), facts or FACTS)
    return path, out


def _read(path, key, on_part=None):
    with open(path, "rb") as source:
        return archive.read(source, archive.identities(key["identity"]), on_part)


def test_an_archive_round_trips_with_its_manifest(tmp_path, key):
    path, out = _write(tmp_path, key)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and out["size"] == os.path.getsize(path)
    assert os.listdir(str(tmp_path)) == [os.path.basename(path)]  # no temporary file left
    seen = {}
    manifest = _read(path, key, lambda name, reader: seen.update({name: reader.read()}))
    assert manifest["cluster"] == FACTS["cluster"] and manifest["format"] == archive.FORMAT
    assert sorted(manifest["parts"]) == sorted(p.name for p in _parts())
    assert manifest["parts"]["secrets.yaml"] == {"size": 17, "sha256": out["parts"]["secrets.yaml"]}
    assert seen == dict((p.name, p.open().read()) for p in _parts())
    with open(path, "rb") as handle:
        raw = handle.read()
    assert raw.startswith(b"age-encryption.org/v1\n") and b"cluster: {id: x}" not in raw


def test_an_archive_is_a_plain_tar_once_decrypted(tmp_path, key):
    """What `age -d -i key.txt archive | tar x` gives (the reference age tool's run: the integration test)."""
    path, unused = _write(tmp_path, key)
    with open(path, "rb") as handle:
        plain = pyrage.decrypt(handle.read(), [pyrage.x25519.Identity.from_str(key["identity"])])
    with tarfile.open(fileobj=io.BytesIO(plain)) as tar:
        assert tar.getnames() == ["etcd.snapshot", "secrets.yaml", "machines/cp-1.yaml", archive.MANIFEST]
        assert json.loads(tar.extractfile(archive.MANIFEST).read())["etcd"] == {"revision": 42}


def _damaged(tmp_path, key, change):
    path, unused = _write(tmp_path, key)
    with open(path, "rb") as handle:
        data = bytearray(handle.read())
    with open(path, "wb") as handle:
        handle.write(change(data))
    with pytest.raises(archive.ArchiveError) as exc:
        _read(path, key)
    return str(exc.value)


@pytest.mark.parametrize("seed", range(8))
def test_a_truncated_or_altered_archive_is_refused(tmp_path, key, seed):
    rng = random.Random(seed)

    def cut(data):
        return data[:rng.randrange(1, len(data) - 1)]

    def flip(data):
        at = rng.randrange(len(data))
        data[at] ^= 1 << rng.randrange(8)
        return data

    for change in (cut, flip):
        message = _damaged(tmp_path, key, change)
        assert "\n" not in message and ("cannot be decrypted" in message or "not a whole backup" in message or
                                        "not an age" in message), message


def test_another_key_cannot_open_it(tmp_path, key):
    path, unused = _write(tmp_path, key)
    other = str(pyrage.x25519.Identity.generate())
    with open(path, "rb") as source:
        with pytest.raises(archive.ArchiveError) as exc:
            archive.read(source, archive.identities(other))
    assert str(exc.value).startswith("the archive cannot be decrypted with the identity given: a wrong key")
    assert other not in str(exc.value)


def _encrypted_tar(path, key, members):
    plain = io.BytesIO()
    with tarfile.open(fileobj=plain, mode="w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with open(path, "wb") as handle:
        handle.write(pyrage.encrypt(plain.getvalue(), [pyrage.x25519.Recipient.from_str(key["recipient"])]))


def test_a_manifest_that_disagrees_with_the_parts_is_refused(tmp_path, key):
    path = str(tmp_path / "a.tar.age")
    parts = {"etcd.snapshot": {"size": 3, "sha256": "0" * 64}, "record.json": {"size": 2, "sha256": "1" * 64}}
    manifest = {"format": archive.FORMAT, "parts": parts}
    _encrypted_tar(path, key, [("etcd.snapshot", b"abc"), ("extra.txt", b"x"),
                               (archive.MANIFEST, json.dumps(manifest).encode())])
    with pytest.raises(archive.ArchiveError) as exc:
        _read(path, key)
    assert str(exc.value) == ("the archive's parts disagree with its manifest: missing: record.json; not in the "
                              "manifest: extra.txt; sha256 differs: etcd.snapshot")


@pytest.mark.parametrize("members, message", [
    ([("etcd.snapshot", b"abc")], "the archive has no manifest.json: it is not a whole backup"),
    ([(archive.MANIFEST, b"{not json")], "the archive's manifest.json is not JSON"),
    ([(archive.MANIFEST, b'{"format": 99, "parts": {}}')],
     "the archive's manifest.json is not one this collection writes (format 1)"),
])
def test_an_archive_without_a_usable_manifest_is_refused(tmp_path, key, members, message):
    path = str(tmp_path / "a.tar.age")
    _encrypted_tar(path, key, members)
    with pytest.raises(archive.ArchiveError) as exc:
        _read(path, key)
    assert str(exc.value) == message


def test_recipients_and_identities_that_are_not_keys_are_one_line_and_show_no_secret(key):
    with pytest.raises(archive.ArchiveError) as exc:
        archive.recipients(["age1notakey"])
    assert str(exc.value) == "recipients: 'age1notakey' is not an age recipient (age1..., as age-keygen -y prints it)"
    with pytest.raises(archive.ArchiveError) as exc:
        archive.recipients([])
    assert "give at least one age recipient" in str(exc.value)
    with pytest.raises(archive.ArchiveError) as exc:  # an identity given where a recipient goes: never shown
        archive.recipients([key["identity"]])
    assert key["identity"] not in str(exc.value)
    broken = key["identity"][:-3] + "QQQ"
    for text in ("# a comment\n\n" + broken + "\n", "ssh-ed25519 AAAA\n"):
        with pytest.raises(archive.ArchiveError) as exc:
            archive.identities(text, "key.txt")
        assert str(exc.value).startswith("key.txt: line ") and broken not in str(exc.value)
    with pytest.raises(archive.ArchiveError) as exc:
        archive.identities("# nothing\n", "key.txt")
    assert str(exc.value) == "key.txt holds no age identity (AGE-SECRET-KEY-1...)"
    assert len(archive.identities("# created: now\n%s\n" % key["identity"])) == 1


def test_a_part_named_twice_or_as_the_manifest_is_refused(tmp_path, key):
    for parts in ([archive.Part.of_bytes("a", b"1"), archive.Part.of_bytes("a", b"2")],
                  [archive.Part.of_bytes(archive.MANIFEST, b"{}")]):
        with pytest.raises(archive.ArchiveError):
            _write(tmp_path, key, parts)
    assert os.listdir(str(tmp_path)) == []


def test_a_large_part_is_streamed_not_held(tmp_path, key):
    """256 MiB through the tar, the encryption and back: the process grows by far less than the part."""
    size = 256 << 20
    source = str(tmp_path / "big")
    with open(source, "wb") as handle:
        block = os.urandom(1 << 20)
        for unused in range(size >> 20):
            handle.write(block)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    path, out = _write(tmp_path, key, [archive.Part.of_file("etcd.snapshot", source)])
    sizes = []

    def count(name, reader):
        total = 0
        while True:
            chunk = reader.read(1 << 20)
            if not chunk:
                break
            total += len(chunk)
        sizes.append(total)

    manifest = _read(path, key, count)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024.0
    assert sizes == [size] and manifest["parts"]["etcd.snapshot"]["size"] == size
    assert grown_mib < 64, grown_mib
