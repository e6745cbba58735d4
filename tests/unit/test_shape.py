"""The collection's shape (issue 10), enforced: one package per concern, only the glue imports Ansible,
thin modules, one name and one type per option, each module taking only the connection options it uses,
role and playbook variables prefixed ``ichor_``."""

import ast
import glob
import importlib
import os
import re

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ansible_collections.maesh.ichor.plugins.module_utils.ansible_module import catalog

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLUGINS = os.path.join(REPO, "plugins")
MODULE_UTILS = os.path.join(PLUGINS, "module_utils")
GLUE = os.path.join(MODULE_UTILS, "ansible_module")
MODULES = sorted(os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(PLUGINS, "modules", "*.py"))
                 if not p.endswith("__init__.py"))
COLLECTION = "ansible_collections.maesh.ichor."
MAIN_LINES = 30

TALOS_OPTIONS = {"talosconfig", "talosconfig_content", "context", "endpoint"}
KUBE_OPTIONS = {"kubeconfig", "kubeconfig_content", "kube_context"}
# the names issue 10 fixes for the whole collection: name -> type
CONVENTIONS = {"node": "str", "cluster": "dict", "cluster_name": "str", "wait": "bool", "wait_timeout": "float",
               "timeout": "float"}
FORBIDDEN = {"address": "a machine's address is `node`"}


def argument_spec(name):
    """The argument spec module ``name`` is validated against (its action plugin's, from the catalog)."""
    return catalog.MODULES[name].argument_spec()


SPECS = dict((name, argument_spec(name)) for name in MODULES)


def _walk(spec, prefix=""):
    for option, definition in spec.items():
        yield prefix + option, option, definition
        if definition.get("options"):
            yield from _walk(definition["options"], prefix + option + ".")


def test_every_option_name_has_one_type_across_the_collection():
    types = {}
    for module, spec in SPECS.items():
        for option, definition in spec.items():
            key = (definition.get("type", "str"), definition.get("elements"), bool(definition.get("no_log")))
            types.setdefault(option, {}).setdefault(key, []).append(module)
    mixed = dict((option, kinds) for option, kinds in types.items() if len(kinds) > 1)
    assert not mixed, "options with more than one type: %s" % mixed


@pytest.mark.parametrize("module", MODULES)
def test_conventional_names(module):
    for path, option, definition in _walk(SPECS[module]):
        assert option not in FORBIDDEN, "%s: option %s: %s" % (module, path, FORBIDDEN[option])
        if option in CONVENTIONS:
            assert definition.get("type", "str") == CONVENTIONS[option], "%s: %s must be %s" % (
                module, path, CONVENTIONS[option])
    spec = SPECS[module]
    if "wait" in spec:
        assert "wait_timeout" in spec, "%s: wait (bool) goes with wait_timeout (seconds)" % module


def _module_utils_file(dotted):
    rel = dotted[len(COLLECTION + "plugins.module_utils."):].replace(".", os.sep)
    for candidate in (os.path.join(MODULE_UTILS, rel + ".py"), os.path.join(MODULE_UTILS, rel, "__init__.py")):
        if os.path.exists(candidate):
            return candidate
    return None


def _imports(path):
    """The collection module_utils files ``path`` imports (``from X import a`` may name submodules)."""
    found = set()
    for node in ast.walk(ast.parse(open(path).read(), path)):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(COLLECTION):
            names = [node.module] + ["%s.%s" % (node.module, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.startswith(COLLECTION)]
        for dotted in names:
            target = _module_utils_file(dotted) if ".module_utils." in dotted else None
            if target:
                found.add(target)
    return found


def _reach(path):
    seen, todo = set(), [path]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        todo.extend(_imports(current))
    return seen


def _uses(module, api):
    """Whether the module's flows or the module_utils they reach (the glue aside) open a client of ``api``."""
    call = re.compile(r"\.%s\(" % api)
    reached = set()
    for flow in catalog.MODULES[module].flows:
        reached |= _reach(flow.__file__.replace(".pyc", ".py"))
    for path in reached:
        if path.startswith(GLUE + os.sep) or os.sep + "proto" + os.sep in path:
            continue
        if call.search(open(path).read()):
            return True
    return False


def _groups():
    runtime = yaml.safe_load(open(os.path.join(REPO, "meta", "runtime.yml")))
    return dict((group, set(members)) for group, members in (runtime.get("action_groups") or {}).items())


@pytest.mark.parametrize("module", MODULES)
def test_a_module_takes_the_connection_options_it_uses_and_only_those(module):
    options = set(SPECS[module])
    groups = _groups()
    for api, names, group in (("talos", TALOS_OPTIONS, "talos"), ("kube", KUBE_OPTIONS, "k8s")):
        has = names & options
        assert has in (set(), names), "%s takes part of the %s options: %s" % (module, api, sorted(has))
        uses = _uses(module, api)
        assert bool(has) == uses, "%s %s the %s options but %s a %s client" % (
            module, "takes" if has else "does not take", api, "never opens" if has else "opens", api)
        assert (module in groups.get(group, ())) == bool(has), "%s: action group %s must list exactly the modules " \
            "that take the %s options" % (module, group, api)
    if (TALOS_OPTIONS | KUBE_OPTIONS) & options:
        assert "timeout" in options, "%s: timeout reaches every API call" % module


def test_action_groups_name_only_modules():
    for group, members in _groups().items():
        assert members <= set(MODULES), "action group %s names no such module: %s" % (group, members - set(MODULES))


def _python_files(root):
    yield from glob.glob(os.path.join(root, "**", "*.py"), recursive=True)


def test_only_the_glue_imports_ansible():
    offenders = []
    for path in _python_files(MODULE_UTILS):
        if path.startswith(GLUE + os.sep):
            continue
        for node in ast.walk(ast.parse(open(path).read(), path)):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            offenders += ["%s: %s" % (os.path.relpath(path, REPO), n) for n in names
                          if n == "ansible" or n.startswith("ansible.")]
    assert not offenders, "only module_utils/ansible_module may import ansible: %s" % offenders


@pytest.mark.parametrize("module", MODULES)
def test_a_module_file_is_its_documentation_and_an_action_plugin_runs_it(module):
    path = os.path.join(PLUGINS, "modules", module + ".py")
    tree = ast.parse(open(path).read(), path)
    names = [t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets]
    assert names == ["__metaclass__", "DOCUMENTATION", "EXAMPLES", "RETURN"], "%s: documentation only" % module
    action = os.path.join(PLUGINS, "action", module + ".py")
    assert os.path.exists(action), "%s has no action plugin" % module
    assert 'MODULE = "%s"' % module in open(action).read()
    assert module in catalog.MODULES


def test_every_action_plugin_is_a_module_of_the_catalog():
    actions = sorted(os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(PLUGINS, "action", "*.py")))
    assert actions == MODULES == sorted(catalog.MODULES)


def test_every_module_utils_package_says_what_it_owns():
    for init in glob.glob(os.path.join(MODULE_UTILS, "*", "__init__.py")):
        package = os.path.basename(os.path.dirname(init))
        tree = ast.parse(open(init).read(), init)
        doc = ast.get_docstring(tree)
        assert doc and len(doc.split()) >= 8, "module_utils/%s/__init__.py: a docstring saying what it owns" % package
    loose = [os.path.basename(p) for p in glob.glob(os.path.join(MODULE_UTILS, "*.py"))
             if os.path.basename(p) != "__init__.py"]
    assert not loose, "module_utils files outside a concern's package: %s" % loose


def _yaml_files(*patterns):
    for pattern in patterns:
        yield from sorted(glob.glob(os.path.join(REPO, pattern), recursive=True))


def _variables(node, out):
    """Variable names a play, block or task list defines: vars, register, set_fact, loop_var."""
    if isinstance(node, list):
        for item in node:
            _variables(item, out)
    elif isinstance(node, dict):
        for key in ("vars",):
            if isinstance(node.get(key), dict):
                out.update(k for k in node[key] if not k.startswith("ansible_"))
        if isinstance(node.get("register"), str):
            out.add(node["register"])
        for action in ("ansible.builtin.set_fact", "set_fact"):
            if isinstance(node.get(action), dict):
                out.update(k for k in node[action] if k != "cacheable")
        if isinstance(node.get("loop_control"), dict) and node["loop_control"].get("loop_var"):
            out.add(node["loop_control"]["loop_var"])
        for key in ("tasks", "block", "rescue", "always", "pre_tasks", "post_tasks", "handlers"):
            if key in node:
                _variables(node[key], out)


def test_role_and_playbook_variables_are_prefixed_ichor():
    names = {}
    for path in _yaml_files("roles/*/defaults/main.yml", "roles/*/vars/main.yml"):
        for name in (yaml.safe_load(open(path)) or {}):
            names.setdefault(name, path)
    for path in _yaml_files("roles/*/meta/argument_specs.yml"):
        for entry in (yaml.safe_load(open(path)) or {}).get("argument_specs", {}).values():
            for name in (entry.get("options") or {}):
                names.setdefault(name, path)
    for path in _yaml_files("roles/*/tasks/*.yml", "playbooks/*.yml"):
        found = set()
        _variables(yaml.safe_load(open(path)), found)
        for name in found:
            names.setdefault(name, path)
    bad = sorted("%s (%s)" % (n, os.path.relpath(p, REPO)) for n, p in names.items() if not n.startswith("ichor_"))
    assert not bad, "role and playbook variables must be prefixed ichor_: %s" % bad


def test_role_defaults_live_in_defaults_main():
    offenders = []
    for path in _yaml_files("roles/*/tasks/*.yml"):
        for number, line in enumerate(open(path), 1):
            if re.search(r"\bichor_\w+\s*\|\s*default\((?!omit\))", line):
                offenders.append("%s:%d" % (os.path.relpath(path, REPO), number))
    assert not offenders, "a role variable's default belongs in defaults/main.yml, not `| default(...)`: %s" % offenders


def _returns_without_contains(doc, prefix=""):
    for key, entry in (doc or {}).items():
        path = prefix + key
        holds_dicts = entry.get("type") == "dict" or (entry.get("type") == "list" and entry.get("elements") == "dict")
        if holds_dicts and not entry.get("contains"):
            yield path
        yield from _returns_without_contains(entry.get("contains"), path + ".")


@pytest.mark.parametrize("module", MODULES)
def test_return_documents_what_every_returned_dict_contains(module):
    source = importlib.import_module(COLLECTION + "plugins.modules." + module)
    missing = list(_returns_without_contains(yaml.safe_load(source.RETURN)))
    # ansible_facts and diff are Ansible's own; a free-form map (versions by source) is documented as such
    missing = [m for m in missing if m.split(".")[0] not in ("ansible_facts", "diff")]
    assert not missing, "%s: RETURN gives no contains for %s" % (module, missing)


# -- the tested range of ansible-core, stated once in each place that states it ---------------------------------------

def _ansible_core_pins(text):
    """The SpecifierSets of every ``ansible-core<spec>`` pin in a text (a shell script's or a YAML file's)."""
    return [SpecifierSet(spec) for spec in re.findall(r"ansible-core\s*((?:[<>=!~]=?\s*[0-9.*]+\s*,?\s*)+)", text)]


def _bound(specifiers, operator):
    (version,) = [Version(s.version) for s in specifiers if s.operator == operator]
    return version


def test_requirements_and_runtime_state_the_same_tested_range_of_ansible_core():
    with open(os.path.join(REPO, "meta", "runtime.yml")) as handle:
        runtime = SpecifierSet(yaml.safe_load(handle)["requires_ansible"])
    with open(os.path.join(REPO, "requirements.txt")) as handle:
        pinned = [Requirement(line.split("#")[0].strip()) for line in handle
                  if re.match(r"ansible-core\b", line.strip())]
    assert len(pinned) == 1, "requirements.txt: one ansible-core line, the range meta/runtime.yml requires"
    assert pinned[0].specifier == runtime, "requirements.txt's ansible-core%s is not meta/runtime.yml's %s" % (
        pinned[0].specifier, runtime)
    # the ends are the ones the tests run (scripts/bootstrap: the floor env and the newest), and the execution
    # environment's ansible-core lies inside the range
    with open(os.path.join(REPO, "scripts", "bootstrap")) as handle:
        tested = _ansible_core_pins(handle.read())
    assert tested, "scripts/bootstrap pins no ansible-core"
    assert min(_bound(pin, ">=") for pin in tested) == _bound(runtime, ">="), "the floor the tests run"
    assert max(_bound(pin, "<") for pin in tested) == _bound(runtime, "<"), "the newest the tests run"
    with open(os.path.join(REPO, "meta", "execution-environment.yml")) as handle:
        for pin in _ansible_core_pins(handle.read()):
            assert _bound(pin, ">=") in runtime, "meta/execution-environment.yml's ansible-core%s" % pin


# A regular expression that reads a version's numbers: digits, then an escaped dot.
_VERSION_REGEX = re.compile(r"(?:\\d[+*]?|\[0-9\](?:\{[^}]*\}|[+*])?)\\\.")
# the one place a version is read (common/versions.py), and what is not a version: generated protobuf code
VERSION_READERS = {"common/versions.py"}


def test_one_version_pattern():
    """Every version string (a release set entry, a contract, an image tag, a chart's or helm's version, a Talos OS
    image) is read by common/versions.py; no other module compiles its own pattern for one."""
    found = []
    for path in glob.glob(os.path.join(MODULE_UTILS, "**", "*.py"), recursive=True):
        relative = os.path.relpath(path, MODULE_UTILS)
        if relative in VERSION_READERS or relative.startswith("talos/proto/"):
            continue
        with open(path) as handle:
            for number, line in enumerate(handle, 1):
                if _VERSION_REGEX.search(line):
                    found.append("%s:%d: %s" % (relative, number, line.strip()))
    assert found == [], "\n".join(found)


# -- the layers module_utils/__init__.py states ---------------------------------------------------------------------

BOTTOM = "common"
CLIENTS = ("talos", "k8s")
ENGINE = "config"
GLUE_PACKAGE = "ansible_module"


def _packages():
    return sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(MODULE_UTILS, "*", "__init__.py")))


FEATURES = [p for p in _packages() if p not in (BOTTOM, ENGINE, GLUE_PACKAGE) + CLIENTS]


def _interface(package):
    """The modules a feature package names in its INTERFACE (None when it names none)."""
    path = os.path.join(MODULE_UTILS, package, "__init__.py")
    for node in ast.parse(open(path).read(), path).body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["INTERFACE"]:
            return set(ast.literal_eval(node.value))
    return None


def _edges(root=MODULE_UTILS):
    """(package, file, line, target package, target module) of every import of module_utils by a module_utils file
    (under ``root``), at the top or deferred into a function."""
    prefix = COLLECTION + "plugins.module_utils."
    found = []
    for path in glob.glob(os.path.join(root, "**", "*.py"), recursive=True):
        relative = os.path.relpath(path, root)
        package = relative.split(os.sep)[0] if os.sep in relative else None
        for node in ast.walk(ast.parse(open(path).read(), path)):
            dotted = []
            if isinstance(node, ast.ImportFrom) and node.module and (node.module + ".").startswith(prefix):
                base = node.module[len(prefix):] if node.module + "." != prefix else ""
                dotted = [(base + "." + a.name).strip(".") for a in node.names]
            elif isinstance(node, ast.Import):
                dotted = [a.name[len(prefix):] for a in node.names if a.name.startswith(prefix)]
            for name in dotted:
                parts = name.split(".")
                found.append((package, relative, node.lineno, parts[0], parts[1] if len(parts) > 1 else ""))
    return found


def _allowed(source, target, module):
    if source == target or source == GLUE_PACKAGE:
        return True
    if source == BOTTOM or target == GLUE_PACKAGE:
        return False
    if source in CLIENTS:
        return target == BOTTOM
    if source == ENGINE:
        return target in (BOTTOM,) + CLIENTS
    if target in FEATURES:  # sideways: through the interface the other feature names
        return module in (_interface(target) or ())
    return True


# the feature packages this round's issues add: their places are stated before their code arrives
ROUND_FEATURES = {"recovery", "credentials", "membership"}


def _layer_rules():
    with open(os.path.join(MODULE_UTILS, "__init__.py")) as handle:
        return ast.get_docstring(ast.parse(handle.read()))


def _stated_features(rules):
    """The packages the rules name in the feature layer (its bullet, "- The feature packages (...)")."""
    bullet = re.search(r"^- The feature packages \((.*?)\) import", rules, re.S | re.M)
    assert bullet, "module_utils/__init__.py states no feature layer"
    return set(re.findall(r"``(\w+)/``", bullet.group(1)))


def test_module_utils_states_the_layers_this_test_holds():
    rules = _layer_rules()
    for package in _packages():
        assert "``%s/``" % package in rules, "module_utils/__init__.py does not place %s/ in a layer" % package
    assert set(FEATURES) >= {"adopt", "cilium", "installer", "machine", "reclaim", "rollout"}


def test_the_feature_layer_is_the_one_the_rules_state_new_packages_included():
    stated = _stated_features(_layer_rules())
    # every feature package is stated as one, and nothing stated as a feature is a lower layer or the glue
    assert set(FEATURES) <= stated, "feature packages the rules do not name: %s" % sorted(set(FEATURES) - stated)
    assert not stated & set((BOTTOM, ENGINE, GLUE_PACKAGE) + CLIENTS)
    # this round's packages have their place before their code: when one arrives it is a feature, held by the
    # import rules above (sideways only through an INTERFACE, no circle)
    assert stated >= ROUND_FEATURES, "the rules place none of %s" % sorted(ROUND_FEATURES - stated)


def _flow_files(module):
    return ["plugins/module_utils/%s.py" % flow.__name__.split("plugins.module_utils.")[1].replace(".", "/")
            for flow in catalog.MODULES[module].flows]


@pytest.mark.parametrize("module", MODULES)
def test_a_modules_documentation_names_the_files_of_its_flow(module):
    documentation = yaml.safe_load(importlib.import_module(COLLECTION + "plugins.modules." + module).DOCUMENTATION)
    named = [note for note in documentation.get("notes") or [] if note.startswith("The flow of this module is")]
    assert len(named) == 1, "%s: no note names its flow" % module
    assert re.findall(r"C\((plugins/module_utils/[\w/]+\.py)\)", named[0]) == _flow_files(module), named[0]
    assert "C(plugins/action/%s.py)" % module in named[0]
    for path in _flow_files(module):
        assert os.path.exists(os.path.join(REPO, path)), path


def test_the_development_guide_maps_every_module_to_its_flow():
    # the map of the code is a contributor's: docs/development.md, "Where the code is" (the README is for users)
    with open(os.path.join(REPO, "docs", "development.md")) as handle:
        guide = handle.read()
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \|", guide, re.M)
    mapped = dict((module, re.findall(r"`([\w/]+\.py)`", flows)) for module, flows in rows if module in catalog.MODULES)
    assert sorted(mapped) == MODULES, "modules docs/development.md's map leaves out: %s" % sorted(
        set(MODULES) - set(mapped))
    for module, files in mapped.items():
        assert ["plugins/module_utils/" + f for f in files] == _flow_files(module), module


def test_every_feature_package_names_its_interface():
    for package in FEATURES:
        interface = _interface(package)
        assert interface is not None, "module_utils/%s/__init__.py names no INTERFACE" % package
        missing = [m for m in interface if not os.path.exists(os.path.join(MODULE_UTILS, package, m + ".py"))]
        assert not missing, "module_utils/%s INTERFACE names no such module: %s" % (package, missing)


def test_every_import_follows_the_layers():
    broken = ["%s:%d imports %s%s" % (relative, line, target, "." + module if module else "")
              for source, relative, line, target, module in _edges()
              if source is not None and not _allowed(source, target, module)]
    assert broken == [], "imports that break the layers of module_utils/__init__.py:\n" + "\n".join(sorted(broken))


def test_the_packages_import_each_other_in_no_circle():
    graph = {}
    for source, unused_relative, unused_line, target, unused_module in _edges():
        if source is not None and source != target:
            graph.setdefault(source, set()).add(target)
    done, path = set(), []

    def visit(package):
        if package in path:
            raise AssertionError("the packages import each other in a circle: %s" % " -> ".join(
                path[path.index(package):] + [package]))
        if package in done:
            return
        path.append(package)
        for target in sorted(graph.get(package, ())):
            visit(target)
        path.pop()
        done.add(package)

    for package in sorted(graph):
        visit(package)


def test_the_layer_check_sees_a_broken_import(tmp_path):
    # the rules judge these as broken: each would have passed if the check looked at nothing
    assert not _allowed("talos", "config", "talos_side")
    assert not _allowed("k8s", "cilium", "record")
    assert not _allowed("config", "reclaim", "inspection")
    assert not _allowed("common", "talos", "client")
    assert not _allowed("init", "ansible_module", "specs")
    assert not _allowed("installer", "cilium", "takeover")
    assert _allowed("cluster", "cilium", "record") and _allowed("ansible_module", "k8s", "client")
    # an import deferred into a function is seen, as one at the top is
    (tmp_path / "talos").mkdir()
    (tmp_path / "talos" / "late.py").write_text(
        "import os\n\n\ndef read():\n    from %splugins.module_utils.config import drift\n    return drift\n"
        % COLLECTION)
    assert _edges(str(tmp_path)) == [("talos", os.path.join("talos", "late.py"), 5, "config", "drift")]
    assert not _allowed("talos", "config", "drift")
