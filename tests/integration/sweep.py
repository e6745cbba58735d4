"""The marker sweep of the secret tests: which files written during a run hold a secret."""

import os


def holding(roots, markers, since, skip):
    """[(path, marker head)] for each file under ``roots`` written since ``since`` that holds a marker."""
    found = []
    for root in roots:
        for directory, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if os.path.join(directory, d) not in skip]
            for name in files:
                path = os.path.join(directory, name)
                try:
                    if path in skip or os.lstat(path).st_mtime < since or not os.path.isfile(path):
                        continue
                    with open(path, "rb") as handle:
                        data = handle.read()
                except OSError:
                    continue
                found += [(path, m[:12]) for m in markers if m.encode() in data]
    return found
