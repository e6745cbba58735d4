# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A path as the operator gives it (``~/clusters/prod/kubeconfig``) read the one way a module's path option reads it,
and the files a play names that are not there: checked before anything is read or sent, so that a file named and
missing is refused rather than replaced by the environment's (KUBECONFIG, ~/.kube/config, TALOSCONFIG)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os


def expanded(path):
    """``path`` with ``$VARS`` and ``~`` expanded, as ansible-core's path options expand it."""
    return os.path.expanduser(os.path.expandvars(path))


def missing_files(named):
    """One line for each entry of ``named`` (a variable's name -> the path it was given; a variable not set is not in
    it, or None) that names no file: given empty, or naming nothing that exists, or a directory, once expanded. In
    the order of the names."""
    problems = []
    for name in sorted(named or {}):
        value = named[name]
        if value is None:
            continue
        given = str(value)
        if not given.strip():
            problems.append("%s is empty: name the file, or leave %s unset (nothing was read or sent)" % (name, name))
            continue
        path = expanded(given)
        if os.path.isfile(path):
            continue
        shown = given if path == given else "%s (%s)" % (given, path)
        problems.append("%s names %s, which %s: correct the path (nothing was read or sent)" % (
            name, shown, "is a directory, not a file" if os.path.isdir(path) else "does not exist"))
    return problems
