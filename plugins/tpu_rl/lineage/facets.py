"""Our OpenLineage run facets as plain dicts: the TPUs and images a step ran on, the training
health watchdog's stop, the exported model's evaluation. Each is checked against its JSON Schema
(draft 2020-12, schemas/ beside this module, shipped in the wheel) before it is returned, so none
leaves malformed (docs/lineage.md, Facets).

They follow OpenLineage's convention for custom facets (spec/OpenLineage.md, "Custom Facet
Naming"): a class name `{prefix}{name}{entity}Facet` and a key `{prefix}_{name}`, the prefix
named after the project (`tpuRl`); `_producer`, a URI naming the producer and its version;
`_schemaURL`, the schema at that version with a `#/$defs/<Name>` fragment, as OpenLineage's own
facets point to theirs ("The versioned URL must be an immutable pointer ... a tag or a git sha").

A failure needs no facet of ours: the OpenLineage provider's adapter attaches the standard
`errorMessage` run facet to a task's FAIL event from its exception (ErrorMessageRunFacet:
message, programmingLanguage "python", stackTrace; providers/openlineage plugins/adapter.py,
fail_task), and the steps' exceptions already carry their one-line reason.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from tpu_rl.heldout.paired import PairedVerdict, Verdict
from tpu_rl.heldout.report import BASE, CHAMPION, HeldoutReport
from tpu_rl.training_log.evaluations import LINE_FIELDS, metric

PREFIX = "tpuRl"
VERSION = "0.1.0"  # pyproject.toml's [project] version (tests/unit/lineage/test_facets.py)
# The repository's public home. The checkout names no remote: this is the one place to change
# when it is published (the schemas' $id follow it: test_facets checks them).
GITHUB_REPOSITORY = "tpu-rl/tpu-rl-airflow"
PRODUCER = f"https://github.com/{GITHUB_REPOSITORY}/tree/v{VERSION}"
SCHEMA_ROOT = (
    f"https://raw.githubusercontent.com/{GITHUB_REPOSITORY}/v{VERSION}/"
    "plugins/tpu_rl/lineage/schemas/"
)
SCHEMAS = Path(__file__).with_name("schemas")

TPU = "TpuRlTpuRunFacet"
TRAINING_HEALTH = "TpuRlTrainingHealthRunFacet"
EVALUATION = "TpuRlEvaluationRunFacet"
# each facet's key in a run's facets
KEYS = {
    TPU: f"{PREFIX}_tpu",
    TRAINING_HEALTH: f"{PREFIX}_trainingHealth",
    EVALUATION: f"{PREFIX}_evaluation",
}
HELDOUT, TRAINER = "heldout", "trainer"  # an evaluation facet's source


def schema_url(facet: str) -> str:
    return f"{SCHEMA_ROOT}{facet}.json#/$defs/{facet}"


def schema(facet: str) -> dict[str, Any]:
    """The facet's schema file: its `$defs` hold the facet, its `properties` the facet's key."""
    loaded: dict[str, Any] = json.loads((SCHEMAS / f"{facet}.json").read_text())
    return loaded


@functools.cache
def _validator(facet: str) -> Any:
    return Draft202012Validator(schema(facet))


def facet_problems(facet: str, value: Mapping[str, Any]) -> list[str]:
    """What keeps `value` from being a valid `facet`, one line each; [] if nothing."""
    errors = list(_validator(facet).iter_errors({KEYS[facet]: value}))
    # a part that fails keeps none of the fields it checked, so unevaluatedProperties then names
    # them all: said only when nothing else is wrong
    if any(error.validator != "unevaluatedProperties" for error in errors):
        errors = [error for error in errors if error.validator != "unevaluatedProperties"]
    return [
        f"{'/'.join(map(str, list(error.absolute_path)[1:])) or 'the facet'}: {error.message}"
        for error in errors
    ]


def without_nulls(value: Any) -> Any:
    """`value` as the OpenLineage client sends it: no null in an object, no null or empty object
    in an array, at any depth (openlineage-python 1.54.0, client/serde.py
    Serde.remove_nulls_and_enums, which every transport's event goes through). An unknown field
    is sent as absent: the schemas require only what is never null."""
    if isinstance(value, Mapping):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        kept = (without_nulls(v) for v in value if v is not None)
        return [v for v in kept if v != {}]
    return value


def _facet(facet: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """`fields` with `_producer` and `_schemaURL`, as the client sends them (without_nulls);
    ValueError naming what the schema refuses."""
    value: dict[str, Any] = without_nulls(
        {"_producer": PRODUCER, "_schemaURL": schema_url(facet), **fields}
    )
    if problems := facet_problems(facet, value):
        raise ValueError(f"{facet}: {'; '.join(problems)}")
    return value


def tpu_run_facet(
    *,
    tpu_type: str,
    topology: str,
    slices: int,
    capacity: str,
    zone: str,
    images: Mapping[str, str],
    digests: Mapping[str, str] | None = None,
    chip_hours: float | None = None,
    cost_usd: float | None = None,
) -> dict[str, Any]:
    """The TPUs, images and cost of a step. `images`: each role's reference as the settings name
    it, pinned by its digest when the reference is (`...@sha256:<hex>`) or `digests` has the
    role's (a pod's imageID); chip-hours and dollars as tpu_rl.report.billing counts them (None:
    not counted, or no spend of the run's own)."""
    known = digests or {}
    return _facet(
        TPU,
        {
            # a list, the role a value: Airflow's secrets masker hides whatever is under a key
            # holding "proxy" (secrets_masker.py DEFAULT_SENSITIVE_FIELDS), as the provider's
            # redaction of each event would the proxy server's image
            "images": [
                {
                    "role": role,
                    "reference": reference,
                    "digest": _digest(reference) or known.get(role),
                }
                for role, reference in images.items()
            ],
            "tpuType": tpu_type,
            "topology": topology,
            "slices": slices,
            "capacityMode": capacity,
            "zone": zone,
            "chipHours": chip_hours,
            "costUsd": cost_usd,
        },
    )


def _digest(reference: str) -> str | None:
    """The digest a reference pins (`repo@sha256:...`), if it pins one."""
    _, at, digest = reference.partition("@")
    return digest if at else None


def training_health_facet(anomaly: Mapping[str, Any]) -> dict[str, Any]:
    """The watchdog's stop, from the anomaly the reward wait records (its XCom `anomaly`: the
    watchdog's rule, step, anomaly_step, why and evidence, with healthy_step,
    healthy_checkpoint and action)."""
    return _facet(
        TRAINING_HEALTH,
        {
            "rule": anomaly.get("rule"),
            "step": anomaly.get("step"),
            "anomalyStep": anomaly.get("anomaly_step"),
            "why": anomaly.get("why"),
            "evidence": list(anomaly.get("evidence") or []),
            "action": anomaly.get("action"),
            "healthyStep": anomaly.get("healthy_step"),
            "healthyCheckpoint": anomaly.get("healthy_checkpoint"),
        },
    )


def heldout_evaluation_facet(report: Mapping[str, Any]) -> dict[str, Any]:
    """The held-out evaluation, from its report as evaluate_heldout returns it (HeldoutReport.
    as_dict): the chosen step, each scored step's score, each benchmark's scores and verdicts."""
    found = HeldoutReport.from_dict(report)
    return _facet(
        EVALUATION,
        {
            "source": HELDOUT,
            "step": found.step,
            "significance": found.alpha,
            "stepScores": {str(step): score for step, score in found.step_scores.items()},
            "verdicts": {
                "vsBase": _verdict(found.verdict(BASE)),
                "vsChampion": _verdict(found.verdict(CHAMPION)),
            },
            "benchmarks": [
                {
                    "task": row.task,
                    "guard": row.guard,
                    "items": row.items,
                    "score": row.candidate,
                    "base": row.base,
                    "champion": row.champion,
                    "vsBase": _verdict(row.vs_base),
                    "vsChampion": _verdict(row.vs_champion),
                }
                for row in found.rows
            ],
        },
    )


def _verdict(found: Verdict | PairedVerdict | None) -> str | None:
    """A verdict as its plain string (a paired test's, or a report's over benchmarks)."""
    if isinstance(found, PairedVerdict):
        found = found.verdict
    return None if found is None else str(found)


def trainer_evaluation_facet(
    step: int | None,
    evaluation: Mapping[str, Any] | None,
    base: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The trainer's own evaluation of the exported step (export's `metrics`: the step's
    Intermediate Eval or Post line) and of the model training started from (`base`: the Pre
    line), their figures without the line's own fields (kind, attempt, step, time)."""
    return _facet(
        EVALUATION,
        {
            "source": TRAINER,
            "step": step,
            "metrics": _figures(evaluation or {}),
            "baseMetrics": None if base is None else _figures(base),
        },
    )


def _figures(line: Mapping[str, Any]) -> dict[str, float | None]:
    """An evaluation line's figures; None for one that is not a finite number."""
    return {name: metric(line, name) for name in line if name not in LINE_FIELDS}
