# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reclaim of one Talos machine that another cluster configured (seed 0103, section 2), the
backend of the ``talos_reset`` module: ``inspection`` reads the machine over exactly one address with
the foreign cluster's talosconfig and probes its control planes; ``policy`` holds the refusals, the
typed-UUID consent and the seed's messages; ``request`` builds THE reset request (STATE and
EPHEMERAL, reboot); ``flow`` is the run itself (``run(opts, io)``), the wait for maintenance mode and
the registration of the machine as pending in the managed cluster's record; ``audit`` writes the
seed's Events as lines; ``live`` is the real I/O (``LiveIO``) and the module's entry
(``reclaim(params, conn, check_mode)``); ``errors`` has ``ReclaimError``. Nothing here holds or
prints credential content."""

# what another feature package may import from this one (module_utils/__init__.py)
INTERFACE = ()
