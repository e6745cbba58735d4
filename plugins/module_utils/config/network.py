# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A machine's network as the spec states it, in both forms Talos takes, and read back from a live config.

Spec (``machine.network``, and ``machine.timeServers`` beside it)::

    network:
      interfaces:
        - name: eth0                   # the link; a bond's own name (bond0) when it has ``bond``
          addresses: [10.5.0.2/24]
          routes: [{network: 0.0.0.0/0, gateway: 10.5.0.1, metric: 1024}]
          mtu: 9000
          vip: 10.5.0.10               # a Layer 2 VIP (control planes only)
          bond: {interfaces: [eth1, eth2], mode: 802.3ad, miimon: 100, lacpRate: fast, xmitHashPolicy: layer3+4,
                 updelay: 200, downdelay: 200}
          vlans: [{id: 100, addresses: [...], routes: [...], mtu: 1500, vip: ...}]
      nameservers: [10.5.0.1]
    timeServers: [time.cloudflare.com]

Contracts v1.12 and v1.13 render ``machine.network.interfaces`` (``interface``, ``addresses``, ``routes{network,
gateway, metric}``, ``mtu``, ``vip.ip``, ``bond``, ``vlans{vlanId, ...}``), ``machine.network.nameservers`` and
``machine.time.servers``; v1.14 the typed documents machinery v1.14.1 has for them: ``LinkConfig`` (or
``BondConfig`` with ``links`` and ``bondMode``), ``VLANConfig`` named ``<parent>.<id>`` (the name Talos gives a
legacy VLAN link), ``Layer2VIPConfig`` (name the VIP, ``link`` the link), ``ResolverConfig.nameservers[].address``
and ``TimeSyncConfig.ntp.servers``. Routes are ``network`` in the spec and the legacy form, ``destination`` in the
typed one. What neither the spec nor this module knows (DHCP, device selectors, bridges, other bond options, route
tables) is not read: its drift is class C.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.config import documents
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.config.values import as_list as _list, only

BOND_STRINGS = ("mode", "lacpRate", "xmitHashPolicy")
BOND_NUMBERS = ("miimon", "updelay", "downdelay")
# spec bond field -> BondConfig field (the legacy form uses the spec's names)
TYPED_BOND = {"interfaces": "links", "mode": "bondMode"}
# A default route: the spec and the legacy form name its network, the typed form has no destination (machinery v1.14.1
# refuses an unspecified one); read back, the gateway's family says which.
DEFAULT_ROUTES = ("0.0.0.0/0", "::/0")


def _number(value, what, top):
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= top:
        raise ConfigError("%s must be a whole number from 1 to %d" % (what, top))
    return value


def _text(value, what):
    if not isinstance(value, str) or not value.strip():
        raise ConfigError("%s must be a non-empty string" % what)
    return value


def _prefix(value, what):
    value = _text(value, what)
    if "/" not in value:
        raise ConfigError("%s %r is not an address with a prefix length (10.5.0.2/24)" % (what, value))
    return value


def _known(raw, keys, what):
    if not isinstance(raw, dict):
        raise ConfigError("%s must be a mapping" % what)
    only(raw, keys, what)


def _routes(raw, what):
    out = []
    for index, route in enumerate(_list(raw, what)):
        where = "%s[%d]" % (what, index)
        _known(route, ("network", "gateway", "metric"), where)
        item = {"network": _prefix(route.get("network"), where + ".network")}
        if route.get("gateway") is not None:
            item["gateway"] = _text(route["gateway"], where + ".gateway")
        if item["network"] in DEFAULT_ROUTES and ("gateway" not in item or
                                                  (":" in item["gateway"]) != (item["network"] == DEFAULT_ROUTES[1])):
            raise ConfigError("%s: the default route %s needs a gateway of its family (IPv4 for 0.0.0.0/0, IPv6 for ::/0)" % (
                where, item["network"]))
        if route.get("metric") is not None:
            item["metric"] = _number(route["metric"], where + ".metric", 2 ** 32 - 1)
        out.append(item)
    return out


def _addressed(raw, item, what, controlplane):
    """addresses, routes, mtu and vip of an interface or a VLAN, into item."""
    addresses = [_prefix(value, "%s.addresses" % what) for value in _list(raw.get("addresses"), what + ".addresses")]
    if addresses:
        item["addresses"] = addresses
    routes = _routes(raw.get("routes"), what + ".routes")
    if routes:
        item["routes"] = routes
    if raw.get("mtu") is not None:
        item["mtu"] = _number(raw["mtu"], what + ".mtu", 65535)
    if raw.get("vip") is not None:
        if not controlplane:
            raise ConfigError("%s.vip: a Layer 2 VIP is a control plane's (the API endpoint), not a worker's" % what)
        item["vip"] = _text(raw["vip"], what + ".vip")
    return item


def _bond(raw, what):
    _known(raw, ("interfaces",) + BOND_STRINGS + BOND_NUMBERS, what)
    links = [_text(name, what + ".interfaces") for name in _list(raw.get("interfaces"), what + ".interfaces")]
    if not links:
        raise ConfigError("%s.interfaces must name the bond's links" % what)
    out = {"interfaces": links, "mode": _text(raw.get("mode"), what + ".mode")}
    for key in BOND_STRINGS[1:]:
        if raw.get(key) is not None:
            out[key] = _text(raw[key], "%s.%s" % (what, key))
    for key in BOND_NUMBERS:
        if raw.get(key) is not None:
            out[key] = _number(raw[key], "%s.%s" % (what, key), 2 ** 32 - 1)
    # machinery's own rules for a bond (v1alpha1 validation), so that no contract's form is refused on the machine
    if "lacpRate" in out and out["mode"] != "802.3ad":
        raise ConfigError("%s.lacpRate is only for mode 802.3ad" % what)
    if ("updelay" in out or "downdelay" in out) and "miimon" not in out:
        raise ConfigError("%s: updelay and downdelay need miimon" % what)
    return out


def interface(raw, controlplane, what="network.interfaces[0]"):
    """One normalised interface, or a ConfigError naming what is wrong."""
    _known(raw, ("name", "addresses", "routes", "mtu", "vip", "bond", "vlans"), what)
    item = {"name": _text(raw.get("name"), what + ".name")}
    _addressed(raw, item, what, controlplane)
    if raw.get("bond") is not None:
        item["bond"] = _bond(raw["bond"], what + ".bond")
    vlans, ids = [], set()
    for index, entry in enumerate(_list(raw.get("vlans"), what + ".vlans")):
        where = "%s.vlans[%d]" % (what, index)
        _known(entry, ("id", "addresses", "routes", "mtu", "vip"), where)
        vlan = {"id": _number(entry.get("id"), where + ".id", 4094)}
        if vlan["id"] in ids:
            raise ConfigError("%s: VLAN %d is listed twice" % (where, vlan["id"]))
        ids.add(vlan["id"])
        vlans.append(_addressed(entry, vlan, where, controlplane))
    if vlans:
        item["vlans"] = vlans
    return item


def normalise(raw, time_servers, controlplane):
    """({interfaces, nameservers}, [time servers]) of a machine spec; one line on bad input."""
    raw = {} if raw is None else raw
    _known(raw, ("interfaces", "nameservers"), "machine network")
    interfaces, names = [], set()
    for index, entry in enumerate(_list(raw.get("interfaces"), "network.interfaces")):
        item = interface(entry, controlplane, "network.interfaces[%d]" % index)
        links = [item["name"]] + ["%s.%d" % (item["name"], vlan["id"]) for vlan in item.get("vlans", [])]
        for name in links:
            if name in names:
                raise ConfigError("network.interfaces[%d]: link %s is configured twice" % (index, name))
            names.add(name)
        interfaces.append(item)
    network = {"interfaces": interfaces,
               "nameservers": [_text(value, "network.nameservers") for value in _list(raw.get("nameservers"), "network.nameservers")]}
    servers = [_text(value, "timeServers") for value in _list(time_servers, "timeServers")]
    return network, servers


def vips(network):
    """The Layer 2 VIPs a normalised network states (on its links and their VLANs)."""
    out = []
    for item in network["interfaces"]:
        out.extend(entry["vip"] for entry in [item] + item.get("vlans", []) if "vip" in entry)
    return out


# ---------------------------------------------------------------------------- the legacy form (v1.12, v1.13)


def _legacy_vip(item, out):
    if "vip" in item:
        out["vip"] = {"ip": item["vip"]}


def legacy(network, time_servers):
    """(machine.network content, machine.time content) for the v1alpha1 document: empty dicts when unset."""
    devices = []
    for item in network["interfaces"]:
        device = {"interface": item["name"]}
        for key in ("addresses", "routes", "mtu"):
            if key in item:
                device[key] = item[key]
        if "bond" in item:
            device["bond"] = dict(item["bond"])
        vlans = []
        for vlan in item.get("vlans", []):
            # machinery writes a VLAN's routes even when it has none (no omitempty on the field)
            out = {"addresses": vlan.get("addresses", []), "routes": vlan.get("routes", []), "vlanId": vlan["id"]}
            if "mtu" in vlan:
                out["mtu"] = vlan["mtu"]
            _legacy_vip(vlan, out)
            vlans.append(out)
        if vlans:
            device["vlans"] = vlans
        _legacy_vip(item, device)
        devices.append(device)
    out = {}
    if devices:
        out["interfaces"] = devices
    if network["nameservers"]:
        out["nameservers"] = list(network["nameservers"])
    return out, ({"servers": list(time_servers)} if time_servers else {})


# ---------------------------------------------------------------------------- the typed form (v1.14)


def _typed_common(item, body):
    if "mtu" in item:
        body["mtu"] = item["mtu"]
    if "addresses" in item:
        body["addresses"] = [{"address": value} for value in item["addresses"]]
    if "routes" in item:
        routes = []
        for route in item["routes"]:
            out = {} if route["network"] in DEFAULT_ROUTES else {"destination": route["network"]}
            for key in ("gateway", "metric"):
                if key in route:
                    out[key] = route[key]
            routes.append(out)
        body["routes"] = routes
    return body


def typed(network, time_servers):
    """The documents of the network at contract v1.14, in the order the render appends them: each interface's
    LinkConfig or BondConfig (none for an interface that only carries VLANs) and its VLANConfigs, then the
    Layer2VIPConfigs, then TimeSyncConfig."""
    links, vips = [], []
    for item in network["interfaces"]:
        if "bond" in item:
            body = {}
            for key, value in item["bond"].items():
                body[TYPED_BOND.get(key, key)] = value
            links.append(documents.typed("BondConfig", _typed_common(item, body), name=item["name"]))
        elif any(key in item for key in ("addresses", "routes", "mtu")) or not (item.get("vlans") or "vip" in item):
            # a link that only carries VLANs or a VIP has no LinkConfig of its own (Talos runs DHCP on it by default)
            links.append(documents.typed("LinkConfig", _typed_common(item, {}), name=item["name"]))
        if "vip" in item:
            vips.append(documents.typed("Layer2VIPConfig", {"link": item["name"]}, name=item["vip"]))
        for vlan in item.get("vlans", []):
            name = "%s.%d" % (item["name"], vlan["id"])
            links.append(documents.typed("VLANConfig", _typed_common(vlan, {"vlanID": vlan["id"], "parent": item["name"]}), name=name))
            if "vip" in vlan:
                vips.append(documents.typed("Layer2VIPConfig", {"link": name}, name=vlan["vip"]))
    docs = links + vips
    if time_servers:
        docs.append(documents.typed("TimeSyncConfig", {"ntp": {"servers": list(time_servers)}}))
    return docs


def typed_nameservers(network):
    return [{"address": value} for value in network["nameservers"]]


# ---------------------------------------------------------------------------- read from a live config


def _seq(value):
    return value if isinstance(value, list) else []


def _map(value):
    return value if isinstance(value, dict) else {}


def _spec_routes(routes, destination):
    out = []
    for route in _seq(routes):
        route = _map(route)
        network = route.get(destination)
        if destination == "destination" and network is None and isinstance(route.get("gateway"), str):
            network = DEFAULT_ROUTES[1] if ":" in route["gateway"] else DEFAULT_ROUTES[0]
        item = {"network": network}
        for key in ("gateway", "metric"):
            if route.get(key) not in (None, ""):
                item[key] = route[key]
        out.append(item)
    return out


def _from_legacy_addressed(raw, item):
    if _seq(raw.get("addresses")):
        item["addresses"] = list(raw["addresses"])
    if _seq(raw.get("routes")):
        item["routes"] = _spec_routes(raw["routes"], "network")
    if raw.get("mtu"):
        item["mtu"] = raw["mtu"]
    vip = _map(raw.get("vip")).get("ip")
    if vip:
        item["vip"] = vip
    return item


def _from_typed_addressed(body, item):
    addresses = [_map(entry).get("address") for entry in _seq(body.get("addresses"))]
    if addresses:
        item["addresses"] = addresses
    if _seq(body.get("routes")):
        item["routes"] = _spec_routes(body["routes"], "destination")
    if body.get("mtu"):
        item["mtu"] = body["mtu"]
    return item


def _kept(raw, controlplane):
    """The raw interface normalised, or None when the spec cannot state it (its drift then shows, class C)."""
    try:
        return interface(raw, controlplane)
    except ConfigError:
        return None


def read(docs, legacy_body, controlplane):
    """(network, time servers, complete) a live config states, in the spec's form; what cannot be stated is left out,
    and then complete is False (adoption leaves the machines' network unmapped: its drift is class C, never a removal)."""
    get = documents.get_path
    raw_interfaces = []
    for device in _seq(get(legacy_body, "machine.network.interfaces")):
        device = _map(device)
        if not device.get("interface"):
            continue  # a device selector has no field
        item = _from_legacy_addressed(device, {"name": device["interface"]})
        if device.get("bond") is not None:
            item["bond"] = dict(_map(device["bond"]))
        vlans = [_from_legacy_addressed(_map(vlan), {"id": _map(vlan).get("vlanId")}) for vlan in _seq(device.get("vlans"))]
        if vlans:
            item["vlans"] = vlans
        raw_interfaces.append(item)
    by_name = {}
    for doc in docs:
        if doc.kind in ("LinkConfig", "BondConfig") and doc.name:
            item = _from_typed_addressed(doc.body, {"name": doc.name})
            if doc.kind == "BondConfig":
                item["bond"] = dict((key, value) for key, value in
                                    ((key, doc.body.get(TYPED_BOND.get(key, key))) for key in ("interfaces",) + BOND_STRINGS + BOND_NUMBERS)
                                    if value is not None)
            by_name[doc.name] = item
            raw_interfaces.append(item)
    for doc in documents.find_all(docs, "VLANConfig"):
        parent = doc.body.get("parent")
        vlan_id = doc.body.get("vlanID")
        if not isinstance(parent, str) or doc.name != "%s.%s" % (parent, vlan_id):
            continue  # another name than Talos's own for the VLAN link has no field
        if parent not in by_name:
            by_name[parent] = {"name": parent}
            raw_interfaces.append(by_name[parent])
        by_name[parent].setdefault("vlans", []).append(_from_typed_addressed(doc.body, {"id": vlan_id}))
    for doc in documents.find_all(docs, "Layer2VIPConfig"):
        link = doc.body.get("link")
        found = False
        for item in raw_interfaces:
            if item["name"] == link:
                item["vip"], found = doc.name, True
            for vlan in item.get("vlans", []):
                if "%s.%s" % (item["name"], vlan.get("id")) == link:
                    vlan["vip"], found = doc.name, True
        if not found and isinstance(link, str):
            # a VIP on a link no document configures (Talos's default DHCP): the spec states the link with its VIP
            raw_interfaces.append({"name": link, "vip": doc.name})
    kept = [_kept(item, controlplane) for item in raw_interfaces]
    nameservers = [_map(entry).get("address") for entry in _seq(_map(_body(docs, "ResolverConfig")).get("nameservers"))]
    nameservers += list(_seq(get(legacy_body, "machine.network.nameservers")))
    servers = _seq(get(legacy_body, "machine.time.servers")) + _seq(get(_map(_body(docs, "TimeSyncConfig")), "ntp.servers"))
    texts = [value for value in nameservers + servers if isinstance(value, str) and value]
    complete = None not in kept and len(texts) == len(nameservers) + len(servers)
    network = {"interfaces": [item for item in kept if item is not None],
               "nameservers": [value for value in nameservers if isinstance(value, str) and value]}
    return network, [value for value in servers if isinstance(value, str) and value], complete


def _body(docs, kind):
    doc = documents.find(docs, kind)
    return doc.body if doc is not None else None
