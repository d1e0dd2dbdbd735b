"""Capacity modes: `make plan`'s blueprint for each differs from the tutorial's only by the
documented edits, which are the vendored Cluster Toolkit flex-start example's own."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from sandbox.paths import BLUEPRINT_FIXTURES
from tests.budgets import step_budgets
from tests.conftest import REPO, TUTORIAL_CONF
from tpu_rl.backend import jobset as pw
from tpu_rl.dag.run_limits import budget_problem
from tpu_rl.deployment import DEFAULT_DAGRUN_TIMEOUT_MINUTES
from tpu_rl.jobs import manifests as m
from tpu_rl.layout import RunLayout
from tpu_rl.plan import main
from tpu_rl.settings.capacity_modes import CAPACITY_MODES
from tpu_rl.settings.run_settings import load_settings, load_settings_file

EXAMPLES = BLUEPRINT_FIXTURES / "consumption-options"
FLEX = "dws-flex-start__gke-tpu-v6e__"
POOL, EXAMPLE_POOL = "gke-tpu-v6e-pool", "gke-tpu-v6-pool"
KUEUE_QUOTA = ("workload-manager-install", "settings", "kueue", "config_template_vars", "tpu_quota")
FIO_NODES = ("fio-bench-job-template", "settings", "node_count")


def yaml_file(name: str) -> dict:
    return yaml.safe_load((EXAMPLES / name).read_text())


def node_pool_variables() -> set[str]:
    text = (EXAMPLES / "modules__compute__gke-node-pool__variables.tf").read_text()
    return set(re.findall(r'^variable "(\w+)"', text, flags=re.M))


def conf_for(mode: str, **more: Any) -> dict:
    conf = json.loads(TUTORIAL_CONF.read_text())
    if mode != "reservation":
        conf["reservation"] = ""
    return {**conf, "capacity": mode, **more}


def render(tmp_path, conf: dict) -> dict[str, Any]:
    """`make plan`'s code path: plan.json, and the blueprint and deployment file if it made
    them (JSON is YAML)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "conf.json").write_text(json.dumps(conf))
    assert main([str(tmp_path / "conf.json"), str(tmp_path / "out")]) == 0
    out = tmp_path / "out"
    files = {"plan": "plan.json", "blueprint": "blueprint.yaml", "deployment": "deployment.yaml"}
    return {
        k: yaml.safe_load((out / f).read_text()) for k, f in files.items() if (out / f).exists()
    }


def modules(bp: dict) -> dict[str, dict]:
    return {mod["id"]: mod for g in bp["deployment_groups"] for mod in g["modules"]}


def flatten(node: Any, path: tuple = ()) -> dict[tuple, Any]:
    """Leaf path -> value; the modules list keyed by module id, so paths name modules."""
    if isinstance(node, dict) and "deployment_groups" in node:
        rest = {k: v for k, v in node.items() if k != "deployment_groups"}
        return {**flatten(rest, path), **flatten(modules(node), path)}
    if isinstance(node, dict) and node:
        return {p: v for k, child in node.items() for p, v in flatten(child, (*path, k)).items()}
    if isinstance(node, list) and node:
        return {p: v for i, child in enumerate(node) for p, v in flatten(child, (*path, i)).items()}
    return {path: node}


def differences(a: dict, b: dict) -> dict[tuple, tuple[Any, Any]]:
    fa, fb = flatten(a), flatten(b)
    missing = object()
    return {
        p: (fa.get(p, missing), fb.get(p, missing))
        for p in fa.keys() | fb.keys()
        if fa.get(p, missing) != fb.get(p, missing)
    }


POOL_SETTINGS = (POOL, "settings")
RESERVATION_PATHS = {
    ("vars", "reservation"),
    (*POOL_SETTINGS, "reservation_affinity", "consume_reservation_type"),
    (*POOL_SETTINGS, "reservation_affinity", "specific_reservations", 0, "name"),
}
AUTOSCALING = {"autoscaling_min_node_count", "autoscaling_max_node_count"}
# Every path that may differ from the tutorial's rendering, per mode (docs/capacity.md).
DOCUMENTED = {
    "flex_start": RESERVATION_PATHS
    | {KUEUE_QUOTA, FIO_NODES}
    | {("vars", k) for k in {"enable_flex_start", *AUTOSCALING}}
    | {(*POOL_SETTINGS, k) for k in {"enable_flex_start", "auto_repair", *AUTOSCALING}},
    # Spot: no autoscaling settings, the static counts kept: gcluster gives the pool
    # static_node_count (pkg/config/hardware.go expandHardwareSettings)
    "spot": RESERVATION_PATHS | {("vars", "spot"), (*POOL_SETTINGS, "spot")},
}


MODES = ("reservation", "flex_start", "spot")
MODE_NODE_LABELS = {m.node_label for m in CAPACITY_MODES.values() if m.node_label}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict[str, dict[str, Any]]:
    base = tmp_path_factory.mktemp("capacity")
    return {mode: render(base / mode, conf_for(mode)) for mode in MODES}


def test_reservation_mode_is_the_tutorials_rendering(rendered):
    bp = rendered["reservation"]["blueprint"]
    pool = modules(bp)[POOL]["settings"]
    assert pool["reservation_affinity"]["specific_reservations"] == [
        {"name": "$(vars.reservation)"}
    ]
    assert not AUTOSCALING & set(pool) and "spot" not in pool and "enable_flex_start" not in pool
    assert rendered["reservation"]["deployment"]["vars"]["reservation"] == "v6e-32-reservation"


@pytest.mark.parametrize("mode", ["flex_start", "spot"])
def test_a_mode_differs_from_the_tutorials_blueprint_only_by_its_documented_edits(rendered, mode):
    diff = differences(rendered["reservation"]["blueprint"], rendered[mode]["blueprint"])
    assert set(diff) == DOCUMENTED[mode]
    if mode == "spot":
        return
    assert diff[KUEUE_QUOTA][1] == diff[KUEUE_QUOTA][0].replace(
        f"{POOL}.node_count_static", "vars.autoscaling_max_node_count"
    )
    assert diff[FIO_NODES] == (f"$({POOL}.node_count_static)", "$(vars.autoscaling_max_node_count)")


def test_the_flex_start_pool_is_the_vendored_examples_pool(rendered):
    """Same setting names as the example's TPU pool, and its values for the flex-start ones."""
    ours = modules(rendered["flex_start"]["blueprint"])[POOL]["settings"]
    theirs = modules(yaml_file(f"{FLEX}gke-tpu-v6e.yaml"))[EXAMPLE_POOL]["settings"]
    assert set(ours) == set(theirs)
    for key in ("enable_flex_start", "auto_repair", *AUTOSCALING):
        assert ours[key] == theirs[key], key
    assert theirs["auto_repair"] is False
    for absent in ("reservation_affinity", "static_node_count", "enable_queued_provisioning"):
        assert absent not in ours and absent not in theirs


def test_the_flex_start_vars_kueue_quota_and_fio_job_are_the_examples(rendered):
    bp = rendered["flex_start"]["blueprint"]
    example = yaml_file(f"{FLEX}gke-tpu-v6e.yaml")
    for key in ("enable_flex_start", *AUTOSCALING):
        assert bp["vars"][key] == example["vars"][key], key
    assert "reservation" not in bp["vars"] and "reservation" not in example["vars"]
    ours, theirs = flatten(modules(bp)), flatten(modules(example))
    assert ours[KUEUE_QUOTA] == theirs[KUEUE_QUOTA].replace(EXAMPLE_POOL, POOL)
    assert ours[FIO_NODES] == theirs[FIO_NODES]


def test_flex_start_deployment_vars_are_the_examples_for_its_slice(tmp_path):
    """The example's v6e-16 (4x4): enable_flex_start true, 0 to 4 nodes."""
    example = yaml_file(f"{FLEX}gke-tpu-v6e-deployment.yaml")["vars"]
    ours = render(tmp_path, conf_for("flex_start", tpu_type="v6e-16", topology="4x4"))
    ours_vars = ours["deployment"]["vars"]
    for key in ("enable_flex_start", *AUTOSCALING):
        assert ours_vars[key] == example[key], key
    assert "reservation" not in ours_vars and "reservation" not in example


def test_a_pool_from_zero_holds_one_slices_hosts(rendered):
    deployment = rendered["flex_start"]["deployment"]["vars"]
    assert (deployment["autoscaling_min_node_count"], deployment["autoscaling_max_node_count"]) == (
        0,
        8,
    )
    assert deployment["enable_flex_start"] is True


def test_spot_is_the_static_pool_gcluster_renders(rendered):
    """gcluster sets static_node_count on a TPU pool not on flex-start, and gke-node-pool then
    drops the autoscaling block: the Spot pool gets no autoscaling settings it would ignore,
    and the plan says it is static from deploy to destroy."""
    pool = modules(rendered["spot"]["blueprint"])[POOL]["settings"]
    assert pool["spot"] == "$(vars.spot)" and not AUTOSCALING & set(pool)
    assert rendered["spot"]["deployment"]["vars"]["spot"] is True
    assert not AUTOSCALING & set(rendered["spot"]["deployment"]["vars"])
    edits = " ".join(rendered["spot"]["plan"]["capacity"]["blueprint_edits"])
    assert "static_node_count=8" in edits and "from deploy to destroy" in edits


@pytest.mark.parametrize("mode", MODES)
def test_every_pool_setting_is_a_node_pool_variable_and_every_deployment_var_is_declared(
    rendered, mode
):
    bp, deployment = rendered[mode]["blueprint"], rendered[mode]["deployment"]
    assert set(modules(bp)[POOL]["settings"]) <= node_pool_variables() | {"num_slices"}
    assert set(deployment["vars"]) <= set(bp["vars"])
    used = set(re.findall(r"\$\(vars\.(\w+)", json.dumps(bp)))
    assert used <= set(bp["vars"]), used - set(bp["vars"])


@pytest.mark.parametrize("mode", MODES)
def test_no_mode_uses_queued_provisioning(rendered, mode):
    """GKE once refused TPU flex-start with queued provisioning: never rendered."""
    assert "queued" not in json.dumps(rendered[mode]["blueprint"])


@pytest.mark.parametrize("mode", ["flex_start", "spot"])
def test_the_gcluster_vars_carry_no_reservation_without_one(rendered, mode):
    deploy = next(s for s in rendered[mode]["plan"]["steps"] if s["id"] == "create_cluster")
    cli_vars = deploy["argv"][deploy["argv"].index("--vars") + 1]
    assert "reservation" not in cli_vars
    assert "reservation=v6e-32-reservation" in json.dumps(rendered["reservation"]["plan"])


@pytest.mark.parametrize("mode", MODES)
def test_the_plan_names_the_mode_and_its_edits(rendered, mode):
    plan = rendered[mode]["plan"]
    assert plan["capacity"]["mode"] == mode
    deploy = next(s for s in plan["steps"] if s["id"] == "create_cluster")
    assert f"on {mode} capacity" in deploy["description"]
    assert deploy["capacity_edits"] == plan["capacity"]["blueprint_edits"]
    if mode != "reservation":
        assert any("reservation_affinity removed" in e for e in deploy["capacity_edits"])


def test_an_existing_clusters_plan_names_its_pools_mode_and_edits_nothing(tmp_path):
    plan = render(tmp_path, conf_for("spot", cluster_mode="existing"))["plan"]
    use = next(s for s in plan["steps"] if s["id"] == "create_cluster")
    assert "on spot capacity" in use["description"]
    assert plan["capacity"] == {
        "mode": "spot",
        "blueprint_edits": [],
        "node_selector": {"cloud.google.com/gke-spot": "true"},
    }


def test_the_example_files_render_and_fit_the_default_dagrun_timeout(tmp_path):
    """flex-start.json's longer pending timeout still fits (validate checks it at run time)."""
    for name, mode in (("flex-start", "flex_start"), ("spot", "spot")):
        conf = REPO / "include" / "examples" / f"{name}.json"
        assert main([str(conf), str(tmp_path / name)]) == 0
        assert json.loads((tmp_path / name / "plan.json").read_text())["capacity"]["mode"] == mode
        settings = load_settings_file(conf)
        assert budget_problem(settings, DEFAULT_DAGRUN_TIMEOUT_MINUTES, step_budgets()) is None, (
            name
        )


LABELS = {
    "reservation": {},
    "flex_start": {"cloud.google.com/gke-flex-start": "true"},
    "spot": {"cloud.google.com/gke-spot": "true"},
}


def pod_specs(layout: RunLayout) -> dict[str, dict]:
    backend = pw.backend_jobset(layout)["spec"]["replicatedJobs"]
    pods = {rj["name"]: rj["template"]["spec"]["template"]["spec"] for rj in backend}
    for name, job in (
        ("convert", m.conversion_job(layout)),
        ("train", m.train_job(layout)),
        ("export", m.export_job(layout, 50)),
    ):
        pods[name] = job["spec"]["template"]["spec"]
    return pods


@pytest.mark.parametrize(("mode", "labels"), LABELS.items())
@pytest.mark.parametrize("cluster_mode", ["create", "existing"])
def test_tpu_pods_select_the_modes_node_label_and_cpu_pods_do_not(mode, labels, cluster_mode):
    conf = conf_for(mode, cluster_mode=cluster_mode)
    if cluster_mode == "existing":
        conf["reservation"] = ""
    pods = pod_specs(RunLayout(load_settings(conf), "manual__capacity", "test-deployment"))
    for name in ("convert", "worker", "export"):
        selector = pods[name]["nodeSelector"]
        assert {k: v for k, v in selector.items() if k in MODE_NODE_LABELS} == labels
        assert selector["cloud.google.com/gke-tpu-accelerator"] == "tpu-v6e-slice"
    for name in ("train", "pathways-head"):
        assert pods[name]["nodeSelector"] == {"cloud.google.com/gke-nodepool": "cpu-np"}
