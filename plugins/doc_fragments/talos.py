# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment:
    # The Talos API connection; every module of the action group maesh.ichor.talos takes these.
    DOCUMENTATION = r"""
options:
  talosconfig:
    description:
      - Path of the talosconfig file (as written by C(talosctl gen config)).
      - When neither this nor O(talosconfig_content) is set, the E(TALOSCONFIG) environment variable is
        used (when it is not empty), else C($TALOS_HOME/config), else C(~/.talos/config), as C(talosctl) does.
      - Given empty (C("")), it names no talosconfig and never falls back to E(TALOSCONFIG) or C(~/.talos/config); a
        call that needs one fails saying so (machines in maintenance mode need none).
    type: path
  talosconfig_content:
    description:
      - The talosconfig itself, for example from Ansible Vault or an AWX credential.
      - Takes precedence over O(talosconfig). Never logged.
    type: str
  context:
    description:
      - The talosconfig context to use instead of the file's current one.
    type: str
  endpoint:
    description:
      - The Talos API endpoint to dial instead of the context's endpoints (C(host) or C(host:port), port 50000
        by default). Calls for other machines go through it with the C(node) gRPC metadata, as C(talosctl -e) does.
    type: str
  timeout:
    description:
      - Seconds to wait for each API call (Talos and Kubernetes), connection included.
    type: float
    default: 30
requirements:
  - protobuf >= 5.28
  - h2 >= 4.1
  - cryptography
  - PyYAML
notes:
  - "Modules run as action plugins in the Ansible controller's own process, with the Python that runs Ansible: it
    needs these requirements; nothing connects to the host, and C(async) is not supported."
  - "Set these options once for a play with C(module_defaults: {group/maesh.ichor.talos: {...}})."
"""
