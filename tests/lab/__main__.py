"""``python -m tests.lab up --workdir DIR ...``: start a simulated Talos lab and run until signalled.

Examples::

    python -m tests.lab up --workdir /tmp/lab     # 3 + 2 machines from real Talos configs (DEFAULT_CASE)
    python -m tests.lab up --workdir /tmp/lab --generated --controlplanes 3 --workers 2 \\
        --talos-version v1.14.1 --mode configured --ca ed25519
    python -m tests.lab up --workdir /tmp/lab --mixed-versions --extra-maintenance
    python -m tests.lab up --workdir /tmp/lab --set worker-1:version=v1.12.11,mode=maintenance \\
        --add name=spare,role=worker,version=v1.12.11,mode=maintenance
    python -m tests.lab up --workdir /tmp/lab --controlplanes 1 --workers 1 \\
        --talos-version v1.13.9 --case v1.13/v1.13.9/k8s-older

Prints the path of DIR/lab.json once every machine listens, then serves until SIGTERM/SIGINT.
"""

import argparse
import asyncio
import logging
import os
import resource
import sys
import time

if __package__ in (None, ""):  # pragma: no cover - run as a script
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))))
    __package__ = "tests.lab"

from tests import collection_path  # noqa: E402

collection_path.ensure()

from tests import versions  # noqa: E402
from tests.lab.talos_sim import config as cfg, lab as simlab, runner  # noqa: E402


# Real Talos configs (machinery v1.14.1, Kubernetes 1.36.3) with their secrets bundle, so that every module
# works against the default lab; Talos and Kubernetes are behind the release set (within its minors), so the
# rollout has steps to plan.
DEFAULT_CASE = "v1.14/v1.14.1/k8s-older"


def _parser():
    p = argparse.ArgumentParser(prog="python -m tests.lab")
    sub = p.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start a lab of simulated Talos machines")
    up.add_argument("--workdir", required=True)
    up.add_argument("--controlplanes", type=int, default=3)
    up.add_argument("--workers", type=int, default=2)
    up.add_argument("--talos-version", default="v1.14.1")
    up.add_argument("--mode", choices=["configured", "maintenance"], default="configured")
    up.add_argument("--ca", choices=["ed25519", "ecdsa"], default="ed25519")
    up.add_argument("--kubernetes-version", default=versions.KUBERNETES,
                    help="Kubernetes in the machine configs, the release set's by default (per machine: --set "
                         "NAME:kubernetes=v1.35.4)")
    up.add_argument("--latency-ms", type=int, default=0,
                    help="latency fault set on every machine at start")
    up.add_argument("--index", type=int, default=None,
                    help="lab index: machines 1..254 live on 127.(10+K//256).(K%%256).0/24, more (indexes below "
                    "736 only) on the index's own /24s in 127.210.0.0-127.255.255.255 (talos_sim/lab.py)")
    up.add_argument("--name", default="lab", help="cluster name and talosconfig context")
    up.add_argument("--mixed-versions", action="store_true",
                    help="first worker runs v1.12.11, second worker v1.13.9")
    up.add_argument("--extra-maintenance", action="store_true",
                    help="add maintenance machines m-112 (v1.12.11) and m-114 (--talos-version)")
    up.add_argument("--set", action="append", default=[], metavar="NAME:k=v,...",
                    help="per-machine override: version, mode, role, address, install_image, extensions (a+b)")
    up.add_argument("--add", action="append", default=[], metavar="name=N,role=R,...",
                    help="add a machine: name, role, version, mode, address")
    up.add_argument("--no-bootstrap", action="store_true",
                    help="configured control planes start with etcd not bootstrapped")
    up.add_argument("--reboot-seconds", type=float, default=None)
    up.add_argument("--upgrade-seconds", type=float, default=None)
    up.add_argument("--install-seconds", type=float, default=None)
    up.add_argument("--kubeconfig-server", default=None)
    up.add_argument("--case", default=DEFAULT_CASE, metavar="DIR",
                    help="a config fixture case (DIR, or relative to tests/fixtures/configs): "
                    "configured machines start from its controlplane.conf / worker.conf as they "
                    "are (made by real Talos code), the lab CA is its OS CA; --kubernetes-version "
                    "and --ca are ignored (default: %(default)s)")
    up.add_argument("--generated", action="store_true",
                    help="configured machines get configs the simulator makes (Talos CA only: the "
                    "config engine refuses them) instead of --case's")
    up.add_argument("--max-streams", type=int, default=None,
                    help="concurrent streams each machine allows per connection (default: h2's 100)")
    up.add_argument("-v", "--verbose", action="store_true")
    return p


def raise_fd_limit(machines):
    """Each machine holds a listening socket (a control plane two) and each client connection one more: a lab of
    hundreds of machines needs more descriptors than a soft limit of 1024. Raise the soft limit towards the hard one
    (what an unprivileged process may) to 4 per machine and 1024 more; returns the soft limit then."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 4 * int(machines) + 1024
    if soft != resource.RLIM_INFINITY and soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        if new > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
            soft = new
    return soft


def rss_mib():
    """This process's resident set now, MiB (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * resource.getpagesize() / 2 ** 20
    except (OSError, IndexError, ValueError):
        return 0.0


def open_fds():
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return -1


def main(argv=None):
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s",
                        stream=sys.stderr)
    logging.getLogger("grpclib").setLevel(logging.WARNING if not args.verbose else logging.INFO)
    plan = runner.plan_machines(args.controlplanes, args.workers, args.talos_version, args.mode,
                                args.mixed_versions, args.extra_maintenance, args.set, args.add)
    for p in plan:  # the Kubernetes the machine configs name (kubelet and control-plane images)
        p.setdefault("kubernetes", args.kubernetes_version)
    if not plan:
        print("no machines requested", file=sys.stderr)
        return 2
    started = time.monotonic()
    case = None
    if args.case and not args.generated:
        try:  # load once: a bad case fails before any port is taken
            case = cfg.Case(args.case)
        except (ValueError, OSError) as exc:
            print("bad --case: %s" % exc, file=sys.stderr)
            return 2
    if args.max_streams is not None:
        from tests.lab.talos_sim.lab import limit_streams
        limit_streams(args.max_streams)
    explicit = args.index is not None
    if explicit and len(plan) > simlab.capacity(args.index):
        print("refusing to start: lab index %d holds at most %d machines, not %d (indexes below %d hold up to %d)"
              % (args.index, simlab.capacity(args.index), len(plan), simlab.EXTENDED_INDEXES, simlab.capacity(0)),
              file=sys.stderr)
        return 2
    limit = raise_fd_limit(len(plan))
    if limit != resource.RLIM_INFINITY and limit < len(plan) + 128:
        print("refusing to start: %d machines need about %d file descriptors, the limit is %d (ulimit -Hn)"
              % (len(plan), len(plan) + 128, limit), file=sys.stderr)
        return 2
    attempts = 1 if explicit else 5
    last = None
    for _attempt in range(attempts):
        index = args.index if explicit else runner.auto_index(len(plan))
        lab = runner.build_lab(args.workdir, plan, index=index, ca=args.ca,
                               latency_ms=args.latency_ms, bootstrapped=not args.no_bootstrap,
                               reboot_seconds=args.reboot_seconds,
                               upgrade_seconds=args.upgrade_seconds,
                               install_seconds=args.install_seconds, name=args.name,
                               kubeconfig_server=args.kubeconfig_server, case=case)

        def ready(lab):
            print(lab.lab_json, flush=True)
            logging.getLogger("talos_sim").info(
                "lab %s ready on %s, control %s: %d machines in %.1f s (CPU %.1f s), RSS %.0f MiB, %d fds", lab.name,
                ", ".join(s + ".0/24" for s in simlab.subnets_for_index(lab.index, len(lab.machines))),
                lab.control_url, len(lab.machines), time.monotonic() - started, time.process_time(), rss_mib(),
                open_fds())
        try:
            asyncio.run(runner.serve(lab, ready))
            return 0
        except RuntimeError as exc:
            last = exc
            print("lab index %d: %s" % (index, exc), file=sys.stderr)
    print("refusing to start: %s" % last, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
