# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The guard every reader of input we do not control goes through (a file the user names, a machine's reply, a
ConfigMap): a size limit checked on the bytes before they are decoded (a file is never read past it), UTF-8 or a
one-line refusal, and what was parsed nesting at most so deep and holding at most so many values (walked without
recursion: YAML aliases can make a small document refer to itself or expand to billions of values).

The refusals are phrases (``Unreadable.problem``: "is larger than 4194304 bytes", "is not UTF-8 text (byte 3)",
"nests deeper than 32 levels") that each reader puts after the name of what it read, in its own error class;
none of them quotes the input. The readers and their fuzz targets are listed in tests/unit/test_fuzz_readers.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError


class Unreadable(IchorError):
    """What is wrong with an input, as a phrase to follow its name; for text that is not UTF-8, ``start`` is where
    (counted from 0) in ``unit`` ("byte" or "character")."""

    def __init__(self, problem, start=None, unit=None):
        super(Unreadable, self).__init__(problem)
        self.problem = problem
        self.start = start
        self.unit = unit


def read_file(path, limit):
    """The first ``limit`` + 1 bytes of a file at most: one more than the limit, so that ``text`` refuses a file that
    is too large without reading it whole. Raises IOError/OSError as ``open`` does."""
    with open(os.path.expanduser(path), "rb") as handle:
        return handle.read(limit + 1)


def too_large(limit):
    return Unreadable("is larger than %d bytes" % limit)


def text(data, limit):
    """``data`` (bytes, or text) as text of at most ``limit`` bytes of UTF-8: the size checked before decoding."""
    if isinstance(data, str):
        if len(data) > limit:  # each character is one byte of UTF-8 at least
            raise too_large(limit)
        try:
            size = len(data.encode("utf-8"))
        except UnicodeEncodeError as exc:  # a lone surrogate (bytes that were not UTF-8, kept by surrogateescape)
            raise Unreadable("is not UTF-8 text (character %d)" % (exc.start + 1), exc.start, "character")
        if size > limit:
            raise too_large(limit)
        return data
    if not isinstance(data, (bytes, bytearray)):
        raise Unreadable("is not text (a %s)" % type(data).__name__)
    if len(data) > limit:
        raise too_large(limit)
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unreadable("is not UTF-8 text (byte %d)" % (exc.start + 1), exc.start, "byte")


def shape_problem(value, max_depth, max_values=None, documents=False):
    """None when ``value`` (parsed JSON or YAML) nests at most ``max_depth`` mappings and lists deep and holds at most
    ``max_values`` values (aliases counted each time they are used); else the problem, as a phrase. ``documents``:
    ``value`` is the list of a stream's documents, each of which is held to ``max_depth``."""
    count, todo = 0, [(value, 0 if documents else 1)]
    while todo:
        value, depth = todo.pop()
        count += 1
        if max_values is not None and count > max_values:
            return "holds more than %d values" % max_values
        if isinstance(value, (dict, list)):
            if depth > max_depth:
                return "nests deeper than %d levels" % max_depth
            todo.extend((item, depth + 1) for item in (value.values() if isinstance(value, dict) else value))
    return None


def check_shape(value, max_depth, max_values=None, documents=False):
    """``value``, or Unreadable when ``shape_problem`` finds something."""
    problem = shape_problem(value, max_depth, max_values, documents)
    if problem:
        raise Unreadable(problem)
    return value
