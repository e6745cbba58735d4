# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""THE reset request of a reclaim (ADR 0042): the one place that says what a reset wipes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

WIPED_LABELS = ("STATE", "EPHEMERAL")
REQUEST_TEXT = "STATE and EPHEMERAL, reboot"


def reset_request(request_cls, graceful):
    """STATE and EPHEMERAL wiped, reboot; graceful (cordon, drain, leave etcd) as decided.

    ``request_cls`` is ``machine.ResetRequest`` (``client.request_type("Reset")``). User disks
    and other volumes are never named, so they are not touched.
    """
    request = request_cls(graceful=bool(graceful), reboot=True, mode=request_cls.SYSTEM_DISK)
    for label in WIPED_LABELS:
        request.system_partitions_to_wipe.add(label=label, wipe=True)
    return request
