"""Where a Talos module's start-up goes, in one fresh process (run by task_overhead.py, not on its own).

    python benchmarks/startup_parts.py <exploded AnsiballZ dir> <talosconfig>

The directory is ``talos_facts``'s AnsiballZ payload exploded (``AnsiballZ_talos_facts.py explode``): the same
``ansible`` and collection code the module runs, compiled on import as from the module zip (no bytecode is written).
Prints one JSON object of CPU milliseconds: Ansible's ``basic`` (what ``ping`` also pays), each library the Talos
API needs, the collection's own code, and the work up to the first call against the refusing talosconfig.
"""

import json
import resource
import sys


def _cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


PARTS = (
    ("ansible_basic", "ansible.module_utils.basic"),
    ("ssl", "ssl"),
    ("asyncio", "asyncio"),
    ("pyyaml", "yaml"),
    ("grpc_transport", "ansible_collections.maesh.ichor.plugins.module_utils.talos.wire"),
    ("protobuf", "google.protobuf.empty_pb2"),
    ("collection", "ansible_collections.maesh.ichor.plugins.modules.talos_facts"),
)


def main(payload, talosconfig_path):
    sys.dont_write_bytecode = True
    sys.path.insert(0, payload)
    out = {}
    for part, name in PARTS:
        start = _cpu()
        __import__(name)
        out[part] = (_cpu() - start) * 1e3
    # pylint: disable=import-outside-toplevel
    from ansible_collections.maesh.ichor.plugins.module_utils.machine import facts as machine_facts
    from ansible_collections.maesh.ichor.plugins.module_utils.talos import client, talosconfig

    start = _cpu()
    talos = client.TalosClient(context=talosconfig.load(path=talosconfig_path), timeout=30)
    try:
        machine_facts.facts_result(talos, "127.0.0.1")
        raise SystemExit("the refusing talosconfig was answered")
    except Exception:  # pylint: disable=broad-except
        pass  # the refused dial, as in the module
    talos.close()
    out["first_call"] = (_cpu() - start) * 1e3
    print(json.dumps(dict((part, round(ms, 2)) for part, ms in out.items())))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
