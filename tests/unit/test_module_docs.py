"""Each module's documentation states its options as its action plugin validates them (issue 28): a module file is
documentation only, so ansible-test's validate-modules no longer compares the two. Every option of DOCUMENTATION,
doc fragments merged as ansible-doc merges them, against the catalog's argument spec, suboptions included: type,
elements, default, choices, required, and a no_log option's description says it is never logged."""

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.ansible_module import catalog
from tests import collection_path

MODULES = sorted(catalog.MODULES)


def _documented():
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collection_path.collections_root())
    doc = os.path.join(os.path.dirname(sys.executable), "ansible-doc")
    done = subprocess.run([doc, "--json", "-t", "module"] + ["maesh.ichor." + m for m in MODULES], env=env,
                          capture_output=True, text=True, timeout=300, check=True)
    return dict((name.split(".")[-1], entry["doc"]) for name, entry in json.loads(done.stdout).items())


DOCS = _documented()


def _same_default(documented, specified):
    if isinstance(specified, float) and isinstance(documented, (int, float)) and not isinstance(documented, bool):
        return float(documented) == specified
    return documented == specified


def differences(documented, specified, prefix=""):
    """Every way the documented options and the spec's differ, as lines."""
    out = []
    for name in sorted(set(documented) | set(specified)):
        path = prefix + name
        if name not in specified:
            out.append("%s: documented, not in the spec" % path)
            continue
        if name not in documented:
            out.append("%s: in the spec, not documented" % path)
            continue
        doc, spec = documented[name], specified[name]
        for key, default in (("type", "str"), ("elements", None), ("choices", None), ("required", False)):
            if doc.get(key, default) != spec.get(key, default):
                out.append("%s: %s %r documented, %r in the spec" % (path, key, doc.get(key, default), spec.get(key, default)))
        if not _same_default(doc.get("default"), spec.get("default")):
            out.append("%s: default %r documented, %r in the spec" % (path, doc.get("default"), spec.get("default")))
        if spec.get("no_log"):
            text = " ".join(doc.get("description") or []) if isinstance(doc.get("description"), list) else doc.get("description", "")
            if "never logged" not in text.lower():
                out.append("%s: no_log, and its description does not say it is never logged" % path)
        if doc.get("suboptions") or spec.get("options"):
            out += differences(doc.get("suboptions") or {}, spec.get("options") or {}, path + ".")
    return out


@pytest.mark.parametrize("module", MODULES)
def test_the_documentation_states_the_options_the_action_validates(module):
    assert differences(DOCS[module].get("options") or {}, catalog.MODULES[module].argument_spec()) == []


def test_a_difference_is_seen():
    # the comparison itself: each kind of difference is reported
    spec = dict(a=dict(type="int", default=3), b=dict(type="list", elements="dict", options=dict(c=dict(type="str"))),
                d=dict(type="str", no_log=True))
    doc = dict(a=dict(type="int", default=3), b=dict(type="list", elements="dict", suboptions=dict(c=dict())),
               d=dict(type="str", description=["The content. Never logged."]))
    assert differences(doc, spec) == []
    assert differences(dict(doc, a=dict(type="int", default=4)), spec) == ["a: default 4 documented, 3 in the spec"]
    assert differences(dict(doc, e=dict()), spec) == ["e: documented, not in the spec"]
    assert differences(dict(doc, b=dict(type="list", elements="dict", suboptions=dict())), spec) == [
        "b.c: in the spec, not documented"]
    assert differences(dict(doc, d=dict(type="str", description="x")), spec) == [
        "d: no_log, and its description does not say it is never logged"]


def test_a_spec_is_not_changed_by_validating_against_it():
    # in the controller's process one spec serves every task: the validator filled release_check's desired (default
    # {}) with its suboptions in place, and the documented default no longer matched the next time it was read
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
    for name in MODULES:
        before = repr(catalog.MODULES[name].argument_spec())  # a snapshot: the spec's dicts may be shared
        ArgumentSpecValidator(catalog.MODULES[name].argument_spec()).validate({})
        assert repr(catalog.MODULES[name].argument_spec()) == before, name
