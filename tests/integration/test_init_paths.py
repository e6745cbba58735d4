"""Issue 44 against the lab: init with ``~/...`` paths writes to the cluster it makes, and only there.

The operator's defaults name another cluster: a second real kube-apiserver (the lab's own binaries, no build) that
both KUBECONFIG and ~/.kube/config (a HOME of the test's own) point at. Init is run with its secrets bundle,
talosconfig and kubeconfig as ``~/clusters/lab/...``, as the guides write them. The role used to test
``ichor_init_kubeconfig_file is exists`` on the path as given (``~`` not expanded: never true), pass the modules ""
and so let the Cilium install, the cluster record and the bundle Secret fall back to KUBECONFIG: the second server's
audit log held them. Now it holds no request of init at all, and the rerun finds the kubeconfig (it takes the lock).
"""

import os
import shutil
import stat

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient

from tests.integration.ansible_env import REPO, ansible_playbook
from tests.integration import test_init
from tests.integration.test_init import KUBE_PROXY, _cilium, _inventory
from tests.lab.cilium import fixtures as cilium_fixtures
from tests.lab.kube.cluster import KubeLab, event_user

pytestmark = pytest.mark.lab

init_cleanup = test_init.init_cleanup
cilium_charts = cilium_fixtures.cilium_charts
cilium_lab = cilium_fixtures.cilium_lab


@pytest.fixture
def other_cluster(kube_lab, tmp_path):
    """A second API server, started from the lab's binaries (never a new build): the cluster the operator's default
    kubeconfig names, a running one (kube-proxy runs there: the old code's Cilium install went ahead in it)."""
    other = KubeLab.start(workdir=str(tmp_path / "other-cluster"), bins=kube_lab.bins, controllers=False, build=False)
    try:
        KubeClient(kubeconfig=other.kubeconfig).apply(KUBE_PROXY, "lab")
        yield other
    finally:
        other.stop()


def _requests_of(lab, since, user="lab-admin"):
    """Every audited request of ``user`` (both labs' admin kubeconfigs are lab-admin) since ``since``, one line each."""
    return ["%s %s" % (e.get("verb"), e.get("requestURI")) for e in lab.audit_events(since) if event_user(e) == user]


def test_init_with_tilde_paths_writes_to_the_named_cluster_only(
        talos_kube_lab, kube_lab, other_cluster, cilium_lab, cilium_charts, tmp_path, init_cleanup):
    lab = talos_kube_lab(controlplanes=1, workers=1, mode="maintenance", bootstrapped=False, version=release.TALOS)
    chart = _cilium(cilium_lab, kube_lab, cilium_charts)
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    shutil.copy(other_cluster.kubeconfig, str(home / ".kube" / "config"))
    env = {"HOME": str(home), "KUBECONFIG": other_cluster.kubeconfig}
    inv, unused_keep = _inventory(lab, tmp_path, ichor_init_secrets_file="~/clusters/lab/secrets.yaml",
                                  ichor_init_talosconfig_file="~/clusters/lab/talosconfig",
                                  ichor_init_kubeconfig_file="~/clusters/lab/kubeconfig",
                                  # the old code's Cilium waited on the other cluster: fail in minutes, not 15
                                  ichor_init_wait_timeout=240, **chart)
    mark = other_cluster.audit_mark()

    planned = ansible_playbook("-i", inv, "maesh.ichor.init", "--check", env=env)
    assert planned.returncode == 0, planned.stdout[-6000:]
    made = ansible_playbook("-i", inv, "maesh.ichor.init", env=env, timeout=900)
    # the other cluster first: what the old code wrote there is the finding, whatever the run said after
    written = ["%s %s" % (e.get("verb"), e.get("requestURI")) for e in other_cluster.mutating_requests(since=mark)]
    assert written == [], "%d writes to the other cluster: %s" % (len(written), written[:20])
    assert _requests_of(other_cluster, mark) == [], made.stdout[-6000:]
    assert made.returncode == 0, made.stdout[-8000:]
    assert "Traceback" not in made.stdout + made.stderr

    # the three files are where ~ is, 0600, and no directory "~" was made anywhere
    keep = home / "clusters" / "lab"
    for name in ("secrets.yaml", "talosconfig", "kubeconfig"):
        assert stat.S_IMODE(os.stat(str(keep / name)).st_mode) == 0o600, name
    assert not os.path.exists(os.path.join(REPO, "~")) and not os.path.exists(str(tmp_path / "~"))
    # init landed in the lab's cluster: the record with both machines, the bundle Secret, our Cilium release
    kube = KubeClient(kubeconfig=kube_lab.kubeconfig)
    record = cluster_record.read(kube)
    assert sorted(record.get("nodes")) == sorted(m["name"] for m in lab.machines)
    assert record.get("cilium")["release"] == "ichor-system/cilium"
    assert kube.get("v1", "Secret", "ichor-secrets-bundle", "ichor-system") is not None

    # the rerun finds the kubeconfig at ~/clusters/lab/kubeconfig: it joins under the cluster lock, in the lab's cluster
    lab_mark = kube_lab.audit_mark()
    again = ansible_playbook("-i", inv, "maesh.ichor.init", env=env, timeout=900)
    assert again.returncode == 0 and "changed=0" in again.stdout, again.stdout[-8000:]
    assert "cluster lock ichor-system/ichor-cluster-lock: taken by" in again.stdout, again.stdout[-8000:]
    assert any("/leases" in line for line in _requests_of(kube_lab, lab_mark))
    assert _requests_of(other_cluster, mark) == []
