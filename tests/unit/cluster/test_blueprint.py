"""The Cluster Toolkit builders against the real blueprint and the tutorial's own commands."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import shlex

import pytest
import yaml

from sandbox.paths import BLUEPRINT_FIXTURES as FIXTURES
from tests.conftest import SEED
from tests.support.cells import cell_conf
from tpu_rl.catalogue.cells import CELLS
from tpu_rl.cluster import blueprint
from tpu_rl.cluster.blueprint import BlueprintError
from tpu_rl.plan import main as plan
from tpu_rl.settings.run_settings import load_settings

BLUEPRINT = (FIXTURES / "gke-tpu-v6e-advanced.yaml").read_text()
TUTORIAL = SEED.read_text()

# The tutorial's placeholders, replaced by valid example values.
EXAMPLES = {
    "YOUR_PROJECT_ID": "tpu-rl-example",
    "YOUR_REGION": "us-east5",
    "YOUR_ZONE": "us-east5-b",
    "YOUR_CLUSTER_NAME": "gemma4-rl",
    "YOUR_BUCKET_NAME": "tpu-rl-example-bucket",
    "YOUR_RESERVATION_NAME": "v6e-32-reservation",
}


def tutorial_exports() -> dict[str, str]:
    """The tutorial's `export NAME="value"` lines, placeholders filled with EXAMPLES."""
    exports = dict(re.findall(r'^export (\w+)="?([^"\n]*)"?$', TUTORIAL, flags=re.M))
    return {k: EXAMPLES.get(v, v) for k, v in exports.items()}


def tutorial_command(start: str, variables: dict[str, str]) -> list[str]:
    """The shell command starting with `start`, continuation lines joined, ${VARS} filled."""
    text = TUTORIAL[TUTORIAL.index(start) :]
    lines = []
    for line in text.splitlines():
        lines.append(line.rstrip().removesuffix("\\"))
        if not line.rstrip().endswith("\\"):
            break
    command = re.sub(
        r"\$\{(\w+)(?::[?-][^}]*)?\}", lambda m: variables[m.group(1)], " ".join(lines)
    )
    return shlex.split(command)


@pytest.fixture
def settings():
    v = tutorial_exports()
    return load_settings(
        {
            "project": v["PROJECT"],
            "region": v["REGION"],
            "zone": v["ZONE"],
            "cluster_name": v["CLUSTER_NAME"],
            "gcs_bucket": v["GCS_BUCKET"],
            "compute_type": v["COMPUTE_TYPE"],
            "tpu_type": v["TPU_TYPE"],
            "topology": v["TOPOLOGY"],
            "cluster_nodepool_count": int(v["CLUSTER_NODEPOOL_COUNT"]),
            "reservation": v["RESERVATION"],
            "cluster_toolkit_version": v["CLUSTER_TOOLKIT_VERSION"],
        }
    )


def modules(bp: dict) -> dict[str, dict]:
    return {m["id"]: m for g in bp["deployment_groups"] for m in g["modules"]}


def sed_edits(text: str) -> str:
    """The tutorial's three `sed -i` commands, line by line as sed runs them."""
    out = []
    for line in text.splitlines():
        line = line.replace("n2-standard-8", "e2-standard-8", 1)
        line = line.replace("- storage.objectViewer", "- storage.admin", 1)
        out.append(line)
        if "system_node_pool_machine_type" in line:
            out.append("      system_node_pool_zones: [$(vars.zone)]")
    return "\n".join(out) + "\n"


def test_the_tutorial_sed_lines_are_the_ones_emulated():
    zones = (
        "sed -i '/system_node_pool_machine_type/a \\      system_node_pool_zones: [$(vars.zone)]'"
    )
    assert 'sed -i "s/n2-standard-8/e2-standard-8/"' in TUTORIAL
    assert zones in TUTORIAL
    assert 'sed -i "s/- storage.objectViewer/- storage.admin/"' in TUTORIAL


def test_edits_equal_the_tutorial_sed_result_plus_labels(settings):
    edited = yaml.safe_load(blueprint.edit_blueprint(BLUEPRINT, settings, "test-deployment"))
    labels = edited["vars"].pop("labels")
    assert edited == yaml.safe_load(sed_edits(BLUEPRINT))
    assert labels == {
        "managed-by": "tpu-rl-airflow",
        "tpu-rl-cluster": "gemma4-rl",
        "tpu-rl-deployment": "test-deployment",
        "tpu-rl-dag": "tpu_rl_post_training",
    }


def test_the_cluster_carries_the_identity_of_the_run_that_creates_it(settings, monkeypatch):
    monkeypatch.setenv("TPU_RL_DEPLOYMENT_ID", "changed-since")  # the run's record wins
    labels = yaml.safe_load(blueprint.edit_blueprint(BLUEPRINT, settings, "team-a-prod"))
    assert labels["vars"]["labels"]["tpu-rl-deployment"] == "team-a-prod"


def test_each_edit_applied_exactly_once(settings):
    text = blueprint.edit_blueprint(BLUEPRINT, settings, "test-deployment")
    assert "n2-standard-8" not in text and "storage.objectViewer" not in text
    assert text.count("system_node_pool_zones") == 1
    assert text.count("e2-standard-8") == 1
    mods = modules(yaml.safe_load(text))
    cluster = mods["gke-tpu-v6e-cluster"]["settings"]
    keys = list(cluster)
    assert cluster["system_node_pool_machine_type"] == "e2-standard-8"
    assert cluster["system_node_pool_zones"] == ["$(vars.zone)"]
    assert keys.index("system_node_pool_zones") == keys.index("system_node_pool_machine_type") + 1
    roles = mods["node_pool_service_account"]["settings"]["project_roles"]
    assert roles.count("storage.admin") == 1
    assert roles.index("storage.admin") == 4  # objectViewer's place


def test_every_other_module_and_var_untouched(settings):
    original = yaml.safe_load(BLUEPRINT)
    edited = yaml.safe_load(blueprint.edit_blueprint(BLUEPRINT, settings, "test-deployment"))
    before, after = modules(original), modules(edited)
    assert list(before) == list(after)
    changed = {"gke-tpu-v6e-cluster", "node_pool_service_account"}
    for mod_id in set(before) - changed:
        assert after[mod_id] == before[mod_id], mod_id
    cluster_before = copy.deepcopy(before["gke-tpu-v6e-cluster"]["settings"])
    cluster_after = after["gke-tpu-v6e-cluster"]["settings"]
    del cluster_before["system_node_pool_machine_type"]
    for key in ("system_node_pool_machine_type", "system_node_pool_zones"):
        del cluster_after[key]
    assert cluster_after == cluster_before
    assert {k: v for k, v in edited["vars"].items() if k != "labels"} == original["vars"]
    assert list(edited) == list(original)  # no top-level key added or dropped
    assert [g["group"] for g in edited["deployment_groups"]] == ["primary"]
    # strings YAML could misread keep their type
    assert edited["vars"]["version_prefix"] == "1.35."
    assert edited["vars"]["kueue_configuration_path"] == (
        '$(ghpc_stage("./kueue-configuration.yaml.tftpl"))'
    )


def test_existing_labels_are_kept(settings):
    bp = yaml.safe_load(BLUEPRINT)
    bp["vars"]["labels"] = {"team": "ml"}
    edited = yaml.safe_load(
        blueprint.edit_blueprint(yaml.safe_dump(bp), settings, "test-deployment")
    )
    assert edited["vars"]["labels"] == {
        "team": "ml",
        "managed-by": "tpu-rl-airflow",
        "tpu-rl-cluster": "gemma4-rl",
        "tpu-rl-deployment": "test-deployment",
        "tpu-rl-dag": "tpu_rl_post_training",
    }


def _without(path: tuple, bp_text: str = BLUEPRINT) -> str:
    """The blueprint with one anchor removed: a module (by id) or a setting of a module."""
    bp = yaml.safe_load(bp_text)
    group = bp["deployment_groups"][0]
    if len(path) == 1:
        group["modules"] = [m for m in group["modules"] if m["id"] != path[0]]
    else:
        mod = next(m for m in group["modules"] if m["id"] == path[0])
        value = mod["settings"][path[1]]
        if isinstance(value, list):
            mod["settings"][path[1]] = [r for r in value if r != path[2]]
        else:
            del mod["settings"][path[1]]
    return yaml.safe_dump(bp)


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (_without(("gke-tpu-v6e-cluster",)), "modules/scheduler/gke-cluster"),
        (
            _without(("gke-tpu-v6e-cluster", "system_node_pool_machine_type")),
            "'system_node_pool_machine_type'",
        ),
        (_without(("node_pool_service_account",)), "node_pool_service_account"),
        (
            _without(("node_pool_service_account", "project_roles", "storage.objectViewer")),
            "'storage.objectViewer'",
        ),
        ("deployment_groups: []\n", "vars"),
        ("vars: {}\n", "deployment_groups"),
    ],
)
def test_missing_anchor_fails_naming_it(settings, broken, message):
    with pytest.raises(BlueprintError, match=re.escape(message)):
        blueprint.edit_blueprint(broken, settings, "test-deployment")


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (_without(("gke-tpu-v6e-pool",)), "modules/compute/gke-node-pool"),
        (_without(("gke-tpu-v6e-pool", "machine_type")), "'machine_type'"),
    ],
)
def test_a_tpu_pool_edit_without_its_tpu_pool_fails_naming_it(settings, broken, message):
    """Every run edits the TPU pool (its generation's boot disk); flex_start/spot more of it."""
    spot = dataclasses.replace(settings, capacity="spot", reservation="")
    for edited in (spot, settings):
        with pytest.raises(BlueprintError, match=re.escape(message)):
            blueprint.edit_blueprint(broken, edited, "test-deployment")


def test_two_gke_cluster_modules_are_ambiguous(settings):
    bp = yaml.safe_load(BLUEPRINT)
    mods = bp["deployment_groups"][0]["modules"]
    mods.append({**modules(bp)["gke-tpu-v6e-cluster"], "id": "second"})
    with pytest.raises(BlueprintError, match="found 2"):
        blueprint.edit_blueprint(yaml.safe_dump(bp), settings, "test-deployment")


def test_several_groups_would_share_one_state_prefix(settings):
    bp = yaml.safe_load(BLUEPRINT)
    bp["deployment_groups"].append({"group": "second", "modules": []})
    with pytest.raises(BlueprintError, match="2 deployment groups"):
        blueprint.edit_blueprint(yaml.safe_dump(bp), settings, "test-deployment")


def test_deployment_file_keeps_state_in_the_bucket(settings):
    dep = yaml.safe_load(blueprint.deployment_file(settings, "p/terraform"))
    fixture = yaml.safe_load((FIXTURES / "gke-tpu-v6e-deployment.yaml").read_text())
    assert dep["terraform_backend_defaults"] == {
        "type": "gcs",
        "configuration": {"bucket": "tpu-rl-example-bucket", "prefix": "p/terraform"},
    }
    assert set(dep["vars"]) == set(fixture["vars"])  # the fixture's vars, every one set
    assert dep["vars"] == {
        "project_id": "tpu-rl-example",
        "deployment_name": "gemma4-rl",
        "region": "us-east5",
        "zone": "us-east5-b",
        "num_slices": 1,
        "machine_type": "ct6e-standard-4t",
        "tpu_topology": "4x8",
        "authorized_cidr": "0.0.0.0/0",
        "reservation": "v6e-32-reservation",
        "user_namespace": "default",
    }


def test_default_state_prefix_is_per_cluster(settings):
    assert blueprint.default_state_prefix(settings) == ("tpu-rl/terraform/gemma4-rl")


def flags(argv: list[str], valued: set[str]) -> tuple[list[str], dict[str, str | None]]:
    """(positional args, {flag: value or None}) of a command line."""
    positional, options, i = [], {}, 0
    while i < len(argv):
        if argv[i].startswith("-"):
            options[argv[i]] = argv[i + 1] if argv[i] in valued else None
            i += 2 if argv[i] in valued else 1
        else:
            positional.append(argv[i])
            i += 1
    return positional, options


def test_deploy_argv_matches_the_tutorial_flag_by_flag(settings):
    variables = {**tutorial_exports(), "BLUEPRINT_FILE": "/tmp/x/gke-tpu-v6e-advanced.yaml"}
    tutorial = tutorial_command('./gcluster deploy "${BLUEPRINT_FILE}"', variables)
    ours = blueprint.blueprint_argv("deploy", settings, "./gcluster", variables["BLUEPRINT_FILE"])
    valued = {"--vars", "-l", "-d"}
    t_pos, t_opts = flags(tutorial, valued)
    o_pos, o_opts = flags(ours, valued)
    assert o_pos == t_pos == ["./gcluster", "deploy", variables["BLUEPRINT_FILE"]]
    for flag, value in t_opts.items():
        assert o_opts[flag] == value, flag
    assert set(o_opts) - set(t_opts) == {"-d"}  # the deployment file: the state backend
    assert o_opts["-d"] == "deployment.yaml"
    t_vars = dict(kv.split("=", 1) for kv in t_opts["--vars"].split(","))
    assert t_vars == {
        "project_id": "tpu-rl-example",
        "deployment_name": "gemma4-rl",
        "region": "us-east5",
        "zone": "us-east5-b",
        "num_slices": "1",
        "tpu_topology": "4x8",
        "authorized_cidr": "0.0.0.0/0",
        "reservation": "v6e-32-reservation",
    }


@pytest.mark.parametrize("capacity", ["reservation", "flex_start", "spot"])
def test_deployment_file_agrees_with_the_cli_vars(settings, capacity):
    if capacity != "reservation":
        settings = dataclasses.replace(settings, capacity=capacity, reservation="")
    dep = yaml.safe_load(blueprint.deployment_file(settings, "p"))["vars"]
    cli = dict(kv.split("=", 1) for kv in blueprint.vars_flag(settings).split(","))
    assert {k: yaml.safe_load(v) for k, v in cli.items()} == {k: dep[k] for k in cli}
    assert ("reservation" in cli) == (capacity == "reservation")


def test_destroy_argv_matches_the_tutorial(settings):
    tutorial = tutorial_command('./gcluster destroy "${CLUSTER_NAME:?}"', tutorial_exports())
    assert blueprint.destroy_argv(settings, "./gcluster") == tutorial


def test_create_argv_has_deploys_inputs_without_applying(settings):
    deploy = blueprint.blueprint_argv("deploy", settings)
    create = blueprint.blueprint_argv("create", settings)
    assert create[1] == "create" and "--auto-approve" not in create
    assert [a for a in deploy if a not in ("deploy", "--auto-approve")] == [
        a for a in create if a != "create"
    ]


PLATFORMS = [("Linux", "x86_64"), ("Linux", "aarch64"), ("Linux", "arm64")]
PLATFORMS += [("Darwin", "x86_64"), ("Darwin", "arm64")]


@pytest.mark.parametrize(("system", "machine"), PLATFORMS)
def test_bundle_names_follow_the_tutorial_table(system, machine):
    case = re.search(rf"^\s*[\w|-]*{system}-{machine}[\w|-]*\)\s+BUNDLE=\"(\S+)\"", TUTORIAL, re.M)
    assert blueprint.bundle_name(system, machine) == case.group(1)


def test_unsupported_platform_is_named():
    with pytest.raises(BlueprintError, match="Windows-AMD64"):
        blueprint.bundle_name("Windows", "AMD64")


def test_bundle_url_is_the_tutorials_pattern():
    line = next(x for x in TUTORIAL.splitlines() if x.startswith("curl -fsSL"))
    pattern = re.search(r'"(https://[^"]+)"', line).group(1)
    expected = pattern.replace("${CLUSTER_TOOLKIT_VERSION:?}", "v1.103.0").replace(
        "${BUNDLE:?}", "gcluster_bundle_linux_amd64.tgz"
    )
    assert blueprint.bundle_url("v1.103.0", "gcluster_bundle_linux_amd64.tgz") == expected
    assert blueprint.bundle_url("v1", "b.tgz", "http://127.0.0.1:9/m/") == (
        "http://127.0.0.1:9/m/v1/b.tgz"
    )


def test_plan_writes_both_files_and_names_the_gcluster_binary(settings):
    steps = blueprint.plan(BLUEPRINT, settings, "test-deployment", gcluster="/cache/gcluster")
    assert set(steps.files) == {"blueprint.yaml", "deployment.yaml"}
    assert steps.deploy[:3] == ["/cache/gcluster", "deploy", "blueprint.yaml"]
    assert steps.create[:2] == ["/cache/gcluster", "create"]
    assert steps.destroy == ["/cache/gcluster", "destroy", "gemma4-rl", "--auto-approve"]
    dep = yaml.safe_load(steps.files["deployment.yaml"])
    assert dep["terraform_backend_defaults"]["configuration"]["prefix"] == (
        blueprint.default_state_prefix(settings)
    )


@pytest.mark.parametrize(
    ("tpu_type", "topology", "machine", "policy"),
    [
        ("tpu7x-128", "4x4x4", "tpu7x-standard-4t", True),  # 16 VMs: a multi-host slice
        ("tpu7x-8", "2x2x1", "tpu7x-standard-4t", False),  # one VM
        ("v5p-64", "2x4x4", "ct5p-hightpu-4t", False),  # v5p keeps the topology flag
    ],
)
def test_a_multi_host_tpu7x_pool_is_placed_by_a_workload_policy(
    settings, tpu_type, topology, machine, policy
):
    """GKE places a multi-host TPU7x slice by a HIGH_THROUGHPUT workload policy: the blueprint
    gains Cluster Toolkit's gke-tpu-7x resource-policy module, the TPU pool uses it in place of
    its own placement policy; other slices keep the tutorial's pool."""
    on = dataclasses.replace(settings, tpu_type=tpu_type, topology=topology, compute_type=machine)
    edited = modules(yaml.safe_load(blueprint.edit_blueprint(BLUEPRINT, on, "d")))
    pool = edited["gke-tpu-v6e-pool"]
    if not policy:
        assert "workload_policy" not in edited and "workload_policy" not in pool["use"]
        assert pool["settings"]["placement_policy"]["tpu_topology"] == "$(vars.tpu_topology)"
        return
    assert edited["workload_policy"] == {
        "id": "workload_policy",
        "source": "modules/compute/resource-policy",
        "settings": {
            "name": "tpu7x-workload-policy",
            "project_id": "$(vars.project_id)",
            "region": "$(vars.region)",
            "workload_policy": {
                "accelerator_topology": "$(vars.tpu_topology)",
                "type": "HIGH_THROUGHPUT",
            },
        },
    }
    assert pool["use"][-1] == "workload_policy" and "placement_policy" not in pool["settings"]
    ids = list(edited)
    assert ids.index("workload_policy") == ids.index("gke-tpu-v6e-pool") - 1


@pytest.mark.parametrize("cell", CELLS, ids=[f"{c.model_name}@{c.tpu_type}" for c in CELLS])
def test_the_tpu_pool_boots_from_its_generations_disk_type(settings, cell):
    """Cloud TPU's disk table (tpu_rl.tpu): v6e and TPU7x pools on hyperdisk-balanced, as the
    tutorial's blueprint has it, v5p pools on pd-balanced."""
    on = dataclasses.replace(
        settings,
        tpu_type=cell.tpu_type,
        topology=cell.topology,
        compute_type=cell.generation.machine_type,
    )
    pool = modules(yaml.safe_load(blueprint.edit_blueprint(BLUEPRINT, on, "d")))["gke-tpu-v6e-pool"]
    expected = "pd-balanced" if cell.generation.name == "v5p" else "hyperdisk-balanced"
    assert pool["settings"]["disk_type"] == cell.generation.boot_disk_type == expected


def test_make_plan_says_a_tpu7x_slice_gets_its_workload_policy(tmp_path, capsys):
    """`make plan` names the edit among the blueprint's, for the tpu7x cell only."""
    said = {}
    for cell in CELLS:
        conf = tmp_path / "cell.json"
        conf.write_text(json.dumps(cell_conf(cell)))
        assert plan([str(conf), str(tmp_path / cell.tpu_type)]) == 0
        said[cell.tpu_type] = "module 'workload_policy' added" in capsys.readouterr().out
    assert {t for t, s in said.items() if s} == {"tpu7x-128"}
