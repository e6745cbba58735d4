# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one retry loop: an action tried again after the failures it names, with a backoff between tries.

Two kinds of retry use it: a write conditional on what was read (a Kubernetes update that met a Conflict is read
again and redone at once, no wait), and a run of an outside tool that may fail for a moment (helm: a doubling wait,
capped). Waiting for a state (a machine back, a Node Ready) is not a retry: that is ``common/poll.py``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time


def no_wait(_failures):
    """Try again at once: for a conditional write that met another writer, whose next read already sees it."""
    return 0


def doubling(base, cap):
    """``base`` seconds after the first failure, doubled after each next one, never more than ``cap``."""
    def delay(failures):
        return min(base * (2 ** (max(failures, 1) - 1)), cap)
    return delay


class Exhausted(Exception):
    """Every attempt failed; ``last`` is the last failure, ``attempts`` how many were made."""

    def __init__(self, last, attempts):
        super(Exhausted, self).__init__(str(last))
        self.last = last
        self.attempts = attempts


def attempt(action, attempts, retry_on, delay=no_wait, sleep=time.sleep, before_retry=None):
    """``action()`` until it returns, ``attempts`` tries at most; returns ``(value, tries)``.

    A failure of a type in ``retry_on`` is tried again after ``delay(failures)`` seconds (``before_retry(exc,
    failures, seconds)`` is told first: a plan line, a repair); any other exception passes through at once. When the
    last try fails too, ``Exhausted`` is raised with that failure, for the caller to say what it means.
    """
    if attempts < 1:
        raise ValueError("attempts must be at least 1, not %r" % (attempts,))
    for tries in range(1, attempts + 1):
        try:
            return action(), tries
        except retry_on as exc:
            if tries == attempts:
                raise Exhausted(exc, tries)
            seconds = delay(tries)
            if before_retry is not None:
                before_retry(exc, tries, seconds)
            if seconds > 0:
                sleep(seconds)
    raise AssertionError("not reached")
