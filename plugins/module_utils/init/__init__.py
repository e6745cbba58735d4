# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Making a new cluster from machines in maintenance mode, and joining machines to it (seed 0113 decision 2, seed
0103 section 2, ADR 0128): the plan (read-only) in ``plan``, the cluster record and bundle Secret in ``write``."""
