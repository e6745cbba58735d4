"""The heartbeat's probe (``k8s.heartbeat.beating``) never blocks: the heartbeat never accepts, so the probes of a
run's renewals fill its listening queue; a blocking probe then waited for ever (found by the fault campaign: a join
renewing the lock before its third machine hung there until the campaign's 600 s)."""

import signal

from ansible_collections.maesh.ichor.plugins.module_utils.k8s import heartbeat


def _alarm(unused_signum, unused_frame):
    raise AssertionError("a probe blocked")


def test_the_probe_says_beating_however_many_renewals_probed_and_never_blocks():
    holder = "maesh-ichor-test-probe-%d" % id(object())
    assert not heartbeat.beating(holder)
    claim = heartbeat._claim(holder)  # pylint: disable=protected-access  # what the heartbeat process holds
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(10)
    try:
        assert [heartbeat.beating(holder) for unused in range(8)] == [True] * 8
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        claim.close()
    assert not heartbeat.beating(holder)
