"""The retention rules of backups (recovery/retention.py), as properties over generated archive sets (seeded,
bounded) and the examples an operator would check by hand."""

import datetime
import random

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.recovery import retention

UTC = datetime.timezone.utc
SEEDS = range(200)
START = datetime.datetime(2026, 1, 1, tzinfo=UTC)


def _archives(rng):
    """Archives of one cluster at random times over ~10 weeks (some on the same day), and a name that is not one."""
    times = set(START + datetime.timedelta(seconds=rng.randrange(70 * 86400)) for unused in range(rng.randrange(0, 40)))
    return [retention.archive_name("prod", t) for t in times] + ["notes.txt"]


def _policy(rng):
    while True:
        rules = dict((k, rng.choice([0, 0, 1, 2, 3, 7])) for k in retention.POLICY_KEYS)
        if any(rules.values()):
            return rules


@pytest.mark.parametrize("seed", SEEDS)
def test_every_archive_is_kept_or_pruned_once_and_a_second_run_prunes_nothing(seed):
    rng = random.Random(seed)
    names, rules = _archives(rng), _policy(rng)
    archives = [n for n in names if retention.parse_name(n)]
    verified = rng.sample(archives, min(len(archives), rng.randrange(3)))
    kept, prune = retention.select(names, rules, verified)
    assert sorted(list(kept) + prune) == sorted(archives) and not set(kept) & set(prune)
    assert "notes.txt" not in kept and "notes.txt" not in prune
    newest_first = sorted(archives, key=lambda n: retention.parse_name(n)[1], reverse=True)
    assert set(newest_first[:rules["keep_last"]]) <= set(kept)
    for period, count in ((lambda at: at.date(), rules["keep_daily"]),
                          (lambda at: at.isocalendar()[:2], rules["keep_weekly"])):
        periods = []
        for name in newest_first:  # the newest archive of each of the most recent periods is kept
            key = period(retention.parse_name(name)[1])
            if key not in periods:
                periods.append(key)
                if len(periods) <= count:
                    assert name in kept, (name, rules)
    if verified:
        assert max(verified, key=lambda n: retention.parse_name(n)[1]) in kept
    assert len(kept) <= sum(rules.values()) + 1
    times = [retention.parse_name(n)[1] for n in prune]
    assert times == sorted(times)  # oldest first
    again_kept, again_prune = retention.select(list(kept), rules, [v for v in verified if v in kept])
    assert again_prune == [] and sorted(again_kept) == sorted(kept)


def test_keep_last_daily_weekly_by_hand():
    at = [datetime.datetime(2026, 3, d, h, tzinfo=UTC) for d, h in ((2, 1), (2, 9), (3, 5), (9, 4), (10, 2), (10, 8))]
    names = [retention.archive_name("prod", t) for t in at]
    kept, prune = retention.select(names, retention.policy({"keep_last": 1, "keep_daily": 2, "keep_weekly": 2}))
    # last 1: 10th 08h; daily 2: 10th 08h, 9th; weekly 2: week of the 9th (10th 08h), week of the 2nd (3rd)
    assert sorted(kept) == sorted([names[5], names[3], names[2]])
    assert kept[names[5]] == ["last 1", "daily 2", "weekly 2"] and kept[names[2]] == ["weekly 2"]
    assert prune == [names[0], names[1], names[4]]


def test_the_newest_verified_archive_survives_a_run_of_failed_backups():
    at = [START + datetime.timedelta(hours=h) for h in range(5)]
    names = [retention.archive_name("prod", t) for t in at]
    kept, prune = retention.select(names, retention.policy({"keep_last": 2}), verified=[names[1]])
    assert sorted(kept) == sorted([names[4], names[3], names[1]]) and kept[names[1]] == ["the newest verified"]
    assert prune == [names[0], names[2]]


def test_a_name_round_trips_and_others_are_not_archives():
    at = datetime.datetime(2026, 12, 7, 3, 4, 5, tzinfo=UTC)
    name = retention.archive_name("prod-eu.1", at)
    assert name == "prod-eu.1-20261207T030405Z.tar.age" and retention.parse_name(name) == ("prod-eu.1", at)
    east = datetime.timezone(datetime.timedelta(hours=2))
    assert retention.archive_name("prod", at.astimezone(east)) == "prod-20261207T030405Z.tar.age"
    for other in ("prod-20261207T030405Z.tar", "prod-20261399T030405Z.tar.age", "-20261207T030405Z.tar.age",
                  "Prod-20261207T030405Z.tar.age", "", None, "prod-20261207T030405Z.tar.age.part"):
        assert retention.parse_name(other) is None


@pytest.mark.parametrize("value, message", [
    ({}, "retention: the policy keeps no archive; set keep_last (or keep_daily, keep_weekly) to 1 or more"),
    ({"keep_last": 0}, "retention: the policy keeps no archive; set keep_last (or keep_daily, keep_weekly) to 1 or more"),
    ({"keep_last": -1}, "retention: keep_last must be a count of archives (0 or more), not -1"),
    ({"keep_daily": "7"}, "retention: keep_daily must be a count of archives (0 or more), not '7'"),
    ({"keep_weekly": True}, "retention: keep_weekly must be a count of archives (0 or more), not True"),
    ({"keep_monthly": 3}, "retention: unknown key(s) keep_monthly; the keys are keep_last, keep_daily, keep_weekly"),
    ([3], "retention: a mapping of keep_last, keep_daily, keep_weekly, not [3]"),
])
def test_a_policy_that_is_not_one_is_one_line(value, message):
    with pytest.raises(retention.RetentionError) as exc:
        retention.policy(value)
    assert str(exc.value) == message


def test_a_policy_fills_what_is_unset():
    assert retention.policy({"keep_daily": 7}) == {"keep_last": 0, "keep_daily": 7, "keep_weekly": 0}
