"""AWX job slicing (docs/awx/README.md, "Job slicing"): the table there says for each playbook whether a slice of the
inventory may run it; every job template in docs/awx/job_templates.yml states its job_slice_count, 1 where the table
says no. The table is the one place the answer is kept: this test reads it."""

import os
import re

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README = os.path.join(REPO, "docs", "awx", "README.md")
TEMPLATES = yaml.safe_load(open(os.path.join(REPO, "docs", "awx", "job_templates.yml")))
# the project playbooks the templates run that are not the collection's (docs/awx/)
PROJECT_PLAYBOOKS = ("init_credentials",)


def _table():
    """{playbook: (may a slice run it, why)} from the README's "Job slicing" table."""
    text = open(README).read()
    section = re.search(r"^## Job slicing\n(.*?)(?=^#)", text, re.S | re.M)
    assert section, "docs/awx/README.md has no section \"Job slicing\""
    rows = re.findall(r"^\| (\w+) \| (yes|no) \| ([^|]+) \|$", section.group(1), re.M)
    table = dict((name, (answer == "yes", why.strip())) for name, answer, why in rows)
    assert len(table) == len(rows), "a playbook with two rows: %s" % [r[0] for r in rows]
    return table


TABLE = _table()


def test_the_table_answers_for_every_playbook_and_only_those():
    playbooks = sorted(os.path.splitext(p)[0] for p in os.listdir(os.path.join(REPO, "playbooks")) if p.endswith(".yml"))
    assert sorted(TABLE) == sorted(playbooks + list(PROJECT_PLAYBOOKS))
    for name, (unused, why) in TABLE.items():
        assert len(why.split()) >= 8, "%s: the table says why in a few words" % name


def test_every_template_states_its_job_slice_count_as_the_table_says():
    for name, template in sorted(TEMPLATES.items()):
        playbook = os.path.splitext(template["playbook"])[0]
        assert playbook in TABLE, "%s runs %s, which the table does not answer for" % (name, template["playbook"])
        assert "job_slice_count" in template, "%s: job_slice_count is stated on every template" % name
        count = template["job_slice_count"]
        assert isinstance(count, int) and not isinstance(count, bool) and count >= 1, (name, count)
        sliceable, why = TABLE[playbook]
        if not sliceable:
            assert count == 1, "%s: %s may not be sliced (%s), job_slice_count is %d" % (name, playbook, why, count)


def test_a_playbook_a_slice_may_run_has_no_localhost_play():
    # what the table's "yes" rests on: each slice runs every play on its own hosts, none on localhost
    for name, (sliceable, unused) in TABLE.items():
        path = os.path.join(REPO, "playbooks", name + ".yml")
        if not os.path.exists(path):
            path = os.path.join(REPO, "docs", "awx", name + ".yml")
        hosts = [play.get("hosts") for play in yaml.safe_load(open(path)) if "hosts" in play]
        local = any("localhost" in str(h) for h in hosts)
        assert sliceable != local, "%s: %s but its plays run on %s" % (
            name, "sliceable" if sliceable else "not sliceable", hosts)
