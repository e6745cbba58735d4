"""Client of the simulator's control API (stdlib only)."""

import base64
import json
import time
import urllib.error
import urllib.request


class ControlError(RuntimeError):
    pass


class LabControl:
    def __init__(self, url, timeout=10.0):
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read().decode() or "null")
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            raise ControlError("%s %s -> %d: %s" % (method, path, exc.code, detail))

    def state(self, full=False, brief=False):
        """The lab JSON, live; ``brief``: each machine's name, address, role, mode, version, uuid, hostname, stage,
        up and kubelet_image only (talos_sim Lab.state)."""
        return self._call("GET", "/state?brief=1" if brief else "/state?full=1" if full else "/state")

    def machines(self):
        return self.state()["machines"]

    def connections(self, reset=False):
        """{"open", "peak", "total"}: established connections to the lab's machines now, the most at once and how
        many were made since the start or the last reset; ``reset`` starts a new count (peak = open now)."""
        return self._call("DELETE" if reset else "GET", "/connections")

    def machine(self, name):
        return self._call("GET", "/machines/%s" % name)

    def calls(self, name):
        """{method name: count} of the calls that reached the machine (``Reset``, ``Version``, ...)."""
        return self._call("GET", "/machines/%s/calls" % name)

    def reset_calls(self, name):
        return self._call("DELETE", "/machines/%s/calls" % name)

    def timeline(self, at=False):
        """[(machine, what), ...] in the order they happened across the lab: each call that reached a machine
        (``ApplyConfiguration``, ...), ``down:<stage>`` when it went down (``down:rebooting``), ``boot``,
        ``installer-done`` when an upgrade's installer finished, ``etcd-leader`` when a member took the lead; with
        ``at``, (machine, what, epoch seconds)."""
        return [tuple(e) for e in self._call("GET", "/timeline?at=1" if at else "/timeline")]

    def reset_timeline(self):
        return self._call("DELETE", "/timeline")

    def requests(self, name):
        """{method path: serialized request} of the last call of each method that reached the machine
        (``/machine.ImageService/Pull``, ``/machine.LifecycleService/Upgrade``, ...)."""
        return dict((path, base64.b64decode(data))
                    for path, data in self._call("GET", "/machines/%s/requests" % name).items())

    def reset_requests(self, name):
        return self._call("DELETE", "/machines/%s/requests" % name)

    def set_faults(self, name, **faults):
        """unreachable, latency_ms, fail_call + fail_code (+ fail_message, fail_count),
        new_address_on_reboot (an address or True for a free one), interrupt_reset,
        apply_needs_reboot, installer_exit_code (LifecycleService.Upgrade's installer exits
        with it, after an error line; the machine keeps its version), kubeprism_unhealthy (its
        KubePrismStatuses says healthy: false, as when no API server answers through the balancer), lose_reply (a
        method: the next such call is carried out and its reply lost, once; the caller sees DEADLINE_EXCEEDED),
        etcd_snapshot_file (a file EtcdSnapshot streams instead of the lab's own bytes: a real etcd's snapshot),
        installer_seconds (LifecycleService.Upgrade's installer runs that much longer before it ends), etcd_db_size
        (bytes: the database size its EtcdStatus reports), etcd_no_leader (its etcd member knows no leader: leader 0
        and etcd's own error "etcdserver: no leader"), etcd_errors (errors its EtcdStatus reports besides, e.g.
        "memberID:<id> alarm:NOSPACE ")."""
        return self._call("POST", "/machines/%s/faults" % name, faults)["faults"]

    def clear_faults(self, name):
        return self._call("POST", "/machines/%s/faults" % name, {})["faults"]

    def set_cni_files(self, name, files):
        """What /etc/cni/net.d holds on the machine ({file name: content}, None: what its CNI writes);
        returns the names of the files now there."""
        return self._call("POST", "/machines/%s/cni_files" % name, {"files": files})["cni_files"]

    def set_timing(self, name, **timing):
        return self._call("POST", "/machines/%s/timing" % name, timing)["timing"]

    def power(self, name, on=True):
        return self._call("POST", "/machines/%s/power" % name, {"on": on})

    def reboot(self, name, seconds=1.0):
        """The machine reboots unasked ("down:unasked", then "boot" ``seconds`` later); ControlError (409) when it is
        down or busy."""
        return self._call("POST", "/machines/%s/reboot" % name, {"seconds": seconds})

    def settings(self, **settings):
        return self._call("POST", "/settings", settings)["settings"]

    def add_ca(self, crt_pem, key_pem):
        """Let the lab sign server certificates with this CA (PEM strings or bytes)."""

        def text(value):
            return value.decode() if isinstance(value, bytes) else value
        return self._call("POST", "/cas", {"crt": text(crt_pem), "key": text(key_pem)})

    def wait_for(self, name, predicate, timeout=30.0, interval=0.05):
        """Poll the machine until ``predicate(machine_dict)``; return that dict."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = self.machine(name)
            if predicate(last):
                return last
            time.sleep(interval)
        raise TimeoutError("machine %s did not reach the expected state; last: %r"
                           % (name, {k: last.get(k) for k in ("mode", "stage", "up", "address",
                                                              "version")} if last else None))
