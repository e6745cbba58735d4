"""System extensions of simulated machines, as Talos reports them (``ExtensionStatuses.runtime.talos.dev``).

A machine runs the extensions its installer image carried. An Image Factory installer
(``<registry>/<flavor>-installer/<schematic id>:<version>``) carries the official extensions its schematic lists and,
last, the factory's virtual extension ``schematic`` whose version is the schematic ID (image-factory
internal/artifacts/schematic.go; Talos's ImageFactorySchematicController reads it). The lab knows its schematics
(``SCHEMATICS``); an installer of a schematic it does not know carries only the ``schematic`` extension; any other
installer (the plain ``ghcr.io/siderolabs/installer``) carries none. An upgrade runs the image it is given and leaves
the machine config as it was (Talos reads ``machine.install.image`` only when it installs).
"""

import hashlib
import re

import yaml

# official extensions the lab's schematics use: name -> (version, description)
CATALOG = {
    "iscsi-tools": ("v0.2.0", "This system extension provides iscsi-tools."),
    "qemu-guest-agent": ("10.1.2", "This system extension provides the QEMU guest agent service."),
    "drbd": ("9.2.14", "This system extension provides DRBD kernel modules."),
    "util-linux-tools": ("2.41.1", "This system extension provides util-linux tools."),
}
AUTHOR = "Sidero Labs"
COMPATIBILITY = ">= v1.9.0"

# the Image Factory's schematic without customisations
DEFAULT_SCHEMATIC = "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"
_SCHEMATIC_ID = re.compile(r"\A[0-9a-f]{64}\Z")


def schematic_yaml(names):
    """The schematic the factory would be given for these official extensions (its ``extraInfo``)."""
    return yaml.safe_dump({"customization": {"systemExtensions": {
        "officialExtensions": ["siderolabs/%s" % n for n in names]}}}, default_flow_style=False)


def schematic_id(names):
    """The lab's ID of a schematic: the SHA-256 of its YAML, as the factory's (the empty one is the factory's own)."""
    if not names:
        return DEFAULT_SCHEMATIC
    return hashlib.sha256(schematic_yaml(names).encode()).hexdigest()


# the lab's schematics: id -> the official extensions it lists, in order
SCHEMATICS = dict((schematic_id(names), names) for names in (
    ("iscsi-tools", "qemu-guest-agent"),
    ("drbd",),
    (),
))


def extension(name, version=None, author=AUTHOR, description=None, extra_info=""):
    """An extension's manifest metadata (extensions.Metadata) as the simulator keeps it."""
    known = CATALOG.get(name, ("v0.0.0", "This system extension provides %s." % name))
    return {"name": name, "version": version or known[0], "author": author,
            "description": description or known[1], "compatibility": COMPATIBILITY, "extraInfo": extra_info}


def schematic_extension(schematic):
    """The factory's virtual extension naming the schematic."""
    names = SCHEMATICS.get(schematic)
    return extension("schematic", version=schematic, author="Image Factory",
                     description="Virtual extension which specifies the schematic of the image built with Image "
                                 "Factory.",
                     extra_info=schematic_yaml(names) if names else "")


def named(names):
    """Extensions installed some other way (an imager-built image, the legacy machine.install.extensions)."""
    return [extension(n) for n in names if n]


def schematic_of(image):
    """The schematic an installer reference names (the last path component of its repository), or None."""
    name = (image or "").split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        last = last.split(":", 1)[0]
    return last if "/" in name and _SCHEMATIC_ID.match(last) else None


def carried(image):
    """The extensions an installer image carries, in the order Talos lists them."""
    schematic = schematic_of(image)
    if schematic is None:
        return []
    return [extension(n) for n in SCHEMATICS.get(schematic, ())] + [schematic_extension(schematic)]


def layer_yaml(index, ext):
    """The yaml_spec of one ExtensionStatus: extensions.Layer as Talos's yaml.Marshal writes it (Go field order,
    ``extraInfo`` omitted when empty)."""
    meta = {"name": ext["name"], "version": ext["version"], "author": ext["author"],
            "description": ext["description"], "compatibility": {"talos": {"version": ext["compatibility"]}}}
    if ext.get("extraInfo"):
        meta["extraInfo"] = ext["extraInfo"]
    return {"image": image_name(index, ext), "metadata": meta}


def image_name(index, ext):
    """The layer's image as Talos names it: its order and name (``000.iscsi-tools.sqsh``)."""
    return "%03d.%s.sqsh" % (index, ext["name"])
