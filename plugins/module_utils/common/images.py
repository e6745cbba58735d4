# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Container image references, parsed in one place: ``[registry[:port]/]path[:tag][@algorithm:hex]``.

The grammar is that of github.com/distribution/reference (v0.6.0), which containerd, Kubernetes and
Talos parse references with. The registry is the first component only when it looks like one (a ``.``
or ``:`` in it, ``localhost``, or capitals), as they read it: ``siderolabs/installer`` is a path on
the default registry, ``registry:5000/installer`` a path on ``registry:5000``. A digest is checked as
go-digest checks it (sha256, sha384 or sha512, lowercase hex of the right length). Anything else is
an ``ImageRefError`` with one line saying what is wrong.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from collections import namedtuple

from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError

# distribution/reference regexp.go, with Go's ASCII \w spelled out and \Z for Go's end of text
_ALNUM = r"[a-z0-9]+"
_PATH_COMPONENT = _ALNUM + r"(?:(?:[._]|__|[-]+)" + _ALNUM + r")*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = r"(?:" + _DOMAIN_COMPONENT + r"(?:\." + _DOMAIN_COMPONENT + r")*|\[[a-fA-F0-9:]+\])"
_NAME = r"(?:" + _HOST + r"(?::[0-9]+)?/)?" + _PATH_COMPONENT + r"(?:/" + _PATH_COMPONENT + r")*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(r"\A(" + _NAME + r")(?::(" + _TAG + r"))?(?:@(" + _DIGEST + r"))?\Z")

NAME_MAX = 255  # reference.RepositoryNameTotalLengthMax
DIGEST_HEX = {"sha256": 64, "sha384": 96, "sha512": 128}
FORM = "[registry[:port]/]path[:tag][@sha256:<64 hex digits>]"
_QUOTED_MAX = 200


class ImageRefError(IchorError):
    """An image reference that is not one (or not one this use can take)."""


class ImageRef(namedtuple("ImageRef", "registry path tag digest")):
    """A parsed reference; ``registry`` (host[:port]), ``tag`` and ``digest`` are None when not written."""

    __slots__ = ()

    @property
    def repository(self):
        """The name without tag and digest, as written: ``registry:5000/a/installer``."""
        return "%s/%s" % (self.registry, self.path) if self.registry else self.path

    def __str__(self):
        return self.repository + (":" + self.tag if self.tag else "") + ("@" + self.digest if self.digest else "")


def quoted(text):
    """A reference as it goes into a message: repr'd (one line) and cut."""
    text = repr(text)
    return text if len(text) <= _QUOTED_MAX else text[:_QUOTED_MAX] + "...'"


def _digest_problem(digest):
    algorithm, _colon, hexits = digest.partition(":")
    if algorithm not in DIGEST_HEX:
        return "unsupported digest algorithm %s (sha256, sha384 or sha512)" % quoted(algorithm)
    if len(hexits) != DIGEST_HEX[algorithm]:
        return "a %s digest has %d hex digits, this one %d" % (algorithm, DIGEST_HEX[algorithm], len(hexits))
    if not re.match(r"\A[a-f0-9]+\Z", hexits):
        return "the digest's hex digits must be lowercase"
    return None


def _mismatch(text):
    """What makes ``text`` miss the grammar, as far as one rule says it."""
    if text != text.strip():
        return "it has leading or trailing whitespace"
    if _REFERENCE.match(text.lower()):
        return "the repository name must be lowercase"
    name, at, digest = text.partition("@")
    if at and not re.match(r"\A" + _DIGEST + r"\Z", digest):
        return "the digest %s is not algorithm:hex (sha256:<64 hex digits>)" % quoted(digest)
    last = name.rsplit("/", 1)[-1]
    if ":" in last and not re.match(r"\A" + _TAG + r"\Z", last.split(":", 1)[1]):
        return ("the tag %s is not 1 to 128 letters, digits, '_', '.' or '-' (not starting with '.' or '-')"
                % quoted(last.split(":", 1)[1]))
    return "not a reference of the form %s" % FORM


def parse(text):
    """``text`` as an ImageRef; ImageRefError (one line) when it is not a valid reference."""
    if not isinstance(text, str):
        raise ImageRefError("an image reference must be a string (%s), not %s" % (FORM, type(text).__name__))
    if not text:
        raise ImageRefError("the image reference is empty; expected %s" % FORM)
    match = _REFERENCE.match(text)
    if match is None:
        raise ImageRefError("image reference %s: %s" % (quoted(text), _mismatch(text)))
    name, tag, digest = match.groups()
    if len(name) > NAME_MAX:
        raise ImageRefError("image reference %s: the repository name is longer than %d characters" % (quoted(text), NAME_MAX))
    if digest:
        problem = _digest_problem(digest)
        if problem:
            raise ImageRefError("image reference %s: %s" % (quoted(text), problem))
    first, slash, rest = name.partition("/")
    if slash and (first == "localhost" or "." in first or ":" in first or first.lower() != first):
        return ImageRef(first, rest, tag, digest)
    return ImageRef(None, name, tag, digest)
