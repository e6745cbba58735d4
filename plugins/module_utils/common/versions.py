# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Version strings, read in one place: ``[v]MAJOR.MINOR[.PATCH]``, then an optional pre-release (``-rc.1``,
``-alpha.0-12-gabcdef``) and build (``+k3s1``), as Talos, Kubernetes, Helm and Cilium write them. Whoever reads a
version (a release set entry, a version contract, an image tag, a chart, helm's own) asks this module what it
states, and decides with that what it accepts: a full version only, a leading ``v``, no suffix."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# ASCII digits only: Python's \d also takes other scripts' digits, which no version is written in
_VERSION = re.compile(r"\A(v?)([0-9]+)\.([0-9]+)(?:\.([0-9]+))?((?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?)\Z")


class Stated:
    """What a version string states: its numbers, whether a patch and a ``v`` were written, and its suffix."""

    __slots__ = ("numbers", "patch_written", "v", "suffix")

    def __init__(self, numbers, patch_written, v, suffix):
        self.numbers = numbers  # (major, minor, patch): patch 0 when not written
        self.patch_written = patch_written
        self.v = v
        self.suffix = suffix

    @property
    def full(self):
        """MAJOR.MINOR.PATCH with nothing after it (a ``v`` or not)."""
        return self.patch_written and not self.suffix

    def text(self):
        """``vMAJOR.MINOR.PATCH`` (the suffix left out)."""
        return "v%d.%d.%d" % self.numbers


def read(text):
    """What ``text`` states as a version (Stated), or None when it is not one. Surrounding whitespace is ignored."""
    if not isinstance(text, str):
        return None
    match = _VERSION.match(text.strip())
    if match is None:
        return None
    v, major, minor, patch, suffix = match.groups()
    return Stated((int(major), int(minor), int(patch or 0)), patch is not None, bool(v), suffix)


def numbers(text):
    """(major, minor, patch) of a version string (patch 0 when not written), or None when it is not one."""
    found = read(text)
    return found.numbers if found else None
