# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster's admin kubeconfig as a control plane gives it over the Talos API (MachineService/Kubeconfig, as
``talosctl kubeconfig`` asks for it): the file out of the archive it streams, and which cluster (API server, CA)
a kubeconfig names."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import tarfile
import zlib

try:
    import yaml
except ImportError:  # pragma: no cover
    yaml = None

from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors


# A kubeconfig is a few kilobytes; the archive is read only until its file is found.
_KUBECONFIG_LIMIT = 1024 * 1024
_ARCHIVE_MEMBERS = 100


def kubeconfig_bytes(chunks):
    """Kubeconfig streams common.Data chunks that form a .tar.gz holding one file ``kubeconfig``."""
    data = b"".join(c.bytes for c in chunks)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            for number, member in enumerate(archive):
                if number >= _ARCHIVE_MEMBERS:
                    break
                if member.name.lstrip("./") == "kubeconfig" and member.isfile() and member.size <= _KUBECONFIG_LIMIT:
                    return archive.extractfile(member).read()
    except (tarfile.TarError, EOFError, zlib.error, OSError):
        raise errors.TalosCallError("the Kubeconfig reply is not a gzipped tar archive", code="INTERNAL")
    raise errors.TalosCallError("the Kubeconfig reply holds no kubeconfig file")


def cluster_of(text):
    """(server, CA data) of a kubeconfig's current context's cluster, or None when it is not a kubeconfig."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("clusters"), list):
        return None
    contexts = dict((c.get("name"), c.get("context") or {}) for c in doc.get("contexts") or [] if isinstance(c, dict))
    wanted = (contexts.get(doc.get("current-context")) or {}).get("cluster")
    clusters = [c for c in doc["clusters"] if isinstance(c, dict) and isinstance(c.get("cluster"), dict)]
    chosen = [c for c in clusters if c.get("name") == wanted] or clusters[:1]
    if not chosen:
        return None
    cluster = chosen[0]["cluster"]
    return cluster.get("server"), cluster.get("certificate-authority-data")
