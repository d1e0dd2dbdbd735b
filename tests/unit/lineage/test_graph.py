"""The run's lineage: what each step reads and writes, the champion's provenance chain through it
(complete for a sandbox-like run, its first missing link named when broken), and the limits an
event keeps for Dataplex (links, size, FQN length, run events only)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tests.conftest import REPO
from tests.support.lineage import CHAIN
from tpu_rl.layout import RunLayout
from tpu_rl.lineage import names
from tpu_rl.lineage.facets import (
    EVALUATION,
    KEYS,
    PRODUCER,
    TPU,
    heldout_evaluation_facet,
    tpu_run_facet,
)
from tpu_rl.lineage.graph import (
    MAX_EVENT_BYTES,
    MAX_LINKS,
    ChainLink,
    RunDatasets,
    StepLineage,
    check_event,
    provenance_chain,
    run_datasets,
    run_lineage,
    written_steps,
)
from tpu_rl.names import DAG_ID, Step
from tpu_rl.settings.run_settings import load_settings

VERSION = "projects/123456/locations/us-east5/models/tpu-rl-gemma4-26b@2"


@pytest.fixture
def heldout_layout(tutorial_conf) -> RunLayout:
    """The sandbox's held-out run: the tutorial with include/examples/heldout.json's settings."""
    conf = json.loads((REPO / "include" / "examples" / "heldout.json").read_text())
    return RunLayout(load_settings({**tutorial_conf, **conf}), "manual__2", "test-deployment")


@pytest.fixture
def sandbox_run(heldout_layout, layout) -> RunDatasets:
    """A sandbox-like run: steps 25 and 50 committed (checkpoint_period 25, 50 batches), both
    scored on the held-out benchmarks against the base model and the champion (an earlier
    run's step 50), step 50 exported and registered as version 2."""
    return run_datasets(
        heldout_layout,
        committed=[25, 50],
        exported=50,
        scored=[25, 50],
        champion_checkpoint=f"{layout.checkpoints_dir}50/",
        registry_version=VERSION,
    )


def test_each_step_reads_and_writes_the_runs_datasets(heldout_layout, sandbox_run):
    run = heldout_layout
    lineage = run_lineage(sandbox_run)
    step_25, step_50 = names.checkpoint_step(run, 25), names.checkpoint_step(run, 50)
    converted, heldout = names.converted_checkpoint(run), names.heldout_results(run)
    assert lineage == {
        Step.CONVERT: StepLineage((names.base_model(run),), (converted,)),
        Step.WAIT_FOR_REWARDS: StepLineage(
            (converted, names.hf_dataset("openai/gsm8k")), (step_25, step_50)
        ),
        Step.EVALUATE_HELDOUT: StepLineage(
            (step_25, step_50, converted, sandbox_run.champion_checkpoint), (heldout,)
        ),
        Step.EXPORT: StepLineage((step_50, heldout), (names.export_folder(run),)),
        Step.PROMOTE: StepLineage(
            (names.export_folder(run),),
            (names.champion_record(run), names.vertex_model_version(VERSION)),
        ),
    }
    # the champion's checkpoint is the step its own run's training wrote
    assert sandbox_run.champion_checkpoint.name.endswith("/checkpoints/actor/50")
    assert sandbox_run.champion_checkpoint != step_50  # another run's


def test_the_chain_of_a_sandbox_like_run_is_complete(heldout_layout, sandbox_run):
    chain = provenance_chain(run_lineage(sandbox_run), sandbox_run)
    run = heldout_layout
    assert chain == [
        ChainLink("base model", Step.CONVERT, names.base_model(run)),
        ChainLink("dataset", Step.WAIT_FOR_REWARDS, names.hf_dataset("openai/gsm8k")),
        ChainLink("run", Step.WAIT_FOR_REWARDS, None),
        ChainLink("step", Step.WAIT_FOR_REWARDS, names.checkpoint_step(run, 50)),
        ChainLink("evaluation", Step.EVALUATE_HELDOUT, names.heldout_results(run)),
        ChainLink("export", Step.EXPORT, names.export_folder(run)),
        ChainLink("approval", Step.PROMOTE, names.champion_record(run)),
        ChainLink("registry version", Step.PROMOTE, names.vertex_model_version(VERSION)),
    ]


def test_without_heldout_the_trainers_evaluation_is_the_link(layout):
    """The default run: no held-out evaluation (its evaluation is the training run's facet),
    and a deployment that registers no Vertex version: the chain ends at the approval."""
    datasets = run_datasets(layout, committed=[25, 50], exported=50)
    lineage = run_lineage(datasets)
    assert Step.EVALUATE_HELDOUT not in lineage
    assert lineage[Step.EXPORT].inputs == (names.checkpoint_step(layout, 50),)
    chain = provenance_chain(lineage, datasets)
    assert [link.label for link in chain] == CHAIN[:-1]
    assert chain[4] == ChainLink("evaluation", Step.WAIT_FOR_REWARDS, None)
    with_version = replace(datasets, version=names.vertex_model_version(VERSION))
    assert [
        link.label for link in provenance_chain(run_lineage(with_version), with_version)
    ] == CHAIN


def without(lineage: dict, step: Step, side: str, dataset) -> dict:
    """The lineage with `dataset` gone from `step`'s inputs or outputs."""
    found = lineage[step]
    kept = tuple(d for d in getattr(found, side) if d != dataset)
    assert kept != getattr(found, side)
    return {**lineage, step: replace(found, **{side: kept})}


@pytest.mark.parametrize(
    ("step", "side", "dataset", "label"),
    [
        (Step.CONVERT, "inputs", "base_model", "base model"),
        (Step.CONVERT, "outputs", "converted", "base model"),
        (Step.WAIT_FOR_REWARDS, "inputs", "training_data", "dataset"),
        (Step.WAIT_FOR_REWARDS, "inputs", "converted", "run"),
        (Step.WAIT_FOR_REWARDS, "outputs", "exported", "step"),
        (Step.EVALUATE_HELDOUT, "inputs", "exported", "evaluation"),
        (Step.EVALUATE_HELDOUT, "outputs", "heldout", "evaluation"),
        (Step.EXPORT, "inputs", "exported", "export"),
        (Step.EXPORT, "inputs", "heldout", "export"),
        (Step.EXPORT, "outputs", "export", "export"),
        (Step.PROMOTE, "inputs", "export", "approval"),
        (Step.PROMOTE, "outputs", "champion", "approval"),
        (Step.PROMOTE, "outputs", "version", "registry version"),
    ],
)
def test_a_missing_link_is_named(sandbox_run, step, side, dataset, label):
    missing = getattr(sandbox_run, dataset)
    lineage = without(run_lineage(sandbox_run), step, side, missing)
    verb = "read" if side == "inputs" else "write"
    with pytest.raises(ValueError, match=f"broken at '{label}': {step} does not {verb}") as err:
        provenance_chain(lineage, sandbox_run)
    assert missing.fqn in str(err.value)


@pytest.mark.parametrize("step", [Step.CONVERT, Step.EVALUATE_HELDOUT, Step.EXPORT, Step.PROMOTE])
def test_a_step_without_lineage_is_named(sandbox_run, step):
    lineage = {k: v for k, v in run_lineage(sandbox_run).items() if k != step}
    with pytest.raises(ValueError, match=f"no lineage of {step}"):
        provenance_chain(lineage, sandbox_run)


def test_an_exported_step_training_never_committed_breaks_the_chain(layout):
    datasets = run_datasets(layout, committed=[25, 50], exported=75)
    with pytest.raises(ValueError, match="broken at 'step': wait_for_rewards does not write"):
        provenance_chain(run_lineage(datasets), datasets)


def test_training_names_the_steps_read_later_then_the_newest_within_the_links(layout):
    committed = tuple(names.checkpoint_step(layout, step) for step in range(1, 301))
    needed = {committed[0], committed[9]}  # scored long ago: kept
    written = written_steps(committed, needed, 2)
    assert len(written) == MAX_LINKS // 2
    assert written[:2] == (committed[0], committed[9])
    assert written[2:] == committed[-48:]
    with pytest.raises(ValueError, match="more than the 50"):
        written_steps(committed, set(committed[:51]), 2)
    assert written_steps(committed[:3], set(), 2) == committed[:3]  # few: all of them


def test_every_step_of_a_long_run_keeps_within_dataplex_s_links(heldout_layout):
    datasets = run_datasets(
        heldout_layout,
        committed=range(10, 3010, 10),
        exported=1000,
        scored=[990, 1000],
        registry_version=VERSION,
    )
    lineage = run_lineage(datasets)
    assert all(found.links <= MAX_LINKS for found in lineage.values())
    assert len(lineage[Step.WAIT_FOR_REWARDS].outputs) == MAX_LINKS // 2
    assert provenance_chain(lineage, datasets)[3].dataset == names.checkpoint_step(
        heldout_layout, 1000
    )


def event(step: Step, found: StepLineage, facets: dict | None = None) -> dict:
    """A COMPLETE run event of the step, as the OpenLineage provider sends one."""
    return {
        "eventType": "COMPLETE",
        "eventTime": "2026-12-07T10:00:00Z",
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": "01939d3c-4b52-7a3e-8f3e-2f6a1c9b0d11", "facets": facets or {}},
        "job": {"namespace": "default", "name": f"{DAG_ID}.{step}"},
        "inputs": [dataset.as_dict() for dataset in found.inputs],
        "outputs": [dataset.as_dict() for dataset in found.outputs],
    }


def test_each_event_of_a_sandbox_like_run_is_within_dataplex_s_limits(sandbox_run, heldout_layout):
    s = heldout_layout.settings
    run_facets = {
        KEYS[TPU]: tpu_run_facet(
            tpu_type=s.tpu_type,
            topology=s.topology,
            slices=s.cluster_nodepool_count,
            capacity=s.capacity,
            zone=s.zone,
            images={"maxtext": s.cloud_image_name},
        )
    }
    for step, found in run_lineage(sandbox_run).items():
        size = check_event(event(step, found, run_facets))
        assert size.links == found.links <= MAX_LINKS
        assert 0 < size.size < MAX_EVENT_BYTES


def test_an_oversized_event_is_refused(sandbox_run):
    found = run_lineage(sandbox_run)[Step.EXPORT]
    facet = {"_producer": PRODUCER, "_schemaURL": PRODUCER, "note": "x" * MAX_EVENT_BYTES}
    with pytest.raises(ValueError, match=r"bytes: Dataplex takes 5,000,000 at most"):
        check_event(event(Step.EXPORT, found, {"big": facet}))


def test_an_event_over_the_links_is_refused(layout):
    steps = tuple(names.checkpoint_step(layout, step) for step in range(51))
    found = StepLineage((names.converted_checkpoint(layout), names.training_data(layout)), steps)
    with pytest.raises(ValueError, match=r"2 inputs x 51 outputs = 102 links"):
        check_event(event(Step.WAIT_FOR_REWARDS, found))
    assert (
        check_event(event(Step.WAIT_FOR_REWARDS, replace(found, outputs=steps[:50]))).links == 100
    )


def test_a_long_name_a_non_finite_value_and_a_dataset_event_are_refused(layout):
    long = names.DatasetId("gs://b", "x" * names.FQN_LIMIT)
    found = StepLineage((long,), (names.export_folder(layout),))
    with pytest.raises(ValueError, match="FQN of 4,007 characters"):
        check_event(event(Step.EXPORT, found))
    ok = StepLineage((names.checkpoint_step(layout, 50),), (names.export_folder(layout),))
    nan = {"_producer": PRODUCER, "_schemaURL": PRODUCER, "loss": float("nan")}
    with pytest.raises(ValueError, match="JSON compliant"):
        check_event(event(Step.EXPORT, ok, {"loss": nan}))
    dataset_event = {k: v for k, v in event(Step.EXPORT, ok).items() if k not in ("run", "job")}
    with pytest.raises(ValueError, match="run events only"):
        check_event(dataset_event)


def test_the_evaluation_facet_rides_the_heldout_event(sandbox_run):
    """A held-out evaluation's facet on evaluate_heldout's event: well within the limits."""
    report = {
        "step": 50,
        "step_scores": {"25": 0.75, "50": 0.85},
        "rows": [
            {
                "task": "gsm8k",
                "guard": False,
                "items": 1319,
                "candidate": 0.85,
                "base": 0.6,
                "champion": 0.84,
                "vs_base": [700, 421, 91, 107],
                "vs_champion": [1000, 121, 108, 90],
            },
        ],
        "alpha": 0.05,
    }
    facets = {KEYS[EVALUATION]: heldout_evaluation_facet(report)}
    found = run_lineage(sandbox_run)[Step.EVALUATE_HELDOUT]
    assert check_event(event(Step.EVALUATE_HELDOUT, found, facets)).links == 4
