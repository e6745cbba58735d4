# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The status of a managed cluster (``cluster_status``): what is read once (``flow``) and the findings, their
severities and the report a person reads (``findings``)."""

# what another feature package may import from this one (module_utils/__init__.py)
INTERFACE = ()
