# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Talos API client: channels to endpoints, node targeting, the calls the collection makes.

- Configured mode: mTLS to the context's endpoints, the server verified against the context's
  CA. A call for another machine goes to an endpoint with the gRPC metadata ``node: <addr>``
  (one node per call, as talosctl 1.14 sends it); apid there proxies it to ``<addr>:50000``.
- ``dial_only``: exactly one address and nothing else (reclaim must never reach the file's
  other endpoints or nodes); no node metadata is sent.
- Maintenance mode: TLS without a client certificate, for the calls Talos allows there.

The calls go over our own gRPC transport (module_utils.talos.wire), which is asyncio; every public method is
synchronous and runs on the client's own loop. ``fan_out`` runs one call per node concurrently on that loop.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import asyncio
import re
import ssl

try:
    import yaml
    from google.protobuf import empty_pb2
    from google.protobuf.message import DecodeError
    from ansible_collections.maesh.ichor.plugins.module_utils.talos.proto import (
        common_pb2, machine_pb2, cosi_state_pb2, spec_config_pb2, storage_pb2, machine_image_pb2, machine_lifecycle_pb2)
    HAS_DEPS = True
    IMPORT_ERROR = None
except ImportError as _exc:  # reported by the module through missing_required_lib
    HAS_DEPS = False
    IMPORT_ERROR = _exc

from ansible_collections.maesh.ichor.plugins.module_utils.common import fanout, redact, yamlload
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, wire
from ansible_collections.maesh.ichor.plugins.module_utils.talos.talosconfig import split_endpoint
from ansible_collections.maesh.ichor.plugins.module_utils.talos.transport import client_context, maintenance_context

# what a call can fail with, each turned into one line by TalosClient._failure (asyncio.TimeoutError is an OSError)
_FAILURES = (wire.CallError, wire.Terminated, wire.ProtocolViolation, asyncio.TimeoutError, OSError) + (
    (DecodeError,) if HAS_DEPS else ())

UNARY = "unary"
STREAM = "stream"

# The calls the collection makes: name -> (path, request type, reply type, cardinality).
# Types are looked up lazily so this module imports without the generated protos.
_CALLS = {
    "Version": ("/machine.MachineService/Version", "empty", "machine.VersionResponse", UNARY),
    "Hostname": ("/machine.MachineService/Hostname", "empty", "machine.HostnameResponse", UNARY),
    "ServiceList": ("/machine.MachineService/ServiceList", "empty", "machine.ServiceListResponse", UNARY),
    "ApplyConfiguration": ("/machine.MachineService/ApplyConfiguration", "machine.ApplyConfigurationRequest",
                           "machine.ApplyConfigurationResponse", UNARY),
    "Upgrade": ("/machine.MachineService/Upgrade", "machine.UpgradeRequest", "machine.UpgradeResponse", UNARY),
    "Reboot": ("/machine.MachineService/Reboot", "machine.RebootRequest", "machine.RebootResponse", UNARY),
    "Reset": ("/machine.MachineService/Reset", "machine.ResetRequest", "machine.ResetResponse", UNARY),
    "Bootstrap": ("/machine.MachineService/Bootstrap", "machine.BootstrapRequest", "machine.BootstrapResponse", UNARY),
    "Kubeconfig": ("/machine.MachineService/Kubeconfig", "empty", "common.Data", STREAM),
    "EtcdSnapshot": ("/machine.MachineService/EtcdSnapshot", "machine.EtcdSnapshotRequest", "common.Data", STREAM),
    # a directory listing, as talosctl ls asks for it (COSI's List is "List" below)
    "FileList": ("/machine.MachineService/List", "machine.ListRequest", "machine.FileInfo", STREAM),
    "EtcdMemberList": ("/machine.MachineService/EtcdMemberList", "machine.EtcdMemberListRequest",
                       "machine.EtcdMemberListResponse", UNARY),
    "EtcdStatus": ("/machine.MachineService/EtcdStatus", "empty", "machine.EtcdStatusResponse", UNARY),
    "EtcdLeaveCluster": ("/machine.MachineService/EtcdLeaveCluster", "machine.EtcdLeaveClusterRequest",
                         "machine.EtcdLeaveClusterResponse", UNARY),
    "EtcdRemoveMemberByID": ("/machine.MachineService/EtcdRemoveMemberByID", "machine.EtcdRemoveMemberByIDRequest",
                             "machine.EtcdRemoveMemberByIDResponse", UNARY),
    "EtcdForfeitLeadership": ("/machine.MachineService/EtcdForfeitLeadership", "machine.EtcdForfeitLeadershipRequest",
                              "machine.EtcdForfeitLeadershipResponse", UNARY),
    "Disks": ("/storage.StorageService/Disks", "empty", "storage.DisksResponse", UNARY),
    "ImagePull": ("/machine.ImageService/Pull", "image.ImageServicePullRequest", "image.ImageServicePullResponse", STREAM),
    "LifecycleUpgrade": ("/machine.LifecycleService/Upgrade", "lifecycle.LifecycleServiceUpgradeRequest",
                         "lifecycle.LifecycleServiceUpgradeResponse", STREAM),
    "Get": ("/cosi.resource.State/Get", "state.GetRequest", "state.GetResponse", UNARY),
    "List": ("/cosi.resource.State/List", "state.ListRequest", "state.ListResponse", STREAM),
}


async def _settled():
    """Let the closed channels' tasks end (their connections' readers), so none is pending when the loop closes."""
    current = asyncio.current_task()
    await asyncio.gather(*[task for task in asyncio.all_tasks() if task is not current], return_exceptions=True)
    await asyncio.sleep(0)


async def gather(*reads):
    """Every read to its end, then the first failure (in the given order) raised: like asyncio.gather, but no read
    is abandoned while still running, to print its own error when the process exits."""
    results = await asyncio.gather(*reads, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results


def _package(name):
    """The generated module of a proto package."""
    return {"machine": machine_pb2, "common": common_pb2, "state": cosi_state_pb2, "storage": storage_pb2,
            "image": machine_image_pb2, "lifecycle": machine_lifecycle_pb2}[name]


def _type(ref):
    if ref == "empty":
        return empty_pb2.Empty
    package, name = ref.split(".", 1)
    return getattr(_package(package), name)


def request_type(call):
    """The request message class of a call (for building requests)."""
    return _type(_CALLS[call][1])


class NodeResult:
    """One node's part of a response: its metadata hostname, the message, or its error."""

    def __init__(self, node, message=None, error=None):
        self.node = node
        self.message = message
        self.error = error

    def __repr__(self):
        return "NodeResult(node=%r, error=%r)" % (self.node, self.error)


class TalosClient:
    """Synchronous client over one or more endpoints of a talosconfig context."""

    def __init__(self, context=None, endpoint=None, dial_only=None, maintenance=False, timeout=30.0):
        if not HAS_DEPS:
            raise errors.TalosError("the Talos client needs protobuf and PyYAML (%s)" % IMPORT_ERROR)
        if not wire.HAS_H2:
            raise errors.TalosError("the Talos client needs h2 (%s)" % wire.H2_IMPORT_ERROR)
        self.timeout = float(timeout)
        self.dial_only = dial_only
        if dial_only:
            endpoints = [dial_only]
        elif endpoint:
            endpoints = [endpoint]
        else:
            endpoints = list(context.endpoints) if context is not None else []
        if not endpoints:
            raise errors.TalosConfigError("no endpoint: the talosconfig context lists none and none was given")
        self.endpoints = [split_endpoint(e) for e in endpoints]
        self.maintenance = maintenance
        if maintenance:
            self._ssl = maintenance_context()
        else:
            if context is None:
                raise errors.TalosConfigError("a talosconfig context is needed outside maintenance mode")
            self._ssl = client_context(context.credentials)
        self._loop = asyncio.new_event_loop()
        self._channels = {}

    # -- lifecycle -------------------------------------------------------------------------
    def close(self):
        for channel in self._channels.values():
            channel.close()
        self._channels = {}
        if not self._loop.is_closed():
            self._loop.run_until_complete(_settled())
            self._loop.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def run(self, coro):
        """Run a coroutine (for example from module_utils.talos.machine) on the client's loop."""
        asyncio.set_event_loop(self._loop)
        return self._loop.run_until_complete(coro)

    def _channel(self, host, port):
        key = (host, port)
        if key not in self._channels:
            self._channels[key] = wire.Channel(host, port, self._ssl)
        return self._channels[key]

    # -- the one place a call is made ------------------------------------------------------
    def _prepared(self, call, request, node):
        """The call's path, reply type, request bytes and metadata. ``node`` is sent as the ``node`` metadata; in
        dial_only mode it is refused, so a call can never be routed beyond the one dialled address."""
        path, request_ref, reply_ref, cardinality = _CALLS[call]
        if request is None:
            request = _type(request_ref)()
        metadata = None
        if node is not None:
            if self.dial_only:
                raise errors.TalosError("this client dials %s only; it does not address other nodes" % self.dial_only)
            metadata = [("node", str(node))]
        return path, _type(reply_ref), cardinality, request, metadata

    async def _invoke(self, call, request, node=None, timeout=None):
        """Make one call; returns the reply (unary) or the list of replies (stream), within one deadline."""
        path, reply_cls, cardinality, request, metadata = self._prepared(call, request, node)
        timeout = self.timeout if timeout is None else timeout
        last = None
        for host, port in self.endpoints:
            address = host if port == 50000 else "%s:%d" % (host, port)
            try:
                replies = await asyncio.wait_for(self._channel(host, port).call(
                    path, request.SerializeToString(), metadata=metadata, timeout=timeout), timeout)
                if cardinality == STREAM:
                    return [reply_cls.FromString(reply) for reply in replies]
                if len(replies) != 1:
                    raise wire.ProtocolViolation("a unary reply of %d messages" % len(replies))
                return reply_cls.FromString(replies[0])
            except _FAILURES as exc:
                last = self._failure(exc, call, request, node, address, timeout)
            self._drop(host, port)
        raise last

    def stream(self, call, request=None, node=None, timeout=None, max_bytes=None):
        """A server-streaming call: its replies as they arrive, each within ``timeout`` of the one before (no deadline
        over the whole call), so a long reply such as an etcd snapshot is never held whole. ``max_bytes`` bounds the
        whole stream (each message counted with its 5-byte prefix)."""
        path, reply_cls, _cardinality, request, metadata = self._prepared(call, request, node)
        timeout = self.timeout if timeout is None else timeout
        started, address, last = None, None, None
        for host, port in self.endpoints:
            address = host if port == 50000 else "%s:%d" % (host, port)
            try:
                started = self.run(asyncio.wait_for(self._channel(host, port).start(
                    path, request.SerializeToString(), metadata=metadata), timeout))
                break
            except _FAILURES as exc:
                last = self._failure(exc, call, request, node, address, timeout)
            self._drop(host, port)
        if started is None:
            raise last
        total = 0
        try:
            while True:
                try:
                    message = self.run(asyncio.wait_for(started.next(), timeout))
                    if message is None:
                        return
                    total += 5 + len(message)
                    if max_bytes is not None and total > max_bytes:
                        raise wire.LimitExceeded("a stream of over %d MiB" % (max_bytes >> 20))
                    reply = reply_cls.FromString(message)
                except _FAILURES as exc:
                    raise self._failure(exc, call, request, node, address, timeout)
                yield reply
        finally:
            if not self._loop.is_closed():
                started.cancel()

    def _failure(self, exc, call, request, node, address, timeout):
        """The one-line error of a failed call. Raised here when the endpoint answered (what it said decides);
        returned when it could not be reached, so the next endpoint may be tried."""
        target = node or address
        if isinstance(exc, wire.CallError):
            if exc.status == "UNAVAILABLE" and node is None:
                return errors.unreachable(address)
            if call == "ApplyConfiguration":
                register_config_secrets(request.data)  # the machine's message may quote them
            raise errors.call_error(target, exc.status, exc.message, call=call, maintenance=self.maintenance)
        if isinstance(exc, asyncio.TimeoutError):
            return errors.unreachable(target, timeout=timeout)
        if isinstance(exc, ssl.SSLError):
            return errors.tls_error(address, getattr(exc, "reason", None) or str(exc), maintenance=self.maintenance)
        if isinstance(exc, (ConnectionError, OSError)):
            return errors.unreachable(address)
        if isinstance(exc, wire.Terminated):
            return errors.closed(address, maintenance=self.maintenance)
        if isinstance(exc, DecodeError):
            # the endpoint answered: what it said decides, and it is not the Talos API's message
            raise undecodable(target, "its reply to %s" % call)
        if isinstance(exc, wire.LimitExceeded):
            raise errors.TalosCallError("%s: %s: %s; check that the address is a Talos API endpoint"
                                        % (target, call, exc), address=target, code="RESOURCE_EXHAUSTED")
        raise errors.TalosCallError("%s: %s: the machine broke the gRPC protocol; check that the address is a "
                                    "Talos API endpoint" % (target, call), address=target, code="INTERNAL")

    def _drop(self, host, port):
        channel = self._channels.pop((host, port), None)
        if channel is not None:
            channel.close()

    def call(self, call, request=None, node=None, timeout=None):
        """Synchronous call; raises errors.TalosError with a one-line message."""
        return self.run(self._invoke(call, request, node=node, timeout=timeout))

    def fan_out(self, fn, nodes, concurrency=fanout.CONCURRENCY):
        """Run ``fn(node)`` (a coroutine function using ``ainvoke``) for every node, at most ``concurrency`` at once.

        Returns {node: NodeResult}; one node's failure is that node's error, not the run's.
        """
        async def all_of():
            lanes = asyncio.Semaphore(max(1, int(concurrency)))  # made on the client's loop

            async def one(node):
                async with lanes:
                    try:
                        return NodeResult(node, message=await fn(node))
                    except errors.TalosError as exc:
                        return NodeResult(node, error=exc)

            return await gather(*[one(n) for n in nodes])

        return dict((r.node, r) for r in self.run(all_of()))

    async def ainvoke(self, call, request=None, node=None, timeout=None):
        """The coroutine form of ``call``, for ``fan_out``."""
        return await self._invoke(call, request, node=node, timeout=timeout)

    # -- replies ---------------------------------------------------------------------------
    @staticmethod
    def first(reply, node=None, call=None):
        """The one element of an ``XResponse.messages`` reply, or the node's error from its metadata."""
        messages = list(reply.messages)
        if not messages:
            raise errors.TalosCallError("%s: the reply holds no message" % (node or "endpoint"))
        message = messages[0]
        if message.HasField("metadata") and message.metadata.error:
            status = message.metadata.status
            hostname = message.metadata.hostname
            where = hostname if hostname and len(hostname) <= _HOSTNAME_LIMIT and hostname.isprintable() else node or "node"
            raise errors.call_error(where, status_name(status.code), status.message or message.metadata.error, call=call)
        return message


# A hostname is at most 253 characters; a longer one in a reply is not one, and is not quoted.
_HOSTNAME_LIMIT = 253


def status_name(code):
    """The name of a gRPC status code; UNKNOWN for 0 in an error and for a code gRPC does not define."""
    return wire.status_name(code) if code else "UNKNOWN"


def undecodable(address, what):
    """A reply that answered but cannot be read as the Talos API's message: one line, nothing of its bytes."""
    return errors.TalosCallError("%s: %s cannot be decoded; check that the address is a Talos API endpoint of a supported "
                                 "version" % (address, what), address=address, code="INTERNAL")


# Leaves of a machine config that hold credentials, by name (v1alpha1 and the typed documents: machine.token,
# cluster.secret, *.key, issuer.privateKey, clusterSecret, secretbox keys, registry auth, passphrases, ...).
# Registering more than needed only hides more of a refusal's text.
# (compiled where used: only a refused apply reads it)
_SECRET_LEAF = r"(?:^|[a-z])(?:[Kk]ey|[Tt]oken|[Ss]ecret|[Pp]assword|[Pp]assphrase|[Aa]uth)$"


def register_config_secrets(data):
    """Register the credential leaves of a machine config we sent (a refusal may quote them)."""
    try:
        docs = list(yaml.safe_load_all(data))
    except yaml.YAMLError:
        return  # the text is not YAML; redaction still removes what looks like key material

    for doc in docs:
        redact.register_leaves(doc, re.compile(_SECRET_LEAF))


def version_info(message):
    """A Version reply element as a plain dict."""
    return {
        "tag": message.version.tag,
        "sha": message.version.sha,
        "arch": message.version.arch,
        "os": message.version.os,
        "platform": message.platform.name if message.HasField("platform") else "",
    }


def resource_request(resource_type, namespace, resource_id=None):
    """A COSI Get (with id) or List (without) request."""
    if resource_id is None:
        return cosi_state_pb2.ListRequest(namespace=namespace, type=resource_type)
    return cosi_state_pb2.GetRequest(namespace=namespace, type=resource_type, id=resource_id)


MACHINE_CONFIG_TYPE = "MachineConfigs.config.talos.dev"


# PyYAML raises these for a scalar its tag cannot hold (an integer of thousands of digits, !!int '', !!bool '',
# !!timestamp x), besides its own errors; libyaml bounds the nesting, the pure loader recurses.
_YAML_ERRORS = (ValueError, LookupError, AttributeError, RecursionError)
if HAS_DEPS:
    _YAML_ERRORS += (yaml.YAMLError,)
    _LOADER = yamlload.LOADER


def resource_dict(resource, resource_type=None):
    """A COSI resource as {id, version, phase, spec}; the spec from its YAML form.

    The machine config is the exception: its spec is the whole multi-document config, taken
    byte for byte from proto_spec (MachineConfigSpec.yaml_marshalled), not re-parsed.
    ``resource_type``: the type asked for, which decides how the spec is read (else the reply's).
    """
    kind = resource_type or resource.metadata.type
    what = "the %s resource" % (kind if len(kind) <= _HOSTNAME_LIMIT else "requested")
    if kind == MACHINE_CONFIG_TYPE:
        try:
            spec = spec_config_pb2.MachineConfigSpec.FromString(resource.spec.proto_spec).yaml_marshalled.decode("utf-8")
        except DecodeError:
            raise undecodable("the machine", what)
        except UnicodeDecodeError as exc:
            raise errors.TalosCallError("the machine: %s is not UTF-8 text (byte %d)" % (what, exc.start + 1), code="INTERNAL")
    else:
        try:
            spec = yaml.load(resource.spec.yaml_spec, Loader=_LOADER) if resource.spec.yaml_spec else None  # nosec
        except _YAML_ERRORS:
            raise errors.TalosCallError("the machine: the spec of %s is not YAML" % what, code="INTERNAL")
    return {"id": resource.metadata.id, "version": resource.metadata.version, "phase": resource.metadata.phase,
            "spec": spec}
