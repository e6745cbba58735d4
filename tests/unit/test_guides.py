"""The user guides in docs/ against the playbooks, roles and files they describe (no lab).

* every playbook of playbooks/ but facts.yml has its guide docs/<name>.md;
* a guide names every variable of the argument specs (every entry point) of each role its playbook runs, and every
  ichor_ variable the playbook itself reads (reclaim.yml has no role: its own variables);
* a guide names no ichor_ variable that nothing defines: not an argument spec option of any role, not a variable of
  a playbook, not a host variable the maesh.ichor.machines filter reads (catches typos and stale names);
* every relative link in docs/*.md points to a file that exists (and, with #fragment, to a heading of it);
* no role, playbook, guide, plugin documentation or module message cites a decision record the user does not have.
"""

import ast
import os
import re

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.path.join(REPO, "docs")
PLAYBOOKS = os.path.join(REPO, "playbooks")
ROLES = os.path.join(REPO, "roles")
NOT_GUIDED = {"facts.yml"}  # read-only facts: described in the README
VARIABLE = re.compile(r"\bichor_[a-z0-9_]*[a-z0-9]")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
COLLECTION_ROLE = re.compile(r"^maesh\.ichor\.([a-z0-9_]+)$")


def _playbooks():
    return sorted(name for name in os.listdir(PLAYBOOKS) if name.endswith(".yml") and name not in NOT_GUIDED)


def _load(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


def _guide(playbook):
    return os.path.join(DOCS, playbook[:-len(".yml")] + ".md")


def _read(path):
    with open(path) as handle:
        return handle.read()


def _strings(node):
    """Every string (keys included) of a loaded YAML document, recursively."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(key)
            yield from _strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item)
    elif isinstance(node, str):
        yield node


def _walk(node):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item)


def roles_of(playbook):
    """The collection roles a playbook runs (include_role, import_role, roles:)."""
    found = set()
    for node in _walk(_load(os.path.join(PLAYBOOKS, playbook))):
        for key in ("ansible.builtin.include_role", "ansible.builtin.import_role", "include_role", "import_role"):
            if isinstance(node.get(key), dict):
                found.add(node[key].get("name"))
        for entry in node.get("roles") or []:
            found.add(entry.get("role") if isinstance(entry, dict) else entry)
    names = set()
    for name in found:
        match = COLLECTION_ROLE.match(str(name))
        assert match, "%s runs the role %r, which is not one of the collection's" % (playbook, name)
        names.add(match.group(1))
    return names


def role_variables(role):
    """Every option of every entry point of the role's meta/argument_specs.yml."""
    specs = _load(os.path.join(ROLES, role, "meta", "argument_specs.yml"))["argument_specs"]
    return set(option for entry in specs.values() for option in (entry.get("options") or {}))


def playbook_variables(playbook):
    """The ichor_ variables a playbook reads or sets (its YAML, comments left out), without the names it registers."""
    data = _load(os.path.join(PLAYBOOKS, playbook))
    registered = set(node["register"] for node in _walk(data) if isinstance(node.get("register"), str))
    return set(name for text in _strings(data) for name in VARIABLE.findall(text)) - registered


def filter_host_variables():
    """The host variables the maesh.ichor.machines filter reads (init's ichor_uuid, ichor_hostname, ichor_install_*)."""
    return set(VARIABLE.findall(_read(os.path.join(REPO, "plugins", "filter", "machines.py"))))


def job_artifacts():
    """The names roles hand to AWX through set_stats (a guide names them as the job's artifacts)."""
    names = set()
    for role in os.listdir(ROLES):
        tasks = os.path.join(ROLES, role, "tasks")
        for name in os.listdir(tasks) if os.path.isdir(tasks) else ():
            for task in yaml.safe_load(open(os.path.join(tasks, name))) or []:
                for item in [task] + list(task.get("block") or []):
                    names |= set((item.get("ansible.builtin.set_stats") or {}).get("data") or {})
    return names


def defined_variables():
    names = set()
    for role in os.listdir(ROLES):
        if os.path.exists(os.path.join(ROLES, role, "meta", "argument_specs.yml")):
            names |= role_variables(role)
    for playbook in os.listdir(PLAYBOOKS):
        if playbook.endswith(".yml"):
            names |= playbook_variables(playbook)
    return names | filter_host_variables() | job_artifacts()


def named(text):
    """The ichor_ names a guide uses (a pattern such as ichor_install_* is not a name)."""
    return set(m.group(0) for m in VARIABLE.finditer(text) if not text[m.end():].lstrip("_").startswith("*"))


def _markdown_files():
    return sorted(name for name in os.listdir(DOCS) if name.endswith(".md"))


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(text):
    found = set()
    in_code = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            found.add(slug(line.lstrip("#")))
    return found


def links(text):
    """The link targets of a Markdown text, fenced code left out."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return LINK.findall(prose)


# -- the checks ------------------------------------------------------------------------------------------------

def test_the_role_mapping_is_the_one_the_guides_follow():
    # guards the parsing above: if it found no roles, the variable check below would check nothing
    expected = {"adopt.yml": {"adopt"}, "init.yml": {"init"}, "upgrade.yml": {"upgrade"},
                "install.yml": {"installer"}, "reclaim.yml": set()}
    assert dict((p, roles_of(p)) for p in _playbooks() if p in expected) == expected
    assert {"ichor_reclaim_node", "ichor_reclaim_confirm_uuid", "ichor_talosconfig"} <= playbook_variables("reclaim.yml")
    assert "ichor_reclaim" not in playbook_variables("reclaim.yml")  # the registered result, not a variable


@pytest.mark.parametrize("playbook", _playbooks())
def test_every_playbook_has_its_guide(playbook):
    assert os.path.isfile(_guide(playbook)), "playbooks/%s has no guide docs/%s.md" % (playbook, playbook[:-4])


@pytest.mark.parametrize("playbook", _playbooks())
def test_the_guide_names_every_variable_of_its_roles_and_of_its_playbook(playbook):
    text = _read(_guide(playbook))
    wanted = playbook_variables(playbook)
    for role in roles_of(playbook):
        wanted |= role_variables(role)
    missing = sorted(wanted - named(text))
    assert not missing, "docs/%s.md does not name %s" % (playbook[:-4], ", ".join(missing))


@pytest.mark.parametrize("guide", _markdown_files())
def test_a_guide_names_no_variable_that_nothing_defines(guide):
    unknown = sorted(named(_read(os.path.join(DOCS, guide))) - defined_variables())
    assert not unknown, "docs/%s names variables no argument spec, playbook or the machines filter defines: %s" % (
        guide, ", ".join(unknown))


@pytest.mark.parametrize("guide", _markdown_files())
def test_every_relative_link_points_to_an_existing_file(guide):
    path = os.path.join(DOCS, guide)
    broken = []
    for target in links(_read(path)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file_part, _sep, fragment = target.partition("#")
        where = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        if not os.path.exists(where):
            broken.append("%s (no such file)" % target)
        elif fragment and where.endswith(".md") and fragment not in anchors(_read(where)):
            broken.append("%s (no such heading)" % target)
    assert not broken, "docs/%s: broken links: %s" % (guide, "; ".join(broken))


def test_the_checks_catch_what_they_should():
    """The helpers on small texts: a typo is unknown, a link to nowhere is found, headings make anchors."""
    assert named("set `ichor_adopt_confrim=true` and ichor_cni_unmanaged") == {
        "ichor_adopt_confrim", "ichor_cni_unmanaged"}
    assert "ichor_adopt_confrim" not in defined_variables() and "ichor_cni_unmanaged" in defined_variables()
    assert "ichor_status" in job_artifacts()
    assert named("ichor-system and ichor_adopt_* are not names") == set()
    assert links("see [a](init.md#variables) and ![b](x.png)\n```\n[c](nowhere.md)\n```\n") == [
        "init.md#variables", "x.png"]
    assert slug("Example: a flannel cluster, adopted unmanaged") == "example-a-flannel-cluster-adopted-unmanaged"
    assert slug("`maesh.ichor.init`: make a new cluster") == "maeshichorinit-make-a-new-cluster"


# -- what a newcomer meets (issue 26 section 7) ---------------------------------------------------------------------

# "seed 0103 section 1", "ADR 0104", "the seed's message": documents a user of the collection does not have
CITATION = re.compile(r"\b(?:ADR|seed)s?(?:'s)?\s+(?:#\s*)?0\d{3}\b|\bthe seed(?:'s)?\b|\bADR\b", re.I)


def _prose(text):
    """A Markdown text without its fenced blocks (example output quotes what modules print)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def _user_files():
    """What a user of the collection reads: the roles, the playbooks, the README and the guides."""
    found = [os.path.join(REPO, "README.md")]
    for top in ("roles", "playbooks", "docs"):
        for folder, _dirs, files in os.walk(os.path.join(REPO, top)):
            found += [os.path.join(folder, name) for name in files if name.endswith((".yml", ".yaml", ".md"))]
    return sorted(found)


def test_no_role_playbook_or_guide_cites_a_decision_record_the_user_does_not_have():
    cited = []
    for path in _user_files():
        relative = os.path.relpath(path, REPO)
        text = _read(path)
        if path.endswith(".md"):
            text = _prose(text)
        for line in text.splitlines():
            if CITATION.search(line):
                cited.append("%s: %s" % (relative, line.strip()))
    assert not cited, "say the rule in its own words instead of citing a record:\n" + "\n".join(cited)


def _docstrings(tree):
    """The ids of the docstring nodes of a parsed file (module, class, function): read by maintainers, not users."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def plugin_citations(path):
    """Where a plugin file cites a record. Outside module_utils the whole file is what a user reads (the modules'
    DOCUMENTATION, EXAMPLES and RETURN, doc fragments, the inventory, callback, lookup and filter plugins); in
    module_utils every string but a docstring (messages, plan lines, warnings, NOTICE lines)."""
    text = _read(path)
    if os.sep + "module_utils" + os.sep not in path:
        return [line.strip() for line in text.splitlines() if CITATION.search(line)]
    tree = ast.parse(text, path)
    docstrings = _docstrings(tree)
    return ["line %d: %s" % (node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            and CITATION.search(node.value)]


def test_no_plugin_documentation_or_message_cites_a_decision_record_the_user_does_not_have():
    cited = []
    for folder, _dirs, files in os.walk(os.path.join(REPO, "plugins")):
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                cited += ["%s: %s" % (os.path.relpath(path, REPO), line) for line in plugin_citations(path)]
    assert not cited, "say the rule in its own words instead of citing a record:\n" + "\n".join(cited)


def test_the_plugin_citation_check_reads_messages_not_docstrings(tmp_path):
    utils = tmp_path / "module_utils"
    utils.mkdir()
    source = utils / "x.py"
    source.write_text('"""Rules of seed 0103, section 2."""\n\n\ndef f():\n    """ADR 0111."""\n'
                      '    # ADR 0109 renamed it\n    return "NOTICE: renamed (ADR" " 0109)"\n')
    assert plugin_citations(str(source)) == ["line 7: NOTICE: renamed (ADR 0109)"]
    module = tmp_path / "m.py"
    module.write_text('DOCUMENTATION = r"""\ndescription:\n  - The reclaim (seed 0103, section 2).\n"""\n')
    assert plugin_citations(str(module)) == ["- The reclaim (seed 0103, section 2)."]


def test_the_citation_check_catches_what_it_should():
    for text in ("(seed 0103 section 1)", "(ADR 0104)", "Seed 0103's four phases", "the seed's message",
                 "(seed\n# 0113, seed 0103 section 2)".replace("\n", " ")):
        assert CITATION.search(text), text
    for text in ("--fuzz-seed 7", "runs them longer or with another seed:", "adopt needs Talos v1.12"):
        assert not CITATION.search(text), text


def _section(text, heading):
    """The text under a '## heading' up to the next '## '."""
    start = text.index("\n## %s\n" % heading)
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def _bundle_objects():
    """(kind, namespace or None) of every object of the installer's bundle."""
    found = set()
    for folder, _dirs, files in os.walk(os.path.join(ROLES, "installer", "files", "bundle")):
        for name in files:
            with open(os.path.join(folder, name)) as handle:
                for doc in yaml.safe_load_all(handle):
                    if doc:
                        found.add((doc["kind"], doc["metadata"].get("namespace")))
    return found


def test_the_adopt_guide_says_what_the_kubeconfig_needs_for_what_phase_2_creates():
    """Phase 2 installs the bundle: cluster-scoped kinds, and Roles in namespaces beyond ichor-system. The guide names
    cluster-admin, every namespace the bundle writes into and every cluster-scoped kind it creates."""
    before = _section(_read(os.path.join(DOCS, "adopt.md")), "Before you start")
    assert "cluster-admin" in before
    objects = _bundle_objects()
    namespaces = set(ns for _kind, ns in objects if ns)
    assert {"ichor-system", "kube-system"} <= namespaces  # the parsing above found the bundle
    for namespace in sorted(namespaces):
        assert "`%s`" % namespace in before, "docs/adopt.md does not say phase 2 writes into %s" % namespace
    for kind in sorted(set(kind for kind, ns in objects if ns is None)):
        assert re.search(r"\b%ss?\b" % kind, before), "docs/adopt.md does not say phase 2 creates %s" % kind
    for kind in sorted(set(kind for kind, ns in objects if ns == "kube-system")):
        assert re.search(r"\b%ss?\b" % kind, before), "docs/adopt.md does not say phase 2 creates %s" % kind


def _inventory_plugin_options():
    text = _read(os.path.join(REPO, "plugins", "inventory", "talos.py"))
    documentation = yaml.safe_load(text.split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0])
    # the constructed fragment's options (keyed_groups and the like) are the plugin's too
    return set(documentation["options"]) | {"compose", "groups", "keyed_groups", "strict", "leading_separator",
                                            "use_extra_vars"}


def _yaml_blocks(text):
    return [yaml.safe_load(block) for block in re.findall(r"^```ya?ml\n(.*?)^```", text, flags=re.M | re.S)]


def test_the_adopt_guide_says_how_to_install_get_a_kubeconfig_and_write_an_inventory_plugin_file():
    before = _section(_read(os.path.join(DOCS, "adopt.md")), "Before you start")
    assert "ansible-galaxy collection install" in before and "pip install -r requirements.txt" in before
    assert re.search(r"talosctl .*\bkubeconfig\b", before), "docs/adopt.md does not say how to get a kubeconfig"
    files = [block for block in _yaml_blocks(before)
             if isinstance(block, dict) and block.get("plugin") == "maesh.ichor.talos"]
    assert files, "docs/adopt.md has no example file of the maesh.ichor.talos inventory plugin"
    for block in files:
        unknown = sorted(set(block) - _inventory_plugin_options())
        assert not unknown, "the inventory plugin example sets options the plugin does not have: %s" % unknown
    assert re.search(r"`[^`]*talos\.yml`", before), "the example's file name must end in talos.yml"


def _task_names(role):
    names = set()
    tasks = os.path.join(ROLES, role, "tasks")
    for name in os.listdir(tasks):
        for node in _walk(_load(os.path.join(tasks, name))):
            if isinstance(node.get("name"), str):
                names.add(node["name"])
    return names


@pytest.mark.parametrize("playbook, role, registered", [("adopt.yml", "adopt", "ichor_adopt_plan"),
                                                        ("upgrade.yml", "upgrade", "ichor_upgrade_check"),
                                                        ("init.yml", "init", "ichor_init_plan"),
                                                        ("install.yml", "installer", "ichor_installer_applied")])
def test_the_task_the_guide_names_prints_the_plan_with_any_callback(playbook, role, registered):
    """Check mode is the plan: the guide says which task prints it, and that task is a debug of the plan lines the
    planning module returned (so Ansible's default output shows them, without the plan callback)."""
    text = _read(_guide(playbook))
    named_tasks = set(" ".join(name.split()) for name in re.findall(r"`(Print the plan[^`]*)`", text))
    assert named_tasks, "docs/%s.md does not say which task prints the plan" % playbook[:-4]
    assert named_tasks <= _task_names(role), named_tasks - _task_names(role)
    printing = []
    for name in os.listdir(os.path.join(ROLES, role, "tasks")):
        for node in _walk(_load(os.path.join(ROLES, role, "tasks", name))):
            if node.get("name") in named_tasks:
                printing.append(node)
    assert printing and all(
        (node.get("ansible.builtin.debug") or {}).get("msg") == "{{ %s.plan }}" % registered for node in printing), printing


def test_every_playbook_a_guide_runs_exists():
    for guide in _markdown_files():
        for name in re.findall(r"ansible-playbook\b[^\n]*?\bmaesh\.ichor\.([a-z_]+)", _read(os.path.join(DOCS, guide))):
            assert os.path.isfile(os.path.join(PLAYBOOKS, name + ".yml")), "docs/%s runs maesh.ichor.%s" % (guide, name)


def _module_examples():
    modules = os.path.join(REPO, "plugins", "modules")
    for name in sorted(os.listdir(modules)):
        if name.endswith(".py") and not name.startswith("_"):
            for node in ast.parse(_read(os.path.join(modules, name))).body:
                if isinstance(node, ast.Assign) and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["EXAMPLES"]:
                    yield name, node.value.value


def _registered(data):
    return set(node["register"] for node in _walk(data or []) if isinstance(node.get("register"), str))


def registered_anywhere():
    """The results a module's example or a role's task registers (an example may read another module's)."""
    names = set()
    for _name, text in _module_examples():
        names |= _registered(yaml.safe_load(text))
    for role in os.listdir(ROLES):
        tasks = os.path.join(ROLES, role, "tasks")
        for name in os.listdir(tasks) if os.path.isdir(tasks) else ():
            names |= _registered(_load(os.path.join(tasks, name)))
    return names


def example_names(text, inventory, known):
    """The ichor_ names a module's EXAMPLES reads in a template that nothing an operator has defines: neither a
    variable of a role, a playbook or the example inventory (a path into one of its dicts must exist there), nor
    a result registered (``known`` holds the others' names; a fact is read as ansible_facts.<name>)."""
    registered = _registered(yaml.safe_load(text))
    unknown = []
    for template in re.findall(r"\{\{(.*?)\}\}", text, flags=re.S):
        for path in re.findall(r"(?<![\w.])ichor_[a-z0-9_]*[a-z0-9](?:\.[A-Za-z_]\w*)*", template):
            head, unused_dot, rest = path.partition(".")
            if head in registered:
                continue
            if head in inventory:
                value = inventory[head]
                for part in rest.split(".") if rest else ():
                    value = value.get(part) if isinstance(value, dict) else None
                if value is None:
                    unknown.append(path)
            elif head not in known:
                unknown.append(path)
    return unknown


def test_a_module_example_reads_only_variables_an_operator_has():
    """The examples of every module read the variables a guide's operator has (the example inventory's, the roles'
    and playbooks'), or what an example registered; a name nothing defines is a value nobody has."""
    inventory = _load(os.path.join(DOCS, "inventory.example.yml"))["all"]["vars"]
    known = defined_variables() | registered_anywhere()
    unknown = dict((name, found) for name, text in _module_examples() for found in [example_names(text, inventory, known)]
                   if found)
    assert not unknown, unknown


def test_the_module_example_check_catches_what_it_should():
    inventory = {"ichor_cluster": {"name": "prod"}, "ichor_kubeconfig": "~/.kube/config"}
    text = ("- maesh.ichor.cilium_takeover:\n    kube_proxy: \"{{ ichor_cluster.cni.kubeProxy }}\"\n"
            "    chart_digest: \"sha256:{{ ichor_cilium_chart_sha256 }}\"\n    kubeconfig: \"{{ ichor_kubeconfig }}\"\n"
            "  register: ichor_plan\n- ansible.builtin.debug:\n    msg: \"{{ ichor_plan.plan }} {{ ichor_cluster.name }}\"\n")
    found = example_names(text, inventory, {"ichor_accept_changes"})
    assert found == ["ichor_cluster.cni.kubeProxy", "ichor_cilium_chart_sha256"]


# -- guides a stranger can follow (issue 44) ----------------------------------------------------------------------

NOT_RUN = {"README.md", "development.md"}  # the index of the guides; a contributor's page (make demo, make test)


def _guide_blocks():
    from tests.integration import guide_blocks
    return guide_blocks


def test_the_readmes_relative_links_point_to_existing_files():
    """The README links the guides and its own sections: each file exists, each #fragment is a heading there."""
    path = os.path.join(REPO, "README.md")
    broken = []
    for target in links(_read(path)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue
        file_part, _sep, fragment = target.partition("#")
        where = os.path.normpath(os.path.join(REPO, file_part)) if file_part else path
        if not os.path.exists(where):
            broken.append("%s (no such file)" % target)
        elif fragment and where.endswith(".md") and fragment not in anchors(_read(where)):
            broken.append("%s (no such heading)" % target)
    assert not broken, "README.md: broken links: %s" % "; ".join(broken)
    assert "docs/development.md" in _read(path)


@pytest.mark.parametrize("guide", [name for name in _markdown_files() if name not in NOT_RUN])
def test_every_guide_has_blocks_the_lab_runs_and_a_test_that_runs_them(guide):
    """Each guide marks what the lab can run (tests/integration/guide_blocks.py), and
    tests/integration/test_guide_commands.py has the test that runs them: test_<guide>_guide."""
    found = _guide_blocks().blocks(_read(os.path.join(DOCS, guide)), guide)
    assert found, "docs/%s marks no block for the lab (<!-- lab --> before a ```sh or ```console block)" % guide
    assert any(block.expected for block in found), "docs/%s quotes no output of its lab blocks" % guide
    for block in found:
        assert block.script.strip(), "docs/%s:%d: a lab block without a command" % (guide, block.line)
    tests = _read(os.path.join(REPO, "tests", "integration", "test_guide_commands.py"))
    name = "test_%s_guide" % guide[:-len(".md")].replace("-", "_")
    assert re.search(r"^def %s\(" % name, tests, re.M), "no %s in tests/integration/test_guide_commands.py" % name


def test_the_new_pages_are_linked_from_the_guides_index_and_the_readme():
    index, readme = _read(os.path.join(DOCS, "README.md")), _read(os.path.join(REPO, "README.md"))
    for page in ("troubleshooting.md", "undo-takeover.md", "restore-snapshot.md", "stale-lock.md", "remove.md"):
        assert "(%s)" % page in index, "docs/README.md does not link %s" % page
        assert "(docs/%s" % page in readme, "README.md does not link docs/%s" % page


def test_the_block_parser_and_the_comparison_catch_what_they_should():
    guide_blocks = _guide_blocks()
    text = ("intro\n<!-- lab: rc=2 -->\n```sh\nfalse\n```\n\nit prints:\n\n<!-- lab-output -->\n```text\n"
            "PLAN\n  - cluster lock x: taken by maesh-ichor-20261201T233711Z-69fc4bf100fa for 45s\n...\n  - done\n```\n"
            "```sh\nnot run\n```\n<!-- lab -->\n```console\n$ echo a \\\n    b\nout a\n```\n")
    first, second = guide_blocks.blocks(text, "x.md")
    assert (first.rc, first.script, first.expected[0]) == (2, "false\n", "PLAN")
    assert (second.script, second.expected) == ("echo a \\\n    b\n", ["out a"])
    printed = ("PLAN\nlocalhost:\n  - cluster lock x: taken by maesh-ichor-20261207T101911Z-8b0f3d2e55a1 for 45s\n"
               "  - other\n  - done\n")
    assert guide_blocks.unmatched(first.expected, printed) is None
    # a quoted line the run does not print, or prints before the line quoted before it, is found
    assert guide_blocks.unmatched(first.expected, printed.replace("done", "undone")) == "  - done"
    assert guide_blocks.unmatched(["  - done", "PLAN"], printed) == "PLAN"
    # ... within a line, JSON quotes, aligned columns, Node names
    assert guide_blocks.unmatched(['        "cp-1 (10.5.0.11, Node talos-6a2-6c4): upgrade ...",', "a   b"],
                                  '"cp-1 (10.5.0.11, Node cp-1): upgrade Talos"\na\tb\n') is None
    assert guide_blocks.unmatched(["cp-1 (10.5.0.12): x"], "cp-1 (10.5.0.11): x\n") == "cp-1 (10.5.0.12): x"
    with pytest.raises(ValueError):
        guide_blocks.blocks("<!-- lab -->\nnot a fence\n", "x.md")
    with pytest.raises(ValueError):
        guide_blocks.blocks("<!-- lab: retries=2 -->\n```sh\ntrue\n```\n", "x.md")
