# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout's Talos step for one machine: upgrade, wait for it to come
back with the new version, its etcd member healthy and the cluster with quorum, its Node Ready.

Talos v1.13+ machines: ImageService Pull, LifecycleService Upgrade, then Reboot (as talosctl 1.14
does); v1.12 machines: the legacy Upgrade call. ``run`` is the ``talos_upgrade`` module's flow.

The target version is the installer image's tag: a reference without one (or pinned by digest only)
is refused before anything is sent, since its version cannot be known before the upgrade.

The image is the machine's own (``rollout.installer``): the installer that keeps the system extensions it runs, at the
set's version, read from its machine config and its ExtensionStatuses; one it cannot be known for is refused before
anything is sent. An image the operator names (``image``) is used as named.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.common import release
from ansible_collections.maesh.ichor.plugins.module_utils.common import images, poll, versions
from ansible_collections.maesh.ichor.plugins.module_utils.common.redact import redact_text
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.k8s import cluster_record, nodes
from ansible_collections.maesh.ichor.plugins.module_utils.config import yamlio
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError
from ansible_collections.maesh.ichor.plugins.module_utils.rollout import installer, plan
from ansible_collections.maesh.ichor.plugins.module_utils.rollout.errors import UpgradeFailed
from ansible_collections.maesh.ichor.plugins.module_utils.talos import client as tc
from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors, etcd, machine

# talosctl 1.14 `upgrade` (its default --namespace system): ContainerDriver CRI (1), ContainerdNamespace
# NS_SYSTEM (1) on both ImageService.Pull and LifecycleService.Upgrade; Talos refuses an unset namespace
# (cmd/talosctl/cmd/talos/image.go containerdInstance, internal/app/internal/ctrhelper).
CONTAINERD_DRIVER_CRI = 1
CONTAINERD_NS_SYSTEM = 1

# How much of the installer's output a failure quotes (its last lines, where it says why).
OUTPUT_LINES = 5
OUTPUT_LIMIT = 300
_EXIT_CODES = {2: "invalid input", 3: "unsupported operation", 4: "environment error", 5: "dependency error",
               6: "I/O error", 7: "installation error"}  # machinery constants.Exit*


def image_version(image):
    """The Talos version an installer image installs: its tag (``name:v1.14.5@sha256:...`` -> v1.14.5).

    ImageRefError when the reference is malformed, has no tag (a digest alone names no version) or its
    tag is not a Talos version.
    """
    ref = images.parse(image)
    if ref.tag is None:
        if ref.digest:
            raise images.ImageRefError(
                "installer image %s is pinned by digest only: the Talos version it installs cannot be known before "
                "the upgrade; name it with its tag too (%s:vX.Y.Z@%s)" % (images.quoted(image), ref.repository, ref.digest))
        raise images.ImageRefError("installer image %s has no tag: name the Talos version it installs (%s:vX.Y.Z)" % (
            images.quoted(image), ref.repository))
    stated = versions.read(ref.tag)
    if not (stated and stated.v and stated.patch_written and "+" not in stated.suffix):
        raise images.ImageRefError("installer image %s: its tag %s is not a Talos version (vX.Y.Z): the upgrade's "
                                   "target is read from the tag" % (images.quoted(image), images.quoted(ref.tag)))
    return ref.tag


def _containerd():
    instance = tc.request_type("ImagePull")().containerd
    instance.driver = CONTAINERD_DRIVER_CRI
    instance.namespace = CONTAINERD_NS_SYSTEM
    return instance


def node_ready(kube, hostname, version):
    """The machine's Node is Ready and reports the new Talos in its OS image."""
    node = nodes.get(kube, hostname)
    return nodes.ready(node) and version in (nodes.info(node).get("osImage") or "")


def pulled_name(replies, image):
    """The name ImageService.Pull reports last (``repository@digest``, the form the machine's image store
    knows); the reference as given when no reply names one."""
    names = [r.name for r in replies if r.WhichOneof("response") == "name" and r.name]
    return names[-1] if names else image


def installer_outcome(replies):
    """(exit code or None, the installer's output lines) from every LifecycleService.Upgrade reply."""
    code, output = None, []
    for reply in replies:
        kind = reply.progress.WhichOneof("response") if reply.HasField("progress") else None
        if kind == "message":
            output.append(reply.progress.message)
        elif kind == "exit_code":
            code = reply.progress.exit_code
    return code, output


def _said(output):
    """The installer's last lines, redacted, on one line, cut from the front (the reason comes last)."""
    text = redact_text(" / ".join(line.strip() for line in output[-OUTPUT_LINES:] if line.strip()))
    if len(text) > OUTPUT_LIMIT:
        text = "[cut] " + text[len(text) - OUTPUT_LIMIT:].lstrip()
    return text


def installer_failed(image, code, output, running):
    """What an installer that did not exit 0 did: its exit code's meaning and its last lines (redacted)."""
    what = "reported no exit code" if code is None else "exited with code %d%s" % (
        code, " (%s)" % _EXIT_CODES[code] if code in _EXIT_CODES else "")
    said = _said(output)
    return "the Talos installer (%s) %s%s; the machine was not rebooted and still runs Talos %s; fix the cause and " \
        "rerun" % (image, what, ", it said: \"%s\"" % said if said else " and said nothing", running)


def pull_request(image):
    """ImageService.Pull of ``image`` into the system namespace of the CRI containerd, as talosctl 1.14's upgrade."""
    return tc.request_type("ImagePull")(containerd=_containerd(), image_ref=image)


def upgrade_request(pulled):
    """LifecycleService.Upgrade from the image the pull reported (its name pinned by digest)."""
    req = tc.request_type("LifecycleUpgrade")(containerd=_containerd())
    req.source.image_name = pulled
    return req


def start_upgrade(client, node, running, image, hostname=None, before_reboot=None):
    """Send the upgrade the machine's Talos version takes.

    v1.13+: Pull, then Upgrade with the name the pull reported, then Reboot only when the installer
    reported exit code 0; otherwise UpgradeFailed (the machine keeps running its Talos, nothing rebooted).
    ``before_reboot`` is called between the installer and the Reboot (a pull and an install take minutes on a real
    machine: a control plane's etcd is judged again there, at the last moment, and may stop the reboot).
    """
    if release.minor(running) >= (1, 13):
        pulled = client.call("ImagePull", pull_request(image), node=node)
        req = upgrade_request(pulled_name(pulled, image))
        code, output = installer_outcome(client.call("LifecycleUpgrade", req, node=node))
        if code != 0:
            raise UpgradeFailed("%s (%s): %s" % (hostname or node, node, installer_failed(image, code, output, running)),
                                result=dict(plan=[], before=running, after=running))
        if before_reboot is not None:
            before_reboot()
        client.first(client.call("Reboot", node=node), node, call="Reboot")
    else:
        client.first(client.call("Upgrade", tc.request_type("Upgrade")(image=image), node=node), node, call="Upgrade")


# Once the machine answers with the new version, what is left (its etcd member, its Node) is read from etcd and the API
# server: cheap reads, polled often so that the rollout moves on the moment they are ready.
HEALTH_INTERVAL = 0.05


def wait_back(client, kube, node, hostname, role, target, timeout, interval=0.1, clock=None, node_name=None):
    """Wait for the machine to answer with the target version, then etcd (control planes), then its Node (``node_name``,
    the one Talos names for it; ``hostname`` when not given)."""
    node_name = node_name or hostname
    clock = clock or poll.Clock
    deadline = clock.time() + timeout

    def answers():
        try:
            version = client.run(machine.version(client, node))["tag"]
        except errors.TalosError:
            version = None
        return version == target, "it to answer with Talos %s" % target

    def healthy():
        answered, detail = answers()  # again: it may have gone away after it first answered
        if not answered:
            return False, detail
        if role == "controlplane":
            ok, detail = etcd.health(client, node)
            if not ok:
                return False, "its etcd member to be healthy (%s)" % detail
        if kube is not None and not node_ready(kube, node_name, target):
            return False, "its Node %s to be Ready on Talos %s" % (node_name, target)
        return True, None

    # every tenth of a second while it is away, so the rollout moves on as soon as it is back: each poll is one
    # Version call (a refused or timed-out dial)
    done, waiting_for = poll.until(answers, timeout, interval, clock)
    if done:
        done, waiting_for = poll.until(healthy, max(0.0, deadline - clock.time()), HEALTH_INTERVAL, clock)
    if not done:
        raise UpgradeFailed("%s (%s) did not come back within %ss: waited for %s; the remaining machines were not "
                            "touched; fix the machine and rerun, the rollout continues from it" % (
                                hostname, node, int(timeout), waiting_for))


def choose_installer(client, node, name, target, named=None):
    """The installer the machine is upgraded with (installer.Choice), from its machine config's install image and its
    system extensions; installer.Refused when the one that keeps them cannot be known."""
    text, items = client.run(machine.installer_reads(client, node))
    try:
        objects = yamlio.load_all(text) if text.strip() else []
    except ConfigError:
        objects = []  # a config that is not YAML names no install image
    return installer.choose(name, installer.installed(objects, items), target, named)


def run(params, conn, check_mode, clock=None):
    """Upgrade the machine ``params["node"]`` unless it runs the target already; the result dict.

    A control plane is not started while etcd is unhealthy, or would lose its quorum while the machine reboots
    (another member already down: UpgradeFailed, nothing sent), and is not rebooted when that became so while its
    installer ran (UpgradeFailed, the new Talos installed and not booted). With
    ``wait`` the machine is waited for (``wait_back``); without it the run returns once the upgrade
    is sent. Without a kubeconfig there is no Node to wait for.
    """
    named = params["image"]  # the operator's, used as named; else each machine's own (installer.choose)
    image = named or release.installer_image()
    node = params["node"]
    try:
        target = image_version(image)  # before anything is sent
    except images.ImageRefError as exc:
        exc.result = dict(plan=[], before="", after="")
        raise
    client = conn.talos()
    kube = conn.kube() if conn.has_kube() else None
    if kube is not None:  # never upgrade a machine adopt still holds
        try:
            cluster_record.refuse_held(cluster_record.read(kube), set(
                name for name in (node, params.get("name"), params.get("hostname")) if name))
        except IchorError as exc:
            exc.result = dict(plan=[], before="", after="")
            raise
    before = ""
    try:
        facts = client.run(machine.running(client, node))
        # the machine is named as the play names it, and its Node as Talos names it (never the play's label)
        hostname = params["name"] or facts["hostname"] or node
        node_name = params["hostname"] or facts["node_name"] or facts["hostname"]
        before = facts["version"]
        result = dict(changed=False, before=before, after=target,
                      diff={"before": "talos: %s\n" % before, "after": "talos: %s\n" % target})
        if before == target:
            result.update(plan=["%s: already at Talos %s, skipped" % (plan.machine_label(hostname, node, node_name), target)],
                          diff={"before": "", "after": ""})
            return result
        if kube is not None and params["wait"] and nodes.get(kube, node_name) is None:
            raise UpgradeFailed(nodes.unregistered((hostname, node, node_name)),
                                result=dict(plan=[], before=before, after=before))
        choice = choose_installer(client, node, hostname, target, named)  # before anything is sent
        image = choice.image
        result["installer"] = installer.result(choice)
        controlplane = params["role"] == "controlplane"
        if controlplane:
            healthy, detail = etcd.health(client, node, going_down=True)
            if not healthy:
                raise UpgradeFailed("%s is a control plane and etcd is not healthy (%s); no upgrade was started" % (
                    hostname, detail), result=dict(plan=[], before=before, after=before))
        result.update(changed=True, plan=[plan.talos_line(hostname, node, before, target, image, controlplane,
                                                          params["wait"], node_name=node_name,
                                                          extensions=installer.describe(choice))])
        if check_mode:
            return result

        def before_reboot():  # another member may have gone down while the installer ran
            healthy, detail = etcd.health(client, node, going_down=True)
            if not healthy:
                raise UpgradeFailed(
                    "%s is a control plane and etcd is no longer healthy (%s); Talos %s is installed but the machine "
                    "was not rebooted and still runs Talos %s; rerun once etcd is healthy" % (
                        hostname, detail, target, before), result=dict(plan=[], before=before, after=before))

        start_upgrade(client, node, before, image, hostname, before_reboot=before_reboot if controlplane else None)
        if params["wait"]:
            wait_back(client, kube, node, hostname, params["role"], target, params["wait_timeout"], clock=clock,
                      node_name=node_name)
    except IchorError as exc:
        if exc.result is None:
            exc.result = dict(plan=[], before=before, after="")
        raise
    return result
