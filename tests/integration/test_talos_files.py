"""MachineService/List (``talosctl ls``) through our client against the simulated machines: the listing's
shape as machined walks it, the CNI configs under /etc/cni/net.d that follow each machine's CNI, and the
lab's per-machine setting of them."""

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as tc
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, machine, talosconfig

pytestmark = pytest.mark.lab


def _client(lab, context=None):
    return tc.TalosClient(talosconfig.load(lab.talosconfig, context=context))


def test_listing_of_the_cni_directory_through_the_endpoint(talos_lab):
    lab = talos_lab(controlplanes=1, workers=1)
    worker = [m for m in lab.machines if m["role"] == "worker"][0]
    with _client(lab) as client:
        entries = client.run(machine.list_files(client, "/etc/cni/net.d", worker["address"]))
        # the root first, as "."; then its entries (the generated configs state no CNI: Talos's flannel)
        assert [(e["name"], e["relative_name"], e["is_dir"]) for e in entries] == [
            ("/etc/cni/net.d", ".", True), ("/etc/cni/net.d/10-flannel.conflist", "10-flannel.conflist", False)]
        assert entries[1]["size"] > 0 and entries[1]["mode"] == 0o644
        assert entries[0]["mode"] == (1 << 31) | 0o755  # Go's os.ModeDir bit, as uint32(fi.Mode()) sends it
        # a trailing slash and a missing leading one are the same root, as for machined
        again = client.run(machine.list_files(client, "etc/cni/net.d/", worker["address"]))
        assert [e["name"] for e in again] == [e["name"] for e in entries]
        # not recursing: /etc lists net.d's parent but does not enter it
        names = [e["name"] for e in client.run(machine.list_files(client, "/etc", worker["address"]))]
        assert names == ["/etc", "/etc/cni"]
        assert client.run(machine.cni_configs(client, worker["address"])) == ["10-flannel.conflist"]
        with pytest.raises(errors.TalosCallError) as exc:
            client.run(machine.list_files(client, "/no/such/dir", worker["address"]))
        assert exc.value.code == "UNKNOWN" and "lstat /no/such/dir: no such file or directory" in str(exc.value)
    assert [m for m in lab.state()["machines"] if m["name"] == worker["name"]][0]["cni_files"] == ["10-flannel.conflist"]


def test_reader_lists_and_the_lab_sets_a_machines_cni_files(talos_lab):
    lab = talos_lab(controlplanes=1, workers=2)
    w1, w2 = [m for m in lab.machines if m["role"] == "worker"]
    files = lab.control.set_cni_files(w1["name"], {"05-cilium.conflist": "{}\n", "10-calico.conflist": "{}\n",
                                                   "README": "not a config\n"})
    assert sorted(files) == ["05-cilium.conflist", "10-calico.conflist", "README"]
    with _client(lab, context=lab.context + "-reader") as client:  # List is a reader's call
        assert client.run(machine.cni_configs(client, w1["address"])) == ["05-cilium.conflist", "10-calico.conflist"]
        assert client.run(machine.cni_configs(client, w2["address"])) == ["10-flannel.conflist"]
    lab.control.set_cni_files(w1["name"], {})
    with _client(lab) as client:
        assert client.run(machine.cni_configs(client, w1["address"])) == []
        assert [e["relative_name"] for e in client.run(machine.list_files(client, "/etc/cni/net.d", w1["address"]))] == ["."]
    assert lab.control.set_cni_files(w1["name"], None) == ["10-flannel.conflist"]
    by_name = dict((m["name"], m) for m in lab.state()["machines"])
    assert by_name[w1["name"]]["cni_files"] == ["10-flannel.conflist"]
