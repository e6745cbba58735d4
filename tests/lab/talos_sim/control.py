"""Control API of a running lab: a small HTTP/JSON server on 127.0.0.1 (ephemeral port).

GET  /state                       the lab JSON (live); ``/state?full=1`` adds faults/timing/...;
                                  ``/state?brief=1``: per machine only name, address, role, mode, version, uuid,
                                  hostname, stage, up and kubelet_image (the lab agent's round)
GET  /machines/<name>             one machine (full form)
GET  /connections                 {"open", "peak", "total"}: established connections to the machines (TLS done)
                                  open now, the most open at once and how many were made since the lab started or
                                  the last DELETE (which sets peak to open now and total to 0)
GET  /machines/<name>/calls       {"Reset": 1, "Version": 3, ...}: calls that reached the machine
                                  (dialled, or proxied to it), and "etcd-peer-port": connections
                                  to its etcd peer port; DELETE clears them
GET  /timeline                    [[machine, what], ...] in order, across machines: each call a
                                  machine served (its method; a proxying endpoint is not named),
                                  "down:<stage>" and "boot"; ``?at=1`` adds each one's epoch
                                  seconds; DELETE clears it
GET  /machines/<name>/requests    {"/machine.ImageService/Pull": base64, ...}: the last request of
                                  each method that reached the machine, serialized; DELETE clears
POST /machines/<name>/faults      {"unreachable", "latency_ms", "fail_call", "fail_code",
                                   "fail_message", "fail_count", "new_address_on_reboot",
                                   "interrupt_reset", "apply_needs_reboot",
                                   "installer_exit_code", "kubeprism_unhealthy",
                                   "lose_reply", "etcd_snapshot_file", "installer_seconds",
                                   "etcd_db_size", "etcd_no_leader", "etcd_errors"}; ``{}``
                                   clears all
POST /machines/<name>/cni_files   {"files": {name: content} | null}: /etc/cni/net.d (null: what
                                   the machine's CNI writes), for MachineService/List
POST /machines/<name>/timing      {"reboot_seconds", "upgrade_seconds", "install_seconds"}
POST /machines/<name>/power       {"on": true|false}   (power on after a Reset with reboot=false)
POST /machines/<name>/reboot      {"seconds": s}: the machine reboots on its own, unasked (a power blip, a
                                   panic): "down:unasked", ``s`` seconds, "boot"; 409 when it is down or busy
POST /settings                    {"kubeconfig_server", "kubeconfig_path"}
POST /cas                         {"crt": PEM, "key": PEM}: a CA key the lab may sign server
                                  certificates with (for configs whose machine.ca has no key)
"""

import asyncio
import base64
import json
import logging
from urllib.parse import parse_qs, urlsplit

log = logging.getLogger("talos_sim.control")

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 409: "Conflict",
            500: "Internal Server Error"}


class ControlServer:
    def __init__(self, lab):
        self.lab = lab
        self.server = None
        self.port = None

    async def start(self, host="127.0.0.1", port=0):
        self.server = await asyncio.start_server(self._serve, host, port)
        self.port = self.server.sockets[0].getsockname()[1]
        self.lab.control_url = "http://%s:%d" % (host, self.port)
        return self.lab.control_url

    async def stop(self):
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _serve(self, reader, writer):
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                method, target, _ver = line.decode("latin-1").split(" ", 2)
                headers = {}
                while True:
                    h = await reader.readline()
                    if h in (b"\r\n", b"\n", b""):
                        break
                    k, _sep, v = h.decode("latin-1").partition(":")
                    headers[k.strip().lower()] = v.strip()
                n = int(headers.get("content-length") or 0)
                body = await reader.readexactly(n) if n else b""
                code, payload = await self._route(method, target, body)
                data = json.dumps(payload).encode()
                keep = headers.get("connection", "").lower() != "close"
                writer.write(("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                              "Content-Length: %d\r\nConnection: %s\r\n\r\n"
                              % (code, _REASONS.get(code, ""), len(data),
                                 "keep-alive" if keep else "close")).encode() + data)
                await writer.drain()
                if not keep:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            writer.close()

    async def _route(self, method, target, body):
        url = urlsplit(target)
        parts = [p for p in url.path.split("/") if p]
        query = parse_qs(url.query)
        try:
            payload = json.loads(body.decode() or "{}") if body else {}
            if not isinstance(payload, dict):
                return 400, {"error": "body must be a JSON object"}
            if parts == ["state"] and method == "GET":
                full = query.get("full", ["0"])[0] not in ("0", "false", "")
                brief = query.get("brief", ["0"])[0] not in ("0", "false", "")
                return 200, self.lab.state(full=full, brief=brief)
            if parts == ["connections"] and method in ("GET", "DELETE"):
                if method == "DELETE":
                    self.lab.connections.reset()
                return 200, self.lab.connections.to_json()
            if parts == ["timeline"] and method in ("GET", "DELETE"):
                if method == "DELETE":
                    self.lab.timeline.clear()
                at = query.get("at", ["0"])[0] not in ("0", "false", "")
                return 200, [list(e) if at else list(e[:2]) for e in self.lab.timeline]
            if len(parts) == 3 and parts[0] == "machines" and parts[2] == "calls" and \
                    method in ("GET", "DELETE"):
                m = self.lab.machine(parts[1])
                if method == "DELETE":
                    m.calls = {}
                return 200, dict(m.calls)
            if len(parts) == 3 and parts[0] == "machines" and parts[2] == "requests" and \
                    method in ("GET", "DELETE"):
                m = self.lab.machine(parts[1])
                if method == "DELETE":
                    m.requests = {}
                return 200, dict((path, base64.b64encode(data).decode()) for path, data in m.requests.items())
            if len(parts) == 2 and parts[0] == "machines" and method == "GET":
                m = self.lab.machine(parts[1])
                return 200, m.to_json()
            if len(parts) == 3 and parts[0] == "machines" and method == "POST":
                name, what = parts[1], parts[2]
                self.lab.machine(name)
                if what == "faults":
                    return 200, {"faults": await self.lab.set_faults(name, payload)}
                if what == "cni_files":
                    return 200, {"cni_files": self.lab.set_cni_files(name, payload.get("files"))}
                if what == "timing":
                    return 200, {"timing": self.lab.set_timing(name, payload)}
                if what == "power":
                    await self.lab.set_power(name, bool(payload.get("on", True)))
                    return 200, self.lab.machine(name).to_json()
                if what == "reboot":
                    if not self.lab.reboot_unasked(name, float(payload.get("seconds", 1.0))):
                        return 409, {"error": "%s is down or busy (%s)" % (name, self.lab.machine(name).stage)}
                    return 200, self.lab.machine(name).to_json()
                return 404, {"error": "unknown machine operation %r" % what}
            if parts == ["settings"] and method == "POST":
                for k, v in payload.items():
                    if k not in self.lab.settings:
                        return 400, {"error": "unknown setting %r" % k}
                    self.lab.settings[k] = v or ("https://127.0.0.1:6443"
                                                 if k == "kubeconfig_server" else "")
                return 200, {"settings": dict(self.lab.settings)}
            if parts == ["cas"] and method == "POST":
                from .. import pki
                pair = pki.KeyPair(pki.load_cert_pem(payload["crt"]),
                                   pki.load_key_pem(payload["key"]))
                self.lab.remember_ca(pair)
                return 200, {"ok": True}
            if parts == ["settings"] and method == "GET":
                return 200, {"settings": dict(self.lab.settings)}
            return 404, {"error": "no route %s %s" % (method, url.path)}
        except KeyError as exc:
            return 404, {"error": "unknown machine %s" % exc}
        except ValueError as exc:
            return 400, {"error": str(exc)}
        except Exception as exc:  # pragma: no cover
            log.exception("control API error")
            return 500, {"error": repr(exc)}
