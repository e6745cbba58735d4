"""Every reader of input from outside (a file or option the user gives, a machine's reply, an object of the API
server) and its fuzz target (issue 26): the one list. A reader goes through the guard of common/untrusted.py (size
checked on the bytes before decoding, UTF-8, depth and values of what was parsed) or its own equivalent, and
every case of its fuzz target succeeds or fails with one IchorError line without key material (tests/unit/conftest.py:
the rule, the mutations, the CI budget and the maintainer's command).

READERS: (reader, what it reads, test file, test function, fuzz target). A reader with no target yet is in GAPS, with
what it still does; the strict expected failures at the end hold those found, so that fixing one fails its mark.
"""

import base64
import glob
import os
import re

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError

HERE = os.path.dirname(os.path.abspath(__file__))

READERS = [
    ("talos.talosconfig.read/parse/load", "a talosconfig: file, talosconfig_content, TALOSCONFIG",
     "test_fuzz_talosconfig.py", "test_fuzz_talosconfig", "talosconfig"),
    ("talos.talosconfig.load (from a file)", "a talosconfig file",
     "test_fuzz_talosconfig.py", "test_fuzz_talosconfig_file", "talosconfig-file"),
    ("reclaim.inspection.load_foreign", "the foreign talosconfig of a reclaim: file or content",
     "test_fuzz_reclaim.py", "test_fuzz_foreign_talosconfig", "foreign-talosconfig"),
    ("reclaim.inspection.inspect_configured, maintenance_identity; reclaim.live.LiveIO.managed",
     "a machine's replies (disks, volumes, system disk, etcd members and status, facts, SystemInformation)",
     "test_fuzz_reclaim.py", "test_fuzz_reclaim_inspection", "reclaim-inspection"),
    ("talos.client (resource_dict, first, status), talos.machine (facts, config, apply), talos.kubeconfig",
     "a machine's replies: protobuf, COSI specs (YAML), statuses, the Kubeconfig archive",
     "test_fuzz_machine_replies.py", "test_fuzz_machine_replies", "machine-replies"),
    ("talos.wire (on h2)", "the HTTP/2 frames of a reply", "test_wire.py", "test_fuzz_the_frames_of_a_reply",
     "wire-frames"),
    ("config.documents.parse, config.yamlio.load_all, config.secrets.from_config/validate/same_cluster",
     "a live machine config (MachineConfig's text): talos_secrets' recover, talos_machine_config's check",
     "test_fuzz_live_config.py", "test_fuzz_live_config_secrets", "live-config-secrets"),
    ("config.talos_side.facts", "a live machine config: what talos_facts reports of it",
     "test_fuzz_live_config.py", "test_fuzz_live_config_facts", "live-config-facts"),
    ("config.adopt.read, config.images.component_versions", "a live machine config: what adopt maps of it",
     "test_fuzz_live_config.py", "test_fuzz_live_config_adopt", "live-config-adopt"),
    ("common.images.parse, config.images.tag_version, config.drift.minor_back", "an image reference of a live config",
     "test_fuzz_live_config.py", "test_fuzz_image_references", "image-references"),
    ("config.secrets.load/parse/validate", "a secrets bundle file",
     "test_fuzz_secrets_bundle.py", "test_fuzz_secrets_bundle", "secrets-bundle"),
    ("k8s.cluster_record.decode and the record's readers", "ConfigMap ichor-system/ichor-cluster",
     "test_fuzz_cluster_record.py", "test_fuzz_cluster_record", "cluster-record"),
    ("installer.bundle.load", "the installer's bundle manifests",
     "test_fuzz_installer_bundle.py", "test_fuzz_installer_bundle", "installer-bundle"),
    ("installer.inventory.parse", "ConfigMap ichor-installer-inventory",
     "test_fuzz_installer_inventory.py", "test_fuzz_installer_inventory", "installer-inventory"),
    ("cilium.record.decode and Record", "a Helm release Secret (base64, gzip, JSON)",
     "test_fuzz_helm_record.py", "test_fuzz_helm_record", "helm-record"),
    ("config.bundle_secret.stored_bundle", "Secret ichor-system/ichor-secrets-bundle",
     "test_fuzz_bundle_secret.py", "test_fuzz_bundle_secret", "bundle-secret"),
    ("k8s.kubeconfig.load (kubeconfig_content, the kubeconfig file, KUBECONFIG), check, Kubeconfig",
     "a kubeconfig: kubeconfig_content, a file, the files KUBECONFIG names",
     "test_fuzz_kubeconfig.py", "test_fuzz_kubeconfig", "kubeconfig"),
    ("ansible_module.specs.validate and ansible-core's validation", "every module's options",
     "test_fuzz_module_options.py", "test_fuzz_module_options", "module-options"),
]

# Fuzz targets that read nothing from outside.
OTHER_TARGETS = {}

# Readers of outside input with no fuzz target yet, and what a probe found in them (issue 26): owned by code outside
# the change that made this list; each is held by a strict expected failure below.
GAPS = []


def _source(name):
    with open(os.path.join(HERE, name)) as handle:
        return handle.read()


@pytest.mark.parametrize("reader, what, path, test, target", READERS, ids=[r[4] for r in READERS])
def test_every_target_exists(reader, what, path, test, target):
    text = _source(path)
    assert re.search(r"^def %s\(" % re.escape(test), text, re.M), "%s: no test %s" % (path, test)
    assert re.search(r"\bfuzz\(\"%s\"" % re.escape(target), text), "%s: no fuzz target %s" % (path, target)


def test_every_fuzz_target_is_listed():
    found = set()
    for path in glob.glob(os.path.join(HERE, "test_*.py")):
        found.update(re.findall(r"\bfuzz\(\"([a-z0-9-]+)\"", _source(os.path.basename(path))))
    listed = set(r[4] for r in READERS) | set(OTHER_TARGETS)
    assert found == listed, "fuzz targets not listed here (or listed and gone): %s" % sorted(found ^ listed)


def _outcome(call):
    """The fuzz tests' rule (success, or one IchorError line), and what the reader made of its input: ("returned",
    value) or ("refused", message), for the test to hold against what the input must give."""
    try:
        return "returned", call()
    except IchorError as exc:
        assert "\n" not in exc.message and len(exc.message) < 500
        return "refused", exc.message


@pytest.mark.parametrize("content", ["a: !!int ''\n", "a: !!timestamp x\n", "a: " + "[" * 50000],
                         ids=["int-tag", "timestamp-tag", "deep"])
def test_kubeconfig_content(content):
    from ansible_collections.maesh.ichor.plugins.module_utils.k8s import kubeconfig
    assert _outcome(lambda: kubeconfig.load(kubeconfig_content=content)) == (
        "refused", "the option kubeconfig_content is not valid YAML")


def test_installer_inventory():
    from ansible_collections.maesh.ichor.plugins.module_utils.installer import inventory
    # an inventory without metadata lists what it lists: here nothing
    assert _outcome(lambda: inventory.parse({"data": {"objects": "[]"}})) == ("returned", ([], []))
    # one that cannot be parsed is ignored, so nothing is pruned on its word, and the run says so
    deep = {"metadata": {}, "data": {"objects": "[" * 100000 + "]" * 100000}}
    assert _outcome(lambda: inventory.parse(deep)) == ("returned", (None, [
        "the installer inventory ichor-installer-inventory cannot be parsed; it is ignored and nothing it lists is "
        "pruned"]))


def test_helm_release_record():
    from ansible_collections.maesh.ichor.plugins.module_utils.cilium import record
    deep = base64.b64encode(base64.b64encode(b"[" * 100000 + b"]" * 100000)).decode()
    assert _outcome(lambda: record.decode(deep)) == (
        "refused", "the release record is not a Helm release (its JSON nests too deep)")


@pytest.mark.parametrize("secret", [{"data": {"bundle.yaml": 5}}, {"data": ["x"]}], ids=["number", "list"])
def test_bundle_secret(secret):
    from ansible_collections.maesh.ichor.plugins.module_utils.config import bundle_secret
    # no readable bundle: the writer then refuses to replace the Secret (the test below)
    assert _outcome(lambda: bundle_secret.stored_bundle(secret)) == ("returned", None)


def test_bundle_secret_writer_refuses_a_secret_with_no_readable_bundle():
    from ansible_collections.maesh.ichor.plugins.module_utils.config import bundle_secret

    class Kube:
        writes = []

        @staticmethod
        def get(*_ref):
            return {"data": {"bundle.yaml": 5}}

        def __getattr__(self, verb):  # create, replace, apply, delete: none may be called
            return lambda *args, **kwargs: self.writes.append(verb)

    class Bundle:
        @staticmethod
        def fingerprint():
            return "sha256:ours"

    kube = Kube()
    with pytest.raises(IchorError, match="holds no readable bundle, not this cluster's .*nothing written"):
        bundle_secret.bundle_secret(kube, Bundle(), {"plan": []}, check_mode=False)
    assert kube.writes == []
