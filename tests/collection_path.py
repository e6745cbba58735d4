"""Make this checkout importable as ``ansible_collections.maesh.ichor``.

Modules and module_utils import each other through the collection namespace, as
AnsiballZ packs them. Tests, the lab and scripts use the same paths, through a
symlink in the user's cache dir (one per checkout, so two clones never clash).
"""

import hashlib
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def collections_root():
    """Return a directory holding ansible_collections/maesh/ichor -> this checkout."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    digest = hashlib.sha1(REPO.encode()).hexdigest()[:10]
    root = os.path.join(cache, "maesh-ichor", "cpath", digest)
    link = os.path.join(root, "ansible_collections", "maesh", "ichor")
    if os.path.realpath(link) != REPO:
        os.makedirs(os.path.dirname(link), exist_ok=True)
        tmp = "%s.%d" % (link, os.getpid())
        os.symlink(REPO, tmp)
        os.replace(tmp, link)
    return root


def ensure():
    """Put the collections root first on sys.path and return it."""
    root = collections_root()
    if root not in sys.path:
        sys.path.insert(0, root)
    return root


if __name__ == "__main__":
    print(collections_root())
