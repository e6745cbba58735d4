"""The mutation score of scripts/mutation: per rule module and in total, from mutmut's results in each group's scratch
dir (mutants/**/*.py.meta), with the surviving mutants that tests/mutation/survivors.md explains (equivalent: no test
can tell them from the code) counted apart.

    python tests/mutation/score.py SURVIVORS_MD WORKDIR...   the table; each survivor not explained, listed
"""

import collections
import glob
import json
import os
import re
import sys

PREFIX = "ansible_collections.maesh.ichor.plugins.module_utils."
# mutmut's exit codes (mutmut.stats.status_by_exit_code): a test failed (1, 3) or the mutant ran out of time (hangs)
KILLED = {1: "killed", 3: "killed", 36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout"}
SURVIVED = {0}
MUTANT = re.compile(r"`([a-z_]+\.[a-z_]+\.x[^`\s]*__mutmut_\d+)`")


def short(key):
    """``adopt.rules.x_cni_outcome__mutmut_39`` of mutmut's full key."""
    return key[len(PREFIX):] if key.startswith(PREFIX) else key


def module_of(name):
    """``adopt/rules.py`` of a short key."""
    return "/".join(name.split(".")[:2]) + ".py"


def results(workdirs):
    out = {}
    for workdir in workdirs:
        for meta in glob.glob(os.path.join(workdir, "mutants", "**", "*.py.meta"), recursive=True):
            with open(meta) as stream:
                for key, code in json.load(stream)["exit_code_by_key"].items():
                    out[short(key)] = code
    return out


def explained(path):
    with open(path) as stream:
        return set(MUTANT.findall(stream.read()))


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    equivalent = explained(argv[0])
    codes = results(argv[1:])
    if not codes:
        sys.exit("no mutmut results under %s" % ", ".join(argv[1:]))
    rows = collections.OrderedDict()
    open_survivors = []
    other = []
    for name in sorted(codes):
        row = rows.setdefault(module_of(name), collections.Counter())
        code = codes[name]
        row["total"] += 1
        if code in KILLED:
            row["killed"] += 1
        elif code in SURVIVED and name in equivalent:
            row["equivalent"] += 1
        elif code in SURVIVED:
            row["survived"] += 1
            open_survivors.append(name)
        else:
            row["other"] += 1
            other.append("%s (exit %s)" % (name, code))
    line = "%-26s %6s %6s %6s %10s %9s %8s"
    print(line % ("module", "total", "killed", "score", "equivalent", "survived", "other"))
    total = collections.Counter()
    for module, row in rows.items():
        total.update(row)
        print(line % (module, row["total"], row["killed"], "%.1f%%" % (100.0 * row["killed"] / row["total"]),
                      row["equivalent"], row["survived"], row["other"]))
    print(line % ("total", total["total"], total["killed"], "%.1f%%" % (100.0 * total["killed"] / total["total"]),
                  total["equivalent"], total["survived"], total["other"]))
    print("score: %d of %d mutants killed (%.1f%%); %d survivors explained as equivalent in %s; %d not explained"
          % (total["killed"], total["total"], 100.0 * total["killed"] / total["total"], total["equivalent"],
             os.path.basename(argv[0]), total["survived"]))
    for name in open_survivors:
        print("survived, not explained: %s" % name)
    for name in other:
        print("neither killed nor survived: %s" % name)
    return 1 if open_survivors or other else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
