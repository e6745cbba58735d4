# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Contract probing: which version contract made a live config, found by rendering the spec at each contract from
the machine's Talos version down to v1.12 and judging each render's drift (``drift``) against the live config; and
one contract for a whole cluster where configs tie (``settle``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.maesh.ichor.plugins.module_utils.config import contracts, documents, drift
from ansible_collections.maesh.ichor.plugins.module_utils.config import render as renderer
from ansible_collections.maesh.ichor.plugins.module_utils.config.errors import ConfigError


def _rank(name, found):
    return (found.counts()["C"], len(found.differences), [-part for part in contracts.parse_version(name)])


def probe(bundle, cluster_spec, machine_spec, live_docs, running_version, unmapped=()):
    """Render at each contract from the running version down to v1.12 and compare with live.

    Returns (chosen contract name, {contract: Drift}). The choice: fewest class C paths; then fewest
    differences; then the highest contract. When several contracts give the same drift (ties()), the
    config does not tell which one made it: a cluster settles that for all its machines (settle()).
    """
    if isinstance(live_docs, (str, bytes)):
        live_docs = documents.parse(live_docs)
    results = {}
    order = contracts.probe_order(running_version)
    for contract in order:
        spec_at = dict(cluster_spec, versionContract=contract.name)
        try:
            rendered = renderer.render(bundle, spec_at, machine_spec, contract.name)
        except ConfigError:
            continue
        results[contract.name] = drift.drift(rendered, live_docs, spec_at, contract.name, unmapped)
    if not results:
        raise ConfigError("no contract from %s down to v1.12 can render this spec" % running_version)
    ranked = sorted(results.items(), key=lambda item: _rank(*item))
    return ranked[0][0], results


def ties(chosen, results):
    """The contracts whose drift is the chosen one's, highest first: more than one means the config
    does not tell them apart (v1.12 and v1.13 differ only by v1.12's empty ``machine.network``, so a
    legacy config whose machine.network has content reads as both)."""
    key = results[chosen].key()
    names = [name for name, found in results.items() if found.key() == key]
    return sorted(names, key=contracts.parse_version, reverse=True)


def settle(probed):
    """One contract per tie for a whole cluster, not one per machine.

    probed: {machine name: (chosen, {contract: Drift})} from probe(). Returns ({machine name: contract},
    plan lines). A machine that tells (its config, or its Talos version, leaves one contract) keeps its
    choice. Tied machines all take the contract the machines that tell agree on (among the tied ones);
    when none tells, or they disagree, the newest contract every tied machine's config fits.
    """
    chosen = dict((name, pair[0]) for name, pair in probed.items())
    tied = dict((name, ties(*pair)) for name, pair in probed.items())
    tied = dict((name, names) for name, names in tied.items() if len(names) > 1)
    if not tied:
        return chosen, []
    candidates = set()
    for names in tied.values():
        candidates.update(names)
    telling = sorted(name for name in probed if name not in tied and chosen[name] in candidates)
    told = sorted(set(chosen[name] for name in telling))
    common = set.intersection(*[set(names) for names in tied.values()])
    if len(told) == 1 and told[0] in common:
        contract = told[0]
        rule = "as %s tell%s (config or Talos version)" % (", ".join(telling), "s" if len(telling) == 1 else "")
    elif common:
        contract = max(common, key=contracts.parse_version)
        rule = "the newest contract all of them fit (%s)" % (
            "no other machine tells" if not told else "the machines that tell disagree: %s" % ", ".join(told))
    else:
        return chosen, ["contract tie: %s each read as several contracts with no one common to all; each keeps its own choice" % (
            ", ".join(sorted(tied)))]
    for name in tied:
        chosen[name] = contract
    alike = " and ".join(sorted(candidates, key=contracts.parse_version))
    return chosen, ["contract tie: the configs of %s read as %s alike (v1.12 differs from v1.13 only by an empty machine.network, "
                    "which these fill); all taken as %s, %s" % (", ".join(sorted(tied)), alike, contract, rule)]
