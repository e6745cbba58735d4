# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The only module_utils code that imports Ansible: the glue between a module's action plugin and its flow.

``catalog`` names every module: its argument spec, the constraints between its options and its flow; ``specs``
builds argument specs from one definition per option (the Talos connection, the Kubernetes connection, waiting,
the rollout's machines) and validates a task's arguments against them; ``runner`` makes the clients from a
module's options, calls the flow, and turns its result or its error into the task's result: an expected error
(``common.errors.IchorError``) is one clean line, anything else keeps its (redacted) traceback for ``-vvv``.
Everything else in module_utils is plain Python, unit-tested without Ansible.
"""
