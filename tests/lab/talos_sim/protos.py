"""Access to the collection's generated Talos protos (message modules only)."""

import importlib

from ... import collection_path

collection_path.ensure()

BASE = "ansible_collections.maesh.ichor.plugins.module_utils.talos.proto"

_cache = {}


def module(name):
    """Import ``<BASE>.<name>`` or, if the package is laid out by directory, ``<BASE>.<dir>.<name>``.

    ``name`` is e.g. ``machine.machine_pb2`` (directory form) or ``machine_pb2``.
    """
    if name in _cache:
        return _cache[name]
    candidates = [name]
    if "." in name:
        candidates.append(name.rsplit(".", 1)[1])
    last = None
    for cand in candidates:
        try:
            mod = importlib.import_module("%s.%s" % (BASE, cand))
            _cache[name] = mod
            return mod
        except ImportError as exc:
            last = exc
    raise last


def available():
    try:
        machine()
        return True
    except ImportError:
        return False


def machine():
    return module("machine_pb2")


def common():
    return module("common_pb2")


def storage():
    return module("storage_pb2")


def image():
    return module("machine_image_pb2")


def lifecycle():
    return module("machine_lifecycle_pb2")


def cosi_resource():
    return module("cosi_resource_pb2")


def cosi_state():
    return module("cosi_state_pb2")


def empty():
    from google.protobuf import empty_pb2
    return empty_pb2


def spec(name):
    """Spec message module: block, cluster, config, enums, extensions, hardware, k8s, network, runtime."""
    return module("spec_%s_pb2" % name)
