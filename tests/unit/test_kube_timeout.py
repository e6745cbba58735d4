"""`timeout` reaches every Kubernetes request, discovery included: a server that accepts and never answers
costs one timeout, not urllib3's default of waiting forever."""

import socket
import threading
import time

import pytest
import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient, KubeError

# the runtime dependencies' floors (h2, hpack, hyperframe, protobuf, kubernetes, PyYAML) run these too
pytestmark = pytest.mark.floor


@pytest.fixture
def silent_server():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held = []
    stop = threading.Event()

    def accept():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])  # accepted, never answered
            except socket.timeout:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield "http://127.0.0.1:%d" % listener.getsockname()[1]
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    listener.close()


def test_a_silent_api_server_costs_one_timeout(silent_server):
    kubeconfig = yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "lab",
        "clusters": [{"name": "lab", "cluster": {"server": silent_server}}],
        "users": [{"name": "lab", "user": {"token": "not-a-real-token"}}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "lab"}}]})
    client = KubeClient(kubeconfig_content=kubeconfig, timeout=1.0)
    start = time.monotonic()
    with pytest.raises(KubeError) as exc:
        client.get("v1", "ConfigMap", "ichor-cluster", "ichor-system")
    elapsed = time.monotonic() - start
    # urllib3 retries a read timeout a few times at most; without the timeout this call never returns
    assert elapsed < 10, elapsed
    assert "\n" not in exc.value.message and "not-a-real-token" not in exc.value.message
