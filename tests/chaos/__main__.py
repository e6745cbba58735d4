"""python -m tests.chaos [--count N] [--seed S] [--budget SECONDS] [--json PATH] [--jobs J]

Runs N schedules (default 10) from seed S (default 2912): each a real playbook run on a fresh lab with one fault
drawn from its seed, then a calm rerun and a third run, invariants checked from outside. Prints one line per schedule
and a summary; exits 1 on any violation or error (a lab that did not start: nothing judged), or when fewer than half
of a playbook's schedules struck after its first write (a fault before any write proves nothing). ``--count 200`` is
the soak run before a release.
"""

import argparse
import json
import sys

from tests import collection_path

collection_path.ensure()

from tests.chaos import campaign  # noqa: E402  pylint: disable=wrong-import-position

DEFAULT_SEED = 2912


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tests.chaos")
    parser.add_argument("--count", type=int, default=10, help="schedules to run (default 10)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of the first schedule")
    parser.add_argument("--budget", type=float, default=None, help="stop starting schedules after this many seconds")
    parser.add_argument("--json", default=None, help="write the summary to this file")
    parser.add_argument("--jobs", type=int, default=1, help="schedules at a time, each on a lab of its own (default 1)")
    args = parser.parse_args(argv)
    summary = campaign.campaign(args.seed, args.count, budget_s=args.budget, jobs=args.jobs)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(summary, handle, indent=2)
    brief = dict((k, v) for k, v in summary.items() if k != "reports")
    print(json.dumps(brief, sort_keys=True))
    return 0 if not summary["violations"] and not summary["errors"] and summary["enough_landed"] else 1


if __name__ == "__main__":
    sys.exit(main())
