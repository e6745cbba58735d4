"""The lab agent: nothing runs kubelets here, so this mirrors the simulated Talos machines into
the real API server, and plays the workload controllers' part for readiness.

- a Node per configured machine (name = hostname): kubelet version from the machine config's
  kubelet image (``machine.kubelet.image`` or a typed ``KubeletConfig``), OS image "Talos (vX)",
  InternalIP, Ready while the machine is up and running, NotReady while it reboots or upgrades;
  the Node goes when the machine is reset (maintenance);
- Deployments and DaemonSets get a ready status, except those annotated
  ``lab.maesh.dev/never-ready: "true"`` (a workload that never becomes ready); a Deployment whose
  pods require anti-affinity per hostname (the Cilium operator: host ports, one per node) gets at
  most one ready replica per Node, as the scheduler would place them (the rest stay Pending);
- Pods bound to its Nodes (``spec.nodeName``; nothing schedules here, a test binds them) get the
  kubelet's part: Running and Ready while the Node's machine runs (a Pod annotated
  ``lab.maesh.dev/never-ready: "true"`` stays Pending), and a Pod being deleted (a graceful
  delete, an eviction, its namespace going) is deleted for good (grace period 0, on its UID) while
  the machine is up, as a kubelet confirms it once its containers stopped. So a drain through the
  Eviction API completes, and the kube-controller-manager's disruption controller counts healthy
  Pods for PodDisruptionBudgets. One Pod list per round.

Run ``sync_once()`` from a test, or ``start()`` a background thread.
"""

import datetime
import json
import threading

import yaml

from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

NEVER_READY = "lab.maesh.dev/never-ready"
MANAGED = "lab.maesh.dev/agent"


def kubelet_version(machine_config, default):
    """The kubelet image tag of a machine config: legacy ``machine.kubelet.image`` (v1alpha1), else
    the typed ``KubeletConfig`` document's ``image`` (v1.14 contract); ``default`` without one."""
    try:
        docs = [d for d in yaml.safe_load_all(machine_config or "") if isinstance(d, dict)]
    except yaml.YAMLError:
        return default
    legacy = [((d.get("machine") or {}).get("kubelet") or {}).get("image") for d in docs if "kind" not in d]
    typed = [d.get("image") for d in docs if d.get("kind") == "KubeletConfig"]
    for image in legacy + typed:
        tag = image_tag(image)
        if tag:
            return tag
    return default


def image_tag(image):
    """The tag of an image reference (``ghcr.io/siderolabs/kubelet:v1.36.3@sha256:...`` -> ``v1.36.3``), None
    without one."""
    ref = (image or "").split("@", 1)[0]
    if ":" in ref.rsplit("/", 1)[-1]:
        return ref.rsplit(":", 1)[1]
    return None


class LabAgent:
    def __init__(self, api_client, talos_lab=None, default_kubelet="v1.36.3", interval=0.3, owner="lab", refresh=True):
        """``refresh``: patch every Node's status every round, as kubelets report in; False patches only what
        changed (a benchmark's agent, so that its own work does not slow what is measured)."""
        self.core = k8s.CoreV1Api(api_client)
        self.apps = k8s.AppsV1Api(api_client)
        self.talos_lab = talos_lab
        self.default_kubelet = default_kubelet
        self.interval = interval
        self.owner = owner  # the Nodes this agent made carry MANAGED=<owner>
        self.refresh = refresh
        self._reported = {}  # Node name -> the status last patched (without its times)
        self._kubelets = {}  # machine config text -> its kubelet version: parsed once, not every round
        self._machines = {}  # Node name -> the machine it mirrors (lab state), as of the last round
        self.not_ready = set()  # Nodes a test holds NotReady while their machines run (a kubelet that fails)
        self._stop = threading.Event()
        self._thread = None

    # -- nodes -----------------------------------------------------------------------------
    def _node_body(self, machine):
        labels = {MANAGED: self.owner, "kubernetes.io/hostname": machine["hostname"], "kubernetes.io/os": "linux"}
        if machine["role"] == "controlplane":
            labels["node-role.kubernetes.io/control-plane"] = ""
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": machine["hostname"], "labels": labels}}

    def _kubelet(self, machine):
        """The machine's kubelet version: from the simulator's reading of its config (``kubelet_image``, the brief
        state) or, from a whole state, its config parsed here (once per config text)."""
        if "kubelet_image" in machine:
            return image_tag(machine["kubelet_image"]) or self.default_kubelet
        config = machine.get("machine_config")
        if config not in self._kubelets:
            self._kubelets[config] = kubelet_version(config, self.default_kubelet)
        return self._kubelets[config]

    def _node_status(self, machine, ready):
        version = self._kubelet(machine)
        return {"status": {
            "nodeInfo": {"kubeletVersion": version, "kubeProxyVersion": version, "osImage": "Talos (%s)" % machine["version"],
                         "operatingSystem": "linux", "architecture": "amd64", "containerRuntimeVersion": "containerd://2.1.0",
                         "kernelVersion": "6.12.0-talos", "machineID": machine["uuid"].replace("-", ""),
                         "systemUUID": machine["uuid"], "bootID": machine["uuid"]},
            "addresses": [{"type": "InternalIP", "address": machine["address"]},
                          {"type": "Hostname", "address": machine["hostname"]}],
            "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                            "reason": "KubeletReady" if ready else "KubeletNotReady",
                            "message": "lab agent", "lastHeartbeatTime": None, "lastTransitionTime": None}],
        }}

    def _lab_state(self):
        try:  # the brief form: no configs, disks or files (a lab process; a thousand machines: 280 KB, not 3 MB)
            return self.talos_lab.state(brief=True)
        except TypeError:  # a lab object without it
            return self.talos_lab.state()

    def _node_names(self):
        """{Node name: its labels} of every Node, read as JSON: the client's models for a thousand Nodes would cost
        the round a second or more, and only names and labels are needed."""
        resp = self.core.list_node(_preload_content=False)
        try:
            items = json.loads(resp.data)["items"]
        finally:
            resp.release_conn()
        return dict((n["metadata"]["name"], n["metadata"].get("labels") or {}) for n in items)

    def sync_nodes(self):
        """One round's Nodes; returns how many Nodes the API server then holds (None without a lab). Per round: the
        lab's brief state, one list of the Nodes, and a write only for a Node to create, delete or (refresh false)
        whose status changed, so its cost with refresh false grows by a few bytes per machine, not by calls."""
        if self.talos_lab is None:
            return None
        state = self._lab_state()
        wanted = {}
        for machine in state["machines"]:
            if machine["mode"] != "configured":
                continue
            wanted[machine["hostname"]] = machine
        self._machines = wanted
        every = self._node_names()
        existing = set(name for name, labels in every.items() if labels.get(MANAGED) == self.owner)
        count = len(every)
        for name in existing:
            if name not in wanted:
                self.core.delete_node(name)
                count -= 1
        for name, machine in wanted.items():
            ready = bool(machine["up"]) and machine["stage"] == "running" and name not in self.not_ready
            if name not in existing:
                try:
                    self.core.create_node(self._node_body(machine))
                    count += name not in every
                except ApiException as exc:
                    if exc.status != 409:
                        raise
            status = self._node_status(machine, ready)
            reported = json.dumps(status, sort_keys=True)
            if not self.refresh and name in existing and self._reported.get(name) == reported:
                continue
            now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            for cond in status["status"]["conditions"]:
                cond["lastHeartbeatTime"] = cond["lastTransitionTime"] = now
            self.core.patch_node_status(name, status)
            self._reported[name] = reported
        return count

    # -- workloads -------------------------------------------------------------------------
    @staticmethod
    def _one_per_node(dep):
        """Whether the pods require anti-affinity on kubernetes.io/hostname (at most one per Node)."""
        affinity = dep.spec.template.spec.affinity
        anti = affinity.pod_anti_affinity if affinity else None
        terms = (anti.required_during_scheduling_ignored_during_execution or []) if anti else []
        return any(t.topology_key == "kubernetes.io/hostname" for t in terms)

    def sync_workloads(self, nodes=None):
        """``nodes``: how many Nodes there are (sync_nodes's count; counted here when None)."""
        if nodes is None:
            nodes = len(self._node_names())
        for dep in self.apps.list_deployment_for_all_namespaces().items:
            if (dep.metadata.annotations or {}).get(NEVER_READY) == "true":
                continue
            want = dep.spec.replicas if dep.spec.replicas is not None else 1
            ready = min(want, nodes) if self._one_per_node(dep) else want
            st = dep.status
            if st and st.observed_generation == dep.metadata.generation and (st.ready_replicas or 0) == ready \
                    and (st.updated_replicas or 0) == ready and (st.available_replicas or 0) == ready \
                    and (st.replicas or 0) == want:
                continue
            available = "True" if ready >= want else "False"
            self.apps.patch_namespaced_deployment_status(dep.metadata.name, dep.metadata.namespace, {"status": {
                "observedGeneration": dep.metadata.generation, "replicas": want, "readyReplicas": ready,
                "updatedReplicas": ready, "availableReplicas": ready, "unavailableReplicas": want - ready,
                "conditions": [{"type": "Available", "status": available,
                                "reason": "MinimumReplicasAvailable" if ready >= want else "MinimumReplicasUnavailable"}]}})
        for ds in self.apps.list_daemon_set_for_all_namespaces().items:
            if (ds.metadata.annotations or {}).get(NEVER_READY) == "true":
                continue
            st = ds.status
            if st and st.observed_generation == ds.metadata.generation and st.number_ready == nodes \
                    and st.desired_number_scheduled == nodes and st.updated_number_scheduled == nodes:
                continue
            self.apps.patch_namespaced_daemon_set_status(ds.metadata.name, ds.metadata.namespace, {"status": {
                "observedGeneration": ds.metadata.generation, "desiredNumberScheduled": nodes,
                "currentNumberScheduled": nodes, "numberReady": nodes, "updatedNumberScheduled": nodes,
                "numberAvailable": nodes, "numberMisscheduled": 0}})

    # -- pods: the kubelet's part -----------------------------------------------------------
    @staticmethod
    def _pod_ready(pod):
        conditions = (pod.status.conditions or []) if pod.status else []
        return pod.status is not None and pod.status.phase == "Running" and any(
            c.type == "Ready" and c.status == "True" for c in conditions)

    def _pod_status(self, pod, machine):
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        started = pod.status.start_time if pod.status and pod.status.start_time else None
        started = started.strftime("%Y-%m-%dT%H:%M:%SZ") if started else now
        conditions = [{"type": kind, "status": "True", "lastTransitionTime": now}
                      for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")]
        containers = [{"name": c.name, "image": c.image, "imageID": "", "ready": True, "started": True,
                       "restartCount": 0, "state": {"running": {"startedAt": started}}}
                      for c in pod.spec.containers or []]
        return {"status": {"phase": "Running", "conditions": conditions, "hostIP": machine["address"],
                           "hostIPs": [{"ip": machine["address"]}], "startTime": started,
                           "containerStatuses": containers}}

    def sync_pods(self):
        """The kubelet's part for the Pods bound to this agent's Nodes: a deleted Pod (deletionTimestamp) is deleted
        for good while its machine is up (a down machine's kubelet confirms nothing); a Pod on a running machine
        becomes Running and Ready, unless annotated never-ready. One list of the bound Pods; nothing more without
        any."""
        if not self._machines:
            return
        pods = self.core.list_pod_for_all_namespaces(field_selector="spec.nodeName!=").items
        for pod in pods:
            machine = self._machines.get(pod.spec.node_name)
            if machine is None or not machine["up"]:
                continue
            meta = pod.metadata
            try:
                if meta.deletion_timestamp is not None:
                    self.core.delete_namespaced_pod(meta.name, meta.namespace, body=k8s.V1DeleteOptions(
                        grace_period_seconds=0, preconditions=k8s.V1Preconditions(uid=meta.uid)))
                elif machine["stage"] == "running" and (meta.annotations or {}).get(NEVER_READY) != "true" \
                        and not self._pod_ready(pod):
                    self.core.patch_namespaced_pod_status(meta.name, meta.namespace, self._pod_status(pod, machine))
            except ApiException as exc:
                if exc.status not in (404, 409):  # gone meanwhile, or another Pod of that name now
                    raise

    def hold_not_ready(self, node, held=True):
        """Report Node ``node`` NotReady from the next round on, whatever its machine does (a kubelet that does not
        come back), or, with ``held`` false, as its machine is again."""
        (self.not_ready.add if held else self.not_ready.discard)(node)

    def sync_once(self):
        self.sync_workloads(self.sync_nodes())
        self.sync_pods()

    # -- background ------------------------------------------------------------------------
    def _loop(self):
        while not self._stop.is_set():
            try:
                self.sync_once()
            except Exception:  # pylint: disable=broad-except
                pass  # the lab is starting or stopping; the next round tries again
            self._stop.wait(self.interval)

    def start(self):
        self._thread = threading.Thread(target=self._loop, name="lab-agent", daemon=True)
        self._thread.start()
        return self

    def stop(self, remove_nodes=True):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if remove_nodes:
            for name, labels in self._node_names().items():
                if labels.get(MANAGED) == self.owner:
                    self.core.delete_node(name)
