"""Issue 26 §3: a credential is never printed, wherever it sits in a machine config: a list element (the URLs of
``cluster.extraManifests``, compared and reported as one value), a map value, a line of multi-line text; a URL's user
information (a user and password, or a token as the user alone) included. Held on a config real Talos code made, through
the drift report and the --diff documents, and as a property of the masking over generated structures."""

import json
import os
import random

import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.common.redact import REDACTED
from ansible_collections.maesh.ichor.plugins.module_utils.config import documents, drift, render, secret_paths, secrets
from tests import config_cases

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CASE = os.path.join(REPO, "tests", "fixtures", "configs", "v1.14", "v1.14.1", "k8s-older")
PASSWORD = "Pw0rdMarkerQ7"
TOKEN = "ghpTokenMarkerZ3"
MARKERS = (PASSWORD, TOKEN)


def _printed(report):
    return json.dumps(report, sort_keys=True, default=str)


def test_credentials_in_lists_maps_and_text_of_a_live_config_are_masked_in_the_report_and_the_diff():
    with open(os.path.join(CASE, "case.json")) as handle:
        case = json.load(handle)
    with open(os.path.join(CASE, "controlplane.conf")) as handle:
        docs = [d for d in yaml.safe_load_all(handle) if d]
    body = docs[0]
    body["cluster"]["extraManifests"] = ["https://ops:%s@manifests.example.com/a.yaml" % PASSWORD,
                                         "https://%s@manifests.example.com/b.yaml" % TOKEN,
                                         "https://manifests.example.com/public.yaml"]
    body["machine"].setdefault("nodeAnnotations", {})["source"] = (
        "https://client:%s@issuer.example.com" % PASSWORD)
    notes = "kind: ConfigMap\n# fetched from\n#   https://%s@git.example.com/x\n" % TOKEN
    body["cluster"]["inlineManifests"] = [{"name": "notes", "contents": notes}]
    live = documents.parse(yaml.safe_dump_all(docs))
    bundle = secrets.load(os.path.join(CASE, "secrets.yaml"))
    cluster_spec, machine_spec = config_cases.spec_of_case(case)
    machine_spec = config_cases.for_role(machine_spec, "controlplane")
    rendered = render.render(bundle, cluster_spec, machine_spec, case["contract"])
    found = drift.drift(rendered, live, dict(cluster_spec, versionContract=case["contract"]), case["contract"])
    report = [d.to_dict() for d in found.differences]
    extra = [d for d in report if d["path"] == "v1alpha1:cluster.extraManifests"]
    assert extra and extra[0]["live"] == [REDACTED, REDACTED, "https://manifests.example.com/public.yaml"]
    assert any("nodeAnnotations" in d["path"] for d in report) and any("inlineManifests" in d["path"] for d in report)
    shown = _printed(report) + documents.emit(drift.mask_docs(live))
    assert all(marker not in shown for marker in MARKERS), [m for m in MARKERS if m in shown]
    assert "https://manifests.example.com/public.yaml" in shown  # what holds no credential stays readable


def _structure(rng, depth, marker):
    """A random YAML-like value; ``marker`` placed (in a URL with user information, or as a password leaf) somewhere."""
    places = []

    def value(level):
        roll = rng.random()
        if level >= depth or roll < 0.3:
            node = rng.choice(["x", 1, True, None, "", "line one\nline two", "https://example.com/plain"])
            places.append(node)
            return node
        if roll < 0.65:
            return [value(level + 1) for unused in range(rng.randint(1, 4))]
        return dict(("k%d" % i, value(level + 1)) for i in range(rng.randint(1, 4)))

    top = value(0)
    secret = rng.choice(["https://u:%s@h.example.com/p" % marker, "git+ssh://%s@h.example.com/r" % marker,
                         "first line\nsee https://%s@h.example.com\nlast" % marker,
                         "-----BEGIN RSA PRIVATE KEY-----\n%s\n-----END RSA PRIVATE KEY-----" % marker])
    if not isinstance(top, (list, dict)):
        return [top, secret]
    holder = top
    for _step in range(rng.randint(0, depth)):  # walk down a random branch, then put it there
        children = [c for c in (holder.values() if isinstance(holder, dict) else holder) if isinstance(c, (list, dict))]
        if not children:
            break
        holder = rng.choice(children)
    if isinstance(holder, dict):
        holder["k%d" % len(holder)] = secret
    else:
        holder.insert(rng.randint(0, len(holder)), secret)
    return top


def test_property_no_credential_survives_the_masking_wherever_it_sits():
    rng = random.Random(26)
    paths = ["v1alpha1:cluster.extraManifests", "v1alpha1:machine.kubelet.extraArgs", "v1alpha1:cluster.inlineManifests",
             "KubeExternalManifestConfig/extra:url", "SomeFutureConfig/x:spec", "v1alpha1:machine.files"]
    for case in range(2000):
        marker = "Mk%dCred" % case
        value = _structure(rng, rng.randint(1, 5), marker)
        path = rng.choice(paths)
        assert marker not in _printed(secret_paths.mask(path, value)), (case, path, value)
        body = {"apiVersion": "v1alpha1", "kind": "SomeFutureConfig", "spec": value}
        assert marker not in _printed(secret_paths.mask_body("SomeFutureConfig", body)), (case, value)
