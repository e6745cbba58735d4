# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Making a new cluster from machines in maintenance mode, at the release set, and joining machines to it: the plan
(read-only) in ``plan``, the cluster record and bundle Secret in ``write``."""

# what another feature package may import from this one (module_utils/__init__.py)
INTERFACE = ()
