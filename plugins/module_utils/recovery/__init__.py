# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Backups a person can trust, and recovery from them: ``retention`` (which archives a policy keeps, as pure rules)
and ``archive`` (one backup as a tar stream encrypted to age recipients: its parts, its manifest, written and read
back without a whole-archive buffer)."""

# what another feature package may import from this one (module_utils/__init__.py)
INTERFACE = ()
