"""A lab simulator as a subprocess (``python -m tests.lab up``): ``LabProcess``. No pytest here, so
the demo can use it; the pytest fixtures are in ``fixtures``."""


import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time


from tests import collection_path, versions

from .control import LabControl

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_counter = itertools.count()


def _next_index(machines=0):
    """Distinct per process (pytest-xdist workers) and per lab: 100..50099; a lab of more machines than one /24 holds
    gets one of the indexes below 100 that may grow beyond it (talos_sim/lab.py, BIG_INDEXES)."""
    from .talos_sim import lab as simlab
    if machines > simlab.HOSTS:
        big = simlab.BIG_INDEXES
        return big[(os.getpid() * 13 + next(_counter) * 7) % len(big)]
    return 100 + (os.getpid() * 131 + next(_counter) * 7) % 50000


class LabStartError(RuntimeError):
    pass


class LabProcess:
    """A lab simulator running as a subprocess (``python -m tests.lab up``)."""

    def __init__(self, workdir, controlplanes=3, workers=2, version="v1.14.1", kubernetes_version=versions.KUBERNETES,
                 mode="configured", ca="ed25519", latency_ms=0, overrides=(), additions=(),
                 mixed_versions=False, extra_maintenance=False, bootstrapped=True,
                 reboot_seconds=0.3, upgrade_seconds=0.5, install_seconds=0.2, name="lab",
                 kubeconfig_server=None, index=None, case=None, max_streams=None):
        self.workdir = os.path.abspath(workdir)
        self.lab_json = os.path.join(self.workdir, "lab.json")
        self.talosconfig = os.path.join(self.workdir, "talosconfig")
        self.stderr_path = os.path.join(self.workdir, "simulator.stderr")
        self.context = name
        self.index = index
        self.size = controlplanes + workers + len(additions) + (2 if extra_maintenance else 0)
        self.proc = None
        self.control = None
        self._args = ["--controlplanes", str(controlplanes), "--workers", str(workers),
                      "--talos-version", version, "--kubernetes-version", kubernetes_version,
                      "--mode", mode, "--ca", ca,
                      "--latency-ms", str(int(latency_ms or 0)), "--name", name,
                      "--reboot-seconds", str(reboot_seconds),
                      "--upgrade-seconds", str(upgrade_seconds),
                      "--install-seconds", str(install_seconds)]
        for o in overrides:
            if isinstance(o, dict):
                o = dict(o)
                o = "%s:%s" % (o.pop("name"), ",".join("%s=%s" % kv for kv in o.items()))
            self._args += ["--set", o]
        for a in additions:
            if isinstance(a, dict):
                a = ",".join("%s=%s" % kv for kv in a.items())
            self._args += ["--add", a]
        if mixed_versions:
            self._args.append("--mixed-versions")
        if extra_maintenance:
            self._args.append("--extra-maintenance")
        if not bootstrapped:
            self._args.append("--no-bootstrap")
        if kubeconfig_server:
            self._args += ["--kubeconfig-server", kubeconfig_server]
        if max_streams is not None:
            self._args += ["--max-streams", str(int(max_streams))]
        self.case = None
        if case:
            # resolved here: the simulator runs from the checkout root, not the test's cwd
            from .talos_sim.config import find_case_dir
            self.case = find_case_dir(str(case))
            self._args += ["--case", self.case]
        else:
            self._args.append("--generated")  # the tests' own machines, not the CLI's default case

    # --- process -----------------------------------------------------------------------
    def start(self, timeout=30.0, attempts=4):
        last = None
        for _attempt in range(attempts):
            index = self.index if self.index is not None else _next_index(self.size)
            try:
                self._start_once(index, timeout)
                self.index = index
                return self
            except LabStartError as exc:
                last = exc
                self.stop()
                if self.index is not None or "address already in use" not in str(exc):
                    raise
        raise last

    def _start_once(self, index, timeout):
        os.makedirs(self.workdir, exist_ok=True)
        for f in (self.lab_json,):
            if os.path.exists(f):
                os.unlink(f)
        env = dict(os.environ)
        root = collection_path.collections_root()
        env["PYTHONPATH"] = os.pathsep.join([root, REPO] + (
            [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        cmd = [sys.executable, "-m", "tests.lab", "up", "--workdir", self.workdir,
               "--index", str(index)] + self._args
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                                     stderr=self._stderr, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise LabStartError("lab simulator exited with %s:\n%s"
                                    % (self.proc.returncode, self.stderr()))
            if os.path.exists(self.lab_json):
                try:
                    with open(self.lab_json) as fh:
                        data = json.load(fh)
                except ValueError:
                    data = None
                if data and all(_port_open(m["address"]) for m in _probed(data["machines"])):
                    self.control = LabControl(data["control"])
                    return
            time.sleep(0.05)
        raise LabStartError("lab simulator not ready after %.0fs:\n%s" % (timeout, self.stderr()))

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if getattr(self, "_stderr", None) is not None:
            self._stderr.close()
            self._stderr = None

    def stderr(self):
        try:
            with open(self.stderr_path, "rb") as fh:
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    # --- state -------------------------------------------------------------------------
    def state(self, full=False, brief=False):
        return self.control.state(full=full, brief=brief)

    @property
    def machines(self):
        return self.state()["machines"]

    def machine(self, name):
        for m in self.machines:
            if m["name"] == name:
                return m
        raise KeyError(name)

    def _brief(self, name):
        for m in self.state(brief=True)["machines"]:
            if m["name"] == name:
                return m
        raise KeyError(name)

    def address(self, name):
        return self._brief(name)["address"]

    def node_name(self, name):
        """The Node the machine's kubelet registers (Talos's Nodename: its hostname, lowercased), not the lab's name."""
        return self._brief(name)["hostname"].lower()

    def label(self, name):
        """How a plan names the machine: its name, its address and the Node Talos reports for it."""
        return "%s (%s, Node %s)" % (name, self.address(name), self.node_name(name))

    @property
    def ca_pem(self):
        with open(os.path.join(self.workdir, "ca.crt"), "rb") as fh:
            return fh.read()

    @property
    def ca_key_pem(self):
        with open(os.path.join(self.workdir, "ca.key"), "rb") as fh:
            return fh.read()

    def ssl(self, context=None):
        """Client ssl context from the talosconfig (default context = os:admin;
        ``"<context>-reader"`` = os:reader)."""
        from .rawclient import ssl_from_talosconfig
        return ssl_from_talosconfig(self.talosconfig, context)

    def wait_for(self, name, predicate, timeout=30.0):
        return self.control.wait_for(name, predicate, timeout=timeout)


def _probed(machines, most=64):
    """The machines whose port the start checks: every machine up, or of a lab of more, ``most`` of them evenly spread
    from the first to the last. The simulator writes lab.json once every machine listens; each probe costs it a TLS
    connection it accepts and drops (asyncio gives each a 256 KiB buffer: a thousand, 250 MiB of peak RSS)."""
    up = [m for m in machines if m["up"]]
    if len(up) <= most:
        return up
    return [up[i] for i in sorted(set(round(k * (len(up) - 1) / (most - 1)) for k in range(most)))]


def _port_open(address, port=50000):
    try:
        with socket.create_connection((address, port), timeout=0.5):
            return True
    except OSError:
        return False
