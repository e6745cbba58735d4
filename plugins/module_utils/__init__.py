# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's code under its plugins, in layers. Every import follows these rules, one deferred into a
function included; tests/unit/test_shape.py fails on one that does not.

- ``common/`` (errors, redaction, files, polling, images, versions, untrusted input, the release set) imports
  nothing of ours.
- ``talos/`` (the Talos API client) and ``k8s/`` (the Kubernetes API client) import only ``common/``.
- ``config/`` (the machine-config engine and the secrets bundle) imports only ``common/``, ``talos/`` and ``k8s/``.
- The feature packages (``adopt/``, ``cilium/``, ``cluster/``, ``init/``, ``installer/``, ``machine/``,
  ``reclaim/``, ``rollout/``, ``status/``, and the ones this round adds: ``recovery/`` for backup, verify and
  recover, ``credentials/`` for CA rotation and renewal, ``membership/`` for join and remove: the flows of the
  modules) import the layers above. One imports another only through the modules that one names in its
  ``INTERFACE``, and never in a circle. A rollout's batches and gates are ``rollout/``'s; a typed field of the
  cluster or machine spec is ``config/``'s, beside the fields it extends.
- ``ansible_module/`` is the only glue to Ansible (the runner, the option specs): it may import every layer, and
  only plugins import it.
"""
