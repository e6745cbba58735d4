# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The status of a managed cluster (``cluster_status``): what is read, as plain data (``readings``), what is found
in it, each finding one judgement with its severity, and the report a person reads (``findings``), and the module's
flow that reads, judges and returns the result (``flow``)."""

# what another feature package may import from this one (module_utils/__init__.py)
INTERFACE = ()
