"""The AWX job templates (docs/awx/job_templates.yml) against what their playbooks take: every survey variable is
documented by the argument spec of the role the playbook runs (reclaim: the playbook's own variables), of a type it
accepts; a required option has a required question; a yes/no question is a multiple choice of "false" and "true",
read with | bool by the roles (as every bool option is: -e name=false is a string too); every playbook of the
collection has a plan template and a run template."""

import os
import re

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEMPLATES = yaml.safe_load(open(os.path.join(REPO, "docs", "awx", "job_templates.yml")))
ROLE_OF = {"init.yml": "init", "adopt.yml": "adopt", "upgrade.yml": "upgrade", "install.yml": "installer",
           "status.yml": "status",
           "init_credentials.yml": "init"}  # docs/awx/init_credentials.yml, a project playbook: init's variables
READ_ONLY = ("status.yml",)  # a check run is the same run: one template
# survey question types -> the argument spec types they can deliver
DELIVERS = {"text": {"str", "path", "raw"}, "textarea": {"str", "path", "raw"}, "password": {"str", "raw"},
            "integer": {"int", "float", "raw"}, "float": {"float", "raw"}, "multiplechoice": {"str", "bool", "raw"},
            "multiselect": {"list", "raw"}}


def _role_options(role):
    spec = yaml.safe_load(open(os.path.join(REPO, "roles", role, "meta", "argument_specs.yml")))
    return spec["argument_specs"]["main"]["options"]


def _reclaim_variables():
    text = open(os.path.join(REPO, "playbooks", "reclaim.yml")).read()
    return set(re.findall(r"\bichor_reclaim_[a-z_]+", text))


def _questions(template):
    return (template.get("survey_spec") or {}).get("spec") or []


CASES = [(name, q) for name, t in sorted(TEMPLATES.items()) for q in _questions(t)]


def test_every_playbook_has_a_plan_and_a_run_template():
    playbooks = sorted(p for p in os.listdir(os.path.join(REPO, "playbooks")) if p.endswith(".yml") and p != "facts.yml")
    kinds = dict((p, set(t["job_type"] for t in TEMPLATES.values() if t["playbook"] == p)) for p in playbooks)
    assert kinds == dict((p, {"run"} if p in READ_ONLY else {"check", "run"}) for p in playbooks), kinds


@pytest.mark.parametrize("template,question", CASES, ids=["%s:%s" % (n, q["variable"]) for n, q in CASES])
def test_a_survey_question_matches_the_argument_spec(template, question):
    playbook = TEMPLATES[template]["playbook"]
    variable = question["variable"]
    if playbook == "reclaim.yml":
        assert variable in _reclaim_variables(), "%s: reclaim.yml does not read %s" % (template, variable)
        return
    options = _role_options(ROLE_OF[playbook])
    assert variable in options, "%s: role %s does not document %s" % (template, ROLE_OF[playbook], variable)
    option = options[variable]
    kind = option.get("type", "str")
    assert kind in DELIVERS[question["type"]], "%s: a %s question cannot give a %s" % (variable, question["type"], kind)
    if option.get("required"):
        assert question.get("required") is True, "%s is required by the role" % variable
    if question["type"] == "multiplechoice":
        if kind == "bool":
            assert sorted(question["choices"]) == ["false", "true"] and question.get("default") in ("false", "true")
            # one click does what the CLI does with no -e: the role's default (upgrade's follow is false)
            assert question["default"] == str(bool(option.get("default", False))).lower(), variable
        elif option.get("choices"):
            assert set(question["choices"]) <= set(option["choices"]), variable
        if "default" in option and kind != "bool":
            assert question.get("default") == option["default"], variable


def test_the_roles_read_their_booleans_with_the_bool_filter():
    """A survey answer, and ``-e name=false`` on the command line, is the string "false", which Jinja takes for true:
    every bool option of a role's argument spec is read with | bool where the role tests it (the modules convert
    their own bool options)."""
    for role in sorted(os.listdir(os.path.join(REPO, "roles"))):
        options = _role_options(role)
        tasks = "".join(open(os.path.join(REPO, "roles", role, "tasks", name)).read()
                        for name in os.listdir(os.path.join(REPO, "roles", role, "tasks")))
        for name, option in options.items():
            if option.get("type") != "bool":
                continue
            bare = re.findall(r"(?:when:|\bif|\band|\bor|\bnot)\s+%s\b(?!\s*\|\s*bool)" % name, tasks)
            bare += re.findall(r"{{\s*%s\s+(?:and|or|if)\b" % name, tasks)
            assert not bare, "%s: %s is tested without | bool" % (role, name)


CREDENTIAL_TYPES = yaml.safe_load(open(os.path.join(REPO, "docs", "awx", "credential_types.yml")))


@pytest.mark.parametrize("kind", sorted(CREDENTIAL_TYPES))
def test_a_credential_type_injects_its_secrets_only_as_files(kind):
    """Each injector names only its own fields (or the files it writes); a secret field reaches the job only as a
    file's content, never as an environment variable's or extra variable's value (those land in job events and
    artifacts); every file it writes is named in env or extra_vars, or the job could not find it."""
    fields = dict((f["id"], f) for f in CREDENTIAL_TYPES[kind]["inputs"]["fields"])
    injectors = CREDENTIAL_TYPES[kind]["injectors"]
    files = set(key.split(".", 1)[1] for key in injectors.get("file") or {})
    named = []
    for section in ("file", "env", "extra_vars"):
        for key, template in (injectors.get(section) or {}).items():
            for ref in re.findall(r"\{\{\s*([\w.]+)\s*\}\}", template):
                if ref.startswith("tower.filename."):
                    assert ref.split(".", 2)[2] in files, (kind, key, ref)
                    named.append(ref.split(".", 2)[2])
                    continue
                assert ref in fields, (kind, key, ref)
                if fields[ref].get("secret"):
                    assert section == "file", "%s: the secret %s is injected as %s %s" % (kind, ref, section, key)
    assert files <= set(named), (kind, files, named)


def test_every_job_template_has_credential_types_for_what_its_playbook_reads():
    """The managed cluster's type gives what init, adopt and upgrade read (ichor_talosconfig, ichor_kubeconfig) and
    what an inventory sync's maesh.ichor.talos reads (TALOSCONFIG, KUBECONFIG: a sync gets no extra variables), each
    naming its file; the kubeconfig type gives install the ichor_kubeconfig its role reads (an extra variable wins
    over the inventory's); reclaim's foreign type gives TALOSCONFIG and ichor_reclaim_foreign_talosconfig (which
    the playbook passes, so that the managed type's TALOSCONFIG on the same job does not decide)."""
    managed = CREDENTIAL_TYPES["managed_cluster"]["injectors"]
    assert set(managed["extra_vars"]) >= {"ichor_talosconfig", "ichor_kubeconfig"}
    assert managed["env"] == {"TALOSCONFIG": managed["extra_vars"]["ichor_talosconfig"],
                              "KUBECONFIG": managed["extra_vars"]["ichor_kubeconfig"]}
    kube = CREDENTIAL_TYPES["kubeconfig"]["injectors"]
    assert set(kube["env"]) == {"KUBECONFIG"} and kube["extra_vars"] == {"ichor_kubeconfig": kube["env"]["KUBECONFIG"]}
    foreign = CREDENTIAL_TYPES["foreign_talosconfig"]["injectors"]
    assert set(foreign["env"]) == {"TALOSCONFIG"}
    assert foreign["extra_vars"]["ichor_reclaim_foreign_talosconfig"] == foreign["env"]["TALOSCONFIG"]
    assert "ichor_reclaim_foreign_talosconfig" in _reclaim_variables()
    installer = open(os.path.join(REPO, "roles", "installer", "tasks", "main.yml")).read()
    assert 'kubeconfig: "{{ ichor_kubeconfig | default(omit) }}"' in installer


def test_the_inventory_plugin_reads_what_the_managed_cluster_type_puts_in_the_environment():
    text = open(os.path.join(REPO, "plugins", "inventory", "talos.py")).read()
    documentation = yaml.safe_load(re.search(r'DOCUMENTATION = r"""(.*?)"""', text, re.S).group(1))
    managed = CREDENTIAL_TYPES["managed_cluster"]["injectors"]["env"]
    for option in ("talosconfig", "kubeconfig"):
        names = [entry["name"] for entry in documentation["options"][option].get("env") or []]
        assert option.upper() in names and option.upper() in managed, option


def test_the_adopt_templates_take_the_chart_the_values_and_every_consent():
    """What the adopt guide has an operator give: the chart (or a mirror) and its digest, the values of a Cilium with
    no Helm record (a mapping: an extra variable edited at launch), every consent the plan can ask for, and where the
    etcd snapshot goes (a directory on the persistent volume)."""
    wanted = {"ichor_adopt_cilium_chart", "ichor_adopt_cilium_chart_digest", "ichor_adopt_cilium_chart_repository",
              "ichor_adopt_etcd_snapshot_dir", "ichor_accept_changes", "ichor_accept_cilium_diff",
              "ichor_accept_cilium_changes", "ichor_adopt_delete_cilium_orphans", "ichor_adopt_recover_from",
              "ichor_cni_unmanaged"}
    for name in ("adopt_plan", "adopt_run"):
        template = TEMPLATES[name]
        assert set(q["variable"] for q in _questions(template)) == wanted, name
        assert template["ask_variables_on_launch"] is True and template["extra_vars"]["ichor_adopt_cilium_values"] == {}
    assert _role_options("adopt")["ichor_adopt_cilium_values"]["type"] == "dict"


def test_the_upgrade_template_takes_one_step_unless_told_to_follow():
    """As the CLI and the guide: one step per run; following every step is a choice made at launch."""
    follow = [q for q in _questions(TEMPLATES["upgrade_run"]) if q["variable"] == "ichor_upgrade_follow"]
    assert [q["default"] for q in follow] == ["false"]


# -- the files a job keeps (issue 44): AWX removes a job's private data dir; in an execution environment HOME is in it

INIT_FILES = ("ichor_init_secrets_file", "ichor_init_talosconfig_file", "ichor_init_kubeconfig_file")
KEPT = {"init.yml": INIT_FILES, "init_credentials.yml": INIT_FILES, "adopt.yml": ("ichor_adopt_etcd_snapshot_dir",)}
REFUSAL = "- name: Refuse a file to keep inside the job's private data directory"


def test_a_file_a_job_keeps_is_asked_for_on_the_persistent_volume_and_the_role_refuses_one_in_the_job():
    """What init and adopt keep for later (init's bundle, talosconfig and kubeconfig, adopt's etcd snapshot) is a
    required question of every template of their playbook (and of init_credentials, which mints init's files again),
    with no default (the role's, ~/..., is inside the job under AWX), whose description says where it lasts; and the
    role's refusal covers each such variable."""
    for name, template in sorted(TEMPLATES.items()):
        questions = dict((q["variable"], q) for q in _questions(template))
        for variable in KEPT.get(template["playbook"], ()):
            question = questions.get(variable)
            assert question is not None, "%s does not ask for %s" % (name, variable)
            assert question.get("required") is True and "default" not in question, (name, variable)
            said = " ".join(question.get("question_description", "").split())
            assert "persistent volume" in said and "refuses it" in said, (name, variable)
    for playbook in ("init.yml", "adopt.yml"):
        variables = KEPT[playbook]
        tasks = open(os.path.join(REPO, "roles", ROLE_OF[playbook], "tasks", "main.yml")).read()
        assert REFUSAL in tasks, playbook
        task = tasks.split(REFUSAL, 1)[1].split("\n    - name:", 1)[0]
        assert "AWX_ISOLATED_DATA_DIR" in task
        for variable in variables:
            assert "'%s'" % variable in task, (playbook, variable)


def _job_dir_run(tmp_path, playbook, extra, runner=True, cwd=None):
    """ansible-playbook as ansible-runner starts it for job 3 of the private data dir ``job``: AWX_ISOLATED_DATA_DIR set
    (as ansible-runner sets it, verified against ansible-runner 2.4's source and a run), HOME the private data dir
    (an execution environment's /runner). No machine answers: a run that gets past the refusal fails on its first
    read."""
    from tests.integration.ansible_env import ansible_playbook
    job = tmp_path / "job"
    (job / "project").mkdir(parents=True, exist_ok=True)
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"vars": {"ichor_adopt_recover_from": "cp-1"}, "children": {
        "controlplane": {"hosts": {"cp-1": {"ansible_host": "127.0.0.1"}}}}}}))
    env = {"HOME": str(job), "KUBECONFIG": str(tmp_path / "no-kubeconfig")}
    if runner:
        env["AWX_ISOLATED_DATA_DIR"] = str(job / "artifacts" / "3")
    proc = ansible_playbook("-i", str(inventory), "maesh.ichor." + playbook, "--check", *extra, env=env,
                            cwd=str(cwd) if cwd else None)
    return job, proc, proc.stdout + proc.stderr


TAIL = ("which is removed with the job: name a %s on a persistent volume mounted into the execution environment "
        "(docs/awx/README.md); nothing was %s or written")


@pytest.mark.parametrize("case", ["default", "relative", "persistent", "cli"])
def test_adopt_under_ansible_runner_refuses_a_snapshot_dir_inside_the_private_data_dir_before_reading(tmp_path, case):
    """The role's default (~/.maesh-ichor/etcd-snapshots: HOME is the private data dir in an execution environment)
    and a relative directory (the job's cwd is the project dir inside it) are refused in one line before anything is
    read; a directory elsewhere (the persistent volume) passes, and so does any directory outside ansible-runner."""
    extra = {"default": (), "relative": ("-e", "ichor_adopt_etcd_snapshot_dir=etcd"),
             "persistent": ("-e", "ichor_adopt_etcd_snapshot_dir=%s" % (tmp_path / "pv" / "etcd")), "cli": ()}[case]
    cwd = tmp_path / "job" / "project" if case == "relative" else None
    if cwd:
        cwd.mkdir(parents=True)
    job, proc, said = _job_dir_run(tmp_path, "adopt", extra, runner=case != "cli", cwd=cwd)
    inspected = "TASK [maesh.ichor.adopt : Inspect the cluster and plan its adoption" in said
    if case in ("default", "relative"):
        where = {"default": job / ".maesh-ichor" / "etcd-snapshots", "relative": job / "project" / "etcd"}[case]
        line = ("ichor_adopt_etcd_snapshot_dir is %s, inside this job's private data directory %s, " % (where, job)
                + TAIL % ("directory", "read"))
        assert proc.returncode == 2 and line in said, said[-3000:]
        assert not inspected and not where.exists(), said[-3000:]
    else:
        assert "inside this job's private data directory" not in said and inspected, said[-3000:]


@pytest.mark.parametrize("case", ["home", "persistent"])
def test_init_under_ansible_runner_refuses_its_files_inside_the_private_data_dir_before_sending(tmp_path, case):
    """init's three files are the only way into the cluster it makes (its bundle Secret is read with the kubeconfig):
    under ansible-runner, ~/... (the private data dir) is refused before the plan reads a machine."""
    where = "~/lab" if case == "home" else str(tmp_path / "pv" / "lab")
    extra = ("-e", "ichor_init_cluster_name=lab", "-e", "ichor_init_secrets_file=%s/secrets.yaml" % where,
             "-e", "ichor_init_talosconfig_file=%s/talosconfig" % where,
             "-e", "ichor_init_kubeconfig_file=%s/kubeconfig" % where)
    job, proc, said = _job_dir_run(tmp_path, "init", extra)
    planned = "TASK [maesh.ichor.init : Plan the cluster" in said
    if case == "home":
        line = ("ichor_init_secrets_file is %s, inside this job's private data directory %s, "
                % (job / "lab" / "secrets.yaml", job) + TAIL % ("file", "sent"))
        assert proc.returncode == 2 and line in said and not planned, said[-3000:]
        assert not (job / "lab").exists()
    else:
        assert "inside this job's private data directory" not in said and planned, said[-3000:]
