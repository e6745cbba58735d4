"""``python -m tests.lab.cilium fetch``: fetch, verify and package the lab's Cilium charts (see README.md).

Prints one line per chart: its minor, packaged version, source module version, .tgz path and the seconds
spent now (0 when it was cached). ``--cold`` empties the cache first (to measure a cold CI).
"""

import argparse
import os
import shutil
import sys
import time

if __package__ in (None, ""):  # pragma: no cover - run as a script
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
    __package__ = "tests.lab.cilium"  # pylint: disable=redefined-builtin

from tests.lab.cilium import charts  # noqa: E402
from tests.lab.kube.cluster import binaries  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tests.lab.cilium")
    parser.add_argument("cmd", choices=["fetch"])
    parser.add_argument("--cold", action="store_true", help="remove the cached charts first")
    args = parser.parse_args(argv)
    if args.cold:
        shutil.rmtree(charts.cache_dir(), ignore_errors=True)
    helm = binaries(names=("helm",), stream=sys.stderr)["helm"]
    start = time.monotonic()
    for minor, entry in sorted(charts.ensure(helm, stream=sys.stderr).items()):
        print("%s %s (from %s) %s %.1fs" % (minor, entry["version"], entry["source"], entry["chart"], entry["seconds"]))
    print("total %.1fs" % (time.monotonic() - start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
