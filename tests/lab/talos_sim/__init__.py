"""Protocol-level simulator of Talos machines (real protos on the wire, real mTLS).

Modules: ``state`` (machine model), ``config`` (machine configs), ``lab`` (runtime: servers,
lifecycle, addresses), ``api`` (routing, auth, RPCs), ``resources`` (COSI), ``control``
(HTTP control API), ``runner`` (build and run a lab; used by ``python -m tests.lab up``).
"""
