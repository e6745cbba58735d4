# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The installer: apply a bundle with server-side apply, prune what the previous run installed
and this bundle drops, with a snapshot to roll back to. ``objects`` (an object's identity, the
installer's mark, the form an object is compared and restored in), ``bundle`` (reading the manifests),
``inventory`` (the record of what a run applied), ``prune`` (the prune rules: the prunable kinds, the
candidates, the renamed objects and the owner check), ``snapshot`` (its persisted form), ``live`` (the
Installer: every call to the API server) and ``stages`` (the flows of installer_apply, installer_prune
and installer_restore, each returning the module's result, with the options they take); ``errors`` holds
the failures they raise."""

# what another feature package may import from this one (module_utils/__init__.py)
INTERFACE = ("policies", "stages")
