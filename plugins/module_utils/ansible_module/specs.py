# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Argument specs, each option defined once for the whole collection.

Connection options come in two concerns, each with its doc fragment: Talos
(``maesh.ichor.talos``: talosconfig, talosconfig_content, context, endpoint, timeout) and Kubernetes
(``maesh.ichor.kubernetes``: kubeconfig, kubeconfig_content, kube_context, timeout). A module takes
only the ones it uses. A connection file (talosconfig, kubeconfig) not given falls back to its environment
variable when that is set and not empty, then to the tool's default file (talosconfig.load, kubeconfig.load); given
empty, it names no file and never falls back: a task told "no kubeconfig" (init before its own exists) has no
Kubernetes connection, whatever KUBECONFIG or ~/.kube/config name. Waiting is ``wait`` (bool) and ``wait_timeout``
(seconds); a machine's address is ``node``; ``cluster`` is the cluster spec and ``cluster_name`` its name.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import decimal
import json
import math
import os

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.errors import AnsibleFallbackNotFound, UnsupportedError

TIMEOUT = dict(type="float", default=30.0)
# An int option's value has at most this many digits: ansible-core builds the int of any number it is given (".inf"
# raises OverflowError in 2.19, "1e999999999" takes minutes to build).
INT_DIGITS = 100


def nonempty_env_fallback(*names):
    """ansible-core's env_fallback, but an environment variable set empty is unset (as talosctl and kubectl read
    it): an option not given never becomes the empty option, which means "no file" (see the module docstring)."""
    for name in names:
        if os.environ.get(name):
            return os.environ[name]
    raise AnsibleFallbackNotFound


def talos_connection():
    """The Talos API connection (doc fragment maesh.ichor.talos); the content is no_log."""
    return dict(
        talosconfig=dict(type="path", fallback=(nonempty_env_fallback, ["TALOSCONFIG"])),
        talosconfig_content=dict(type="str", no_log=True),
        context=dict(type="str"),
        endpoint=dict(type="str"),
        timeout=dict(TIMEOUT),
    )


def kube_connection():
    """The Kubernetes API connection (doc fragment maesh.ichor.kubernetes); the content is no_log."""
    return dict(
        kubeconfig=dict(type="path", fallback=(nonempty_env_fallback, ["KUBECONFIG"])),
        kubeconfig_content=dict(type="str", no_log=True),
        kube_context=dict(type="str"),
        timeout=dict(TIMEOUT),
    )


def validate(argument_spec, args, **constraints):
    """(options, no_log values, problem): a task's arguments validated against a module's spec and ``constraints``
    (mutually_exclusive, required_if, ...), the options with their defaults and fallbacks, and the one line that says
    what is wrong (None when nothing is).

    It is the validator ActionBase.validate_argument_spec runs, called here so that the values of no_log options are
    known on a failure too (the action masks them in whatever it returns), after two guards where ansible-core
    (2.16 to 2.19) would raise: an int option given a number no int holds (OverflowError, or minutes of work), and
    a scalar where the spec has suboptions (TypeError: fallbacks are looked up in the value before its type is
    checked).
    """
    # plain Python types: task arguments arrive as ansible-core's own str and dict types (tagged or unsafe), which
    # libraries such as PyYAML's C loader do not take
    try:
        params = json.loads(json.dumps(dict(args), default=str))
    except (RecursionError, ValueError):
        return {}, set(), "the options are nested too deep to read"
    huge = _take_huge_ints(argument_spec, params)
    try:
        checked = ArgumentSpecValidator(argument_spec, **constraints).validate(params)
    except TypeError:
        loose = dict((name, dict(type="raw", no_log=bool(definition.get("no_log"))))
                     for name, definition in argument_spec.items())
        no_log = ArgumentSpecValidator(loose).validate(params)._no_log_values  # pylint: disable=protected-access
        return params, no_log, (shape_problem(argument_spec, params)
                                or "the module's options do not have the shapes its documentation gives")
    no_log = checked._no_log_values  # pylint: disable=protected-access
    if huge:
        return params, no_log, huge
    if checked.error_messages:
        return params, no_log, "; ".join(("Unsupported parameters: " if isinstance(error, UnsupportedError) else "")
                                         + error.msg for error in checked.errors.errors)
    return checked.validated_parameters, no_log, None


def _too_big(value):
    """Whether ``value``, given to an int option, is infinite or has more than INT_DIGITS digits (not a number: False,
    ansible-core refuses it)."""
    if isinstance(value, float):
        return math.isinf(value) or abs(value) >= 10.0 ** INT_DIGITS
    if not isinstance(value, str):
        return False
    try:
        number = decimal.Decimal(value)
    except (decimal.DecimalException, ValueError):
        return False
    return number.is_infinite() or (number.is_finite() and number != 0 and number.adjusted() >= INT_DIGITS)


def _take_huge_ints(argument_spec, params, prefix=""):
    """The first int option (nested too) given a value _too_big, as a line, after putting 0 in its place (the option
    fails then with that line); None when there is none."""
    if not isinstance(argument_spec, dict) or not isinstance(params, dict):
        return None
    for name, definition in argument_spec.items():
        value = params.get(name)
        if value is None or not isinstance(definition, dict):
            continue
        kind, elements = definition.get("type"), definition.get("elements")
        if kind == "int" and _too_big(value):
            params[name] = 0
            return "%s%s must be an integer of at most %d digits, not an infinite or larger number" % (
                prefix, name, INT_DIGITS)
        if kind == "list" and elements == "int" and isinstance(value, list):
            for index, item in enumerate(value):
                if _too_big(item):
                    value[index] = 0
                    return "%s%s[%d] must be an integer of at most %d digits, not an infinite or larger number" % (
                        prefix, name, index, INT_DIGITS)
        if definition.get("options"):
            many = kind == "list" and isinstance(value, list)
            for index, item in enumerate(value if many else [value]):
                problem = _take_huge_ints(definition["options"], item,
                                          "%s%s%s." % (prefix, name, "[%d]" % index if many else ""))
                if problem:
                    return problem
    return None


def shape_problem(argument_spec, params, prefix=""):
    """The first option given something other than a mapping where the spec lists suboptions (a line), or None."""
    for name, definition in argument_spec.items():
        value = params.get(name) if isinstance(params, dict) else None
        suboptions = definition.get("options")
        if value is None or not suboptions:
            continue
        path = prefix + name
        many = definition.get("type") == "list"
        items = value if many and isinstance(value, list) else [value]
        for index, item in enumerate(items):
            where = "%s[%d]" % (path, index) if many else path
            if not isinstance(item, dict):
                return "%s must be a mapping (its keys: %s), not %s" % (
                    where, ", ".join(sorted(suboptions)), type(item).__name__)
            problem = shape_problem(suboptions, item, where + ".")
            if problem:
                return problem
    return None


def spec(options, talos=False, kube=False):
    """``options`` with the connection options of the APIs the module uses."""
    merged = {}
    if talos:
        merged.update(talos_connection())
    if kube:
        merged.update(kube_connection())
    merged.update(options)
    return merged


def wait(timeout):
    """``wait`` (whether to wait) and ``wait_timeout`` (how long, seconds): each module documents them itself, since
    what is waited for is its own."""
    return dict(wait=dict(type="bool", default=True), wait_timeout=dict(type="float", default=float(timeout)))


def machines():
    """The cluster's machines (doc fragment maesh.ichor.machines), validated by their suboptions."""
    return dict(type="list", elements="dict", required=True, options=dict(
        name=dict(type="str", required=True),
        node=dict(type="str", required=True),
        role=dict(type="str", required=True, choices=["controlplane", "worker"]),
    ))


def cluster(required=False):
    """The cluster spec's fields (camelCase, as the spec names them) as suboptions; the config engine checks their
    values. Ansible fills each one not given with None: ``given`` drops those."""
    strings = dict(type="list", elements="str")
    return dict(type="dict", required=required, options=dict(
        name=dict(type="str"), endpoint=dict(type="str"), kubernetesVersion=dict(type="str"),
        talosVersion=dict(type="str"), versionContract=dict(type="str"),
        network=dict(type="dict", options=dict(dnsDomain=dict(type="str"), podSubnets=strings, serviceSubnets=strings)),
        cni=dict(type="dict", options=dict(preset=dict(type="str"), kubeProxy=dict(type="str"), unmanaged=dict(
            type="dict", options=dict(talosCNI=dict(type="str"), urls=strings)))),
        kubePrism=dict(type="dict", options=dict(enabled=dict(type="bool"), port=dict(type="int"))),
        registries=dict(type="list", elements="dict", options=dict(
            host=dict(type="str"), endpoints=strings, overridePath=dict(type="bool"), skipFallback=dict(type="bool"),
            authSecretRef=dict(type="dict", options=dict(name=dict(type="str", required=True))))),
        certSANs=strings, sysctls=dict(type="dict"), kernelModules=strings,
        inlineManifests=dict(type="list", elements="dict", options=dict(
            name=dict(type="str", required=True), contents=dict(type="str", required=True))),
        discovery=dict(type="raw"),
        apiServer=component_args(), controllerManager=component_args(), scheduler=component_args(),
        auditPolicy=dict(type="dict"), admissionControl=dict(type="list", elements="dict", options=dict(
            name=dict(type="str", required=True), configuration=dict(type="dict", required=True))),
    ))


def component_args():
    return dict(type="dict", options=dict(extraArgs=dict(type="dict")))
