# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``cluster_backup`` module's flow: one backup of a managed cluster as one archive (archive.py) in a local
directory, then the older archives its retention policy lets go pruned.

1. Read the cluster record and the secrets bundle Secret (a cluster the collection does not manage is refused), and
   choose the control plane whose etcd member is snapshotted: the one named, else the first that answers healthy as
   a voting member (never a learner, never one etcd reports errors on).
2. Plan: the member, the archive's name, each archive the policy would prune (check mode stops here).
3. Stream the snapshot into a file without a name (gone with the process, even a killed one), read its revision,
   hash and key count with ``etcdutl snapshot status``, read every machine's live config, and write the archive:
   the snapshot, the bundle, the record and the configs, and the manifest, encrypted to the recipients; nothing
   unencrypted reaches the destination or any file with a name.
4. Prune what the policy lets go (the newest archive a drill verified is always kept).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import datetime
import json
import os
import shutil
import subprocess
import tempfile

from ansible_collections.maesh.ichor.plugins.module_utils.common import files
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.config import bundle_secret
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from ansible_collections.maesh.ichor.plugins.module_utils.machine import etcd_snapshot
from ansible_collections.maesh.ichor.plugins.module_utils.recovery import archive, retention
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, etcd, machine
from ansible_collections.maesh.ichor.plugins.module_utils.talos import resources as res

SNAPSHOT = "etcd.snapshot"
BUNDLE = "secrets.yaml"
RECORD = "record.json"
# a drill writes its result beside the archive it restored: <archive>.drill.json, {"result": "verified" | "failed"}
DRILL_SUFFIX = ".drill.json"


class BackupError(IchorError):
    """A backup that was refused or could not be taken."""


def _snapshot_member(client, controlplanes, named):
    """(machine, why) of the control plane to snapshot: ``named`` when it qualifies, else the first that does."""
    candidates = [m for m in controlplanes if named in (None, m["name"], m["node"])]
    if not candidates:
        raise BackupError("node: %s is not one of the control planes given (%s)" % (
            named, ", ".join(m["name"] for m in controlplanes) or "none"))
    refused = []
    for m in candidates:
        healthy, detail = etcd.health(client, m["node"])
        if not healthy:
            refused.append("%s: %s" % (m["name"], detail))
            continue
        try:
            status = client.call("EtcdStatus", node=m["node"]).messages[0].member_status
        except errors.TalosError as exc:
            refused.append("%s: %s" % (m["name"], exc))
            continue
        if status.is_learner:
            refused.append("%s: its etcd member is a learner (it does not hold the whole database yet)" % m["name"])
            continue
        return m, detail
    raise BackupError("no etcd snapshot taken: no control plane qualifies: %s" % "; ".join(refused))


def _verified(directory, names):
    """The archives among ``names`` whose drill result beside them says verified."""
    out = []
    for name in names:
        try:
            with open(os.path.join(directory, name + DRILL_SUFFIX)) as handle:
                if json.load(handle).get("result") == "verified":
                    out.append(name)
        except (OSError, ValueError, AttributeError):
            continue
    return out


def etcdutl_binary(etcdutl):
    """The etcdutl binary's path; BackupError naming what to install when it is missing (checked before anything is
    taken, in check mode too)."""
    binary = shutil.which(etcdutl) if etcdutl else None
    if binary is None:
        raise BackupError("etcdutl was not found (%s): the manifest records the snapshot's revision, hash and key "
                          "count as etcd reads them; install etcdutl (the execution environment carries it) or give "
                          "its path as etcdutl" % (etcdutl or "not given"))
    return binary


def snapshot_status(binary, snapshot):
    """``etcdutl snapshot status`` (``binary``) of the open file ``snapshot`` (handed to etcdutl as /dev/fd/N: it has
    no name) as {hash, revision, total_key, total_size}; BackupError with what etcdutl said when it cannot read it."""
    fd = snapshot.fileno()
    proc = subprocess.run([binary, "snapshot", "status", "/dev/fd/%d" % fd, "-w", "json"], capture_output=True,
                          text=True, check=False, timeout=600, pass_fds=(fd,))
    try:
        status = json.loads(proc.stdout) if proc.returncode == 0 else None
    except ValueError:
        status = None
    if not isinstance(status, dict):
        said = (proc.stderr or proc.stdout).strip().splitlines()
        raise BackupError("etcdutl cannot read the etcd snapshot: %s" % (said[-1] if said else "no output"))
    return {"hash": status.get("hash"), "revision": status.get("revision"), "total_key": status.get("totalKey"),
            "total_size": status.get("totalSize")}


def _from_start(handle):
    """A reader of the open file ``handle`` from its first byte (its own descriptor: closing it leaves ``handle``)."""
    reader = os.fdopen(os.dup(handle.fileno()), "rb")
    reader.seek(0)
    return reader


@contextlib.contextmanager
def _unnamed_file():
    """A new 0600 file with no name: made in a 0700 directory, then its name and the directory removed at once, before
    anything is written. The plaintext snapshot lives in it; the kernel frees it when the file is closed or the
    process ends, killed included, so it never outlives the task."""
    scratch = tempfile.mkdtemp(prefix="ichor-backup-")
    try:
        fd, path = tempfile.mkstemp(dir=scratch)
        os.unlink(path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    with os.fdopen(fd, "w+b") as handle:
        yield handle


def _configs(client, machines):
    """{name: the live machine config's text} of every machine (secrets: only ever inside the archive)."""
    out, missing = {}, []
    results = client.fan_out(lambda node: machine.get_resource(client, res.MACHINE_CONFIG, node),
                             [m["node"] for m in machines])
    for m in machines:
        answer = results[m["node"]]
        spec = (answer.message or {}).get("spec") if answer.error is None else None
        if not isinstance(spec, str):
            missing.append("%s: %s" % (m["name"], answer.error or "it has no machine config"))
        else:
            out[m["name"]] = spec
    if missing:
        raise BackupError("the live machine config of every machine goes in the backup; not read: %s" % (
            "; ".join(missing)))
    return out


def _cluster(kube, record):
    cluster = record.get("cluster") or {}
    name = cluster.get("name") or ""
    if not name or not (record.get("talos") or record.get("kubernetes")):
        raise BackupError("no cluster record: back up a cluster the collection manages (adopt or init it first)")
    namespace = kube.get("v1", "Namespace", "kube-system") or {}
    return {"name": name, "id": cluster.get("id") or "", "uid": (namespace.get("metadata") or {}).get("uid") or ""}


def run(params, conn, check_mode, now=None):
    """The ``cluster_backup`` module; the result dict (BackupError: the line, with the plan so far)."""
    plan = []
    result = dict(changed=False, plan=plan)
    try:
        return _run(params, conn, check_mode, now, result)
    except IchorError as exc:
        if exc.result is None:
            exc.result = result
        raise


def _run(params, conn, check_mode, now, result):
    plan = result["plan"]
    keys = archive.recipients(params["recipients"])
    rules = retention.policy(params["retention"])
    etcdutl = etcdutl_binary(params.get("etcdutl"))
    directory = os.path.abspath(os.path.expanduser(params["directory"]))
    files.private_directory(os.path.join(directory, "archive"))  # made 0700 when missing; refused when others write
    kube = conn.kube()
    record = cluster_record.read(kube)
    cluster = _cluster(kube, record)
    bundle = bundle_secret.stored_bundle(kube.get("v1", "Secret", bundle_secret.BUNDLE_SECRET,
                                                  cluster_record.NAMESPACE))
    if bundle is None:
        where = "%s/%s" % (cluster_record.NAMESPACE, bundle_secret.BUNDLE_SECRET)
        raise BackupError("the secrets bundle Secret %s holds no bundle: a backup without it cannot rebuild a "
                          "machine; run adopt (or init) again to store it" % where)
    machines = params["machines"]
    controlplanes = [m for m in machines if m.get("role") == "controlplane"]
    client = conn.talos()
    source, detail = _snapshot_member(client, controlplanes, params.get("node"))
    at = now or datetime.datetime.now(datetime.timezone.utc)
    name = retention.archive_name(cluster["name"], at)
    existing = sorted(n for n in os.listdir(directory) if (retention.parse_name(n) or ("",))[0] == cluster["name"])
    unused_kept, prune = retention.select(existing + [name], rules, _verified(directory, existing))
    plan.append("etcd snapshot of %s (%s; %s)" % (source["name"], source["node"], detail))
    plan.append("archive %s in %s: the snapshot, the secrets bundle, the cluster record and the live config of %d "
                "machines, encrypted to %d age recipient(s)" % (name, directory, len(machines), len(keys)))
    plan.extend("prune %s (retention: %s)" % (n, ", ".join("%s %d" % kv for kv in sorted(rules.items()) if kv[1]))
                for n in prune)
    result.update(archive=os.path.join(directory, name), node=source["name"], pruned=prune)
    if check_mode:
        result["changed"] = True
        return result
    with _unnamed_file() as snapshot:
        size, digest = etcd_snapshot.stream_into(client, source["node"], snapshot)
        snapshot.flush()
        status = snapshot_status(etcdutl, snapshot)
        configs = _configs(client, machines)
        parts = [archive.Part(SNAPSHOT, size, lambda: _from_start(snapshot)),
                 archive.Part.of_bytes(BUNDLE, bundle.to_yaml().encode("utf-8")),
                 archive.Part.of_bytes(RECORD, json.dumps(record.data, indent=2, sort_keys=True).encode("utf-8"))]
        parts += [archive.Part.of_bytes("machines/%s.yaml" % n, configs[n].encode("utf-8")) for n in sorted(configs)]
        facts = {"cluster": cluster, "time": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                 "etcd": dict(status, member=source["name"], node=source["node"], sha256=digest),
                 "talos": record.get("talos"), "kubernetes": record.get("kubernetes"),
                 "contract": record.get("contract"), "machines": sorted(configs)}
        written = archive.write(os.path.join(directory, name), keys, parts, facts)
    result.update(changed=True, size=written["size"], sha256=written["sha256"], manifest=dict(
        facts, parts=dict((n, {"sha256": sha}) for n, sha in written["parts"].items())))
    plan.append("written %s (%d bytes, sha256 %s); etcd revision %s, %s keys" % (
        name, written["size"], written["sha256"], status["revision"], status["total_key"]))
    for old in prune:
        for path in (os.path.join(directory, old), os.path.join(directory, old + DRILL_SUFFIX)):
            if os.path.exists(path):
                os.unlink(path)
        plan.append("pruned %s" % old)
    return result
