# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""YAML in and out, in the layout machinery's encoder writes (four-space indent, literal blocks).

PyYAML is optional at import time: module_utils must import without it, and every function that
needs it raises a ConfigError naming the missing library.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.common import untrusted, yamlload
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError

try:
    import yaml
    HAS_YAML = True
    YAML_IMPORT_ERROR = None
except ImportError as exc:  # pragma: no cover - exercised only without PyYAML
    yaml = None
    HAS_YAML = False
    YAML_IMPORT_ERROR = exc


# The guard of every YAML text read here (live machine configs, a secrets bundle, inline manifests): a machine
# config is tens of kilobytes, a few hundred with inline manifests (a whole Cilium manifest is about half a
# megabyte); the limit bounds what a machine can make us parse (libyaml and PyYAML's constructor take seconds per
# megabyte of small values). The depth admits a CRD's schema in an inline manifest (a config itself nests less than
# ten levels) and keeps the recursive walkers (drift's flatten) far from Python's recursion limit; the count of
# values bounds what aliases can expand to.
MAX_SIZE = 8 * 1024 * 1024
MAX_DEPTH = 128
MAX_VALUES = 500000


def _require():
    if not HAS_YAML:
        raise ConfigError("PyYAML is required for machine configs (pip install pyyaml)")


if HAS_YAML:
    # Go's YAML decodes "2026-01-01" into a string field as the string. Errors read the same from libyaml's loader
    # and the pure one (describe_error; tests/unit/test_yamlio.py runs each).
    _Loader = yamlload.TEXT_DATES

    class _Dumper(yaml.SafeDumper):  # pylint: disable=too-many-ancestors
        """Dumper with indented sequences and literal blocks for multi-line strings."""

        def increase_indent(self, flow=False, indentless=False):
            return super(_Dumper, self).increase_indent(flow, False)

    def _str_representer(dumper, data):
        if "\n" in data:
            return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
        return dumper.represent_scalar("tag:yaml.org,2002:str", data)

    _Dumper.add_representer(str, _str_representer)
else:  # pragma: no cover
    _Loader = None
    _Dumper = None


# What went wrong, by the error's class: a parse error of an untrusted document says where and what kind,
# never the text there (a private key is a few lines of a config; PyYAML quotes the offending bytes).
_KINDS = (
    ("ReaderError", "a character YAML does not allow"),
    ("ScannerError", "a token that cannot be read"),
    ("ParserError", "a structure that cannot be parsed"),
    ("ComposerError", "an anchor or alias that cannot be resolved"),
    ("ConstructorError", "a value or tag that cannot be constructed"),
)


# What PyYAML's constructors raise on a scalar they cannot build under an explicit tag (!!int on a word,
# !!timestamp x, !!bool '', an unhashable key): not YAMLErrors, but the same thing to the user.
_CONSTRUCTOR_ERRORS = (ValueError, TypeError, OverflowError, AttributeError, KeyError, IndexError)


def describe_error(exc):
    """'<kind> at line L, column C' for a YAML error (or a decode error), without any of the document's text."""
    if isinstance(exc, UnicodeDecodeError):
        return "bytes that are not UTF-8 at byte %d" % exc.start
    if isinstance(exc, RecursionError):
        return "nesting too deep to read"
    if isinstance(exc, _CONSTRUCTOR_ERRORS) and not isinstance(exc, yaml.YAMLError):
        # a constructor that gave up on a scalar (!!int on a word, a key that cannot be hashed): no position known
        return "a value or tag that cannot be constructed"
    kind = "a YAML error"
    for name, text in _KINDS:
        if any(cls.__name__ == name for cls in type(exc).__mro__):
            kind = text
            break
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is not None:
        return "%s at line %d, column %d" % (kind, mark.line + 1, mark.column + 1)
    position = getattr(exc, "position", None)
    if isinstance(position, int):
        return "%s at character %d" % (kind, position + 1)
    return kind


def load_all(text, what="the machine config"):
    """Parse a YAML stream (str or UTF-8 bytes) into a list of Python objects (empty documents dropped), through
    the guard: at most MAX_SIZE bytes (checked before decoding), nesting at most MAX_DEPTH levels, at most MAX_VALUES
    values.

    A parse error is a ConfigError naming ``what``, the position and the kind of error, never content.
    """
    _require()
    try:
        text = untrusted.text(text, MAX_SIZE)
    except untrusted.Unreadable as exc:
        if exc.start is not None:
            raise ConfigError("%s is not valid YAML: bytes that are not UTF-8 at %s %d" % (what, exc.unit, exc.start))
        raise ConfigError("%s %s" % (what, exc.problem))
    try:
        docs = [doc for doc in yaml.load_all(text, Loader=_Loader) if doc is not None]
    except (yaml.YAMLError, RecursionError) + _CONSTRUCTOR_ERRORS as exc:
        raise ConfigError("%s is not valid YAML: %s" % (what, describe_error(exc)))
    problem = untrusted.shape_problem(docs, MAX_DEPTH, MAX_VALUES, documents=True)
    if problem:
        raise ConfigError("%s %s" % (what, problem))
    return docs


def load_one(text, what="the document"):
    """Parse a single YAML document."""
    docs = load_all(text, what)
    if len(docs) != 1:
        raise ConfigError("expected one YAML document, found %d" % len(docs))
    return docs[0]


def dump(obj):
    """Emit one document (no leading '---')."""
    _require()
    return yaml.dump(obj, Dumper=_Dumper, default_flow_style=False, sort_keys=False, indent=4, width=100000, allow_unicode=True)


def dump_all(objs):
    """Emit documents separated by '---' lines, as machinery does."""
    return "---\n".join(dump(obj) for obj in objs)
