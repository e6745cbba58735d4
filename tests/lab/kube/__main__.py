"""``python -m tests.lab.kube``: build the lab's Kubernetes binaries, or start a control plane.

    python -m tests.lab.kube build
    python -m tests.lab.kube up --workdir DIR [--no-controllers] [--timeout S]

``up`` starts etcd, kube-apiserver and kube-controller-manager on 127.0.0.1 (building the
binaries first if needed), writes DIR/kube.json ({"server", "kubeconfig", "version",
"audit_log", "helm", "kubectl", "ca_file", "pids"}), prints its path and runs until
SIGTERM/SIGINT, then stops everything. DIR is kept (logs in DIR/logs).
"""

import argparse
import json
import os
import signal
import sys
import time

if __package__ in (None, ""):  # pragma: no cover - run as a script
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))))
    __package__ = "tests.lab.kube"  # pylint: disable=redefined-builtin

from tests.lab.kube.cluster import KubeLab, KubeLabError, binaries  # noqa: E402


def _parser():
    p = argparse.ArgumentParser(prog="python -m tests.lab.kube")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("build", help="build (or find cached) kube-apiserver, etcd, kubectl, helm")
    up = sub.add_parser("up", help="start etcd + kube-apiserver + kube-controller-manager")
    up.add_argument("--workdir", required=True)
    up.add_argument("--no-controllers", action="store_true",
                    help="do not start kube-controller-manager")
    up.add_argument("--timeout", type=float, default=None,
                    help="seconds to wait for /readyz (default 240)")
    return p


class _Stop(Exception):
    pass


def _raise_stop(_signum, _frame):
    raise _Stop()


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        if args.cmd == "build":
            for name, path in sorted(binaries(stream=sys.stderr).items()):
                print("%s=%s" % (name, path))
            return 0
        signal.signal(signal.SIGTERM, _raise_stop)
        signal.signal(signal.SIGINT, _raise_stop)
        lab = KubeLab.start(workdir=args.workdir, controllers=not args.no_controllers,
                            timeout=args.timeout)
    except KubeLabError as e:
        print("kube lab: %s" % e, file=sys.stderr)
        return 1
    except _Stop:
        return 1
    try:
        kube_json = os.path.join(lab.workdir, "kube.json")
        tmp = kube_json + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(lab.describe(), f, indent=2)
        os.replace(tmp, kube_json)
        print(kube_json, flush=True)
        while True:
            time.sleep(1)
            lab.check()
    except _Stop:
        return 0
    except KubeLabError as e:
        print("kube lab: %s" % e, file=sys.stderr)
        return 1
    finally:
        lab.stop()


if __name__ == "__main__":
    sys.exit(main())
