"""installer.prune, the edges mutation testing found untested (issue 43, scripts/mutation): a renamed object made
here (RENAMED_OBJECTS is built at import, before a mutant of Renamed could act), the refusal of an unmarked object in
full."""

from ansible_collections.maesh.ichor.plugins.module_utils.installer import objects, prune
from ansible_collections.maesh.ichor.plugins.module_utils.installer.objects import Ref


def test_a_renamed_object_keeps_its_old_ref_its_label_and_its_new_name():
    ref = Ref("v1", "ConfigMap", "ichor-system", "old-name")
    renamed = prune.Renamed(ref, ("example.com/owner", "me"), "new-name")
    assert prune.renamed_candidates([]) == list(prune.RENAMED_OBJECTS)
    assert (renamed.ref, renamed.label, renamed.new_name) == (ref, ("example.com/owner", "me"), "new-name")
    live = {"metadata": {"name": "old-name", "labels": {"example.com/owner": "me"}}}
    assert prune.owner_check(live, renamed) == (True, "renamed to new-name in the bundle and carries example.com/owner=me")
    assert prune.owner_check({"metadata": {"labels": {"example.com/owner": "you"}}}, renamed) == (
        False, "does not carry example.com/owner=me")


def test_an_object_without_the_mark_is_left_saying_why():
    assert prune.owner_check({"metadata": {"name": "a", "labels": {}}}) == (
        False, "does not carry %s=%s (not installed by the installer, or relabelled by a person)" % (
            objects.MARK_KEY, objects.MARK_VALUE))
