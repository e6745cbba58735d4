# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Backups a person can trust, and recovery from them: ``backup`` (the ``cluster_backup`` module's flow: one backup
of a managed cluster, then the prunes its retention allows), ``archive`` (one backup as a tar stream encrypted to age
recipients: its parts, its manifest, written and read back without a whole-archive buffer) and ``retention`` (which
archives a policy keeps, as pure rules)."""

# what another feature package may import from this one (module_utils/__init__.py)
INTERFACE = ()
