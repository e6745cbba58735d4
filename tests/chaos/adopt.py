"""maesh.ichor.adopt, confirmed, taking over a Cilium someone else installed with Helm: 3 control planes and 2 workers
from real Talos configs (contract v1.13, CNI none, kube-proxy on, KubePrism on 7445), a kube-proxy DaemonSet, and
Cilium 1.19 installed and upgraded once by the real helm into kube-system (two record Secrets, the hubble certificates'
Job that chart 1.20 no longer renders). Adopt upgrades it to the release set's Cilium as the Helm release
ichor-system/cilium, deletes the orphan Job (consented) and retires the foreign records, each backed up first."""

import json
import os
import threading
import time

import yaml

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.k8s.client import KubeClient
from tests.chaos.scenario import (API_FAULTS, OTHER_FAULTS, RUN_FAULTS, Lab, Scenario, Violation, helm_release,
                                  helm_status, may_have_landed, record, run_writes)
from tests.chaos.upgrade import check_record as check_versions
from tests.integration.ansible_env import REPO
from tests.lab.cilium import charts as cilium_charts
from tests.lab.cilium.fixtures import TALOS_VALUES, CiliumLab, merged
from tests.versions import CILIUM_MINOR

CASE = os.path.join(REPO, "tests", "fixtures", "configs", "v1.13", "v1.14.1", "cni-none")
TALOS_VERSION = "v1.14.1"
CONTROLPLANES, WORKERS = 3, 2
# kube-proxy runs (the configs enable it): the user's Cilium does not replace it, nor dials KubePrism itself
FOREIGN_VALUES = merged(dict((k, v) for k, v in TALOS_VALUES.items() if k not in ("k8sServiceHost", "k8sServicePort")),
                        {"kubeProxyReplacement": False},
                        {"hubble": {"tls": {"auto": {"method": "cronJob"}}}})  # the Job chart 1.20 renames
FOREIGN = ("kube-system", "cilium")
OURS = ("ichor-system", "cilium")
HELM_OWNED = "owner=helm,name=cilium"
BACKUP_OF = "ichor.maesh.dev/backup-of"
INSTALLER_SNAPSHOT = "ichor-installer-snapshot"
# what adopt never orders on machines that are already in shape
MACHINE_DISRUPTIONS = frozenset(("Reset", "Reboot", "Upgrade"))


class Adopt(Scenario):
    playbook = "adopt"
    # adopt writes nothing to a machine of this lab (zero drift): no lose_reply; its machine reads are not faulted.
    # second_upgrade: a second operator upgrades the cluster meanwhile; sigkill_upgrade: at once after the run was
    # killed (it takes the dead run's lock over). Neither may touch a machine adopt holds
    faults = RUN_FAULTS + OTHER_FAULTS + API_FAULTS + ("helm_kill", "second_upgrade", "sigkill_upgrade")
    write_span = 10.0  # measured: 10 s from the first write to the end

    def __init__(self, work):
        super().__init__(work)
        self.charts = None
        self.mark = None
        self.foreign_records = {}  # record name: (uid, data) as helm left them
        self.foreign_objects = []  # (apiVersion, kind, namespace, name, uid) the foreign release made
        self.configs = {}  # machine: its config before any run
        self.watch = None

    def start(self):
        self.lab = Lab(self.work, controlplanes=CONTROLPLANES, workers=WORKERS, version=TALOS_VERSION, case=CASE)
        kube = self.lab.kube
        self.charts = cilium_charts.ensure(kube.bins["helm"])
        labels = {"k8s-app": "kube-proxy"}
        self.lab.client.create({
            "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "kube-proxy", "namespace": "kube-system",
                                                                       "labels": labels},
            "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                "containers": [{"name": "kube-proxy", "image": "registry.k8s.io/kube-proxy:v1.36.3"}]}}}})
        # the user's install and a later upgrade of it: helm keeps both records (superseded, deployed)
        cilium = CiliumLab(kube, self.charts, self.work)
        cilium.helm_install("1.19", FOREIGN_VALUES)
        kube.helm("upgrade", "cilium", cilium.chart("1.19"), "-n", "kube-system",
                  "-f", cilium.file("values.json", merged(FOREIGN_VALUES, {"debug": {"enabled": True}})))
        cilium.wait_ready(timeout=60)
        for secret in self.lab.client.list("v1", "Secret", FOREIGN[0], label_selector=HELM_OWNED):
            self.foreign_records[secret["metadata"]["name"]] = (secret["metadata"]["uid"], secret.get("data"))
        manifest = kube.helm("get", "manifest", "cilium", "-n", "kube-system").stdout
        for doc in yaml.safe_load_all(manifest):
            if isinstance(doc, dict) and doc.get("kind"):
                live = self._get(doc["apiVersion"], doc["kind"], doc["metadata"]["name"],
                                 doc["metadata"].get("namespace") or FOREIGN[0])
                if live is not None:
                    meta = live["metadata"]
                    self.foreign_objects.append((doc["apiVersion"], doc["kind"], meta.get("namespace"), meta["name"],
                                                 meta["uid"]))
        self.lab.write_inventory(self.lab.inventory, ichor_adopt_recover_from="cp-1",
                                 ichor_adopt_cilium_chart=cilium.chart(CILIUM_MINOR), ichor_adopt_helm=kube.bins["helm"],
                                 ichor_adopt_etcd_snapshot_dir=os.path.join(self.work, "etcd"),
                                 ichor_adopt_wait_timeout=120, ichor_upgrade_cilium_chart=cilium.chart(CILIUM_MINOR),
                                 ichor_upgrade_helm=kube.bins["helm"])
        self.configs = dict((m["name"], m["machine_config"]) for m in self.lab.talos.state(full=True)["machines"])
        self.mark = kube.audit_mark()
        self.watch = DeployedWatch(kube.kubeconfig)
        self.watch.start()
        return self.lab

    def args(self, run):
        return ["-i", self.lab.inventory, "maesh.ichor.adopt", "-e", "ichor_adopt_confirm=true",
                "-e", "ichor_accept_cilium_diff=true", "-e", "ichor_adopt_delete_cilium_orphans=true"]

    def _get(self, api_version, kind, name, namespace):
        if not self.lab.client.resource(api_version, kind).namespaced:
            namespace = None
        return self.lab.client.get(api_version, kind, name, namespace)

    # -- the invariants ------------------------------------------------------------------------
    def check(self, complete):
        backups = self._backups()
        figures = dict(objects_gone=self._objects_kept(backups), deletes=self._deletes_backed_up(backups))
        figures.update(self.watch.figures())
        self.watch.judge(complete)
        releases = self._releases()
        deployed = sorted(key for key, recs in releases.items() if any(r["status"] == "deployed" for r in recs))
        if FOREIGN in deployed and OURS in deployed:
            figures["both_deployed_after_run"] = True  # an interrupted hand-over: the rerun must end it
        if complete:
            self._handed_over(releases, backups)
        self._record_true(releases)
        if self.second_exit == 0:  # the second operator's upgrade ran, after adopt: its machine writes are its own
            figures.update(upgraded_after_adopt=True)
        else:
            self._machines_untouched()
        return figures

    def _objects_kept(self, backups):
        """Cilium's objects are never lost: the DaemonSet is there, and every object the foreign release made is
        live or backed up (an orphan adopt deleted with consent). Returns how many are backed up and gone."""
        if self.lab.client.get("apps/v1", "DaemonSet", "cilium", "kube-system") is None:
            raise Violation("the Cilium DaemonSet kube-system/cilium is gone")
        gone = 0
        for api_version, kind, namespace, name, uid in self.foreign_objects:
            if self._get(api_version, kind, name, namespace) is not None:
                continue
            saved = [b for b in backups.values() if _names(b, namespace, name) and
                     b["metadata"]["annotations"].get("ichor.maesh.dev/backup-uid") == uid]
            if not saved:
                raise Violation("%s %s/%s of the foreign release is gone and no backup of it (uid %s) is in "
                                "ichor-system" % (kind, namespace, name, uid))
            gone += 1
        return gone

    def _deletes_backed_up(self, backups):
        return deletes_backed_up(self.lab.kube.audit_events(self.mark), backups)

    def _backups(self):
        return dict((s["metadata"]["name"], s) for s in self.lab.client.list(
            "v1", "Secret", OURS[0], label_selector=BACKUP_OF))

    def _releases(self):
        """Helm's records of Cilium, by release: [{revision, status, chart}], oldest first."""
        out = {}
        for secret in self.lab.client.list("v1", "Secret", label_selector=HELM_OWNED):
            meta = secret["metadata"]
            out.setdefault((meta["namespace"], "cilium"), []).append(dict(
                revision=int(meta["labels"]["version"]), status=helm_status(secret),
                chart=_chart_version(secret)))
        return dict((key, sorted(recs, key=lambda r: r["revision"])) for key, recs in out.items())

    def _handed_over(self, releases, backups):
        """After the calm rerun: only the collection's release is deployed, at the release set's Cilium, every object
        it lists is live, and the foreign records are retired: gone from kube-system, each backed up byte for byte."""
        listed = helm_list(self.lab)
        deployed = sorted("%s/%s %s" % (r["namespace"], r["name"], r["chart"]) for r in listed
                          if r["status"] == "deployed")
        if deployed != ["%s/%s cilium-%s" % (OURS + (release.CILIUM,))]:
            raise Violation("after the calm rerun helm lists as deployed %s, not ichor-system/cilium at cilium-%s" % (
                deployed, release.CILIUM))
        if releases.get(FOREIGN):
            raise Violation("the foreign records are still in kube-system after the calm rerun: %s" % releases[FOREIGN])
        for name, (uid, data) in sorted(self.foreign_records.items()):
            copy = backups.get("ichor-cilium-prior.%s.%s" % (FOREIGN[0], name))
            if copy is None or copy.get("data") != data:
                raise Violation("the foreign record %s/%s (uid %s) was retired without a byte-identical backup" % (
                    FOREIGN[0], name, uid))
        manifest = self.lab.kube.helm("get", "manifest", OURS[1], "-n", OURS[0]).stdout
        for doc in yaml.safe_load_all(manifest):
            if isinstance(doc, dict) and doc.get("kind"):
                meta = doc["metadata"]
                if self._get(doc["apiVersion"], doc["kind"], meta["name"], meta.get("namespace") or FOREIGN[0]) is None:
                    raise Violation("%s %s/%s of the collection's release is not live" % (
                        doc["kind"], meta.get("namespace"), meta["name"]))

    def _record_true(self, releases):
        """The cluster record names the collection's release only while it is deployed, at the chart it is at, and
        that Cilium runs; its versions are no newer than what runs."""
        stored = record(self.lab)
        cilium = stored.get("cilium")
        if cilium:
            ours = [r for r in releases.get(OURS, []) if r["status"] == "deployed"]
            if cilium.get("release") != "%s/%s" % OURS or not ours:
                raise Violation("the record states Cilium %s while helm's records of ichor-system/cilium are %s" % (
                    cilium, releases.get(OURS)))
            if ours[-1]["chart"] != cilium.get("chart"):
                raise Violation("the record states chart %s, the deployed release is at %s" % (
                    cilium.get("chart"), ours[-1]["chart"]))
            ds = self.lab.client.get("apps/v1", "DaemonSet", "cilium", "kube-system")
            image = ds["spec"]["template"]["spec"]["containers"][0]["image"]
            if not image.split("@")[0].endswith(":v%s" % cilium.get("chart")):
                raise Violation("the record states Cilium %s while the DaemonSet runs %s" % (
                    cilium.get("chart"), image))
        if stored.get("talos"):
            check_versions(self.lab)

    def _machines_untouched(self):
        """The machines were in shape before adopt: it resets, reboots, upgrades nothing and changes no config."""
        for machine, what in self.lab.timeline():
            if what in MACHINE_DISRUPTIONS or (what.startswith("down:") and what != "down:unasked"):
                raise Violation("%s: %s by a run, on a machine adopt had nothing to change on" % (machine, what))
        for m in self.lab.talos.state(full=True)["machines"]:
            if m["machine_config"] != self.configs.get(m["name"]):
                raise Violation("%s: its machine config changed, though it had zero drift" % m["name"])

    def converged(self):
        stored = record(self.lab)
        adoption = stored.get("adoption") or {}
        if not adoption.get("adopted") or (stored.get("cilium") or {}).get("release") != "%s/%s" % OURS:
            raise Violation("not adopted: adoption %s, cilium %s" % (
                dict((k, adoption.get(k)) for k in ("adopted", "mode")), stored.get("cilium")))
        if stored.get("held"):
            raise Violation("machines still held: %s" % sorted(stored["held"]))
        releases = self._releases()
        ours = [r for r in releases.get(OURS, []) if r["status"] == "deployed"]
        if not ours or ours[-1]["chart"] != release.CILIUM:
            raise Violation("the collection's release is not deployed at Cilium %s: %s" % (release.CILIUM, ours))
        if releases.get(FOREIGN):
            raise Violation("the foreign Helm records are not retired: %s" % releases[FOREIGN])

    def stop(self):
        if self.watch is not None:
            self.watch.stop()
        super().stop()


class DeployedWatch:
    """Helm's records of Cilium, looked at a few times a second through every run: which releases claim to be
    deployed, and for how long two did. One release with two deployed revisions is Helm's own corruption; two
    releases both deployed is allowed only as adopt's hand-over (ours deployed at the set's Cilium, the foreign one
    not retired yet) and never after the calm rerun."""

    def __init__(self, kubeconfig, interval=0.25):
        self.client = KubeClient(kubeconfig=kubeconfig)
        self.interval = interval
        self.problem = None
        self.both_since = None
        self.both_s = 0.0  # the longest hand-over window seen
        self.both_now = False
        self.looks = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="chaos-deployed-watch", daemon=True)

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join(5)

    def _loop(self):
        while not self._stop.is_set():
            try:
                self.look()
            except Exception:  # pylint: disable=broad-except  # the API server is away (restarting): look again
                pass
            self._stop.wait(self.interval)

    def look(self):
        deployed = {}
        for secret in self.client.list("v1", "Secret", label_selector=HELM_OWNED + ",status=deployed"):
            meta = secret["metadata"]
            deployed.setdefault(meta["namespace"], []).append(secret)
        self.looks += 1
        now = time.monotonic()
        for namespace, secrets in deployed.items():
            if len(secrets) > 1 and self.problem is None:
                self.problem = "%s/cilium has %d revisions deployed at once (%s)" % (
                    namespace, len(secrets), ", ".join(s["metadata"]["name"] for s in secrets))
        if len(deployed) > 1:
            ours = deployed.get(OURS[0]) or []
            if (set(deployed) != {OURS[0], FOREIGN[0]} or _chart_version(ours[0]) != release.CILIUM) and \
                    self.problem is None:
                self.problem = "two Cilium releases deployed at once, not adopt's hand-over: %s" % sorted(deployed)
            self.both_since = self.both_since or now
            self.both_s = max(self.both_s, now - self.both_since)
        else:
            self.both_since = None
        self.both_now = len(deployed) > 1

    def judge(self, complete):
        if self.problem:
            raise Violation(self.problem)
        if complete:
            self.look()
            if self.both_now:
                raise Violation("two Cilium releases are both deployed after the calm rerun")

    def figures(self):
        return dict(both_deployed_s=round(self.both_s, 1), deployed_looks=self.looks)


def helm_list(lab):
    """Every release helm knows of, in every namespace, whatever its status."""
    return json.loads(lab.kube.helm("list", "-A", "-a", "-o", "json").stdout or "[]")


def deletes_backed_up(events, backups):
    """Every delete a run made (the audit ``events`` in order; ``backups``: adopt's backup Secrets by name): first its
    backup written, then that backup read back, then the delete; the collection's own run state aside
    (_own_working_copy). A write of the backup that may have landed (a 5xx: a run killed as it wrote) counts once a
    read after it found the backup. Returns how many deletes were judged."""
    deletes = 0
    for index, event in enumerate(events):
        if event not in run_writes([event]) or event["verb"] != "delete":
            continue
        ref = event.get("objectRef") or {}
        namespace, name = ref.get("namespace"), ref.get("name")
        if _own_working_copy(ref):
            continue
        deletes += 1
        what = "%s %s/%s" % (ref.get("resource"), namespace, name)
        backup = [b["metadata"]["name"] for b in backups.values() if _names(b, namespace, name)]
        if not backup:
            raise Violation("%s was deleted at %s with no backup of it in ichor-system" % (
                what, event.get("stageTimestamp")))
        written = [i for i, e in enumerate(events[:index]) if _is(e, backup[0]) and e["verb"] in (
            "create", "update", "patch") and may_have_landed(e)]
        if not written:
            raise Violation("%s was deleted at %s before its backup %s was written" % (
                what, event.get("stageTimestamp"), backup[0]))
        if not [e for e in events[written[0] + 1:index] if _is(e, backup[0]) and e["verb"] == "get" and _ok(e)]:
            raise Violation("%s was deleted at %s without its backup %s read back after it was written" % (
                what, event.get("stageTimestamp"), backup[0]))
    return deletes


def _chart_version(secret):
    """The chart version of a Helm record Secret."""
    return ((helm_release(secret).get("chart") or {}).get("metadata") or {}).get("version")


def _names(backup, namespace, name):
    """Whether a backup Secret of adopt's says it holds namespace/name."""
    held = (backup["metadata"].get("annotations") or {}).get(BACKUP_OF) or ""
    return held.endswith("%s/%s" % (namespace, name)) if namespace else held.endswith(" " + name)


def _own_working_copy(ref):
    """The collection's own run state, which a run deletes without a backup by design: a pending record of its own
    release left by a stopped run (repaired: it holds the chart and values again), and the installer's snapshot (itself
    the rollback copy of a run, removed once that run completed). The admission policy of the campaign's refuse_writes
    fault is the campaign's (the same admin user): no run writes one."""
    if ref.get("apiGroup") == "admissionregistration.k8s.io":
        return True
    if ref.get("resource") != "secrets":
        return False
    if ref.get("name") == INSTALLER_SNAPSHOT:  # ichor-system's, or the second_other install's in its namespace
        return True
    return ref.get("namespace") == OURS[0] and ref.get("name", "").startswith("sh.helm.release.v1.cilium.")


def _is(event, secret_name):
    ref = event.get("objectRef") or {}
    return ref.get("resource") == "secrets" and ref.get("namespace") == OURS[0] and ref.get("name") == secret_name


def _ok(event):
    return (event.get("responseStatus") or {}).get("code", 200) < 300
