# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment:
    # The Kubernetes API connection; every module of the action group maesh.ichor.k8s takes these.
    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Path of a kubeconfig for the cluster's Kubernetes API (C(~) and variables expanded). A file it names that
        does not exist is refused; it is never replaced by another kubeconfig.
      - Not given (and no O(kubeconfig_content)), the file E(KUBECONFIG) names is used when it is set and not
        empty, else C(~/.kube/config), as C(kubectl) and C(kubernetes.core) do.
      - Given empty (C("")), the task has no Kubernetes connection and never falls back to E(KUBECONFIG) or
        C(~/.kube/config); a module that needs the API then fails saying so, and one that reads it only when it can
        (M(maesh.ichor.init_plan), M(maesh.ichor.talos_machine_config)) does not read it. The role
        C(maesh.ichor.init) passes C("") until the kubeconfig it writes exists.
    type: path
  kubeconfig_content:
    description:
      - The kubeconfig itself. Takes precedence over O(kubeconfig). Never logged.
    type: str
  kube_context:
    description:
      - The kubeconfig context to use instead of its current one.
    type: str
  timeout:
    description:
      - Seconds to wait for each API call (Talos and Kubernetes), connection included.
    type: float
    default: 30
requirements:
  - kubernetes >= 30
notes:
  - "Set these options once for a play with C(module_defaults: {group/maesh.ichor.k8s: {...}})."
"""
