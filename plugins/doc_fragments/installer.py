# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment:
    # Where the installer keeps its inventory and its snapshot; the three installer modules take these.
    DOCUMENTATION = r"""
options:
  namespace:
    description:
      - The installer's namespace, where the inventory ConfigMap and the snapshot Secret live; also the default for
        namespaced objects of the bundle.
    type: str
    default: ichor-system
  snapshot_file:
    description:
      - Keep the run's snapshot in this file (mode 0600) instead of a Secret in O(namespace). Give the same file to
        every installer module of a run.
      - The snapshot holds Secret values. It is written to a new file in the same directory, created mode 0600, and
        renamed over the old one, so whatever was there before (its mode, a link) never keeps it.
      - Its directory must be writable by its owner only, and owned by the user running the module or by root (not
        C(/tmp)); otherwise the module fails, naming the directory and its mode.
    type: path
  holder:
    description:
      - The id under which this run holds the cluster lock (M(maesh.ichor.cluster_lock)). Given, the module checks that
        the run still holds it before it writes anything, and fails naming the holder otherwise (another run took
        the lock over after it expired). The installer role always gives it.
      - Not checked in check mode, which writes nothing.
    type: str
"""
