# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which backup archives a retention policy keeps, as pure rules (what restic and borg call ``--keep-last``,
``--keep-daily``, ``--keep-weekly``): the ``keep_last`` newest; the newest of each of the ``keep_daily`` most recent
days that hold one; the newest of each of the ``keep_weekly`` most recent ISO weeks that hold one (UTC). An archive
any rule keeps is kept; the others are pruned. Two rules go beyond a count: the newest archive a restore drill
verified is always kept (a run of failed backups never prunes the last good one), and a policy that keeps nothing
is refused.

Nothing here lists or deletes an archive: the backup flow reads the destination, asks these rules and prunes under
the cluster lock.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import re

from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError

SUFFIX = ".tar.age"
_STAMP = "%Y%m%dT%H%M%SZ"
# <cluster>-<UTC time>.tar.age: the name says which cluster and when, and sorts by time within a cluster
_NAME = re.compile(r"^(?P<cluster>[a-z0-9]([a-z0-9.-]*[a-z0-9])?)-(?P<at>\d{8}T\d{6}Z)\.tar\.age$")
POLICY_KEYS = ("keep_last", "keep_daily", "keep_weekly")


class RetentionError(IchorError):
    """A retention policy that is not one."""


def archive_name(cluster, at):
    """The name of ``cluster``'s archive taken at ``at`` (an aware or UTC datetime)."""
    if at.tzinfo is not None:
        at = at.astimezone(datetime.timezone.utc)
    return "%s-%s%s" % (cluster, at.strftime(_STAMP), SUFFIX)


def parse_name(name):
    """(cluster, UTC datetime) of an archive name; None for a name that is not one (left alone by retention)."""
    match = _NAME.match(name or "")
    if not match:
        return None
    try:
        at = datetime.datetime.strptime(match.group("at"), _STAMP).replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return None
    return match.group("cluster"), at


def policy(value):
    """The policy {keep_last, keep_daily, keep_weekly} (each a count, 0 when unset); RetentionError for a negative
    or non-integer count, an unknown key, or a policy that keeps nothing."""
    value = value or {}
    if not isinstance(value, dict):
        raise RetentionError("retention: a mapping of %s, not %r" % (", ".join(POLICY_KEYS), value))
    unknown = sorted(set(value) - set(POLICY_KEYS))
    if unknown:
        raise RetentionError("retention: unknown key(s) %s; the keys are %s" % (", ".join(unknown),
                                                                                ", ".join(POLICY_KEYS)))
    out = {}
    for key in POLICY_KEYS:
        count = value.get(key) or 0
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise RetentionError("retention: %s must be a count of archives (0 or more), not %r" % (key, count))
        out[key] = count
    if not any(out.values()):
        raise RetentionError("retention: the policy keeps no archive; set keep_last (or keep_daily, keep_weekly) "
                             "to 1 or more")
    return out


def _newest_per(archives, period, count):
    """The newest archive of each of the ``count`` most recent periods holding one (archives newest first)."""
    kept, seen = [], set()
    for name, at in archives:
        if len(seen) >= count:
            break
        key = period(at)
        if key not in seen:
            seen.add(key)
            kept.append(name)
    return kept


def select(names, rules, verified=()):
    """({kept archive: [why, ...]}, [archives to prune, oldest first]) for one cluster's archive ``names`` under the
    policy ``rules`` (policy()); ``verified``: the archives a drill verified. Names that are not archives are
    neither kept nor pruned."""
    archives = sorted(((n, parse_name(n)[1]) for n in names if parse_name(n)), key=lambda a: (a[1], a[0]),
                      reverse=True)
    kept = {}
    for name, at in archives[:rules["keep_last"]]:
        kept.setdefault(name, []).append("last %d" % rules["keep_last"])
    for name in _newest_per(archives, lambda at: at.date(), rules["keep_daily"]):
        kept.setdefault(name, []).append("daily %d" % rules["keep_daily"])
    for name in _newest_per(archives, lambda at: at.isocalendar()[:2], rules["keep_weekly"]):
        kept.setdefault(name, []).append("weekly %d" % rules["keep_weekly"])
    good = [name for name, at in archives if name in set(verified)]
    if good:
        kept.setdefault(good[0], []).append("the newest verified")
    prune = [name for name, at in reversed(archives) if name not in kept]
    return kept, prune
