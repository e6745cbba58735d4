# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who runs a playbook, for what a run records about itself (a reclaim's audit, a status acknowledgement)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import getpass
import os


def local_user(environ=None):
    """Who runs this when no AWX user is given: the local login name."""
    environ = os.environ if environ is None else environ
    for key in ("USER", "LOGNAME"):
        if environ.get(key):
            return environ[key]
    try:
        return getpass.getuser()
    except (KeyError, OSError, ImportError):  # no passwd entry for the uid (a container)
        return "unknown"
