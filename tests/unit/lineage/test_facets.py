"""Our run facets: each schema is a draft 2020-12 schema at the URL the facets name, each
builder's output validates against its schema file, an invalid facet does not (and the builder
refuses to make one), and the schemas ship in the wheel."""

from __future__ import annotations

import copy
import fnmatch
import json
import tomllib

import jsonschema
import pytest

from tests.conftest import REPO
from tpu_rl.heldout.report import BASE, CHAMPION, heldout_report
from tpu_rl.lineage import facets
from tpu_rl.lineage.facets import (
    EVALUATION,
    KEYS,
    TPU,
    TRAINING_HEALTH,
    facet_problems,
    heldout_evaluation_facet,
    schema,
    schema_url,
    tpu_run_facet,
    trainer_evaluation_facet,
    training_health_facet,
)
from tpu_rl.settings.choices import Capacity, HealthAction

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
DIGEST = "sha256:" + "ab" * 32


def valid(facet: str, value: dict) -> bool:
    """`value` is a valid `facet` by the schema file itself (not the builder's own check)."""
    try:
        jsonschema.validate({KEYS[facet]: value}, schema(facet), jsonschema.Draft202012Validator)
    except jsonschema.ValidationError:
        return False
    return True


def tpu_facet(layout) -> dict:
    s = layout.settings
    return tpu_run_facet(
        tpu_type=s.tpu_type,
        topology=s.topology,
        slices=s.cluster_nodepool_count,
        capacity=s.capacity,
        zone=s.zone,
        images={
            "maxtext": s.cloud_image_name,  # a tag: its digest from the pod's imageID
            "pathways_server": s.pathways_server_image,  # pinned by digest (MaxText 0.2.4's)
            "pathways_proxy_server": s.pathways_proxy_server_image,
            "sidecar": "example.com/sidecar:latest",  # a tag no pod reported
        },
        digests={"maxtext": DIGEST},
        chip_hours=41.5,
        cost_usd=None,  # a reservation: no spend of the run's own
    )


RECORDED_ANOMALY = {  # the reward wait's XCom `anomaly` (operators/rewards.py RecordedAnomaly)
    "rule": "nonfinite_loss",
    "step": 31,
    "anomaly_step": 30,
    "why": "loss nan",
    "evidence": ["step 31 | loss: nan"],
    "healthy_step": 25,
    "healthy_checkpoint": "gs://b/gemma4-26b/trained/rl-1/checkpoints/actor/25/",
    "action": "export_healthy",
}


def items(right: int, total: int = 200) -> dict[str, bool]:
    return {f"{i}:h{i}": i < right for i in range(total)}


def heldout_facet() -> dict:
    steps = {
        25: {"gsm8k": items(150), "arc_easy": items(150)},
        50: {"gsm8k": items(170), "arc_easy": items(100)},
    }
    references = {
        BASE: {"gsm8k": items(120), "arc_easy": items(150)},
        CHAMPION: {"gsm8k": items(168), "arc_easy": items(150)},
    }
    report = heldout_report(steps, references, ["gsm8k"], ["arc_easy"], 0.05)
    return heldout_evaluation_facet(report.as_dict())  # as evaluate_heldout's XCom holds it


def trainer_facet() -> dict:
    post = {"step": 50, "corr": 41, "total": 100, "accuracy": 0.41, "mean_reward": float("nan")}
    pre = {"kind": "pre", "attempt": 1, "step": 0, "accuracy": 0.3, "mean_reward": 0.9}
    return trainer_evaluation_facet(50, post, pre)


@pytest.mark.parametrize("facet", [TPU, TRAINING_HEALTH, EVALUATION])
def test_each_schema_is_draft_2020_12_at_the_url_its_facets_name(facet):
    found = schema(facet)
    jsonschema.Draft202012Validator.check_schema(found)
    assert found["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert f"{found['$id']}#/$defs/{facet}" == schema_url(facet)
    assert found["properties"] == {KEYS[facet]: {"$ref": f"#/$defs/{facet}"}}
    # OpenLineage's custom facet naming: {prefix}{name}{entity}Facet, key {prefix}_{name}
    assert facet.startswith("TpuRl") and facet.endswith("RunFacet")
    assert KEYS[facet].startswith("tpuRl_")


def test_the_producer_and_schemas_name_the_projects_version():
    version = PYPROJECT["project"]["version"]
    assert version == facets.VERSION
    assert facets.PRODUCER.endswith(f"/tree/v{version}")
    assert f"/v{version}/plugins/tpu_rl/lineage/schemas/" in schema_url(TPU)


def test_the_tpu_facet_names_images_by_digest_when_known(layout):
    facet = tpu_facet(layout)
    assert valid(TPU, facet)
    assert facet["_producer"] == facets.PRODUCER and facet["_schemaURL"] == schema_url(TPU)
    images = {image.pop("role"): image for image in facet["images"]}
    assert images["maxtext"] == {"reference": layout.settings.cloud_image_name, "digest": DIGEST}
    server = layout.settings.pathways_server_image
    assert images["pathways_server"] == {"reference": server, "digest": server.split("@")[1]}
    # unknown, so absent: the OpenLineage client drops nulls (without_nulls)
    assert images["sidecar"] == {"reference": "example.com/sidecar:latest"}


def test_no_value_of_a_facet_is_under_a_key_airflow_s_masker_hides(layout):
    """The provider redacts each event with Airflow's secrets masker, which hides every value
    under a key holding a sensitive word ("proxy": the Pathways proxy server's image was sent
    as '***' when the facet keyed images by role)."""
    from airflow.sdk._shared.secrets_masker.secrets_masker import should_hide_value_for_key

    def keys(value) -> list[str]:
        if isinstance(value, dict):
            return [k for key, v in value.items() for k in (key, *keys(v))]
        return [k for v in value for k in keys(v)] if isinstance(value, list) else []

    facet = tpu_facet(layout)
    assert [k for k in keys(facet) if should_hide_value_for_key(k)] == []
    assert (facet["tpuType"], facet["topology"], facet["slices"]) == ("v6e-32", "4x8", 1)
    assert (facet["capacityMode"], facet["chipHours"]) == ("reservation", 41.5)
    assert "costUsd" not in facet  # a reservation is no spend of the run's own


def test_the_capacity_modes_and_health_actions_are_the_settings_choices():
    defs = schema(TPU)["$defs"]["TpuRlTpuRunFacet"]["allOf"][1]["properties"]
    assert defs["capacityMode"]["enum"] == [mode.value for mode in Capacity]
    health = schema(TRAINING_HEALTH)["$defs"]["TpuRlTrainingHealthRunFacet"]["allOf"][1]
    assert health["properties"]["action"]["enum"] == [*(a.value for a in HealthAction), None]


def test_the_training_health_facet_carries_the_rule_the_step_and_the_step_kept():
    facet = training_health_facet(RECORDED_ANOMALY)
    assert valid(TRAINING_HEALTH, facet)
    assert (facet["rule"], facet["step"], facet["anomalyStep"]) == ("nonfinite_loss", 31, 30)
    assert (facet["healthyStep"], facet["action"]) == (25, "export_healthy")
    assert facet["healthyCheckpoint"].endswith("/actor/25/")
    stopped = training_health_facet(
        {**RECORDED_ANOMALY, "healthy_step": None, "healthy_checkpoint": None}
    )
    assert valid(TRAINING_HEALTH, stopped)


def test_the_heldout_facet_carries_each_benchmark_its_scores_and_verdicts():
    facet = heldout_facet()
    assert valid(EVALUATION, facet)
    assert (facet["source"], facet["step"], facet["significance"]) == ("heldout", 50, 0.05)
    assert facet["stepScores"] == {"25": 0.75, "50": 0.85}
    assert facet["verdicts"] == {"vsBase": "better", "vsChampion": "not_distinguishable"}
    gsm8k, arc = facet["benchmarks"]
    assert (gsm8k["task"], gsm8k["guard"], gsm8k["items"], gsm8k["score"]) == (
        "gsm8k",
        False,
        200,
        0.85,
    )
    assert (gsm8k["base"], gsm8k["champion"], gsm8k["vsBase"]) == (0.6, 0.84, "better")
    assert (arc["guard"], arc["vsBase"]) == (True, "worse")  # a guard that fell
    json.dumps(facet, allow_nan=False)  # plain JSON: the verdicts are strings


def test_the_trainer_facet_carries_the_steps_figures_and_the_base_models():
    facet = trainer_facet()
    assert valid(EVALUATION, facet)
    # mean_reward was NaN: not a figure, so absent (the client drops nulls)
    assert facet["metrics"] == {"corr": 41.0, "total": 100.0, "accuracy": 0.41}
    # the Pre line's kind, attempt and step say where it comes from: not figures
    assert facet["baseMetrics"] == {"accuracy": 0.3, "mean_reward": 0.9}
    assert valid(EVALUATION, trainer_evaluation_facet(None, None))


DELETE = object()


def broken(path: list, value: object):
    """A change at `path` (a missing key when `value` is DELETE)."""

    def change(facet: dict) -> dict:
        facet = copy.deepcopy(facet)
        *parents, last = path
        target = facet
        for key in parents:
            target = target[key]
        if value is DELETE:
            del target[last]
        else:
            target[last] = value
        return facet

    return change


INVALID = [
    (TPU, broken(["slices"], 0), "slices"),
    (TPU, broken(["capacityMode"], "cheap"), "capacityMode"),
    (TPU, broken(["images", 0, "digest"], "sha256:abc"), "digest"),
    (TPU, broken(["chipHours"], -1), "chipHours"),
    (TPU, broken(["tpuType"], DELETE), "tpuType"),
    (TPU, broken(["_schemaURL"], DELETE), "_schemaURL"),
    (TPU, broken(["gpuType"], "a100"), "gpuType"),
    (TRAINING_HEALTH, broken(["anomalyStep"], None), "anomalyStep"),
    (TRAINING_HEALTH, broken(["action"], "ignore"), "action"),
    (TRAINING_HEALTH, broken(["healthyCheckpoint"], "/tmp/25"), "healthyCheckpoint"),
    (EVALUATION, broken(["source"], "vibes"), "source"),
    (EVALUATION, broken(["benchmarks", 0, "vsBase"], "great"), "great"),
    (EVALUATION, broken(["benchmarks", 0, "score"], 1.5), "1.5"),
    (EVALUATION, broken(["stepScores", "best"], 0.5), "best"),
    (EVALUATION, broken(["metrics"], {}), "metrics"),  # a trainer's field on a held-out facet
]


@pytest.mark.parametrize(("facet", "change", "named"), INVALID)
def test_an_invalid_facet_does_not_validate(layout, facet, change, named):
    made = {
        TPU: lambda: tpu_facet(layout),
        TRAINING_HEALTH: lambda: training_health_facet(RECORDED_ANOMALY),
        EVALUATION: heldout_facet,
    }
    wrong = change(made[facet]())
    assert not valid(facet, wrong)
    problems = facet_problems(facet, wrong)
    assert problems and named in " ".join(problems)


def test_a_builder_refuses_to_make_an_invalid_facet():
    with pytest.raises(ValueError, match=r"TpuRlTrainingHealthRunFacet: the facet: 'step' is a"):
        training_health_facet({"rule": "stall"})  # a record without its step
    with pytest.raises(ValueError, match="capacityMode"):
        tpu_run_facet(
            tpu_type="v6e-32", topology="4x8", slices=1, capacity="on_demand", zone="z", images={}
        )


def test_the_schemas_are_package_data_of_the_wheel():
    """pyproject's package-data names every schema file (tests/packaging/test_wheel.py builds
    the wheel and finds every file of the package in it)."""
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]["tpu_rl.lineage"]
    files = sorted(path.name for path in facets.SCHEMAS.iterdir())
    assert files == sorted(f"{facet}.json" for facet in KEYS)
    assert all(any(fnmatch.fnmatch(f"schemas/{name}", p) for p in patterns) for name in files)
