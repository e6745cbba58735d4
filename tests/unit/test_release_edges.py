"""common.release, the edges mutation testing found untested (issue 43, scripts/mutation): the ends of each support
range, a patch step within one minor, a first desired value with nothing stored, the set's keys, the refusals'
words."""

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.common import release


def _minor(pair, patch=0):
    return "v%d.%d.%d" % (pair[0], pair[1], patch)


def test_the_release_set_names_each_version_by_its_key():
    assert release.release_set() == {"talos": release.TALOS, "contract": release.CONTRACT,
                                     "kubernetes": release.KUBERNETES, "cilium": release.CILIUM}


@pytest.mark.parametrize("supports,table", [(release.talos_supports, release.TALOS_KUBERNETES),
                                            (release.cilium_supports, release.CILIUM_KUBERNETES)])
def test_each_support_range_holds_both_its_ends_and_nothing_past_them(supports, table):
    for minor, (low, high) in table.items():
        component = _minor(minor, 1)
        assert supports(component, _minor(low)) and supports(component, _minor(high, 9))
        assert not supports(component, _minor((low[0], low[1] - 1), 9))
        assert not supports(component, _minor((high[0], high[1] + 1)))
    unknown = _minor((9, 99))
    assert not supports(unknown, release.KUBERNETES)


def test_one_minor_step_holds_a_patch_step_and_the_next_minor_only():
    current = release.minor(release.KUBERNETES)
    assert release.one_minor_step(_minor(current, 0), _minor(current, 4))
    assert release.one_minor_step(_minor((current[0], current[1] - 1), 9), release.KUBERNETES)
    assert not release.one_minor_step(_minor((current[0], current[1] - 2), 9), release.KUBERNETES)
    assert not release.one_minor_step(_minor((current[0], current[1] + 1)), release.KUBERNETES)


def test_a_first_desired_value_is_taken_when_it_is_the_sets():
    for field, pinned in (("talos", release.TALOS), ("kubernetes", release.KUBERNETES), ("contract", release.CONTRACT)):
        assert release.validate_change(field, None, pinned) is None


def test_the_refusal_of_a_lower_value_in_full(monkeypatch):
    # the set's own value lower than what a cluster stores: a set moved back (only this refusal's words are checked)
    monkeypatch.setattr(release, "TALOS", "v1.13.0")
    assert release.validate_change("talos", "v1.14.5", "v1.13.0") == "talos v1.13.0 is lower than the cluster's v1.14.5"


def test_a_bad_version_is_named_in_the_refusal():
    with pytest.raises(release.VersionError) as info:
        release.parse("latest")
    assert str(info.value) == "'latest' is not a version (vMAJOR.MINOR.PATCH)"


def test_a_minor_is_written_as_major_dot_minor():
    assert release.fmt_minor((1, 36)) == "1.36"
