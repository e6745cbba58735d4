"""Module options (issue 12): every nested option is validated by the argument spec's suboptions, not by hand, and
no mutation of valid options (a scalar where a mapping is expected and the reverse, wrong scalar types inside
nested specs, unknown keys, nesting, huge values) gets past a module's validation in a shape the spec does not
describe, or makes it raise: it fails with one message (no_log values masked, as the action returns it) or hands
the options to the flow. Each case validates the options as the module's action plugin does (specs.validate), before
any connection. Budget and the maintainer's command: tests/unit/conftest.py.

Target: ``module-options`` (every module's validation: ansible_module.specs.validate and ansible-core's
ArgumentSpecValidator)."""

import json

import pytest
from ansible.module_utils.common.parameters import remove_values

from ansible_collections.maesh.ichor.plugins.module_utils.ansible_module import catalog, specs

from tests.unit.conftest import FuzzFailure, mutate_tree
from tests.unit.test_shape import MODULES

MARKER = "ICHORfuzzOPTIONSmarkerKEY0123456789abcdefXYZ"
CONTENT = "contexts:\n  a:\n    key: %s\n" % MARKER
NO_LOG = ("talosconfig_content", "kubeconfig_content", "foreign_talosconfig_content")

# Mappings whose keys are the user's, so a spec cannot list them; their values are checked where they are used.
# Keyed by the option's path, in any module that has it.
FREE_FORM = {
    "cluster.sysctls": "sysctl names are the keys (config.spec checks them)",
    "update": "cluster_record's: the record's keys (k8s.cluster_record and release check the known ones)",
    "cilium_values": "Helm values: the chart's keys",
    "cluster.apiServer.extraArgs": "flags are the keys (config.spec checks the values are strings)",
    "cluster.controllerManager.extraArgs": "flags are the keys",
    "cluster.scheduler.extraArgs": "flags are the keys",
    "cluster.auditPolicy": "an audit.k8s.io/v1 Policy, Kubernetes' own schema (the API server judges it)",
    "cluster.admissionControl.configuration": "an admission plugin's configuration, the plugin's own schema",
    "registry_auth": "registry hosts are the keys (config.registry_auth reads each Secret it names)",
    "machines.spec": "init_record's: init_plan's result, each machine spec judged there by config.spec",
}
# A machine's labels, taints and kubelet flags are the user's keys too, in every module that takes a machine spec.
FREE_FORM.update(("%s.%s" % (option, field), "label, taint and flag names are the keys (config.spec checks the values)")
                 for option in ("machine", "machines") for field in ("nodeLabels", "nodeTaints", "kubelet.extraArgs"))


def module_arguments(name):
    """What module ``name``'s action validates against: argument_spec and the constraints (mutually_exclusive, ...)."""
    entry = catalog.MODULES[name]
    return dict(entry.constraints, argument_spec=entry.argument_spec())


ARGUMENTS = dict((name, module_arguments(name)) for name in MODULES)


def _walk(spec, prefix=""):
    for option, definition in spec.items():
        yield prefix + option, definition
        yield from _walk(definition.get("options") or {}, prefix + option + ".")


def _nests_dicts(definition):
    kind = definition.get("type", "str")
    return kind == "dict" or (kind == "list" and definition.get("elements") == "dict")


@pytest.mark.parametrize("module", MODULES)
def test_every_nested_option_has_suboptions(module):
    """A mapping (or list of mappings) option lists its keys as suboptions, so that Ansible checks their types."""
    missing = [path for path, definition in _walk(ARGUMENTS[module]["argument_spec"])
               if _nests_dicts(definition) and not definition.get("options") and path not in FREE_FORM]
    assert not missing, "%s: options without suboptions (validated by hand, or not at all): %s" % (module, missing)


# -- valid options, from the spec ---------------------------------------------------------------------------------

_SCALARS = {"str": "x", "path": "/tmp/ichor-fuzz", "bool": True, "int": 1, "float": 1.5, "raw": "x"}


def _value(option, definition):
    if option in NO_LOG:
        return CONTENT
    if definition.get("choices"):
        value = definition["choices"][0]
        return [value] if definition.get("type") == "list" else value
    kind = definition.get("type", "str")
    if kind == "dict":
        return _params(definition.get("options") or {}, everything=True)
    if kind == "list":
        elements = definition.get("elements", "str")
        if elements == "dict":
            return [_params(definition.get("options") or {}, everything=True)]
        return [_SCALARS.get(elements, "x")]
    return _SCALARS.get(kind, "x")


def _params(spec, everything=False):
    """Every required option (nested: every option), plus the no_log ones the spec has."""
    return dict((option, _value(option, definition)) for option, definition in spec.items()
                if everything or definition.get("required") or option in NO_LOG)


def _valid(module):
    """Valid options of a module: its required ones, and the first option of each required_one_of group."""
    arguments = ARGUMENTS[module]
    params = _params(arguments["argument_spec"])
    for group in arguments.get("required_one_of") or ():
        if not any(option in params for option in group):
            params[group[0]] = _value(group[0], arguments["argument_spec"][group[0]])
    return params


def run_module(module, params):
    """("failed", message) or ("handed", validated options): what the module's action does with ``params`` before it
    runs the flow (the message as the action returns it: no_log values masked)."""
    entry = catalog.MODULES[module]
    validated, no_log, problem = specs.validate(entry.argument_spec(), params, **entry.constraints)
    if problem:
        return "failed", remove_values(problem, no_log)
    return "handed", validated


@pytest.mark.parametrize("module", MODULES)
def test_valid_options_validate(module):
    outcome, what = run_module(module, _valid(module))
    assert outcome == "handed", "%s: %s" % (module, what)


# -- the rule ----------------------------------------------------------------------------------------------------

_TYPES = {"str": str, "path": str, "bool": bool, "int": int, "float": float, "dict": dict, "list": list}


def _conforms(value, definition, path, module):
    """Where the validated value does not have the shape the spec says (None when it has)."""
    if value is None:
        return None
    kind = definition.get("type", "str")
    if kind == "raw":
        return None
    # ansible-core's int check takes a bool (an int in Python); the config engine refuses it where a port or a count is
    # read (config.spec._port), past runner.run where this test stops
    if not isinstance(value, _TYPES[kind]):
        return "%s is a %s, not a %s" % (path, type(value).__name__, kind)
    if kind == "list":
        elements = definition.get("elements")
        for index, item in enumerate(value):
            problem = _conforms(item, dict(definition, type=elements), "%s[%d]" % (path, index), module) if elements else None
            if problem:
                return problem
    elif kind == "dict" and definition.get("options"):
        unknown = set(value) - set(definition["options"])
        if unknown:
            return "%s has keys the spec does not list: %s" % (path, sorted(map(str, unknown)))
        for option, sub in definition["options"].items():
            problem = _conforms(value.get(option), sub, path + "." + option, module)
            if problem:
                return problem
    return None


def _check(module, params):
    outcome, what = run_module(module, params)
    if outcome == "failed":
        elsewhere = json.dumps(dict((k, v) for k, v in params.items() if k not in NO_LOG))
        if MARKER not in elsewhere:  # else the user put the key in an option that is not no_log: Ansible shows it
            assert MARKER not in what, "%s: a no_log value in the message: %s" % (module, what)
        return what
    spec = ARGUMENTS[module]["argument_spec"]
    for option, definition in spec.items():
        problem = _conforms(what.get(option), definition, option, module)
        if problem:
            raise FuzzFailure("%s accepted options of a shape its spec does not describe: %s" % (module, problem))
    return what


def _depth(value):
    deepest, todo = 0, [(value, 0)]
    while todo:
        value, depth = todo.pop()
        deepest = max(deepest, depth)
        if isinstance(value, (dict, list)):
            todo.extend((item, depth + 1) for item in (value.values() if isinstance(value, dict) else value))
    return deepest


# Module arguments reach the module as JSON (keys are text), and ansible-core deep-copies them before it validates:
# a few hundred levels of nesting fail there (RecursionError), before any of this collection's code runs.
MAX_DEPTH = 100


def test_fuzz_module_options(fuzz):
    run = fuzz("module-options")
    valid = dict((module, _valid(module)) for module in MODULES)
    for index, rng in run.cases():
        module = MODULES[index % len(MODULES)]
        params = mutate_tree(valid[module], rng)
        if not isinstance(params, dict) or _depth(params) > MAX_DEPTH:
            continue  # Ansible's module arguments are a mapping; see MAX_DEPTH
        params = json.loads(json.dumps(params))
        run.check(lambda: _check(module, params), index, (module, params), [MARKER])


def _with(module, path, value):
    params = _valid(module)
    parts = path.split(".")
    target = params
    for part in parts[:-1]:
        target = target[part]
    target[parts[-1]] = value
    return params


# Found with --fuzz-seed 12, cases 711, 1257 and 1699: a number or a boolean where a mapping with suboptions is
# expected makes ansible-core's validation raise TypeError (module_utils/common/parameters.py set_fallbacks tests
# `param not in parameters` before it checks that the value is a mapping; 2.16 and 2.19 alike), so the module dies
# with a traceback instead of failing with one line. specs.validate guards against it (shape_problem, when
# the validator raises); these cases hold it to one line.
SCALAR_FOR_MAPPING = [
    ("talos_machine_config", "cluster", 1.5),
    ("talos_machine_config", "machine", True),
    ("talos_machine_config", "cluster.network", False),
    ("talos_machine_config", "machine.install", 7),
    ("talos_machine_config", "cluster.registries", [1]),
]


@pytest.mark.parametrize("module, path, value", SCALAR_FOR_MAPPING, ids=["%s-%s" % (m, p) for m, p, _v in SCALAR_FOR_MAPPING])
def test_a_scalar_where_a_mapping_is_expected_fails_in_one_line(module, path, value):
    outcome, message = run_module(module, _with(module, path, value))
    assert outcome == "failed" and path.split(".")[-1] in message, message


# Found with --fuzz-seed 3, case 2434 (issue 26; seeds 12 and 7 find none in 20000 cases): an infinite number where an
# int option is expected (.inf in YAML, Infinity in the module's JSON arguments, or the text "inf") makes ansible-core
# 2.19's check_type_int raise OverflowError, a traceback instead of one line, and a number of a billion digits
# ("1e999999999") takes it minutes to build. specs.validate takes such values out before ansible-core validates and fails
# naming the option.
@pytest.mark.parametrize("value", [float("inf"), "inf", "-Infinity", "1e999999999", "9" * 150, 2.5e300])
def test_an_infinite_number_for_an_int_option_fails_in_one_line(value):
    outcome, message = run_module("talos_machine_config", _with("talos_machine_config", "cluster.kubePrism.port", value))
    assert outcome == "failed" and "port" in message, message
    assert message == ("cluster.kubePrism.port must be an integer of at most 100 digits, not an infinite or larger "
                       "number"), message


@pytest.mark.parametrize("value", [7445, "7445", "7.445e3", 7445.0, "0e999999999"])
def test_an_int_option_still_takes_what_ansible_core_converts(value):
    params = _with("talos_machine_config", "cluster.kubePrism.port", value)
    outcome, options = run_module("talos_machine_config", params)
    assert outcome == "handed" and options["cluster"]["kubePrism"]["port"] in (7445, 0), options


@pytest.mark.parametrize("module, path, value", [
    ("release_check", "machines", 5), ("release_check", "machines", [None]), ("talos_upgrade", "role", {"a": 1}),
    ("talos_machine_config", "cluster.kubePrism.enabled", "maybe"), ("talos_machine_config", "cluster.kubePrism.port", "x"),
    ("talos_machine_config", "cluster.unknown", "x"),
])
def test_wrong_types_inside_nested_options_fail_in_one_line(module, path, value):
    outcome, message = run_module(module, _with(module, path, value))
    assert outcome == "failed", message
