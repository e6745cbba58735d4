# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit of a reclaim: the seed's Events (``ReclaimRequested`` ... ``ReclaimExpired``) as lines
``<time> <Event>: <what>``, naming the requesting user, the UUID and the foreign cluster, never a
credential (every line passes through the redaction)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.maesh.ichor.plugins.module_utils.common.redact import redact_text
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim.policy import quoted, seconds
from ansible_collections.maesh.ichor.plugins.module_utils.reclaim.request import REQUEST_TEXT


def utc(at=None):
    """A time as ``2026-11-04T10:00:00Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if at is None else at))


class Audit:
    """The seed's Events as lines: ``<time> <Event>: <what>`` (no credential, ever)."""

    def __init__(self, user, node, clock=time.time):
        self.user = user
        self.node = node
        self.clock = clock
        self.lines = []

    def add(self, event, text, cluster_id=None):
        line = "%s %s: %s" % (utc(self.clock()), event, redact_text(text))
        if cluster_id is not None:
            # the ID Talos publishes for discovery (ClusterInfo), not a credential, though it has a secret's shape
            line += " (ID %s)" % (cluster_id or "?")
        self.lines.append(line)

    def requested(self):
        self.add("ReclaimRequested", "%s requested the reclaim of %s" % (self.user, self.node))

    def inspected(self, insp):
        self.add("ReclaimInspected", "%s is UUID %s (%s, %s) of cluster %s" % (
            self.node, insp["uuid"], insp.get("hostname") or "?", insp.get("role") or "unknown role",
            quoted(insp["cluster"]["name"])), cluster_id=insp["cluster"]["id"])

    def inspected_maintenance(self, uuid):
        self.add("ReclaimInspected", "%s is UUID %s in maintenance mode (no cluster)" % (self.node, uuid))

    def confirmed(self, uuid):
        self.add("ReclaimConfirmed", "%s confirmed UUID %s" % (self.user, uuid))

    def reset(self, graceful):
        self.add("ReclaimReset", "reset sent to %s (%s), graceful: %s" % (
            self.node, REQUEST_TEXT, "true" if graceful else "false"))

    def completed(self, text):
        self.add("ReclaimCompleted", text)

    def failed(self, text):
        self.add("ReclaimFailed", text)

    def expired(self, wait_timeout):
        self.add("ReclaimExpired", "the wait of %ss for %s to return to maintenance mode expired" % (
            seconds(wait_timeout), self.node))
