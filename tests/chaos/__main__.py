"""python -m tests.chaos [--count N] [--seed S] [--budget SECONDS] [--json PATH] [--jobs J] [--ci-slice [COMMIT]]

Runs N schedules (default 10) from seed S: each a real playbook run on a fresh lab with one fault drawn from its seed,
then a calm rerun started at once and a third run, invariants checked from outside. Prints one line per schedule and a
summary; exits 1 on any violation or error (a lab that did not start: nothing judged), or when fewer than half of a
playbook's schedules struck after its first write (a fault before any write proves nothing).

A soak (``--count`` above 1; ``--count 200`` before a release) runs on seeds no soak used before: without ``--seed``
it takes the next unused ones; it refuses seeds listed in tests/chaos/used_seeds.txt (a soak on seeds the fixes were
made against proves nothing new), adds its range there when it starts, and writes its summary to tests/chaos/soaks/,
to be committed beside the README's figures it backs. ``--count 1 --seed S`` replays one schedule, used or not.
``--ci-slice [COMMIT]`` runs CI's slice of that commit (default: the checkout's).
"""

import argparse
import datetime
import json
import os
import sys

from tests import collection_path

collection_path.ensure()

from tests.chaos import campaign  # noqa: E402  pylint: disable=wrong-import-position

HERE = os.path.dirname(os.path.abspath(__file__))
USED_SEEDS = os.path.join(HERE, "used_seeds.txt")
SOAKS = os.path.join(HERE, "soaks")


def used_ranges(path=USED_SEEDS):
    """[(first, last)] of the seed ranges tests/chaos/used_seeds.txt lists (lines "FIRST-LAST  note", # comments)."""
    ranges = []
    with open(path) as handle:
        for line in handle:
            field = line.split("#", 1)[0].split()
            if field:
                first, _dash, last = field[0].partition("-")
                ranges.append((int(first), int(last or first)))
    return ranges


def soak_seeds(seed, count, ranges):
    """(first seed, None) of a soak of ``count`` schedules: ``seed``, or the first after every used range; (None,
    refusal) when it meets a used range."""
    if seed is None:
        seed = max([last for unused_first, last in ranges if last < campaign.COMMIT_SEEDS_FROM] + [-1]) + 1
    met = [(first, last) for first, last in ranges if first <= seed + count - 1 and seed <= last]
    if met:
        return None, "seeds %d-%d meet the used range(s) %s (tests/chaos/used_seeds.txt): a soak runs on seeds never " \
            "used before; leave --seed out to take the next unused ones" % (
                seed, seed + count - 1, ", ".join("%d-%d" % r for r in met))
    return seed, None


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tests.chaos")
    parser.add_argument("--count", type=int, default=10, help="schedules to run (default 10)")
    parser.add_argument("--seed", type=int, default=None,
                        help="seed of the first schedule (a soak's default: the first unused)")
    parser.add_argument("--budget", type=float, default=None, help="stop starting schedules after this many seconds")
    parser.add_argument("--json", default=None, help="write the summary to this file too")
    parser.add_argument("--jobs", type=int, default=1, help="schedules at a time, each on a lab of its own (default 1)")
    parser.add_argument("--ci-slice", nargs="?", const="", default=None, metavar="COMMIT",
                        help="run CI's slice of COMMIT (default: the checkout's)")
    args = parser.parse_args(argv)
    seeds, record, commit = None, None, campaign.head_commit()
    if args.ci_slice is not None:
        commit, seeds = campaign.ci_slice(args.ci_slice or None)
        print("the campaign's slice of commit %s: seeds %s" % (commit, seeds), file=sys.stderr)
    elif args.count > 1:
        first, refusal = soak_seeds(args.seed, args.count, used_ranges())
        if refusal:
            print(refusal, file=sys.stderr)
            return 2
        args.seed = first
        day = datetime.date.today().isoformat()
        record = os.path.join(SOAKS, "%s-seeds-%d-%d.json" % (day, first, first + args.count - 1))
        with open(USED_SEEDS, "a") as handle:  # used from the moment it starts, whatever comes of it
            handle.write("%d-%d  %s  soak of commit %s (--count %d --jobs %d): %s\n" % (
                first, first + args.count - 1, day, commit[:12], args.count, args.jobs,
                os.path.relpath(record, campaign.REPO)))
    elif args.seed is None:
        parser.error("--seed is needed to replay a schedule (--count 1)")
    summary = campaign.campaign(args.seed, args.count, budget_s=args.budget, jobs=args.jobs, seeds=seeds)
    # the runs load the collection from the working tree: a commit made meanwhile is named too
    summary.update(commit=commit, commit_at_end=campaign.head_commit(), seed=args.seed,
                   count=len(seeds) if seeds else args.count, jobs=args.jobs)
    for path in (record, args.json):
        if path:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            with open(path, "w") as handle:
                json.dump(summary, handle, indent=2, sort_keys=True)
                handle.write("\n")
    brief = dict((k, v) for k, v in summary.items() if k != "reports")
    print(json.dumps(brief, sort_keys=True))
    return 0 if not summary["violations"] and not summary["errors"] and summary["enough_landed"] else 1


if __name__ == "__main__":
    sys.exit(main())
