"""A simulated machine's filesystem, for MachineService/List (``talosctl ls``).

Only what the collection reads is there: ``/etc/cni/net.d`` and its CNI configs. By default they follow the
CNI the cluster's machine configs select (Talos's flannel writes ``10-flannel.conflist``; a Cilium inline
manifest with ``cni: none``, Cilium's ``05-cilium.conflist``; ``none`` without one and ``custom``: nothing, as
the CNI is not known). A lab sets a machine's files itself (``POST /machines/<name>/cni_files``), for a CNI
installed from Kubernetes (Helm, Calico's operator) or two CNIs at once.

The listing follows Talos's machined: the root first (relative name "."), then its entries in lexical order,
a directory below the root not entered unless ``recurse`` (``recursion_depth`` 0 = no limit), a root that
does not exist an error of the whole call (Go's ``lstat`` message, gRPC Unknown).
"""

import json
import posixpath

import yaml

from . import config as cfg

CNI_DIR = "/etc/cni/net.d"

# Go's os.FileMode bits as uint32(fi.Mode()) sends them
MODE_DIR = 1 << 31
MODE_SYMLINK = 1 << 27

FLANNEL = "10-flannel.conflist"
CILIUM = "05-cilium.conflist"


def _conflist(name, plugin):
    return json.dumps({"cniVersion": "1.0.0", "name": name, "plugins": [{"type": plugin}]}, indent=2) + "\n"


DEFAULT_CONTENT = {FLANNEL: _conflist("cbr0", "flannel"), CILIUM: _conflist("cilium", "cilium-cni")}


def _has_cilium(manifests):
    for text in manifests:
        try:
            objs = list(yaml.safe_load_all(text or ""))
        except yaml.YAMLError:
            continue
        for obj in objs:
            if isinstance(obj, dict) and obj.get("kind") == "DaemonSet" and \
                    (obj.get("metadata") or {}).get("name") == "cilium":
                return True
    return False


def _cni_stated(facts):
    """(name, inline manifest texts) a config states, or None when it states no CNI (a contract v1.14
    worker's config carries no CNI document)."""
    if facts is None:
        return None
    docs = facts.docs
    v1 = facts.v1 or {}
    typed = cfg._typed(docs, "KubeletConfig")
    if typed:
        manifests = [d.get("manifest") or "" for d in cfg._typed(docs, "KubeInlineManifestConfig")]
        if cfg._typed(docs, "KubeFlannelCNIConfig"):
            return "flannel", manifests
        if any(d.get("name") == "custom-cni" for d in cfg._typed(docs, "KubeExternalManifestConfig")):
            return "custom", manifests
        if facts.machine_type != "controlplane":
            return None
        return "none", manifests
    manifests = [item.get("contents") or "" for item in (cfg._get(v1, "cluster", "inlineManifests") or [])
                 if isinstance(item, dict)]
    return cfg._get(v1, "cluster", "network", "cni", "name") or "flannel", manifests


def derived_cni_files(lab, m):
    """{file name: content} under /etc/cni/net.d that the cluster's selected CNI writes on ``m``."""
    stated = _cni_stated(m.facts)
    if stated is None:
        for other in lab.cluster_machines(m):
            if other.is_controlplane:
                stated = _cni_stated(other.facts)
                if stated is not None:
                    break
    if stated is None:
        return {}
    name, manifests = stated
    if name == "flannel":
        return {FLANNEL: DEFAULT_CONTENT[FLANNEL]}
    if name == "none" and _has_cilium(manifests):
        return {CILIUM: DEFAULT_CONTENT[CILIUM]}
    return {}


def cni_files(lab, m):
    """What /etc/cni/net.d holds on ``m``: the lab's own setting, else the derived files."""
    own = getattr(m, "cni_files", None)
    if own is not None:
        return dict(own)
    return derived_cni_files(lab, m)


def tree(lab, m):
    """{path: (is_dir, size, content)} of the machine's simulated filesystem."""
    out = {"/": (True, 4096, None)}
    parts = CNI_DIR.strip("/").split("/")
    for i in range(len(parts)):
        out["/" + "/".join(parts[:i + 1])] = (True, 4096, None)
    for name, content in cni_files(lab, m).items():
        data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
        out[posixpath.join(CNI_DIR, name)] = (False, len(data), data)
    return out


def _children(files, path):
    prefix = path.rstrip("/") + "/"
    return sorted(p for p in files if p != path and p.startswith(prefix) and "/" not in p[len(prefix):])


def _at_max_depth(max_depth, root, cur):
    if max_depth < 0 or root == cur:
        return False
    return cur.count("/") - root.count("/") >= max_depth


def listing(lab, m, root, recurse=False, recursion_depth=0, types=()):
    """[(name, relative name, is_dir, size)] as machined's List walks them; KeyError(message) when the root
    does not exist."""
    if not root.startswith("/"):
        root = "/" + root
    root = root.rstrip("/") or "/"
    files = tree(lab, m)
    if root not in files:
        raise KeyError("lstat %s: no such file or directory" % root)
    max_depth = (-1 if recursion_depth == 0 else int(recursion_depth)) if recurse else 0
    out = []

    def walk(path):
        is_dir, size, _content = files[path]
        if path == root:
            rel = "." if is_dir else posixpath.basename(path)
        else:
            rel = posixpath.relpath(path, root)
        kind = 1 if is_dir else 0  # ListRequest.Type: REGULAR 0, DIRECTORY 1 (the lab has no symlinks)
        if types and kind not in types:
            if is_dir:  # machined's walker skips the entry but still enters it, whatever the depth
                for child in _children(files, path):
                    walk(child)
            return
        out.append((path, rel, is_dir, size))
        if is_dir and not _at_max_depth(max_depth, root, path):
            for child in _children(files, path):
                walk(child)

    walk(root)
    return out
