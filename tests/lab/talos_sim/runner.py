"""Build and run a lab in this process (``python -m tests.lab up``)."""

import asyncio
import logging
import os
import random
import signal

from .. import pki
from . import state as st
from .control import ControlServer
from . import lab as simlab
from .lab import Lab

log = logging.getLogger("talos_sim")

V112 = "v1.12.11"
V113 = "v1.13.9"


def _parse_kv(spec):
    out = {}
    for part in spec.split(","):
        if not part.strip():
            continue
        k, _sep, v = part.partition("=")
        out[k.strip()] = v.strip()
    return out


def plan_machines(controlplanes=3, workers=2, version="v1.14.1", mode=st.CONFIGURED,
                  mixed_versions=False, extra_maintenance=False, overrides=(), additions=()):
    """List of dicts {name, role, version, mode} in start order."""
    plan = []
    for i in range(controlplanes):
        plan.append({"name": "cp-%d" % (i + 1), "role": "controlplane", "version": version,
                     "mode": mode})
    for i in range(workers):
        plan.append({"name": "worker-%d" % (i + 1), "role": "worker", "version": version,
                     "mode": mode})
    if mixed_versions:
        tail = [p for p in plan if p["role"] == "worker"] or plan[1:] or plan
        if tail:
            tail[0]["version"] = V112
        if len(tail) > 1:
            tail[1]["version"] = V113
    if extra_maintenance:
        plan.append({"name": "m-112", "role": "worker", "version": V112,
                     "mode": st.MAINTENANCE})
        plan.append({"name": "m-114", "role": "worker", "version": version,
                     "mode": st.MAINTENANCE})
    by_name = {p["name"]: p for p in plan}
    for spec in overrides:
        if isinstance(spec, str):
            name, _sep, rest = spec.partition(":")
            kv = _parse_kv(rest)
        else:
            kv = dict(spec)
            name = kv.pop("name")
        if name not in by_name:
            raise ValueError("override for unknown machine %r" % name)
        by_name[name].update(kv)
    for spec in additions:
        kv = _parse_kv(spec) if isinstance(spec, str) else dict(spec)
        if "name" not in kv:
            raise ValueError("an added machine needs a name")
        kv.setdefault("role", "worker")
        kv.setdefault("version", version)
        kv.setdefault("mode", mode)
        if kv["name"] in by_name:
            raise ValueError("duplicate machine %r" % kv["name"])
        plan.append(kv)
        by_name[kv["name"]] = kv
    for p in plan:
        st.parse_version(p["version"])
        if p["role"] not in ("controlplane", "worker"):
            raise ValueError("bad role %r" % p["role"])
        if p["mode"] not in (st.CONFIGURED, st.MAINTENANCE):
            raise ValueError("bad mode %r" % p["mode"])
    return plan


def build_lab(workdir, plan, index=0, ca=pki.ED25519, latency_ms=0, bootstrapped=True,
              reboot_seconds=None, upgrade_seconds=None, install_seconds=None, name="lab",
              kubeconfig_server=None, case=None):
    """``case``: a fixture case directory; configured machines start from its configs (see Lab)."""
    if len(plan) > simlab.capacity(index):
        raise ValueError("lab index %d holds at most %d machines, not %d (indexes below %d hold up to %d)" % (
            index, simlab.capacity(index), len(plan), simlab.EXTENDED_INDEXES, simlab.capacity(0)))
    lab = Lab(workdir, index=index, name=name, ca_algorithm=ca, case=case)
    if reboot_seconds is not None:
        lab.default_timing["reboot_seconds"] = float(reboot_seconds)
    if upgrade_seconds is not None:
        lab.default_timing["upgrade_seconds"] = float(upgrade_seconds)
    if install_seconds is not None:
        lab.default_timing["install_seconds"] = float(install_seconds)
    lab.default_latency_ms = int(latency_ms or 0)
    if kubeconfig_server:
        lab.settings["kubeconfig_server"] = kubeconfig_server
    cps = [p for p in plan if p["role"] == "controlplane"]
    endpoint = lab.address(plan.index(cps[0]) + 1) if cps else None
    for i, p in enumerate(plan):
        # install_image: the installer it was installed from ("none": its config names none); extensions: names of
        # extensions installed some other way, "+" between them
        extensions = p.get("extensions") or ()
        lab.add_machine(p["name"], p["role"], p["version"], p["mode"],
                        address=p.get("address") or lab.address(i + 1), endpoint=endpoint,
                        kubernetes=p.get("kubernetes"), install_image=p.get("install_image"),
                        extensions=extensions.split("+") if isinstance(extensions, str) else list(extensions))
    if bootstrapped:
        lab.bootstrap_all()
    return lab


async def serve(lab, ready_cb=None, stop_event=None):
    control = ControlServer(lab)
    await control.start()
    try:
        await lab.start()
    except Exception:
        await lab.stop()
        await control.stop()
        raise
    lab.changed()
    if ready_cb:
        ready_cb(lab)
    stop_event = stop_event or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop_event.set)
        except (NotImplementedError, RuntimeError):  # pragma: no cover
            pass
    await stop_event.wait()
    log.info("stopping lab")
    await lab.stop()
    await control.stop()


def auto_index(machines=0):
    """A lab index for a lab of ``machines`` machines: 1000 .. 30999 for one /24's worth, else one of
    lab.BIG_INDEXES (the indexes that may grow beyond one /24; see lab.subnet_for_index)."""
    if machines > simlab.HOSTS:
        return random.choice(simlab.BIG_INDEXES)
    return 1000 + (os.getpid() * 7 + random.randrange(1000)) % 30000
