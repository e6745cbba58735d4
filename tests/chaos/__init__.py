"""The fault campaign (issue 29): seeded schedules of faults against real playbook runs on the lab, invariants
checked from outside. ``python -m tests.chaos --help``."""
