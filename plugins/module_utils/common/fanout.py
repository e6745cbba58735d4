# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one concurrency limit of a fan-out, and its threaded form.

Machines read through one client are read on that client's event loop (``talos/client.py``: ``fan_out``, bounded
by ``CONCURRENCY``); machines that each need a client of their own (init's maintenance-mode and authenticated reads,
reclaim's probes) are read on threads here, bounded the same way. A thousand machines are never a thousand
connections at once.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from concurrent.futures import ThreadPoolExecutor

# machines read at once: enough that a hundred machines are read in a few rounds of one read's time, few enough that
# a fleet does not open a connection (or a thread) per machine at once, nor, through one endpoint, a stream per call
# of every machine (a machine's facts are nine calls at once)
CONCURRENCY = 16


def each(fn, items, limit=CONCURRENCY):
    """``fn(item)`` for every item on threads, at most ``limit`` at once; returns when every call has ended.

    The finished futures in the items' order: ``.result()`` gives each value or raises that call's failure, so the
    caller decides what one failure means (init raises the first in inventory order once every read has ended).
    """
    items = list(items)
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(len(items), int(limit)))) as pool:
        return [pool.submit(fn, item) for item in items]
