# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The installer image each machine is upgraded with, so that an upgrade keeps its system extensions.

What a machine runs is read from two places. Its system extensions are its ``ExtensionStatuses.runtime.talos.dev``
resources (one per extension, spec ``extensions.Layer``). An Image Factory image also carries a virtual extension
named ``schematic`` whose version is the schematic ID (the factory's ``schematicExtension``; Talos surfaces it as
``ImageFactorySchematics.runtime.talos.dev`` too): the schematic the machine booted. Its installer repository is
read from its machine config (``UnattendedInstallConfig`` ``installer.image``, or v1alpha1 ``machine.install.image``).
Talos reads that field only when it installs; an upgrade runs the image the request names and leaves the config as
it was, so the config's tag is often old and its repository is all that counts.

``choose`` keeps what the machine runs: an Image Factory installer of the schematic it runs (the config's repository,
whose last path component is the schematic ID: ``factory.talos.dev/installer/<id>``, ``.../metal-installer/<id>``
or a mirror of them) or the config's own repository at the set's version; the plain installer only for a machine
that runs no extension. It refuses (``Refused``, one line naming the machine, what it would lose and
``ichor_upgrade_installer_image``) when the repository that carries them cannot be known. An image the operator
names is used as named. Pure: no I/O, no Ansible.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from collections import namedtuple

from ansible_collections.maesh.ichor.plugins.module_utils.common import images, release
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError

# machinery constants.ImageFactorySchematicExtensionName: the factory's virtual extension
SCHEMATIC = "schematic"
# the Image Factory's schematic without customisations (no extension, no kernel argument, no overlay)
DEFAULT_SCHEMATIC = "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"
# a schematic ID: the hex SHA-256 of the schematic
_SCHEMATIC_ID = re.compile(r"\A[0-9a-f]{64}\Z")
# what a plan line shows of a name a machine reports as it is; anything else is quoted
_PLAIN_NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._+/-]{0,99}\Z")
OVERRIDE = "ichor_upgrade_installer_image"


class Refused(IchorError):
    """The machine's installer cannot be chosen without losing what it runs; nothing was sent."""


class Installed(namedtuple("Installed", "declared extensions schematic")):
    """What a machine runs: ``declared`` its config's install image ("" when it names none), ``extensions`` the names
    of its system extensions in Talos's order (the ``schematic`` one left out), ``schematic`` the schematic ID of the
    Image Factory image it booted ("" when none)."""

    __slots__ = ()


class Choice(namedtuple("Choice", "image source before after")):
    """The installer a machine is upgraded with. ``source``: ``operator`` (named by the operator), ``schematic`` (the
    Image Factory installer of the schematic it runs), ``repository`` (its config's repository, not an Image
    Factory one), ``plain`` (the plain installer: it runs no extension). ``before``: the Installed it was chosen
    for; ``after``: what the plan says the image carries."""

    __slots__ = ()


def _map(value):
    return value if isinstance(value, dict) else {}


def _text(value):
    return value if isinstance(value, str) else ""


def declared_image(objects):
    """The install image a machine config states (its parsed documents): ``UnattendedInstallConfig``
    ``installer.image`` (contract v1.14), else the v1alpha1 document's ``machine.install.image``; "" when none."""
    objects = [o for o in objects or () if isinstance(o, dict)]
    for obj in objects:
        if obj.get("kind") == "UnattendedInstallConfig":
            return _text(_map(obj.get("installer")).get("image"))
    for obj in objects:
        if "kind" not in obj and isinstance(obj.get("machine"), dict):
            return _text(_map(obj["machine"].get("install")).get("image"))
    return ""


def installed(objects, extension_items):
    """An Installed from a machine's parsed config documents and its ExtensionStatuses resources (dicts with the
    spec as Talos's YAML states it: ``{image, metadata: {name, version, ...}}``, in id order)."""
    names, schematic = [], ""
    for item in extension_items or ():
        meta = _map(_map(_map(item).get("spec")).get("metadata"))
        name = _text(meta.get("name"))
        if name == SCHEMATIC:
            schematic = schematic or _text(meta.get("version"))
        elif name:
            names.append(name)
    return Installed(declared_image(objects), tuple(names), schematic)


def schematic_of(image):
    """The schematic ID an Image Factory installer reference names (its last path component), or "" (not one, or not
    a reference)."""
    try:
        last = images.parse(image).path.rsplit("/", 1)[-1]
    except images.ImageRefError:
        return ""
    return last if _SCHEMATIC_ID.match(last) else ""


def repository_of(image):
    """The repository of a reference (tag and digest dropped), or "" when it is not one."""
    try:
        return images.parse(image).repository if image else ""
    except images.ImageRefError:
        return ""


def _shown(name):
    return name if _PLAIN_NAME.match(name) else images.quoted(name)


def _loses(machine):
    """What an installer without the machine's extensions would drop, as a phrase ("" when nothing): the system
    extensions and the Image Factory schematic (the default one, which customises nothing, is not a loss)."""
    schematic = machine.schematic if machine.schematic and machine.schematic != DEFAULT_SCHEMATIC else ""
    if machine.extensions:
        plural = "s" if len(machine.extensions) > 1 else ""
        names = ", ".join(_shown(n) for n in machine.extensions)
        return "the system extension%s %s%s" % (plural, names,
                                                " (Image Factory schematic %s)" % _shown(schematic) if schematic else "")
    return "Image Factory schematic %s" % _shown(schematic) if schematic else ""


def _refuse(name, machine, why, version):
    example = "factory.talos.dev/installer/%s:%s" % (
        machine.schematic if _SCHEMATIC_ID.match(machine.schematic) else "<schematic-id>", version)
    raise Refused("%s runs %s, but %s: an upgrade with the plain installer would drop them; name the installer that "
                  "carries them for the set's Talos %s in %s (e.g. %s); nothing was sent" % (
                      name, _loses(machine), why, version, OVERRIDE, example))


def choose(name, machine, version=None, named=None):
    """The Choice for machine ``name`` (an Installed) at Talos ``version`` (the set's by default); ``named``: the image
    the operator names (``ichor_upgrade_installer_image``), used as named. Refused when the installer that keeps what
    the machine runs cannot be known."""
    version = version or release.TALOS
    if named:
        return Choice(named, "operator", machine, _after_named(machine, named))
    declared = repository_of(machine.declared)
    loses = bool(_loses(machine))
    if not declared:
        if loses:
            what = "names no install image" if not machine.declared else "names an install image that is not a reference"
            _refuse(name, machine, "its machine config %s, so the installer it runs cannot be known" % what, version)
        return Choice(release.installer_image(version), "plain", machine, "none")
    declared_schematic = schematic_of(machine.declared)
    if declared_schematic:
        if declared_schematic != machine.schematic:
            runs = "Image Factory schematic %s" % _shown(machine.schematic) if machine.schematic else \
                "no Image Factory image"
            raise Refused("%s: its machine config names the installer of Image Factory schematic %s, but it runs %s "
                          "(system extensions: %s): which one to install cannot be known; name the installer in %s; "
                          "nothing was sent" % (name, declared_schematic, runs,
                                                ", ".join(_shown(n) for n in machine.extensions) or "none", OVERRIDE))
        return Choice("%s:%s" % (declared, version), "schematic", machine, "kept")
    if declared == release.INSTALLER:
        if loses:
            _refuse(name, machine, "its machine config names the plain installer (%s), which carries none: they were "
                    "installed another way" % release.INSTALLER, version)
        return Choice(release.installer_image(version), "plain", machine, "none")
    # a repository of the operator's own (an imager-built installer, a mirror): the same one at the set's version
    return Choice("%s:%s" % (declared, version), "repository", machine,
                  "unverified" if (machine.extensions or machine.schematic) else "none")


def _after_named(machine, named):
    if machine.schematic and schematic_of(named) == machine.schematic:
        return "kept"
    if not (machine.extensions or machine.schematic):
        return "none"
    return "named"


def describe(choice):
    """The plan's words for the extensions before and after: ``system extensions iscsi-tools, qemu-guest-agent ->
    kept (schematic <id>)``."""
    machine = choice.before
    before = ", ".join(_shown(n) for n in machine.extensions) or "none"
    schematic = " (schematic %s)" % _shown(machine.schematic) if machine.schematic else ""
    after = {
        "kept": "kept%s" % schematic,
        "none": "none",
        "named": "not verified (the image %s names)" % OVERRIDE,
        "unverified": "as %s carries them (not an Image Factory installer: not verified)" % repository_of(choice.image),
    }[choice.after]
    if before == "none" and choice.after in ("none", "kept"):
        return "system extensions: none%s" % schematic
    return "system extensions %s -> %s" % (before, after)


def result(choice):
    """The Choice as a module's result: {image, source, extensions: {before, schematic, declared, after}}."""
    return {"image": choice.image, "source": choice.source,
            "extensions": {"before": list(choice.before.extensions), "schematic": choice.before.schematic,
                           "declared": choice.before.declared, "after": choice.after}}
