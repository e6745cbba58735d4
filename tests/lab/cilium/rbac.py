"""The RBAC a credential needs to run the Cilium chart with helm, generated from the chart (issue 13).

Helm runs on the controller with the kubeconfig the run was given, and the API server refuses to let it
create or update a Role or ClusterRole that grants what the caller does not hold (the hubble-generate-certs
lesson, seed 0103 amendments 1 to 3: escalation by resourceNames does not cover a create). So the caller's
rules are made of:

- every rule the chart's Roles and ClusterRoles grant, in the same scope (a Role's rules in its namespace,
  a ClusterRole's cluster-wide);
- helm's own verbs on every kind the chart renders, where it renders it (get for take-ownership and
  ``lookup``, create, patch for its three-way merge and the gate's server-side dry runs, delete for objects a
  chart bump drops);
- what the takeover and the release module read and write themselves (``OWN``).

The set's chart and the one a minor lower (a takeover from it binds and patches that chart's live roles before
helm replaces them) are rendered with ``helm template`` the way the collection renders them (stored in
ichor-system, every object in kube-system through the owned keys), with the Talos guide's values and the features users
plausibly enable on top (``FEATURES``: hubble relay and UI, the hubble certificates made by helm or by the
cron job), and the rules of every render are united. A feature outside that list that adds a rule (cluster
mesh, the Gateway API, ingress, SPIRE) is not covered: add it to ``FEATURES`` and regenerate.

    python -m tests.lab.cilium.rbac           # rewrite roles/installer/files/bundle/20-cilium-release/
    python -m tests.lab.cilium.rbac --check   # exit 1 when the committed files differ

The output is one object per file (ansible-test reads every YAML file alone), applied by the installer with
the rest of its bundle: a Namespace for each namespace a chart Role lives in besides kube-system (the caller's
Role there needs it before the chart makes it), the ServiceAccount ``ichor-system/ichor-cilium-release``, and
the ClusterRole and Roles ``ichor-cilium-release`` bound to it and to the Group ``ichor:cilium-release``; and
the installer's own right to write Roles in those namespaces (``ichor-installer``, never pruned).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

if __package__ in (None, ""):  # pragma: no cover - run as a script
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
    __package__ = "tests.lab.cilium"  # pylint: disable=redefined-builtin

from tests import collection_path  # noqa: E402

collection_path.ensure()

from ansible_collections.maesh.ichor.plugins.module_utils.common import release  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import live as live_mod  # noqa: E402
from ansible_collections.maesh.ichor.plugins.module_utils.cilium import values as values_mod  # noqa: E402

from tests.lab.cilium import charts  # noqa: E402
from tests.lab.cilium.fixtures import TALOS_VALUES, merged  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
OUT = os.path.join(REPO, "roles", "installer", "files", "bundle", "20-cilium-release")

NAME = "ichor-cilium-release"
GROUP = "ichor:cilium-release"
RELEASE_NAMESPACE = live_mod.RELEASE_NAMESPACE
CHART_NAMESPACE = values_mod.OBJECTS_NAMESPACE
INSTALLER = "ichor-installer"
RBAC = "rbac.authorization.k8s.io"
LABELS = {"app.kubernetes.io/name": "ichor", "app.kubernetes.io/component": "cilium-release"}

_HUBBLE = {"hubble": {"enabled": True, "relay": {"enabled": True}, "ui": {"enabled": True}}}
# (what, user values over the Talos guide's, kube-proxy mode, tunnel): the renders whose rules are united
FEATURES = (
    ("the Talos guide's values", {}, "replaced", "vxlan"),
    ("kube-proxy kept, geneve", {}, "enabled", "geneve"),
    ("hubble relay and UI, certificates by helm", merged(_HUBBLE, {"hubble": {"tls": {"auto": {"method": "helm"}}}}),
     "replaced", "native"),
    ("hubble relay and UI, certificates by the cron job",
     merged(_HUBBLE, {"hubble": {"tls": {"auto": {"method": "cronJob"}}}}), "replaced", "vxlan"),
)

# kind -> (API group, resource): every kind a render may hold; a kind not here stops the generator
KINDS = {
    "Namespace": ("", "namespaces"), "ServiceAccount": ("", "serviceaccounts"), "Secret": ("", "secrets"),
    "ConfigMap": ("", "configmaps"), "Service": ("", "services"), "DaemonSet": ("apps", "daemonsets"),
    "Deployment": ("apps", "deployments"), "Job": ("batch", "jobs"), "CronJob": ("batch", "cronjobs"),
    "Role": (RBAC, "roles"), "RoleBinding": (RBAC, "rolebindings"), "ClusterRole": (RBAC, "clusterroles"),
    "ClusterRoleBinding": (RBAC, "clusterrolebindings"), "PodDisruptionBudget": ("policy", "poddisruptionbudgets"),
    "IngressClass": ("networking.k8s.io", "ingressclasses"),
}
# helm on each rendered kind: get (take-ownership, lookup), create, patch (three-way merge; the gate's
# server-side dry runs), delete (an object the next chart drops)
HELM_VERBS = ("get", "create", "patch", "delete")

# what the modules read and write themselves: (scope, group, resource, resourceNames, verbs, why); scope
# None is cluster-wide
OWN = (
    (CHART_NAMESPACE, "", "secrets", None, ("get", "list", "delete"),
     "foreign Helm records: listed, read, deleted by UID after their backup"),
    (CHART_NAMESPACE, "", "configmaps", None, ("get",), "cilium-config: IPAM, tunnel, kube-proxy replacement"),
    (CHART_NAMESPACE, "apps", "daemonsets", None, ("get", "list"), "the agent and kube-proxy DaemonSets: health"),
    (CHART_NAMESPACE, "apps", "deployments", None, ("get", "list"), "the operator: health"),
    (CHART_NAMESPACE, "", "pods", None, ("get", "list"), "health"),
    (RELEASE_NAMESPACE, "", "secrets", None, ("get", "list", "create", "update", "delete"),
     "helm's release records (update marks superseded, delete keeps ten), the backups of foreign records"),
    (RELEASE_NAMESPACE, "", "configmaps", None, ("create",), "the cluster record, when it is not there yet"),
    (RELEASE_NAMESPACE, "", "configmaps", ("ichor-cluster",), ("get", "update"), "the cluster record"),
    (None, "", "nodes", None, ("get", "list"), "health and operator replicas count every Node"),
    (None, "", "namespaces", None, ("get", "create"), "helm --create-namespace and the cluster record's namespace"),
)

_VERB_ORDER = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


class RbacError(RuntimeError):
    pass


def render(helm, chart, version, kube_version=release.KUBERNETES):
    """{"<version>: <what>": [documents]} of each FEATURES render, as the collection renders the chart."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="ichor-rbac-") as tmp:
        for index, (what, user, mode, tunnel) in enumerate(FEATURES):
            effective = values_mod.effective(2, merged(TALOS_VALUES, user), values_mod.owned(mode, tunnel))
            path = os.path.join(tmp, "values-%d.yaml" % index)
            with open(path, "w") as handle:
                yaml.safe_dump(effective, handle)
            proc = subprocess.run(
                [helm, "template", "cilium", chart, "--namespace", RELEASE_NAMESPACE, "--kube-version", kube_version,
                 "-f", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                universal_newlines=True, check=False, env=dict(os.environ, HELM_CACHE_HOME=tmp,
                                                               HELM_CONFIG_HOME=tmp, HELM_DATA_HOME=tmp))
            if proc.returncode != 0:
                raise RbacError("helm template %s (%s) failed: %s" % (version, what, proc.stderr.strip()))
            out["%s: %s" % (version, what)] = [d for d in yaml.safe_load_all(proc.stdout) if d]
    return out


def _atoms(rule):
    """A rule as (group, resource, resourceName or None, verb) atoms: how the API server compares rules."""
    if rule.get("nonResourceURLs"):
        return [("<url>", url, None, verb) for url in rule["nonResourceURLs"] for verb in rule.get("verbs") or []]
    names = rule.get("resourceNames") or [None]
    return [(group, resource, name, verb) for group in rule.get("apiGroups") or [""]
            for resource in rule.get("resources") or [] for name in names for verb in rule.get("verbs") or []]


def collect(renders):
    """(atoms, why, kinds): {scope: set of atoms}, {scope: {atom: [sources]}}, sorted rendered kinds."""
    atoms, why, kinds = {}, {}, set()

    def add(scope, atom, source):
        atoms.setdefault(scope, set()).add(atom)
        why.setdefault(scope, {}).setdefault(atom, set()).add(source)

    for what, docs in sorted(renders.items()):
        for doc in docs:
            kind, meta = doc.get("kind"), doc.get("metadata") or {}
            if kind not in KINDS:
                raise RbacError("the chart renders a %s (%s): add its API group and resource to rbac.KINDS" % (
                    kind, what))
            scope = meta.get("namespace")
            if scope == RELEASE_NAMESPACE:
                raise RbacError("the chart renders %s %s into %s (%s): namespaceOverride did not hold" % (
                    kind, meta.get("name"), RELEASE_NAMESPACE, what))
            group, resource = KINDS[kind]
            kinds.add((scope or "", kind))
            for verb in HELM_VERBS:
                add(scope, (group, resource, None, verb), "helm on the chart's %s" % kind)
            if kind in ("Role", "ClusterRole"):
                if doc.get("aggregationRule"):
                    raise RbacError("%s %s aggregates other roles: its rules are not in the chart" % (kind, meta["name"]))
                if kind == "Role" and not scope:
                    raise RbacError("Role %s has no namespace (%s)" % (meta.get("name"), what))
                for rule in doc.get("rules") or []:
                    for atom in _atoms(rule):
                        add(scope if kind == "Role" else None, atom, "the chart's %s %s" % (kind, meta["name"]))
    for scope, group, resource, names, verbs, reason in OWN:
        for name in names or [None]:
            for verb in verbs:
                add(scope, (group, resource, name, verb), reason)
    return atoms, why, sorted(kinds)


def _verbs(verbs):
    return sorted(verbs, key=lambda v: (_VERB_ORDER.index(v) if v in _VERB_ORDER else len(_VERB_ORDER), v))


def rules(atoms):
    """The fewest plain rules that hold exactly these atoms (a named atom an unnamed verb covers is dropped)."""
    unnamed, named, urls = {}, {}, {}
    for group, resource, name, verb in atoms:
        if group == "<url>":
            urls.setdefault(resource, set()).add(verb)
        elif name is None:
            unnamed.setdefault((group, resource), set()).add(verb)
    for group, resource, name, verb in atoms:
        if group != "<url>" and name is not None:
            held = unnamed.get((group, resource), set())
            if verb not in held and "*" not in held:
                named.setdefault((group, resource, verb), set()).add(name)
    out = []
    by_verbs = {}
    for (group, resource), verbs in unnamed.items():
        verbs = {"*"} if "*" in verbs else verbs
        by_verbs.setdefault((group, tuple(_verbs(verbs))), []).append(resource)
    for (group, verbs), resources in sorted(by_verbs.items()):
        out.append({"apiGroups": [group], "resources": sorted(resources), "verbs": list(verbs)})
    by_names = {}
    for (group, resource, verb), names in named.items():
        by_names.setdefault((group, resource, tuple(sorted(names))), set()).add(verb)
    for (group, resource, names), verbs in sorted(by_names.items()):
        out.append({"apiGroups": [group], "resources": [resource], "resourceNames": list(names),
                    "verbs": _verbs(verbs)})
    by_url_verbs = {}
    for url, verbs in urls.items():
        by_url_verbs.setdefault(tuple(_verbs(verbs)), []).append(url)
    for verbs, found in sorted(by_url_verbs.items()):
        out.append({"nonResourceURLs": sorted(found), "verbs": list(verbs)})
    return out


def _meta(name, namespace=None):
    meta = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = dict(LABELS)
    return meta


def _subjects():
    return [{"kind": "Group", "apiGroup": RBAC, "name": GROUP},
            {"kind": "ServiceAccount", "name": NAME, "namespace": RELEASE_NAMESPACE}]


def objects(atoms):
    """[(file name, object)]: the bundle's files for these atoms."""
    namespaces = sorted(s for s in atoms if s is not None)
    extra = [ns for ns in namespaces if ns not in (CHART_NAMESPACE, RELEASE_NAMESPACE)]
    # the chart's own Namespace: no label of ours besides the installer's mark (the takeover's gate skips that one)
    out = [("00-namespace-%s.yaml" % ns, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
           for ns in extra]
    out.append(("10-serviceaccount.yaml", {"apiVersion": "v1", "kind": "ServiceAccount",
                                           "metadata": _meta(NAME, RELEASE_NAMESPACE)}))
    out.append(("20-clusterrole.yaml", {"apiVersion": RBAC + "/v1", "kind": "ClusterRole", "metadata": _meta(NAME),
                                        "rules": rules(atoms.get(None, ()))}))
    out.append(("21-clusterrolebinding.yaml", {
        "apiVersion": RBAC + "/v1", "kind": "ClusterRoleBinding", "metadata": _meta(NAME),
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": NAME}, "subjects": _subjects()}))
    for index, ns in enumerate(namespaces):
        out.append(("%d-role-%s.yaml" % (30 + 2 * index, ns), {
            "apiVersion": RBAC + "/v1", "kind": "Role", "metadata": _meta(NAME, ns), "rules": rules(atoms[ns])}))
        out.append(("%d-rolebinding-%s.yaml" % (31 + 2 * index, ns), {
            "apiVersion": RBAC + "/v1", "kind": "RoleBinding", "metadata": _meta(NAME, ns),
            "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": NAME}, "subjects": _subjects()}))
    # the installer (its ServiceAccount and its Role in ichor-system are 10- to 14- of the bundle) writes Roles
    # in the chart's namespaces only through these: as in its own namespace, escalate and bind included
    for index, ns in enumerate(n for n in namespaces if n != RELEASE_NAMESPACE):
        out.append(("%d-installer-role-%s.yaml" % (60 + 2 * index, ns), {
            "apiVersion": RBAC + "/v1", "kind": "Role",
            "metadata": {"name": INSTALLER, "namespace": ns, "labels": {"app.kubernetes.io/name": "ichor"}},
            "rules": [{"apiGroups": [RBAC], "resources": ["roles", "rolebindings"],
                       "verbs": ["get", "create", "patch", "update", "delete", "bind", "escalate"]}]}))
        out.append(("%d-installer-rolebinding-%s.yaml" % (61 + 2 * index, ns), {
            "apiVersion": RBAC + "/v1", "kind": "RoleBinding",
            "metadata": {"name": INSTALLER, "namespace": ns, "labels": {"app.kubernetes.io/name": "ichor"}},
            "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": INSTALLER},
            "subjects": [{"kind": "ServiceAccount", "name": INSTALLER, "namespace": RELEASE_NAMESPACE}]}))
    return out


def _header(entries, why, scope, obj):
    lines = ["# Generated by tests/lab/cilium/rbac.py; do not edit. From the Cilium charts %s" % ", ".join(
        "%s (the lab's: %s)" % (e["version"], e["source"]) for e in entries),
        "# (the set's, and the minor a takeover upgrades from: its live roles are bound and patched on the way),",
        "# each rendered with:"] + ["#   - %s" % f[0] for f in FEATURES]
    if obj["kind"] in ("Role", "ClusterRole") and obj["metadata"]["name"] == NAME:
        sources = sorted(set(s for reasons in why.get(scope, {}).values() for s in reasons))
        lines.append("# Its rules hold every atom of:")
        lines += ["#   - %s" % s for s in sources]
    elif obj["kind"] == "Namespace":
        lines.append("# The chart's Roles live here too; the caller's Role for them needs it before the chart makes it.")
    return "\n".join(lines) + "\n"


class _Dumper(yaml.SafeDumper):  # pylint: disable=too-many-ancestors
    """Sequences indented under their key, as the rest of the bundle (and yamllint) has them."""

    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)


def files(entries, renders):
    """{file name: text} of the bundle directory for these chart entries and their renders."""
    atoms, why, _kinds = collect(renders)
    out = {}
    for name, obj in objects(atoms):
        scope = obj["metadata"].get("namespace") if obj["kind"] == "Role" else None
        body = yaml.dump(obj, Dumper=_Dumper, default_flow_style=False, sort_keys=False)
        out[name] = _header(entries, why, scope, obj) + "---\n" + body
    return out


def chart_entries(cilium_charts):
    """The set's chart and the one a minor lower (a takeover accepts that as the running Cilium)."""
    major, minor = release.CILIUM.split(".")[:2]
    entry = cilium_charts["%s.%s" % (major, minor)]
    if entry["version"] != release.CILIUM:
        raise RbacError("the lab's chart is %s, the release set's %s" % (entry["version"], release.CILIUM))
    return [entry, cilium_charts["%s.%d" % (major, int(minor) - 1)]]


def generate(helm, cilium_charts):
    entries = chart_entries(cilium_charts)
    renders = {}
    for entry in entries:
        renders.update(render(helm, entry["chart"], entry["version"]))
    return files(entries, renders)


def committed(out=OUT):
    found = {}
    if os.path.isdir(out):
        for name in sorted(os.listdir(out)):
            with open(os.path.join(out, name)) as handle:
                found[name] = handle.read()
    return found


def write(generated, out=OUT):
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    for name, text in sorted(generated.items()):
        with open(os.path.join(out, name), "w") as handle:
            handle.write(text)


def main(argv=None):
    from tests.lab.kube.cluster import binaries  # pylint: disable=import-outside-toplevel
    parser = argparse.ArgumentParser(prog="python -m tests.lab.cilium.rbac")
    parser.add_argument("--check", action="store_true", help="compare with the committed files, write nothing")
    args = parser.parse_args(argv)
    helm = binaries(names=("helm",), stream=sys.stderr)["helm"]
    generated = generate(helm, charts.ensure(helm, stream=sys.stderr))
    if args.check:
        if generated != committed():
            sys.stderr.write("%s differs from what the chart needs: run python -m tests.lab.cilium.rbac\n" % OUT)
            return 1
        return 0
    write(generated)
    print("wrote %d files to %s" % (len(generated), OUT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
