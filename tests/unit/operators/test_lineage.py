"""Each step's OpenLineage part, as the provider's listener takes it (get_openlineage_facets_on_
complete / on_failure): the datasets it read and wrote from what it found while it ran, our run
facets, nothing written by a failed try, nothing before the run's settings are known, and an
event the provider's own adapter makes of it that the client's spec model and our schemas take."""

from __future__ import annotations

import pytest
from airflow.providers.openlineage.plugins.adapter import OpenLineageAdapter
from openlineage.client.serde import Serde

from tests.support.heldout import GSM8K, heldout_xcom
from tests.support.openlineage_events import event_problems, step_lineage
from tpu_rl import storage
from tpu_rl.checkpoints.checkpoint_choice import HELDOUT, LAST, Choice
from tpu_rl.lineage import names
from tpu_rl.lineage.facets import EVALUATION, KEYS, TPU, TRAINING_HEALTH
from tpu_rl.lineage.graph import StepLineage
from tpu_rl.operators.checks import RunOutcomeOperator
from tpu_rl.operators.heldout import EvaluateHeldoutOperator
from tpu_rl.operators.job_steps import ConvertCheckpointOperator, ExportCheckpointOperator
from tpu_rl.operators.jobs import RunJobStep
from tpu_rl.operators.promotion import PromoteExportOperator
from tpu_rl.operators.rewards import WaitForRewardsSensor
from tpu_rl.promotion.champion import ChampionRecord, ChampionStore

VERSION = "projects/123456/locations/us-east5/models/gemma-rl@3"
MAXTEXT_DIGEST = "sha256:" + "c" * 64


@pytest.fixture(autouse=True)
def pods_ran(monkeypatch, layout):
    """The Job steps' pods ran the MaxText image at MAXTEXT_DIGEST (their imageID)."""
    ran = {layout.settings.cloud_image_name: MAXTEXT_DIGEST}
    monkeypatch.setattr(RunJobStep, "ran_image_digests", lambda self, layout: ran)


PRE = {"kind": "pre", "attempt": 1, "step": 0, "accuracy": 0.3, "mean_reward": 0.08}


def ran(operator, layout):
    """`operator` as the listener finds it after a try on the run of `layout`."""
    operator._layout = (layout.run_id, layout)
    return operator


def ids(found) -> StepLineage:
    to = (
        [(d.namespace, d.name) for d in found.inputs],
        [(d.namespace, d.name) for d in found.outputs],
    )
    return StepLineage(*(tuple(names.DatasetId(*pair) for pair in side) for side in to))


def test_convert_read_the_model_and_wrote_the_converted_checkpoint(layout):
    convert = ran(ConvertCheckpointOperator(), layout)
    done = convert.get_openlineage_facets_on_complete(None)
    base, converted = names.base_model(layout), names.converted_checkpoint(layout)
    assert ids(done) == StepLineage((base,), (converted,))
    # a failed try names what it read, never what it was writing
    assert ids(convert.get_openlineage_facets_on_failure(None)) == StepLineage((base,), ())
    # the TPUs it ran on, the MaxText image by the digest its pods reported
    images = {i["role"]: i["digest"] for i in done.run_facets[KEYS[TPU]]["images"]}
    server = layout.settings.pathways_server_image.split("@")[1]
    assert images == {
        "maxtext": MAXTEXT_DIGEST,
        "pathways_server": server,  # pinned in the reference
        "pathways_proxy_server": layout.settings.pathways_proxy_server_image.split("@")[1],
    }


def test_a_skipped_conversion_names_nothing_the_earlier_run_made_it(layout):
    convert = ran(ConvertCheckpointOperator(), layout)
    convert.found_converted = True
    done = convert.get_openlineage_facets_on_complete(None)
    assert ids(done) == StepLineage((), ()) and done.run_facets == {}


def test_a_step_that_failed_before_knowing_its_run_sends_no_part_of_ours():
    assert ConvertCheckpointOperator().get_openlineage_facets_on_failure(None) is None


def test_training_wrote_the_committed_steps_and_the_watchdog_s_stop(layout, monkeypatch):
    monkeypatch.setattr(storage, "committed_steps", lambda uri, conn: [10, 20])
    wait = ran(WaitForRewardsSensor(), layout)
    wait.recorded_anomaly = {
        "rule": "nonfinite_loss",
        "step": 25,
        "anomaly_step": 25,
        "why": "loss is nan",
        "evidence": ["step 25 loss=nan"],
        "healthy_step": 20,
        "healthy_checkpoint": f"{layout.checkpoints_dir}20/",
        "action": "export_healthy",
    }
    done = wait.get_openlineage_facets_on_complete(None)
    inputs = (names.converted_checkpoint(layout), names.hf_dataset("openai/gsm8k"))
    steps = tuple(names.checkpoint_step(layout, s) for s in (10, 20))
    assert ids(done) == StepLineage(inputs, steps)
    health = done.run_facets[KEYS[TRAINING_HEALTH]]
    assert (health["rule"], health["anomalyStep"], health["healthyStep"]) == (
        "nonfinite_loss",
        25,
        20,
    )


def test_the_heldout_step_read_the_scored_steps_base_and_champion(layout, monkeypatch):
    record = ChampionRecord(
        run_id="manual__0",
        export_uri=f"{layout.model_root}/hf-trained/rl-old/",
        checkpoint_uri=f"{layout.model_root}/trained/rl-old/checkpoints/actor/50/",
        step=50,
        metrics={},
        promoted_at="2026-12-01T00:00:00+00:00",
    )
    monkeypatch.setattr(ChampionStore, "read", lambda self: record)
    heldout = ran(EvaluateHeldoutOperator(), layout)
    assert heldout.get_openlineage_facets_on_complete(None).inputs == []  # no report yet
    heldout.report = heldout_xcom(GSM8K, step=100)  # steps 80 and 100 scored
    done = heldout.get_openlineage_facets_on_complete(None)
    scored = tuple(names.checkpoint_step(layout, s) for s in (80, 100))
    champion = names.gcs_dataset(record.checkpoint_uri)
    inputs = (*scored, names.converted_checkpoint(layout), champion)
    assert ids(done) == StepLineage(inputs, (names.heldout_results(layout),))
    evaluation = done.run_facets[KEYS[EVALUATION]]
    assert (evaluation["source"], evaluation["step"]) == ("heldout", 100)


@pytest.mark.parametrize("choice", [LAST, HELDOUT])
def test_export_read_the_step_it_exported(layout, choice):
    export = ran(ExportCheckpointOperator(rewards={"pre": PRE}), layout)
    export.exported = Choice(50, choice, {"accuracy": 0.41}, "why", 50)
    done = export.get_openlineage_facets_on_complete(None)
    heldout = (names.heldout_results(layout),) if choice == HELDOUT else ()
    step = names.checkpoint_step(layout, 50)
    assert ids(done) == StepLineage((step, *heldout), (names.export_folder(layout),))
    # the trainer's evaluation rides export's event unless the held-out evaluation chose
    assert (KEYS[EVALUATION] in done.run_facets) == (choice == LAST)
    assert KEYS[TPU] in done.run_facets


@pytest.mark.parametrize("version", [VERSION, None])
def test_promote_wrote_the_champion_record_and_the_registry_version(layout, version):
    promote = ran(PromoteExportOperator(), layout)
    promote.promoted = {"registry_version": version}
    done = promote.get_openlineage_facets_on_complete(None)
    wrote = (
        names.champion_record(layout),
        *([names.vertex_model_version(version)] if version else []),
    )
    assert ids(done) == StepLineage((names.export_folder(layout),), wrote)


def test_the_run_s_verdict_carries_its_tpus_and_cost(layout):
    outcome = ran(RunOutcomeOperator(final_task="verify"), layout)
    assert outcome.get_openlineage_facets_on_complete(None).run_facets == {}  # not counted
    outcome.run_cost = {"chip_hours": 12.5, "estimated_cost_usd": None}
    tpu = outcome.get_openlineage_facets_on_complete(None).run_facets[KEYS[TPU]]
    roles = [image["role"] for image in tpu["images"]]
    assert roles == ["maxtext", "pathways_server", "pathways_proxy_server"]
    assert (tpu["tpuType"], tpu["chipHours"], tpu["capacityMode"]) == (
        "v6e-32",
        12.5,
        "reservation",
    )


def test_the_provider_s_adapter_makes_a_valid_event_of_a_step_s_part(layout):
    """Through the provider's own adapter and the client's serialisation (nulls dropped, the
    facets' dicts kept), what a backend receives: valid, with the datasets it was given."""
    export = ran(ExportCheckpointOperator(rewards={"pre": PRE}), layout)
    export.exported = Choice(50, LAST, {"accuracy": 0.41, "mean_reward": float("nan")}, "why", 50)
    part = export.get_openlineage_facets_on_complete(None)
    event = OpenLineageAdapter().complete_task(
        run_id="01938d0e-7a40-7c2e-9b4f-5c6d7e8f9a0b",
        job_name="tpu_rl_post_training.export",
        end_time="2026-12-07T08:00:00+00:00",
        task=part,
        nominal_start_time=None,
        nominal_end_time=None,
        owners=[],
        tags=[],
        job_description=None,
    )
    sent = Serde.to_dict(event)
    assert event_problems(sent) == []
    assert step_lineage(sent) == ids(part)
    assert sent["run"]["facets"][KEYS[EVALUATION]]["metrics"] == {"accuracy": 0.41}
