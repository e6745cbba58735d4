"""The one retry loop (common/retry.py): tries, what is retried, the waits between tries."""

import random

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.common import retry


class Flaky:
    """Fails with ``error`` the first ``failures`` calls, then returns how many calls it took."""

    def __init__(self, failures, error=KeyError):
        self.failures = failures
        self.error = error
        self.calls = 0

    def __call__(self):
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error("call %d" % self.calls)
        return self.calls


@pytest.mark.parametrize("seed", range(40))
def test_an_action_is_tried_until_it_returns_and_never_more_than_the_attempts(seed):
    rng = random.Random(seed)
    attempts, failures = rng.randint(1, 6), rng.randint(0, 7)
    waits, told = [], []
    action = Flaky(failures)
    base, cap = rng.choice([0.5, 1, 2]), rng.choice([1, 3, 10])

    def run():
        return retry.attempt(action, attempts, KeyError, delay=retry.doubling(base, cap), sleep=waits.append,
                             before_retry=lambda exc, n, s: told.append((str(exc), n, s)))
    if failures < attempts:
        assert run() == (failures + 1, failures + 1)
        assert action.calls == failures + 1
    else:
        with pytest.raises(retry.Exhausted) as raised:
            run()
        assert raised.value.attempts == attempts and isinstance(raised.value.last, KeyError)
        assert "call %d" % attempts in str(raised.value.last)
        assert action.calls == attempts
    retried = min(failures, attempts - 1)
    expected = [min(base * 2 ** n, cap) for n in range(retried)]
    assert waits == expected
    assert [(n, s) for _exc, n, s in told] == list(zip(range(1, retried + 1), expected))


def test_a_failure_not_named_passes_through_at_once():
    action = Flaky(1, error=ValueError)
    with pytest.raises(ValueError):
        retry.attempt(action, 5, KeyError, sleep=pytest.fail)
    assert action.calls == 1


def test_no_wait_retries_without_sleeping():
    assert retry.attempt(Flaky(2), 3, KeyError, sleep=pytest.fail) == (3, 3)


def test_doubling_starts_at_base_and_stops_at_the_cap():
    delay = retry.doubling(5, 60)
    assert [delay(n) for n in range(0, 7)] == [5, 5, 10, 20, 40, 60, 60]


def test_fewer_than_one_attempt_is_refused():
    with pytest.raises(ValueError):
        retry.attempt(Flaky(0), 0, KeyError)
