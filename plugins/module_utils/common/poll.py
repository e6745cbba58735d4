# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one poll-until-deadline loop: every wait of the collection (a machine back after a reboot,
a Node Ready, a kubelet at its version, a machine in maintenance mode) is a ``check`` polled here."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time


class Clock:
    """Real time; tests pass a fake one with the same two methods."""

    @staticmethod
    def time():
        return time.monotonic()

    @staticmethod
    def sleep(seconds):
        time.sleep(seconds)


# Every half second by default: what a wait reads (a Version call, a Node, a DaemonSet) is cheap next to what it waits
# for (a reboot, a rollout), and the run moves on soon after it is done.
INTERVAL = 0.5


def until(check, timeout, interval=INTERVAL, clock=None):
    """Call ``check()`` until it returns ``(True, value)`` or ``timeout`` seconds have passed.

    ``check`` returns ``(done, detail)``: the value when done, else what is still awaited. Returns
    ``(True, value)``, or ``(False, detail)`` with the last thing awaited when the deadline passed.
    ``check`` is always called at least once.
    """
    clock = clock or Clock
    deadline = clock.time() + timeout
    while True:
        done, detail = check()
        if done:
            return True, detail
        remaining = deadline - clock.time()
        if remaining <= 0:
            return False, detail
        clock.sleep(min(interval, remaining))
