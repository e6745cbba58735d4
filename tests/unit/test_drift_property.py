"""The drift rule as a property: every leaf in which a live config and our render differ is in the drift
report (a path of the report equals the leaf, or one is below the other), or the machine is blocked
(class C, or the engine refuses the config). Issue 11 §2.

Variants: every fixture config (tests/fixtures/configs) mutated once: a leaf changed, emptied, set to
"" or {}, removed; a typed document added (from another fixture), removed, or the typed documents
reordered. The render is the one the engine compares with: adoption (adopt.read over the mutated
machine and its cluster's other machine, then probe) and, for the cases a spec reproduces, the spec
from case.json as an inventory would declare it.

This module holds the variant machinery and runs the property without Go, against an oracle written
here (it walks the YAML itself, sharing nothing with documents.flatten) over the configs machinery has
already re-encoded canonically (upgraded/*): CI runs a seeded sample of 400 variants (seed 11, about
fifteen seconds). tests/integration/test_drift_oracle.py runs the same variants against machinery itself.

A maintainer runs more: ICHOR_DRIFT_SEED=<n> (another sample), ICHOR_DRIFT_COUNT=<n> (its size),
ICHOR_DRIFT_ALL=1 (every variant of every config; hours).
"""

import glob
import json
import os
import random

import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.config import adopt, documents, drift, probing, render, secrets
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from tests import config_cases

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGS = os.path.join(REPO, "tests", "fixtures", "configs")
ROLES = ("controlplane", "worker")
IDENTITY = ("apiVersion", "kind", "name")

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
SEED = int(os.environ.get("ICHOR_DRIFT_SEED", "11"))
ALL = os.environ.get("ICHOR_DRIFT_ALL") == "1"


def count(default):
    return int(os.environ.get("ICHOR_DRIFT_COUNT", str(default)))


# ---------------------------------------------------------------------------- fixtures and variants


class Config:
    """One fixture config: its case, role, text and the other role's text (the rest of its cluster)."""

    def __init__(self, case_dir, role):
        self.case_dir = case_dir
        self.rel = os.path.relpath(case_dir, CONFIGS)
        self.role = role
        with open(os.path.join(case_dir, "case.json")) as handle:
            self.case = json.load(handle)
        with open(os.path.join(case_dir, role + ".conf")) as handle:
            self.text = handle.read()
        other = ROLES[1 - ROLES.index(role)]
        with open(os.path.join(case_dir, other + ".conf")) as handle:
            self.other_text = handle.read()
        self.other_role = other
        self.bodies = [doc for doc in yaml.load_all(self.text, Loader=LOADER) if doc is not None]

    @property
    def representable(self):
        return not self.case.get("unrepresentable")

    def __repr__(self):
        return "%s/%s" % (self.rel, self.role)


def configs(pattern="*/*/*"):
    dirs = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(CONFIGS, pattern, "case.json")))
    return [Config(case_dir, role) for case_dir in dirs for role in ROLES]


def _label(body):
    if "kind" in body:
        return body["kind"] if body.get("name") is None else "%s/%s" % (body["kind"], body["name"])
    return "v1alpha1"


def _nodes(value, path=()):
    """Every node below value: (path, node)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not path and key in IDENTITY[:2]:
                continue
            yield path + (key,), item
            yield from _nodes(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield path + (index,), item
            yield from _nodes(item, path + (index,))


NODE_MUTATIONS = ("change", "empty", "blank", "map", "remove")


def document_pool(all_configs):
    """Typed documents found in the fixtures, by contract family (legacy or typed), to add to others."""
    pool = {}
    for config in all_configs:
        family = "typed" if config.case["contract"] == "v1.14" else "legacy"
        for body in config.bodies:
            if "kind" in body:
                pool.setdefault(family, {}).setdefault(_label(body), body)
    return dict((family, [found[label] for label in sorted(found)]) for family, found in pool.items())


def variants(config, pool):
    """Every mutation of one config, as (kind, document index, path, extra)."""
    out = []
    for index, body in enumerate(config.bodies):
        for path, node in _nodes(body):
            leaf = not isinstance(node, (dict, list)) or not node
            for kind in NODE_MUTATIONS:
                if kind == "change" and not leaf:
                    continue
                out.append((kind, index, path, None))
        if "kind" in body:
            out.append(("remove-doc", index, (), None))
    if len(config.bodies) > 2:
        out.append(("reorder", 0, (), None))
    present = set(_label(body) for body in config.bodies)
    family = "typed" if config.case["contract"] == "v1.14" else "legacy"
    for body in pool.get(family, []):
        if _label(body) not in present:
            out.append(("add-doc", len(config.bodies), (), _label(body)))
    return out


def _changed(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 1.5
    if isinstance(value, str):
        if "\n" in value:
            return "changed\n" + value.split("\n", 1)[1]
        return value + "x" if value else "x"
    return "x"


def _empty(value):
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return 0
    if isinstance(value, dict):
        return {}
    if isinstance(value, list):
        return []
    return ""


def mutate(config, variant, pool):
    """The config's documents with one variant applied (deep copies)."""
    kind, index, path, extra = variant
    bodies = json.loads(json.dumps(config.bodies))
    if kind == "remove-doc":
        del bodies[index]
        return bodies
    if kind == "reorder":
        head = [body for body in bodies if "kind" not in body]
        typed = [body for body in bodies if "kind" in body]
        random.Random(len(typed)).shuffle(typed)
        return head + (list(reversed(typed)) if typed == [body for body in bodies if "kind" in body] else typed)
    if kind == "add-doc":
        family = "typed" if config.case["contract"] == "v1.14" else "legacy"
        bodies.append(json.loads(json.dumps([body for body in pool[family] if _label(body) == extra][0])))
        return bodies
    parent = bodies[index]
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if kind == "remove":
        del parent[last]
    elif kind == "change":
        parent[last] = _changed(parent[last])
    elif kind == "empty":
        parent[last] = _empty(parent[last])
    elif kind == "blank":
        parent[last] = ""
    else:
        parent[last] = {}
    return bodies


def emit(bodies):
    return yaml.dump_all(bodies, Dumper=DUMPER, sort_keys=False, default_flow_style=False, width=100000)


def describe(variant):
    kind, index, path, extra = variant
    return "%s doc %d %s%s" % (kind, index, ".".join(str(part) for part in path), " " + extra if extra else "")


def sample(items, seed, size):
    if ALL or size >= len(items):
        return list(items)
    return random.Random(seed).sample(items, size)


def all_variants(all_configs, pool, seed, size):
    """A seeded sample of (config, variant) over every config given (or all of them with ICHOR_DRIFT_ALL=1)."""
    items = [(config, variant) for config in all_configs for variant in variants(config, pool)]
    chosen = sample(items, seed, size)
    for config, _variant in chosen:
        # every bundle first: each registers its secrets for redaction, and a new registration makes
        # the next error message recompile the redaction pattern
        bundle_of(config)
    return chosen


# ---------------------------------------------------------------------------- the engine's side


class Outcome:
    """What the engine makes of a mutated live config: refused (one line), blocked, or open with its report."""

    def __init__(self, state, paths=(), rendered=None, reason=None):
        self.state = state
        self.paths = list(paths)
        self.rendered = rendered
        self.reason = reason


_BUNDLES = {}


def bundle_of(config):
    """The cluster's bundle (its secrets.yaml: a mutated secret is then another cluster's, as it would be)."""
    if config.case_dir not in _BUNDLES:
        _BUNDLES[config.case_dir] = secrets.load(os.path.join(config.case_dir, "secrets.yaml"))
    return _BUNDLES[config.case_dir]


def engine(config, live_text, scenario):
    """The engine against a mutated live config, as adoption ("adopted") or with case.json's spec ("declared")."""
    talos = config.case["talos_version"]
    bundle = bundle_of(config)
    try:
        live = documents.parse(live_text)
        other = documents.parse(config.other_text)
        cluster = {config.role: live, config.other_role: other}
        if scenario == "declared":
            cluster_spec, machine_spec = config_cases.spec_of_case(config.case)
            machine_spec = config_cases.for_role(machine_spec, config.role)
            contract = config.case["contract"]
            unmapped = ()
        else:
            adopted = adopt.read([(role, cluster[role], talos) for role in ROLES])
            cluster_spec, machine_spec, unmapped = adopted.cluster, adopted.machines[ROLES.index(config.role)], adopted.unmapped
            contract, _results = probing.probe(bundle, cluster_spec, machine_spec, live, talos, unmapped)
        cluster_spec = dict(cluster_spec, versionContract=contract)
        rendered = render.render(bundle, cluster_spec, machine_spec, contract)
        found = drift.drift(rendered, live, cluster_spec, contract, unmapped)
    except ConfigError as exc:
        return Outcome("refused", reason=str(exc))
    text = documents.emit(rendered)
    if found.blocked:
        return Outcome("blocked", [d.path for d in found.differences], text)
    return Outcome("open", [d.path for d in found.differences], text)


# ---------------------------------------------------------------------------- coverage


def _schematic(path):
    """A path with list items as [] (the oracle indexes lists, the engine keys named items by name)."""
    out, depth = [], 0
    for char in path:
        if char == "[":
            depth += 1
            if depth == 1:
                out.append("[]")
            continue
        if char == "]":
            depth -= 1
            continue
        if depth == 0:
            out.append(char)
    return "".join(out)


def _mirror_host(leaf):
    """registries/<host>: for a leaf of a mirror in either form (the engine folds both into one)."""
    if leaf.startswith("RegistryMirrorConfig/"):
        label = leaf.split("/", 1)[1]
        for end in range(len(label)):
            if label[end] == ":" and (label[end + 1:].startswith(("endpoints", "skipFallback")) or label[end + 1:] == ""):
                return "registries/%s:" % label[:end]
    if leaf.startswith("v1alpha1:machine.registries.mirrors."):
        return "registries/%s:" % leaf[len("v1alpha1:machine.registries.mirrors."):].split(".endpoints", 1)[0].split(".overridePath")[0]
    return None


def _related(one, two):
    if one == two:
        return True
    short, long_ = sorted((one, two), key=len)
    return long_.startswith(short) and (short.endswith(":") or long_[len(short)] in ".[")


def covered(leaf, paths):
    host = _mirror_host(leaf)
    if host is not None:
        return any(path.startswith(host) for path in paths) or any(_related(_schematic(leaf), _schematic(p)) for p in paths)
    target = _schematic(leaf)
    return any(_related(target, _schematic(path)) for path in paths)


def uncovered(leaves, outcome):
    """The oracle's leaves the engine neither reported nor blocked on."""
    if outcome.state != "open":
        return []
    return [leaf for leaf in leaves if not covered(leaf, outcome.paths)]


# ---------------------------------------------------------------------------- an oracle without Go


def _walk(label, value, path, out):
    if isinstance(value, dict):
        if not value:
            out[label + path] = ("map", "{}")
        for key, item in value.items():
            _walk(label, item, "%s.%s" % (path, key) if path else str(key), out)
    elif isinstance(value, list):
        if not value:
            out[label + path] = ("seq", "[]")
        for index, item in enumerate(value):
            _walk(label, item, "%s[%d]" % (path, index), out)
    else:
        out[label + path] = (type(value).__name__, repr(value))


def yaml_leaves(text):
    out = {}
    for body in yaml.load_all(text, Loader=LOADER):
        if not isinstance(body, dict):
            continue
        label = _label(body) + ":"
        out[label] = ("document", "")
        for key, value in body.items():
            if "kind" in body and key in IDENTITY:
                continue
            _walk(label, value, str(key), out)
    return out


# Machinery drops these empty values when it loads a config (the Go oracle sees them gone; without Go,
# this oracle is told): talosctl's commented files carry them.
DROPPED = {"v1alpha1:cluster.extraManifests": ("seq", "[]"), "v1alpha1:cluster.inlineManifests": ("seq", "[]"),
           "v1alpha1:machine.registries": ("map", "{}")}


def python_oracle(rendered_text, live_text):
    one, two = yaml_leaves(rendered_text), yaml_leaves(live_text)
    for leaves in (one, two):
        for path, value in DROPPED.items():
            if leaves.get(path) == value:
                del leaves[path]
    return sorted(path for path in set(one) | set(two) if one.get(path) != two.get(path))


# ---------------------------------------------------------------------------- the test


def test_coverage_rule():
    assert covered("KubeNodeConfig:labels.a", ["KubeNodeConfig:labels.a"])
    assert covered("v1alpha1:cluster.inlineManifests[0].contents", ["v1alpha1:cluster.inlineManifests[cilium].contents"])
    assert covered("v1alpha1:machine.certSANs[1]", ["v1alpha1:machine.certSANs"])
    assert covered("v1alpha1:machine.network", ["v1alpha1:machine.network.interfaces[0].dhcp"])
    assert covered("VolumeConfig/STATE:encryption.keys[0].tpm", ["VolumeConfig/STATE:"])
    assert covered("RegistryMirrorConfig/h:5000:endpoints[1].overridePath", ["registries/h:5000:overridePath"])
    assert not covered("KubeNodeConfig:labels.ab", ["KubeNodeConfig:labels.a"])
    assert not covered("v1alpha1:machine.nodeLabels.x", ["v1alpha1:machine.nodeLabel"])


def test_variants_cover_every_kind():
    config = configs("v1.14/v1.14.1/kitchen-sink")[0]
    pool = document_pool(configs("v1.14/v1.14.1/secrets-typed"))
    kinds = set(variant[0] for variant in variants(config, pool))
    assert kinds == set(NODE_MUTATIONS) | {"remove-doc", "reorder", "add-doc"}
    reordered = mutate(config, ("reorder", 0, (), None), pool)
    assert [_label(b) for b in reordered] != [_label(b) for b in config.bodies]
    assert sorted(_label(b) for b in reordered) == sorted(_label(b) for b in config.bodies)


def test_every_differing_leaf_is_reported_or_blocks():
    """Seeded sample over the canonical (upgraded) fixtures, judged by the oracle above."""
    canonical = configs("upgraded/*/*")
    pool = document_pool(configs())
    checked = {"open": 0, "blocked": 0, "refused": 0}
    failures = []
    for config, variant in all_variants(canonical, pool, SEED, count(400)):
        live_text = emit(mutate(config, variant, pool))
        for scenario in ("adopted", "declared") if config.representable else ("adopted",):
            outcome = engine(config, live_text, scenario)
            checked[outcome.state] += 1
            if outcome.state == "refused":
                assert "\n" not in outcome.reason
                continue
            missing = uncovered(python_oracle(outcome.rendered, live_text), outcome)
            if missing:
                failures.append("%r %s (%s): not reported: %s" % (config, describe(variant), scenario, missing[:5]))
    assert not failures, "\n".join(failures[:20])
    assert checked["open"] >= 10 and checked["blocked"] >= 10, checked
