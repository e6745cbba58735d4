# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which fields of a machine config hold secrets: the one list drift reports and diffs mask by.

Paths are the engine's (``documents.paths``): ``<kind>[/<name>]:<dotted.path>``, list items as
``[name]`` or ``[index]``. A field is matched on its kind and on its path with the list segments left
out, so ``machine.network.interfaces[0].vip.hcloud.apiToken`` and ``[eth0]`` alike match
``machine.network.interfaces.vip.hcloud.apiToken``.

The list covers every field machinery's ``RedactSecrets`` replaces at v1.12.7, v1.13.9 and v1.14.1
(tests/integration/test_secret_paths.py holds it to that, fixture by fixture), plus fields machinery
leaves as they are although they carry credentials (``ours`` below). Bundle fields are the secrets
bundle's: drift there means the bundle is another cluster's (their certificates are public, and
masked all the same, as a set).

Environment values are masked: ``machine.env`` and the other environment maps and lists. Talos
documents ``http_proxy``/``https_proxy`` there, and a proxy URL often carries a user and password;
the variable names stay visible in the paths. Decided here for every config, as the safe default.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.maesh.ichor.plugins.module_utils.common.redact import REDACTED

BUNDLE = "bundle"  # a field of the secrets bundle (also masked)
SECRET = "secret"  # machinery redacts it
OURS = "ours"  # machinery does not redact it, we mask it

# (document kind, path with list segments left out, what it is)
FIELDS = (
    ("v1alpha1", r"machine\.token", BUNDLE),
    ("v1alpha1", r"machine\.ca\.(crt|key)", BUNDLE),
    ("v1alpha1", r"cluster\.(id|secret|token|secretboxEncryptionSecret|aescbcEncryptionSecret)", BUNDLE),
    ("v1alpha1", r"cluster\.(ca|aggregatorCA|etcd\.ca)\.(crt|key)", BUNDLE),
    ("v1alpha1", r"cluster\.serviceAccount\.key", BUNDLE),
    ("v1alpha1", r"machine\.registries\.config\..+\.auth\.(password|auth|identityToken)", SECRET),
    ("v1alpha1", r"machine\.registries\.config\..+\.tls\.clientIdentity\.key", SECRET),
    ("v1alpha1", r"machine\.network\.interfaces\.wireguard\.privateKey", SECRET),
    ("v1alpha1", r"machine\.network\.interfaces(\.vlans)?\.vip\.(equinixMetal|hcloud)\.apiToken", SECRET),
    ("v1alpha1", r"machine\.systemDiskEncryption\.(state|ephemeral)\.keys\.static\.passphrase", SECRET),
    ("v1alpha1", r"machine\.env\..+", OURS),
    ("v1alpha1", r"cluster\.(apiServer|controllerManager|scheduler)\.env\..+", OURS),
    ("v1alpha1", r"cluster\.extraManifestHeaders\..+", OURS),
    ("DiscoveryIdentityConfig", r"clusterID|clusterSecret", BUNDLE),
    ("KubeAPIServerCAConfig", r"issuingCA\.(cert|key)|acceptedCAs", BUNDLE),
    ("KubeAggregatorCAConfig", r"issuingCA\.(cert|key)", BUNDLE),
    ("KubeServiceAccountConfig", r"issuer\.privateKey", BUNDLE),
    ("KubeEtcdEncryptionConfig", r"config\.(.+\.)?secret", BUNDLE),
    ("RegistryAuthConfig", r"password|auth|identityToken", SECRET),
    ("RegistryTLSConfig", r"clientIdentity\.key", SECRET),
    ("WireguardConfig", r"privateKey|peers\.presharedKey", SECRET),
    ("HCloudVIPConfig", r"apiToken", SECRET),
    ("SideroLinkConfig", r"apiUrl|uniqueToken", SECRET),  # the join token is a query parameter of apiUrl
    ("VolumeConfig", r"encryption\.keys\.static\.passphrase", SECRET),
    ("UserVolumeConfig", r"encryption\.keys\.static\.passphrase", SECRET),
    ("RawVolumeConfig", r"encryption\.keys\.static\.passphrase", SECRET),
    ("SwapVolumeConfig", r"encryption\.keys\.static\.passphrase", SECRET),
    ("EnvironmentConfig", r"variables\..+", OURS),
    ("ExtensionServiceConfig", r"environment", OURS),
    ("ContainerConfig", r"environment", OURS),
    ("KubeAPIServerConfig", r"env\..+", OURS),
    ("KubeControllerManagerConfig", r"env\..+", OURS),
    ("KubeSchedulerConfig", r"env\..+", OURS),
    ("KubeExternalManifestConfig", r"headers\..+", OURS),
)

_BY_KIND = {}
for _kind, _pattern, _what in FIELDS:
    _BY_KIND.setdefault(_kind, []).append((re.compile("^(%s)$" % _pattern), _what))

# A field no entry names but whose last segment says credential (a field a later Talos adds).
_NAMED_LIKE = re.compile(r"(?i)(password|passphrase|token|secret|privatekey|presharedkey)$")
# Values that are credentials wherever they are.
_PRIVATE_KEY = "PRIVATE KEY"
# a URL's user information (RFC 3986 3.2.1): a user and password, or a token given as the user alone
_URL_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s]+@")
_LIST_SEGMENT = re.compile(r"\[[^\]]*\]")


_KIND = re.compile(r"^([A-Za-z0-9]+)[/:]")


def _fields(path):
    """(kind, [field candidates]): a document's name may hold ':' (a registry host with a port), so every
    ':' after the kind is a possible end of the label; the patterns are anchored, the candidates rarely
    both match."""
    match = _KIND.match(path)
    if not match:
        return "", []
    kind = match.group(1)
    out = []
    index = path.find(":", len(kind))
    while index >= 0:
        out.append(_LIST_SEGMENT.sub("", path[index + 1:]))
        index = path.find(":", index + 1)
    return kind, out


def what(path):
    """BUNDLE, SECRET or OURS for a path of the list, else None."""
    kind, fields = _fields(path)
    for pattern, found in _BY_KIND.get(kind, ()):
        if any(pattern.match(field) for field in fields):
            return found
    return None


def is_bundle(path):
    """A field of the secrets bundle: drift there means the bundle is another cluster's."""
    return what(path) == BUNDLE


def is_secret(path, value=None):
    """Whether the value at path is never printed: the list, a credential-like name, or key material."""
    if what(path) is not None:
        return True
    if _NAMED_LIKE.search(path.rsplit(".", 1)[-1].rsplit(":", 1)[-1]):
        return True
    return isinstance(value, str) and (_PRIVATE_KEY in value or bool(_URL_USERINFO.search(value)))


def mask(path, value):
    """The value as printed: the redaction marker for a secret, None and empty values as they are. A list or a map
    (a leaf the drift compares whole, as ``cluster.extraManifests``) is masked element by element: every string in
    it is judged as a leaf of its own, wherever it sits."""
    if value is None or value == "" or value == [] or value == {}:
        return value
    if isinstance(value, list):
        if is_secret(path):
            return [REDACTED for _item in value]
        return [mask("%s[%d]" % (path, index), item) for index, item in enumerate(value)]
    if isinstance(value, dict) and not is_secret(path):
        return dict((key, mask("%s.%s" % (path, key), item)) for key, item in value.items())
    return REDACTED if is_secret(path, value) else value


def mask_body(label, body):
    """A copy of a document body with every secret leaf replaced by the redaction marker."""
    return _mask_walk(label + ":", body, "")


def _mask_walk(prefix, value, field):
    if isinstance(value, dict):
        return dict((key, _mask_walk(prefix, item, "%s.%s" % (field, key) if field else str(key))) for key, item in value.items())
    if isinstance(value, list):
        if is_secret(prefix + field) and value:
            return [REDACTED for _item in value]
        return [_mask_walk(prefix, item, "%s[%d]" % (field, index)) for index, item in enumerate(value)]
    if value is None or value == "":
        return value
    return REDACTED if is_secret(prefix + field, value) else value
