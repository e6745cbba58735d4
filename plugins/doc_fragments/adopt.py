# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment:
    # What adopt's inspection reads a cluster with: adopt_plan and adopt_write (adopt.inspection.options()).
    DOCUMENTATION = r"""
options:
  secrets:
    description:
      - Path of the cluster's secrets bundle (C(talosctl gen secrets) form). Exactly one of O(secrets) and
        O(recover_from) is given.
    type: path
  recover_from:
    description:
      - A control plane (its name or address among O(machines)) whose live config the secrets bundle is recovered
        from, in memory; it is never returned or written by this module.
    type: str
  cni_unmanaged:
    description:
      - Adopt the cluster with its CNI left exactly as it is (the C(ichor_cni_unmanaged) variable of the adopt role).
        Two CNIs are refused even so.
    type: bool
    default: false
  version_contract:
    description:
      - Override the probed version contract; only the release set's contract is accepted.
    type: str
  registry_auth:
    description:
      - The registry credentials the machines carry, by reference - each registry host mapped to the name of a Secret
        in C(ichor-system) with the keys C(username) and C(password) (or C(auth), or C(identityToken)). The
        credentials are read from the Secret and compared with the machines' (class A when they differ, applied on
        release); the spec and the record keep the Secret's name only, and no value is ever shown.
      - A host the machines carry credentials for that is not named here is class C.
    type: dict
"""
