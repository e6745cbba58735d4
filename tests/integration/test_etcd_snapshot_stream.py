"""A real etcd snapshot, streamed. The lab's etcd (grpc-go, built from etcd's Go module) is filled with
MAESH_ICHOR_SNAPSHOT_MIB MiB (256 by default; a maintainer runs 2048 before a release, and its figure goes in the
README), its snapshot streamed by our transport from Maintenance/Snapshot into a file as it arrives, and etcd's own
``etcdutl snapshot status`` reads it. A simulated control plane then serves that snapshot through
MachineService/EtcdSnapshot and the etcd_snapshot module, in a process of its own, writes it to its 0600 file as the
bytes arrive: the same bytes, read again by etcdutl, with the process's peak memory under 100 MB."""

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import time

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.talos import transport, wire
from tests.integration.test_wire_grpc_go import etcd_over_tls, field, fields
from tests.lab.kube.cluster import binaries

pytestmark = pytest.mark.lab

SIZE_MIB = int(os.environ.get("MAESH_ICHOR_SNAPSHOT_MIB", "256"))
PEAK_MB = 100
VALUE = 1 << 20  # one put: 1 MiB (etcd takes requests up to 1.5 MiB)


def _print_figure(**figure):
    sys.stdout.write("\nFIGURE %s\n" % json.dumps(figure, sort_keys=True))


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    """(path, seconds) of a snapshot of an etcd holding SIZE_MIB MiB, streamed by our transport from grpc-go."""
    work = str(tmp_path_factory.mktemp("etcd-snapshot"))
    with etcd_over_tls(work, "--quota-backend-bytes", str(8 << 30), "--unsafe-no-fsync",
                       "--max-request-bytes", str(2 * VALUE)) as (port, context):
        path = os.path.join(work, "grpc-go.db")
        seconds = asyncio.run(_fill_and_stream(port, context, path))
    _print_figure(what="snapshot streamed from grpc-go (etcd's Maintenance/Snapshot)", mib=SIZE_MIB,
                  seconds=round(seconds, 1))
    return path, seconds


async def _fill_and_stream(port, context, path):
    channel = wire.Channel("127.0.0.1", port, transport.client_context(context.credentials))
    try:
        block = os.urandom(VALUE)
        limit = asyncio.Semaphore(8)

        async def put(index):
            async with limit:
                value = block[index % VALUE:] + block[:index % VALUE]  # each value its own
                await channel.call("/etcdserverpb.KV/Put", field(1, b"snap/%06d" % index) + field(2, value), timeout=60)
        await asyncio.gather(*[put(index) for index in range(SIZE_MIB)])
        started = time.monotonic()
        call = await channel.start("/etcdserverpb.Maintenance/Snapshot", b"")
        try:
            with open(path, "wb") as handle:
                while True:
                    message = await asyncio.wait_for(call.next(), 30)  # between messages, not over the whole
                    if message is None:
                        break
                    blob = dict(fields(message)).get(3, b"")  # SnapshotResponse.blob
                    handle.write(blob)
        finally:
            call.cancel()
        return time.monotonic() - started
    finally:
        channel.close()


def _status(path):
    """etcdutl snapshot status, as JSON."""
    etcdutl = binaries(names=("etcdutl",))["etcdutl"]
    proc = subprocess.run([etcdutl, "snapshot", "status", path, "-w", "json"], capture_output=True, text=True, check=False,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def test_a_snapshot_streamed_from_grpc_go_is_one_etcdutl_reads(snapshot):
    path, _seconds = snapshot
    status = _status(path)
    assert status["totalKey"] >= SIZE_MIB and status["totalSize"] >= SIZE_MIB << 20, status


# The module's flow in a process of its own with only what it needs (the Talos client; an Ansible worker holds the
# Kubernetes client and ansible-core besides): its peak memory, and the same process's before the snapshot.
_MODULE = r'''
import json, sys
from ansible_collections.maesh.ichor.plugins.module_utils.machine import etcd_snapshot
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client, talosconfig
params = json.loads(sys.argv[1])


class Connections:
    def __init__(self):
        self.opened = []

    def talos(self):
        context = talosconfig.load(path=params["talosconfig"])
        self.opened.append(client.TalosClient(context=context, timeout=params["timeout"]))
        return self.opened[-1]


def peak_mb():  # this program's high-water mark (ru_maxrss would carry the forking test runner's over exec)
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024.0


conn = Connections()
conn.talos().call("Version", node=params["node"])  # every import and the connection made: the baseline
baseline = peak_mb()
try:
    result = etcd_snapshot.run(params, conn, False)
finally:
    for opened in conn.opened:
        opened.close()
print(json.dumps(dict(result, peak_mb=peak_mb(), baseline_mb=baseline)))
'''


def test_etcd_snapshot_streams_a_real_snapshot_into_its_file_within_100_mb(snapshot, talos_lab, tmp_path):
    source, _seconds = snapshot
    lab = talos_lab(controlplanes=1, workers=0, version="v1.14.1", mode="configured", ca="ed25519")
    cp = lab.machines[0]
    lab.control.set_faults(cp["name"], etcd_snapshot_file=source)
    target = tmp_path / "backups" / "etcd.db"
    params = dict(talosconfig=lab.talosconfig, timeout=30.0, node=cp["address"], path=str(target))
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", _MODULE, json.dumps(params)], capture_output=True, text=True,
                          timeout=1800, check=False, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    seconds = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    _print_figure(what="etcd_snapshot module (through the simulated machine)", mib=SIZE_MIB, seconds=round(seconds, 1),
                  peak_mb=round(result["peak_mb"], 1), baseline_mb=round(result["baseline_mb"], 1))
    assert result["size"] == os.path.getsize(source) and result["sha256"] == _sha256(source) == _sha256(str(target))
    assert oct(os.stat(target).st_mode & 0o777) == "0o600"
    assert _status(str(target))["totalKey"] >= SIZE_MIB
    assert result["peak_mb"] < PEAK_MB, result["peak_mb"]
