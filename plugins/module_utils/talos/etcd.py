# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""etcd through Talos: the member list, the one etcd health check (a control plane is not touched while etcd
is unhealthy), and its leader: who leads, and moving the leadership away from a member before its machine goes down."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.talos import errors


def member_host(member):
    """The address in a member's client or peer URLs (how a member is matched to a machine), or None."""
    for url in list(member.client_urls) + list(member.peer_urls):
        host = url.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
        if host:
            return host
    return None


def health(client, node, going_down=False):
    """(healthy?, detail): this member answers its status, and a quorum of the voting members does. With
    ``going_down`` (the node is about to reboot), a quorum of the voting members without this node's own, or every
    other member healthy (one or two members lose their quorum with any of them down, whatever is done): etcd keeps
    its quorum while the node is down if it can (one member of three already down is enough to refuse)."""
    try:
        listed = client.call("EtcdMemberList", node=node).messages[0].members
        status = client.call("EtcdStatus", node=node).messages[0].member_status
    except errors.TalosError as exc:
        return False, "etcd on %s does not answer (%s)" % (node, exc)
    if status.errors:
        return False, "etcd on %s reports errors" % node
    voters = [m for m in listed if not m.is_learner]
    if not voters:
        return False, "etcd on %s lists no members" % node
    healthy = others = 0
    for member in voters:
        host = member_host(member)
        try:
            if host and not client.call("EtcdStatus", node=host).messages[0].member_status.errors:
                healthy += 1
                others += member.id != status.member_id
        except errors.TalosError:
            continue
    if healthy * 2 <= len(voters):
        return False, "only %d of %d etcd members are healthy (no quorum)" % (healthy, len(voters))
    # a member of one or two can only go down with its quorum (Talos upgrades those too); a larger one must keep
    # its quorum, unless every other member answers
    if going_down and others * 2 <= len(voters) and others < len(voters) - 1:
        return False, "only %d of the %d other etcd members are healthy: etcd would lose its quorum of %d while %s " \
            "is down" % (others, len(voters) - 1, len(voters) // 2 + 1, node)
    return True, "%d of %d etcd members healthy" % (healthy, len(voters))


def members(client, node):
    """The etcd member names ``node`` lists, or None when its etcd does not answer (not bootstrapped, not joined)."""
    try:
        reply = client.call("EtcdMemberList", node=node).messages[0]
    except errors.TalosError:
        return None
    return sorted(m.hostname for m in reply.members)


def leader(client, node):
    """The member id of the leader as ``node``'s etcd member sees it (its EtcdStatus), 0 when it knows none. Raises
    errors.TalosError when that member does not answer."""
    return int(client.call("EtcdStatus", node=node).messages[0].member_status.leader)


def forfeit_leadership(client, node):
    """Move etcd's leadership away from ``node``'s member, as ``talosctl etcd forfeit-leadership`` does: the new
    leader as Talos names it (its etcd member name, which Talos makes the machine's hostname), or "" when this member
    did not lead (then nothing changed). Talos refuses it on a worker and when etcd has one member (errors.TalosError:
    "cannot forfeit leadership, only one member")."""
    call = "EtcdForfeitLeadership"
    return client.first(client.call(call, node=node), node, call=call).member
