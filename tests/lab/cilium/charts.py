"""The lab's real Cilium charts and CRDs, from the Cilium source module (see README.md).

``ensure(helm)`` fetches ``github.com/cilium/cilium`` at each version ``go.sum`` pins with
``go mod download`` (the go command refuses a zip that does not match go.sum; the zip's h1 hash
is checked here again before it is read), takes ``install/kubernetes/cilium`` from the module
zip, packages it with the lab's helm, and keeps the CRDs of ``pkg/k8s/apis/cilium.io/client/crds/v2``.
Results are cached under ``${XDG_CACHE_HOME:-~/.cache}/maesh-ichor/cilium`` (``MAESH_ICHOR_CILIUM``
overrides it) and reused while ``manifest.json`` names the same sums and recipe; a lock file makes
concurrent callers wait for one fetch. Charts are never committed.

The release set's Cilium is 1.20.4, which the module proxy does not serve: the lab's 1.20 chart is
1.20.2 packaged as 1.20.4 (version, appVersion and the chart's v1.20.2 image tags rewritten), with
annotations naming its real source. The templates and every other default are 1.20.2's.
"""

import base64
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
MODULE = "github.com/cilium/cilium"
CHART_DIR = "install/kubernetes/cilium/"
CRD_DIR = "pkg/k8s/apis/cilium.io/client/crds/v2/"
# Bump when what ensure() writes changes, so cached results are rebuilt.
RECIPE = "1"

# source version -> the version the lab packages it as (the set's 1.20.4 for the 1.20 stand-in)
PACKAGED_AS = {"v1.20.2": "1.20.4", "v1.19.5": "1.19.5", "v1.18.6": "1.18.6"}
ANNOTATION = "ichor.maesh.dev/lab-"


class ChartError(RuntimeError):
    pass


def cache_dir():
    return os.environ.get("MAESH_ICHOR_CILIUM") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "maesh-ichor", "cilium")


def pinned():
    """{source version: h1 sum of its module zip}, from go.sum."""
    sums = {}
    with open(os.path.join(HERE, "go.sum")) as handle:
        for line in handle:
            parts = line.split()
            if len(parts) == 3 and parts[0] == MODULE and not parts[1].endswith("/go.mod"):
                sums[parts[1]] = parts[2]
    missing = set(PACKAGED_AS) - set(sums)
    if missing:
        raise ChartError("go.sum pins no %s" % sorted(missing))
    return sums


def zip_hash(path):
    """The go command's h1 hash of a module zip (golang.org/x/mod/sumdb/dirhash.HashZip)."""
    summary = hashlib.sha256()
    with zipfile.ZipFile(path) as archive:
        for name in sorted(archive.namelist()):
            if name.endswith("/"):
                continue
            digest = hashlib.sha256(archive.read(name)).hexdigest()
            summary.update(("%s  %s\n" % (digest, name)).encode())
    return "h1:" + base64.b64encode(summary.digest()).decode()


def download(version, go="go"):
    """``go mod download`` of one pinned version, in a copy of this module (go.sum checked by go)."""
    env = dict(os.environ, GOFLAGS="-mod=readonly", GOTOOLCHAIN="local")
    with tempfile.TemporaryDirectory(prefix="cilium-gomod-") as work:
        for name in ("go.mod", "go.sum"):
            shutil.copy(os.path.join(HERE, name), os.path.join(work, name))
        try:
            proc = subprocess.run([go, "mod", "download", "-json", "%s@%s" % (MODULE, version)], cwd=work, env=env,
                                  capture_output=True, text=True, timeout=900, check=False)
        except OSError as exc:
            raise ChartError("go is needed to fetch the Cilium charts (%s)" % exc)
    try:
        info = json.loads(proc.stdout)
    except ValueError:
        info = {}
    if proc.returncode != 0 or info.get("Error") or not info.get("Zip"):
        raise ChartError("go mod download %s@%s failed (exit %d): %s %s" % (
            MODULE, version, proc.returncode, info.get("Error", ""), proc.stderr.strip()[-2000:]))
    return info


def _extract(archive, prefix, dest):
    count = 0
    for name in archive.namelist():
        if not name.startswith(prefix) or name.endswith("/"):
            continue
        target = os.path.join(dest, name[len(prefix):])
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as handle:
            handle.write(archive.read(name))
        count += 1
    if not count:
        raise ChartError("the module zip has nothing under %s" % prefix)


def _stand_in(chart, source, packaged_as, h1):
    """Rewrite the 1.20.2 chart's image tags to the set's version and name its real source in Chart.yaml."""
    values = os.path.join(chart, "values.yaml")
    text = open(values).read()
    old, new = 'tag: "%s"' % source, 'tag: "v%s"' % packaged_as
    if not text.count(old):
        raise ChartError("values.yaml of %s has no %s" % (source, old))
    with open(values, "w") as handle:
        handle.write(text.replace(old, new))
    meta = os.path.join(chart, "Chart.yaml")
    text = open(meta).read()
    lines = ["  %ssource: %s@%s %s" % (ANNOTATION, MODULE, source, CHART_DIR.rstrip("/")),
             "  %ssource-sum: \"%s\"" % (ANNOTATION, h1),
             "  %srewritten: version, appVersion and the %s image tags of values.yaml, to %s" % (
                 ANNOTATION, source, packaged_as)]
    text, found = re.subn(r"(?m)^annotations:\n", lambda m: m.group(0) + "\n".join(lines) + "\n", text, count=1)
    if not found:
        raise ChartError("Chart.yaml of %s has no annotations" % source)
    with open(meta, "w") as handle:
        handle.write(text)


def _package(helm, chart, dest, version):
    with tempfile.TemporaryDirectory(prefix="helm-home-") as home:
        env = dict(os.environ, HELM_CACHE_HOME=os.path.join(home, "c"), HELM_CONFIG_HOME=os.path.join(home, "f"),
                   HELM_DATA_HOME=os.path.join(home, "d"))
        proc = subprocess.run([helm, "package", chart, "-d", dest, "--version", version, "--app-version", version],
                              env=env, capture_output=True, text=True, timeout=300, check=False)
    path = os.path.join(dest, "cilium-%s.tgz" % version)
    if proc.returncode != 0 or not os.path.exists(path):
        raise ChartError("helm package %s failed: %s%s" % (chart, proc.stdout, proc.stderr))
    return path


def _build(helm, version, h1, out, go):
    info = download(version, go)
    if info.get("Sum") != h1:
        raise ChartError("%s@%s: go reports %s, go.sum pins %s" % (MODULE, version, info.get("Sum"), h1))
    if zip_hash(info["Zip"]) != h1:
        raise ChartError("%s: the zip's hash is not go.sum's %s" % (info["Zip"], h1))
    prefix = "%s@%s/" % (MODULE, version)
    packaged_as = PACKAGED_AS[version]
    crds = os.path.join(out, "crds-%s" % version)
    with tempfile.TemporaryDirectory(prefix="cilium-chart-") as work, zipfile.ZipFile(info["Zip"]) as archive:
        chart = os.path.join(work, "cilium")
        _extract(archive, prefix + CHART_DIR, chart)
        if packaged_as != version.lstrip("v"):
            _stand_in(chart, version, packaged_as, h1)
        tgz = _package(helm, chart, out, packaged_as)
        shutil.rmtree(crds, ignore_errors=True)
        _extract(archive, prefix + CRD_DIR, crds)
    for name in os.listdir(crds):
        if not name.endswith(".yaml"):
            os.remove(os.path.join(crds, name))
    return {"source": version, "sum": h1, "version": packaged_as, "chart": tgz, "crds": crds}


@contextlib.contextmanager
def _locked(directory):
    with open(os.path.join(directory, ".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _usable(entry):
    return entry and os.path.exists(entry.get("chart", "")) and os.path.isdir(entry.get("crds", ""))


def ensure(helm, go="go", stream=None):
    """{"1.20": entry, "1.19": entry, "1.18": entry}; each entry: source (the module version), sum (h1),
    version (the packaged chart's), chart (.tgz path), crds (directory of CRD YAML files), seconds
    (time spent fetching and packaging it now; 0 when cached)."""
    out = cache_dir()
    os.makedirs(out, exist_ok=True)
    sums = pinned()
    with _locked(out):
        manifest_path = os.path.join(out, "manifest.json")
        try:
            manifest = json.load(open(manifest_path))
        except (IOError, ValueError):
            manifest = {}
        result = {}
        for version in sorted(PACKAGED_AS):
            entry = manifest.get(version)
            if not (_usable(entry) and entry.get("sum") == sums[version] and entry.get("recipe") == RECIPE):
                if stream is not None:
                    stream.write("cilium charts: fetching %s@%s and packaging it\n" % (MODULE, version))
                    stream.flush()
                start = time.monotonic()
                entry = dict(_build(helm, version, sums[version], out, go), recipe=RECIPE)
                entry["seconds"] = round(time.monotonic() - start, 1)
                manifest[version] = entry
                with open(manifest_path + ".tmp", "w") as handle:
                    json.dump(manifest, handle, indent=2, sort_keys=True)
                os.replace(manifest_path + ".tmp", manifest_path)
            else:
                entry = dict(entry, seconds=0)
            result[".".join(entry["version"].split(".")[:2])] = entry
    return result


def crd_documents(entry):
    """The CRD files of one entry, sorted by name."""
    return [os.path.join(entry["crds"], name) for name in sorted(os.listdir(entry["crds"]))]
