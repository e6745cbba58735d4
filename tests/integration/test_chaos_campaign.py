"""CI's slice of the fault campaign (tests/chaos): six seeded schedules, each a real playbook run on a fresh lab with
one fault drawn from the seed (ansible-playbook killed or cancelled, a second run at once, a machine unreachable, slow
or losing a reply), then a calm rerun and a third run, invariants checked from outside the playbook. ``python -m tests.chaos
--count 200`` is the soak before a release."""

import json
import sys

import pytest

from tests.chaos import campaign
from tests.chaos.__main__ import DEFAULT_SEED

pytestmark = pytest.mark.lab

COUNT = 6
BUDGET_S = 12 * 60  # no schedule starts after this: the slice stays within CI's 15 minutes


def test_a_seeded_slice_of_the_campaign_finds_no_violation_and_converges(tmp_path):
    summary = campaign.campaign(DEFAULT_SEED, COUNT, work=str(tmp_path), budget_s=BUDGET_S, stream=sys.stderr)
    brief = json.dumps(dict((k, v) for k, v in summary.items() if k != "reports"), sort_keys=True)
    assert summary["schedules"] >= 3, brief
    assert summary["violations"] == 0, brief
    assert summary["errors"] == 0, brief
    assert summary["convergence"] == 1.0, brief
    assert summary["enough_landed"], brief  # at least half of each playbook's faults struck after its first write
    assert all(r.get("machine_downs") for r in summary["reports"]), brief  # the invariants had something to judge
