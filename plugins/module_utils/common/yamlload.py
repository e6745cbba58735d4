# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The YAML loaders every reader uses: safe ones, on libyaml's parser where PyYAML was built with it (the wheels are:
about 20 times faster on a control plane's config, and it bounds nesting where the pure-Python loader recurses).

``LOADER`` reads YAML as YAML does; ``TEXT_DATES`` reads it as Go's YAML and kubectl (YAML to JSON) do, where
"2026-01-01" in a string field stays that string, not a date: machine configs and Kubernetes objects.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

try:
    import yaml
    HAS_YAML = True
except ImportError:  # pragma: no cover - PyYAML comes with ansible-core
    HAS_YAML = False


def text_dates(base):
    """A loader on ``base`` (a safe loader class) that leaves dates as text."""
    class _TextDates(base):  # pylint: disable=too-many-ancestors
        pass

    _TextDates.yaml_implicit_resolvers = dict(
        (key, [(tag, regexp) for tag, regexp in value if tag != "tag:yaml.org,2002:timestamp"])
        for key, value in yaml.SafeLoader.yaml_implicit_resolvers.items())
    return _TextDates


if HAS_YAML:
    LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    TEXT_DATES = text_dates(LOADER)
else:  # pragma: no cover
    LOADER = TEXT_DATES = None
