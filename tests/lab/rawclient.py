"""A minimal raw grpclib client for tests of the simulator (not the collection's client)."""

import asyncio
import base64

import yaml
from grpclib.client import Channel
from grpclib.const import Cardinality

from . import pki
from .talos_sim import api
from .talos_sim import protos as P

PORT = 50000


def talosconfig_context(path, context=None):
    """(endpoints, nodes, ca_pem, crt_pem, key_pem) of a talosconfig context."""
    with open(path) as fh:
        tc = yaml.safe_load(fh)
    ctx = tc["contexts"][context or tc["context"]]

    def dec(key):
        return base64.b64decode(ctx[key])
    return ctx["endpoints"], ctx["nodes"], dec("ca"), dec("crt"), dec("key")


def ssl_from_talosconfig(path, context=None):
    _e, _n, ca, crt, key = talosconfig_context(path, context)
    client = pki.KeyPair(pki.load_cert_pem(crt), pki.load_key_pem(key))
    return pki.client_ssl_context(ca, client)


def insecure_ssl():
    """Maintenance-mode client: no verification, no client certificate (talosctl --insecure)."""
    return pki.client_ssl_context(None, None)


def method_types(path):
    card, req, resp, _roles, _mp = api.methods()[path]
    return card, req, resp


class RawTalos:
    """Calls by full path, e.g. ``/machine.MachineService/Version``."""

    def __init__(self, address, ssl_context, port=PORT):
        self.address = address
        self.channel = Channel(address, port, ssl=ssl_context)

    def close(self):
        self.channel.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        self.close()

    async def call(self, path, request=None, node=None, metadata=None, timeout=10.0):
        """Unary call: returns the reply; server-streaming: returns the list of replies."""
        card, req_t, resp_t = method_types(path)
        md = list(metadata or [])
        if node:
            md.append(("node", node))
        if request is None:
            request = req_t()
        async with self.channel.request(path, card, req_t, resp_t, timeout=timeout,
                                        metadata=md) as stream:
            await stream.send_message(request, end=True)
            if card == Cardinality.UNARY_UNARY:
                reply = await stream.recv_message()
                await stream.recv_trailing_metadata()
                return reply
            out = []
            async for msg in stream:
                out.append(msg)
            return out


def run(coro):
    return asyncio.run(coro)


def machine():
    return P.machine()
