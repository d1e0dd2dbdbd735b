"""`make plan`: render a whole run offline, from a JSON settings file, without credentials.

Each step's text is its operator's `step_doc` (its first paragraph, the task's doc in Airflow's
UI), then what the step does in this run.

Usage: python -m tpu_rl.plan SETTINGS.json OUT_DIR [RUN_ID]
"""

from __future__ import annotations

import ast
import inspect
import json
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import yaml

import tpu_rl.operators
from tpu_rl import deployment
from tpu_rl.backend import jobset as pathways_jobset
from tpu_rl.cluster import blueprint, capacity, kueue_config
from tpu_rl.cluster.ladder_plan import ladder_plan
from tpu_rl.include_files import PLAN_BLUEPRINT, PLAN_KUEUE_CONFIG, include_file
from tpu_rl.jobs import manifests, maxtext_flags
from tpu_rl.layout import RunLayout
from tpu_rl.names import Step
from tpu_rl.promotion.champion import champion_uri
from tpu_rl.report.estimate import (
    cost_words,
    estimate_rows,
    estimate_run,
    format_estimate,
    mode_in,
)
from tpu_rl.settings.fields import RunSettings
from tpu_rl.settings.run_settings import SettingsError, load_settings_file
from tpu_rl.settings.validation import settings_warnings
from tpu_rl.training_log.evaluations import gate_thresholds

PLAN_RUN_ID = "manual__plan"
# The identity a plan shows when none is configured: the stored one lives in a deployment's
# metadata DB, which this offline tool does not read (tpu_rl.deployment.deployment_id).
PLAN_DEPLOYMENT = "plan-preview"
PlanStep = dict[str, Any]


@cache
def step_docs() -> dict[Step, str]:
    """The first paragraph of each step's operator `step_doc`, as one line, by step.

    Read from the operators' source, not imported: an operator module imports Airflow
    (tpu_rl.operators.run_step), which `make plan` runs without. A step doc that is an f-string
    has its first paragraph before its first replacement field.
    """
    docs: dict[Step, str] = {}
    for path in sorted(Path(tpu_rl.operators.__file__).parent.glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and (found := _class_step_doc(node)):
                docs[found[0]] = found[1]
    return docs


def _class_step_doc(node: ast.ClassDef) -> tuple[Step, str] | None:
    """A class's `step_id = Step.<NAME>` and the first paragraph of its `step_doc`, if it
    declares both."""
    values = {
        target.id: statement.value
        for statement in node.body
        if isinstance(statement, ast.Assign | ast.AnnAssign) and statement.value
        for target in (
            statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        )
        if isinstance(target, ast.Name)
    }
    step, doc = values.get("step_id"), values.get("step_doc")
    if not (isinstance(step, ast.Attribute) and doc is not None):
        return None
    return Step[step.attr], _first_paragraph(doc, f"{node.name}.step_doc")


def _first_paragraph(doc: ast.expr, where: str) -> str:
    """A step doc's first paragraph, as one line; `where` names the doc in the error raised when
    that paragraph is not all text (an f-string's replacement field in it)."""
    parts = doc.values if isinstance(doc, ast.JoinedStr) else [doc]
    texts = list(_leading_texts(parts))
    paragraph, end, _ = inspect.cleandoc("".join(texts)).partition("\n\n")
    if not end and len(texts) < len(parts):
        raise ValueError(f"{where}: its first paragraph is not all text, which make plan reads")
    return " ".join(paragraph.split())


def _leading_texts(parts: list[ast.expr]) -> Iterator[str]:
    """The string constants of `parts` up to the first other part."""
    for part in parts:
        if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
            return
        yield part.value


def described(step: Step, here: str = "") -> str:
    """A step's text in the plan: its operator's step doc (step_docs), then `here`, what it does
    in this run."""
    return f"{step_docs()[step]} This run: {here}" if here else step_docs()[step]


def build_plan(layout: RunLayout) -> tuple[list[PlanStep], dict[str, str]]:
    """The ordered steps, and the files (name -> text) a plan writes besides plan.json."""
    s = layout.settings
    files: dict[str, str] = {}
    steps: list[PlanStep] = [
        {"id": Step.VALIDATE, "description": described(Step.VALIDATE)},
        {
            "id": Step.PREFLIGHT,
            "description": described(
                Step.PREFLIGHT,
                f"project {s.project}: its APIs, IAM, {s.compute_type} in {s.zone}, the "
                f"{s.capacity} capacity, the bucket, the images, the Hugging Face licence (make "
                "preflight CONF=<json> runs the same checks).",
            ),
        },
        {
            "id": Step.ENSURE_BUCKET,
            "description": described(Step.ENSURE_BUCKET, f"gs://{s.gcs_bucket} in {s.region}."),
        },
    ]
    cluster = _cluster_plan(layout) if s.cluster_mode == "create" else None
    if cluster:
        files.update(cluster.files)
        rungs, rung_files = _ladder(layout)
        files.update(rung_files)
        kueue_text = include_file(PLAN_KUEUE_CONFIG).read_text()
        files[kueue_config.CONFIG_FILE] = kueue_config.edit_kueue_config(kueue_text)
        steps.append(
            {
                "id": Step.CREATE_CLUSTER,
                "description": described(
                    Step.CREATE_CLUSTER,
                    f"GKE cluster {s.cluster_name} with Cluster Toolkit "
                    f"{s.cluster_toolkit_version} (terraform state in gs://{s.gcs_bucket}), its "
                    f"TPU pool on {s.capacity} capacity.",
                ),
                "capacity_edits": capacity.describe_edits(s),
                "argv": cluster.deploy,
                # tried in order while GKE refuses a rung for lack of capacity
                "capacity_ladder": rungs,
            }
        )
    else:
        steps.append(
            {
                "id": Step.CREATE_CLUSTER,
                "description": described(
                    Step.CREATE_CLUSTER,
                    f"nothing to deploy: the existing cluster {s.cluster_name}, its TPU pool on "
                    f"{s.capacity} capacity.",
                ),
            }
        )
    steps += [
        _object_step(
            Step.HF_TOKEN_SECRET,
            f"the token of connection {deployment.hf_conn_id()!r}.",
            manifests.token_secret(layout),
            files,
        ),
        _object_step(
            Step.CONVERT,
            f"{s.hf_model_path} into {layout.maxtext_dir}.",
            manifests.conversion_job(layout),
            files,
            python_argv(manifests.CONVERT_MODULE, maxtext_flags.conversion_flags(layout)),
        ),
        _object_step(
            Step.START_BACKEND,
            f"a {s.tpu_type} slice ({s.topology}).",
            pathways_jobset.backend_jobset(layout),
            files,
        ),
        _object_step(
            Step.TRAIN,
            f"{_identity(layout)}.",
            manifests.train_job(layout),
            files,
            python_argv(manifests.TRAIN_MODULE, maxtext_flags.train_flags(layout)),
        ),
        {"id": Step.WAIT_FOR_REWARDS, "description": described(Step.WAIT_FOR_REWARDS)},
        _champion_evaluation(layout, files),
        {"id": Step.STOP_BACKEND, "description": described(Step.STOP_BACKEND)},
        _heldout_evaluation(layout, files),
        {
            "id": Step.GATE,
            "description": described(
                Step.GATE,
                "gains over the base model of "
                + ", ".join(
                    f"{name} >= {gain:+g}"
                    for name, gain in gate_thresholds(s.gate_metrics, s.min_reward_gain).items()
                )
                + ".",
            ),
        },
        _object_step(
            Step.EXPORT,
            f"the {s.export_checkpoint} committed checkpoint under {layout.checkpoints_dir} to "
            f"{layout.export_dir} (step {s.num_batches} shown).",
            manifests.export_job(layout, s.num_batches),
            files,
            python_argv(manifests.EXPORT_MODULE, maxtext_flags.export_flags(layout, s.num_batches)),
        ),
        {
            "id": Step.VERIFY,
            "description": described(
                Step.VERIFY, f"config.json, safetensors and tokenizer in {layout.export_dir}."
            ),
        },
        {
            "id": Step.COMPARE_CHAMPION,
            "description": described(
                Step.COMPARE_CHAMPION, f"by {gains_text(s.min_gain_over_champion)}."
            ),
        },
        *_cleanup_steps(layout, cluster),
        *promotion_steps(layout),
    ]
    return steps, files


def _champion_evaluation(layout: RunLayout, files: dict[str, str]) -> PlanStep:
    """evaluate_champion: its Job as it runs when the deployment has a champion, whose
    checkpoint the run reads from the champion record."""
    record = champion_uri(layout.model_root, layout.deployment)
    parameters = f"<checkpoint_uri of {record}>"
    return _object_step(
        Step.EVALUATE_CHAMPION,
        f"the champion recorded in {record}.",
        manifests.champion_evaluation_job(layout, parameters),
        files,
        python_argv(
            manifests.TRAIN_MODULE, maxtext_flags.champion_evaluation_flags(layout, parameters)
        ),
    )


def _heldout_evaluation(layout: RunLayout, files: dict[str, str]) -> PlanStep:
    """evaluate_heldout: its Job with the last step standing for the steps it will score (the
    best committed ones, known once training is over), the base model and a champion; only its
    skip when heldout_tasks is empty."""
    from tpu_rl.heldout.report import BASE, CHAMPION, step_label
    from tpu_rl.jobs.heldout_job import HeldoutModel, heldout_evaluation_job

    s = layout.settings
    if not s.heldout_tasks:
        here = "skipped: heldout_tasks is empty."
        return {"id": Step.EVALUATE_HELDOUT, "description": described(Step.EVALUATE_HELDOUT, here)}
    record = champion_uri(layout.model_root, layout.deployment)
    models = [
        HeldoutModel(step_label(s.num_batches), layout.checkpoint_params(s.num_batches)),
        HeldoutModel(BASE, layout.maxtext_items),
        HeldoutModel(CHAMPION, f"<checkpoint_uri of {record}>model_params/"),
    ]
    here = (
        f"{', '.join([*s.heldout_tasks, *s.heldout_guard_tasks])} for the best "
        f"{s.heldout_top_k} committed step(s) (step {s.num_batches} shown), the base model and "
        "the champion."
    )
    return _object_step(Step.EVALUATE_HELDOUT, here, heldout_evaluation_job(layout, models), files)


def _identity(layout: RunLayout) -> str:
    """Which Google identity the pods that use the bucket have, in words."""
    if account := layout.settings.client_service_account:
        return f"its pods run as service account {account} (Workload Identity)"
    return "its pods use the host network, so the node pool's service account"


def _cluster_plan(layout: RunLayout) -> blueprint.ClusterToolkitPlan:
    return blueprint.plan(
        include_file(PLAN_BLUEPRINT).read_text(),
        layout.settings,
        layout.deployment,
        layout.terraform_state_prefix,
    )


def _ladder(layout: RunLayout) -> tuple[list[PlanStep], dict[str, str]]:
    """What each rung of the capacity ladder creates, and its files (tpu_rl.cluster.ladder_plan)."""
    return ladder_plan(
        include_file(PLAN_BLUEPRINT).read_text(),
        layout.settings,
        layout.deployment,
        layout.terraform_state_prefix,
    )


def python_argv(module: str, flags: list[str]) -> list[str]:
    return ["python3", "-m", module, *flags]


def _object_step(
    step_id: Step,
    here: str,
    obj: manifests.Manifest,
    files: dict[str, str],
    argv: list[str] | None = None,
) -> PlanStep:
    """A step that creates one Kubernetes object, written to its own YAML file; `here` is what
    it does in this run (described).

    `argv` is the MaxText command the object's container runs (its shell line wraps it).
    """
    file_name = f"{step_id}.{obj['kind'].lower()}.yaml"
    files[file_name] = yaml.safe_dump(obj, sort_keys=False)
    step: PlanStep = {"id": step_id, "description": described(step_id, here), "object": file_name}
    if argv:
        step["argv"] = argv
    return step


def _cleanup_steps(
    layout: RunLayout, cluster: blueprint.ClusterToolkitPlan | None
) -> list[PlanStep]:
    """The teardowns; `cluster`: the cluster this run creates, if it does."""
    destroys = cluster is not None and not layout.settings.keep_cluster
    from tpu_rl.kube.swept import kinds_text

    s = layout.settings
    objects: PlanStep = {
        "id": Step.CLEANUP_KUBERNETES,
        "description": described(Step.CLEANUP_KUBERNETES, f"the run's {kinds_text()}."),
    }
    destroy: PlanStep = {
        "id": Step.CLEANUP_CLUSTER,
        "description": described(
            Step.CLEANUP_CLUSTER,
            f"destroys {s.cluster_name}." if destroys else f"{s.cluster_name} is kept.",
        ),
    }
    if cluster is not None and destroys:
        destroy["argv"] = cluster.destroy
    return [objects, destroy]


def gains_text(gains: dict[str, float]) -> str:
    """`accuracy +0, mean_reward +0.01`: the gains a setting asks, in words."""
    return ", ".join(f"{name} {gain:+g}" for name, gain in gains.items())


def promotion_steps(layout: RunLayout) -> list[PlanStep]:
    """Approval (or not) and promotion, after the cleanups."""
    s = layout.settings
    asks = (
        f"a person is asked; no answer in {s.approval_timeout_minutes} min answers "
        f"{s.approval_timeout_answer}."
        if s.approval == "required"
        else "no approval asked (approval=none)."
    )
    registry = deployment.vertex_registry()
    promotes = f"the champion record {layout.model_root}/champions/{layout.deployment}.json" + (
        f"; Vertex AI model {registry}, alias champion." if registry else "."
    )
    return [
        {"id": Step.APPROVE, "description": described(Step.APPROVE, asks)},
        {"id": Step.PROMOTE, "description": described(Step.PROMOTE, promotes)},
    ]


def write_plan(layout: RunLayout, out_dir: Path) -> Path:
    """Write plan.json and every rendered file into out_dir; returns plan.json's path."""
    steps, files = build_plan(layout)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (out_dir / name).write_text(text)
    plan = {
        "run_id": layout.run_id,
        "run_slug": layout.slug,
        "capacity": capacity_summary(layout.settings),
        # per region and capacity mode, with each price's source and date (tpu_rl.prices)
        "cost_estimate": estimate_rows(estimate_run(layout.settings)),
        "settings": layout.settings.to_dict(),
        "steps": steps,
    }
    path = out_dir / "plan.json"
    path.write_text(json.dumps(plan, indent=2) + "\n")
    return path


def capacity_summary(s: RunSettings) -> dict[str, Any]:
    """The capacity mode and what it changes: the blueprint's edits (a cluster the run creates)
    and the node label the TPU pods select."""
    edits = capacity.describe_edits(s) if s.cluster_mode == "create" else []
    return {
        "mode": s.capacity,
        "blueprint_edits": edits,
        "node_selector": capacity.node_selector(s),
    }


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    try:
        settings = load_settings_file(argv[0])
    except SettingsError as err:
        print(f"{argv[0]}: {err}", file=sys.stderr)
        return 1
    try:
        identity = deployment.configured_deployment_id() or PLAN_DEPLOYMENT
    except deployment.DeploymentError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    layout = RunLayout(settings, argv[2] if len(argv) == 3 else PLAN_RUN_ID, identity)
    try:
        path = write_plan(layout, Path(argv[1]))
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    estimate, warnings = estimate_run(settings), settings_warnings(settings)
    print(verdict(settings, estimate, warnings))
    print(f"wrote {path} and {len(list(path.parent.iterdir())) - 1} rendered files")
    for warning in warnings:
        print(f"warning: {warning}")
    print_capacity(settings, layout, estimate)
    print("\n".join(format_estimate(estimate)))
    return 0


def print_capacity(settings: RunSettings, layout: RunLayout, estimate: Any) -> None:
    """The plan's capacity lines: the mode, the blueprint's edits, the node labels the TPU pods
    select and, for a ladder the plan creates, each rung's cluster and cost."""
    summary = capacity_summary(settings)
    print(f"TPU capacity: {summary['mode']}")
    for edit in summary["blueprint_edits"]:
        print(f"  blueprint: {edit}")
    for edit in blueprint.describe_workload_policy(settings):
        print(f"blueprint, TPU7x slice: {edit}")
    for label, value in summary["node_selector"].items():
        print(f"  TPU pods select node label {label}={value}")
    if settings.capacity_ladder and settings.cluster_mode == "create":
        for i, row in enumerate(_ladder(layout)[0], 1):
            print(f"  capacity ladder, rung {i} {row['rung']}: {row['creates']}")
            print(f"    cost on this rung: {_rung_cost(estimate, row['rung'])}")
            if row["cross_zone"]:
                print(f"    across zones: {row['cross_zone']}")


def verdict(s: RunSettings, estimate: Any, warnings: list[str]) -> str:
    """The plan's first line, above the price lists: the settings valid (and how many warnings
    follow) and what the chosen capacity costs."""
    chosen = mode_in(estimate, s.capacity, s.region)
    cost = cost_words(chosen) if chosen else "no price for it in the table"
    noted = f", {len(warnings)} warning(s) below" if warnings else ""
    return f"Verdict: the settings are valid{noted}; {s.capacity} in {s.region}: {cost}"


def _rung_cost(estimate: Any, rung: str) -> str:
    """What the run costs when the ladder stops on `rung` (mode@zone), from the estimate."""
    mode, _, zone = rung.partition("@")
    found = mode_in(estimate, mode, zone)
    if found is None:
        return "no estimate"
    return (
        f"{found.chip_hours:.2f} chip-hours in {found.region}, {cost_words(found)} "
        "(waits on earlier rungs not included)"
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
