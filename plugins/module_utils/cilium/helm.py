# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real helm binary, run with the run's kubeconfig, and the chart it is given.

The kubeconfig given as content, and every values file (values may hold secrets), are in-memory files
(common.keyfiles) that helm reads through ``/proc/self/fd/N``, closed when the ``Helm`` context ends; they never
reach a file system, even when the run is killed. helm's cache and the charts it pulls go to a private temporary
directory (``mkdtemp``: 0700) removed then too. helm's output is quoted in errors only after redaction.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile

try:
    import yaml
except ImportError:  # the module fails with missing_required_lib-like words when it needs it
    yaml = None

from ansible_collections.maesh.ichor.plugins.module_utils.common import keyfiles
from ansible_collections.maesh.ichor.plugins.module_utils.common import processes
from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.common import versions
from ansible_collections.maesh.ichor.plugins.module_utils.cilium.errors import CiliumError, HelmError
from ansible_collections.maesh.ichor.plugins.module_utils.common.redact import excerpt
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.kubeconfig import EMPTY as NO_KUBECONFIG

# take-ownership exists since 3.17 and works on custom resources since 3.18 (helm/helm#30622);
# Helm 4 applies server-side by default, which this collection does not drive yet.
MINIMUM = (3, 18, 0)
REPOSITORY = "https://helm.cilium.io"
CHART_NAME = "cilium"
MESSAGE_LIMIT = 600


def _run_process(argv, env, timeout, pass_fds=()):
    try:
        # helm ends with the task's worker (which ends with ansible-playbook): no release written by a dead run
        proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                              check=False, universal_newlines=True, pass_fds=pass_fds,
                              preexec_fn=processes.die_with_parent)
    except OSError as exc:
        raise CiliumError("cannot run %s: %s; install Helm %s or later 3.x, or set the option helm" % (
            argv[0], exc.strerror or exc, ".".join(str(p) for p in MINIMUM)))
    except subprocess.TimeoutExpired:
        raise HelmError("%s did not finish within %ss" % (" ".join(argv[:3]), timeout))
    return proc.returncode, proc.stdout, proc.stderr


class Helm:
    """``with Helm(...) as helm:`` one run's helm: its kubeconfig, its private directory, its calls.

    ``run_process(argv, env, timeout, pass_fds) -> (rc, stdout, stderr)`` is replaced by unit tests.
    """

    def __init__(self, binary="helm", kubeconfig=None, kubeconfig_content=None, kube_context=None, timeout=600,
                 run_process=None):
        self.binary = binary or "helm"
        self.kubeconfig = kubeconfig
        self.kubeconfig_content = kubeconfig_content
        self.kube_context = kube_context
        self.timeout = timeout
        self.run_process = run_process or _run_process
        self.dir = None
        self._kubeconfig_path = None
        self._files = None
        self._inherited = []

    def __enter__(self):
        if yaml is None:
            raise CiliumError("PyYAML is required to read helm's output (pip install pyyaml)")
        if self.kubeconfig_content is None and self.kubeconfig is not None and not self.kubeconfig:
            # named empty: helm would read KUBECONFIG, ~/.kube/config or a pod's own cluster instead
            raise CiliumError(NO_KUBECONFIG)
        self.dir = tempfile.mkdtemp(prefix="ichor-helm-")
        self._files = contextlib.ExitStack()
        self._inherited = []  # the in-memory files' descriptors: helm reads them by their /proc/self/fd paths
        if self.kubeconfig_content is not None:
            content = self.kubeconfig_content
            if not isinstance(content, str):
                content = yaml.safe_dump(content)
            self._kubeconfig_path = self.file("kubeconfig", content)
        elif self.kubeconfig:
            self._kubeconfig_path = os.path.expanduser(self.kubeconfig)
        return self

    def __exit__(self, *exc):
        if self._files:
            self._files.close()
            self._files = None
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def env(self):
        env = dict(os.environ)
        env["HELM_CACHE_HOME"] = os.path.join(self.dir, "cache")
        if self._kubeconfig_path:
            env["KUBECONFIG"] = self._kubeconfig_path
        return env

    def file(self, name, data):
        """The path of an in-memory file holding ``data`` (values may hold secrets), until the context ends; JSON is
        YAML to helm."""
        text = data if isinstance(data, str) else json.dumps(data, sort_keys=True)
        path = self._files.enter_context(keyfiles.reading(text, "helm-" + name))
        if keyfiles.descriptor(path) is not None:
            self._inherited.append(keyfiles.descriptor(path))
        return path

    def run(self, *args, **kwargs):
        """helm ARGS; stdout. A non-zero exit raises HelmError with its last lines."""
        argv = [self.binary] + [str(a) for a in args]
        if kwargs.get("cluster") and self.kube_context:
            argv += ["--kube-context", self.kube_context]
        rc, out, err = self.run_process(argv, self.env(), kwargs.get("timeout") or self.timeout,
                                        pass_fds=tuple(self._inherited))
        if rc != 0:
            said = excerpt(" ".join((err or out or "").strip().splitlines()[-5:]), MESSAGE_LIMIT)
            raise HelmError("helm %s failed (exit %s): %s" % (args[0] if args else "", rc, said))
        return out

    def version(self):
        """The helm version (a tuple), refused below MINIMUM or at 4 and later."""
        text = self.run("version", "--template", "{{.Version}}").strip()
        stated = versions.read(text)
        if not (stated and stated.patch_written):
            raise CiliumError("helm reports version %r, which is not vX.Y.Z" % text)
        found = stated.numbers
        if found < MINIMUM or found[0] != 3:
            raise CiliumError("helm %s is not supported: use Helm %s or a later 3.x" % (
                text, ".".join(str(p) for p in MINIMUM)))
        return found

    # -- the chart --------------------------------------------------------------------------
    def resolve_chart(self, chart=None, digest=None, repository=None):
        """A local chart (directory or .tgz) at the release set's Cilium, and its Chart.yaml.

        ``chart``: a directory, a .tgz, an ``oci://`` reference, or None for the chart repository ``repository``
        (the Cilium Helm repository by default, or a mirror of it); remote charts are pulled at the set's version
        into the private directory. ``digest`` ("sha256:<hex>") is checked against the .tgz. A chart of any other
        version is refused: the release set pins it (no override).
        """
        if chart and not chart.startswith("oci://"):
            path = os.path.expanduser(chart)
            if not os.path.exists(path):
                raise CiliumError("the chart %s does not exist" % chart)
            if digest and os.path.isdir(path):
                raise CiliumError("chart_digest applies to a packaged chart (.tgz or remote), not to the directory %s" % chart)
        else:
            dest = tempfile.mkdtemp(prefix="chart-", dir=self.dir)
            repository = repository or REPOSITORY
            if chart:
                self.run("pull", chart, "--version", release.CILIUM, "-d", dest)
            else:
                self.run("pull", CHART_NAME, "--repo", repository, "--version", release.CILIUM, "-d", dest)
            pulled = [name for name in os.listdir(dest) if name.endswith(".tgz")]
            if len(pulled) != 1:
                raise CiliumError("helm pull of %s left %s" % (chart or repository, pulled or "no chart"))
            path = os.path.join(dest, pulled[0])
        if digest:
            check_digest(path, digest)
        meta = yaml.safe_load(self.run("show", "chart", path)) or {}
        if meta.get("name") != CHART_NAME:
            raise CiliumError("the chart %s is %r, not the Cilium chart" % (chart or repository or REPOSITORY, meta.get("name")))
        if str(meta.get("version")) != release.CILIUM:
            raise CiliumError("the chart %s is Cilium %s; this collection's release set pins Cilium %s (no override)" % (
                chart or repository or REPOSITORY, meta.get("version"), release.CILIUM))
        return path, meta

    def template(self, chart, release_name, namespace, values, kube_version, api_versions=()):
        """``helm template`` (client-only: ``lookup`` finds nothing, generated certificates are new)."""
        args = ["template", release_name, chart, "--namespace", namespace, "--kube-version", kube_version,
                "-f", self.file("values.json", values)]
        if api_versions:
            args += ["--api-versions", ",".join(sorted(api_versions))]
        return self.run(*args)

    def upgrade_install(self, chart, release_name, namespace, values):
        """``helm upgrade --install --take-ownership``: adopts the live objects whoever made them. Never ``--atomic``
        (a failed first install would uninstall the running CNI) and no ``--wait`` (the caller waits)."""
        return self.run("upgrade", "--install", release_name, chart, "--namespace", namespace, "--create-namespace",
                        "--take-ownership", "--description", "maesh.ichor cilium_takeover",
                        "-f", self.file("values.json", values), cluster=True)


def check_digest(path, digest):
    algorithm, want = ((digest or "").split(":", 1) + [""])[:2]
    if algorithm != "sha256" or not re.match(r"^[0-9a-f]{64}$", want):
        raise CiliumError("chart_digest %r is not sha256:<64 hex digits>" % digest)
    with open(path, "rb") as handle:
        got = hashlib.sha256(handle.read()).hexdigest()
    if got != want:
        raise CiliumError("the chart %s has digest sha256:%s, not %s" % (os.path.basename(path), got, digest))


def documents(manifest):
    """The objects of a rendered manifest (empty documents and hooks' separators dropped)."""
    return [doc for doc in yaml.safe_load_all(manifest) if isinstance(doc, dict) and doc.get("kind")]
