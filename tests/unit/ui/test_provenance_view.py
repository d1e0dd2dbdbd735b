"""tpu_rl.ui.provenance_view: a run's export's provenance chain, base model to registry version,
from the records the run kept: each link's OpenLineage dataset as the lineage names it and what
a person reads; with and without the held-out evaluation or a registry version, and a link
whose record was not kept saying so (the DB and GCS reads: tests/ui/test_ui_provenance.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.conftest import REPO
from tests.support.heldout import ARC, GSM8K, heldout
from tests.support.lineage import CHAIN
from tpu_rl.layout import RunLayout
from tpu_rl.lineage import names
from tpu_rl.lineage.graph import provenance_chain, run_datasets, run_lineage
from tpu_rl.promotion.champion import ChampionRecord
from tpu_rl.settings.run_settings import load_settings
from tpu_rl.ui.provenance_view import (
    READERS,
    REGISTRY_VERSION,
    RunRecords,
    champion_status,
    provenance_view,
)

RUN = "manual__1"
BUCKET = "gs://my-tpu-project-rl"
SLUG = "rl-c8211f1e51"  # layout.run_slug("manual__1", "test-deployment")
CHECKPOINT = f"{BUCKET}/gemma4-26b/trained/{SLUG}/checkpoints/actor/40/"
EXPORT = f"{BUCKET}/gemma4-26b/hf-trained/{SLUG}/"
RECORD = f"{BUCKET}/gemma4-26b/champions/test-deployment.json"
VERSION = "projects/123456/locations/us-east5/models/tpu-rl-gemma4-26b@2"
CONSOLE = "https://console.cloud.google.com/storage/browser/"
FIRST = "this run's export becomes the first candidate"  # compare_champion's, with no champion
METRICS = {"corr": 12, "total": 64, "accuracy": 18.75, "mean_reward": 0.1234}


def layout(tutorial_conf: dict, **settings: Any) -> RunLayout:
    return RunLayout(load_settings({**tutorial_conf, **settings}), RUN, "test-deployment")


@pytest.fixture
def heldout_conf(tutorial_conf) -> dict:
    """The sandbox's held-out run: the tutorial with include/examples/heldout.json's settings."""
    return {**tutorial_conf, **json.loads((REPO / "include/examples/heldout.json").read_text())}


def exported(choice: str = "best", reason: str = "best mean_reward of the evaluated steps") -> dict:
    """export's result for step 40 (ExportCheckpointOperator.execute_complete)."""
    return {"step": 40, "choice": choice, "metrics": METRICS, "reason": reason, "final_step": 50,
            "checkpoint_uri": CHECKPOINT, "export_uri": EXPORT}  # fmt: skip


def promoted(**changes: Any) -> dict:
    """promote's result: the champion record it wrote and where (promote._result)."""
    record = {"run_id": RUN, "export_uri": EXPORT, "checkpoint_uri": CHECKPOINT, "step": 40,
              "metrics": METRICS, "promoted_at": "2026-03-01T12:00:00+00:00", "previous": [],
              "registry_version": VERSION, "champion_uri": RECORD}  # fmt: skip
    return {**record, **changes}


def links(records: RunRecords) -> list[dict[str, Any]]:
    view = provenance_view(records, {})
    assert view["error"] is None, view["error"]
    return view["links"]


def by_label(records: RunRecords) -> dict[str, dict[str, Any]]:
    return {link["label"]: link for link in links(records)}


def test_a_heldout_runs_chain_names_each_dataset_as_its_lineage_events_do(heldout_conf):
    """Eight links in the chain's order, each dataset the names builders' (what the OpenLineage
    events carry), each text what the run's records say."""
    run = layout(heldout_conf)
    records = RunRecords(
        run,
        export=exported("heldout", "the held-out evaluation's best step"),
        heldout=heldout(GSM8K, ARC, step=40, step_scores={"30": 0.7, "40": 0.72}),
        comparison={"beats": True, "reason": "better than the champion on the held-out items"},
        approval={"chosen_options": ["Approve"], "responded_by_user": {"id": "7", "name": "alice"}},
        approved_at=datetime(2026, 3, 1, 11, 58, tzinfo=UTC),
        promoted=promoted(),
    )
    chain = links(records)
    assert [link["label"] for link in chain] == CHAIN
    assert [link["task"] for link in chain] == [
        "convert",
        "wait_for_rewards",
        "wait_for_rewards",
        "wait_for_rewards",
        "evaluate_heldout",
        "export",
        "promote",
        "promote",
    ]
    assert [link["dataset"] for link in chain] == [
        names.base_model(run).as_dict(),
        names.training_data(run).as_dict(),
        None,  # the run itself
        names.checkpoint_step(run, 40).as_dict(),
        names.heldout_results(run).as_dict(),
        names.export_folder(run).as_dict(),
        names.champion_record(run).as_dict(),
        names.vertex_model_version(VERSION).as_dict(),
    ]
    assert chain[0]["dataset"] == {
        "namespace": "https://huggingface.co",
        "name": "google/gemma-4-26b-a4b-it@main",
    }
    assert chain[3]["dataset"] == {
        "namespace": BUCKET,
        "name": f"gemma4-26b/trained/{SLUG}/checkpoints/actor/40",
    }
    assert [(link["text"], link["url"]) for link in chain] == [
        ("google/gemma-4-26b-a4b-it@main", "https://huggingface.co/google/gemma-4-26b-a4b-it"),
        ("openai/gsm8k@main", "https://huggingface.co/datasets/openai/gsm8k"),
        (RUN, "dags/tpu_rl_post_training/runs/manual__1"),
        ("step 40", CONSOLE + CHECKPOINT.removeprefix("gs://")),
        (
            "Held-out (95% level): step 40 better than the base model, not distinguishable from "
            "the champion",
            f"{CONSOLE}my-tpu-project-rl/gemma4-26b/trained/{SLUG}/heldout/",
        ),
        (EXPORT, CONSOLE + EXPORT.removeprefix("gs://")),
        ("approved by alice", f"{CONSOLE}_details/{RECORD.removeprefix('gs://')}"),
        (VERSION, None),
    ]
    assert chain[3]["detail"] == f"{CHECKPOINT}; the held-out evaluation's best step"
    assert chain[4]["detail"] == (
        "gsm8k: 76.0% on 1,000 items; champion 74.0% (not distinguishable, +2.0 points); base "
        "64.0% (better, +12.0 points); arc_easy: 67.5% on 400 items; champion 66.0% (not "
        "distinguishable, +1.5 points); base 62.5% (better, +5.0 points)"
    )
    assert chain[6]["detail"] == (
        "approve ended at 2026-03-01T11:58:00+00:00; promoted at 2026-03-01T12:00:00+00:00"
    )
    assert not any(link["missing"] for link in chain)


def test_without_heldout_the_evaluation_is_the_trainers_and_no_version_is_not_registered(
    tutorial_conf,
):
    """approval=none promoted it by the champion comparison's rule; a deployment with no Vertex
    registry records a null version: the chain's seven links, and the eighth says so."""
    records = RunRecords(
        layout(tutorial_conf),
        export=exported(),
        comparison={"beats": True, "reason": f"no champion yet: {FIRST}"},
        approval={"approval": "none"},
        promoted=promoted(registry_version=None),
    )
    chain = by_label(records)
    assert list(chain) == CHAIN
    evaluation = chain["evaluation"]
    assert (evaluation["task"], evaluation["dataset"]) == ("wait_for_rewards", None)
    assert (
        evaluation["text"]
        == "the trainer's evaluation of step 40: accuracy 18.75, mean_reward 0.1234"
    )
    assert evaluation["detail"] == (
        "no held-out evaluation (heldout_tasks): MaxText's own evaluation on its test set"
    )
    approval = chain["approval"]
    assert approval["text"] == "approval=none: promoted by the rule"
    assert approval["detail"] == (
        f"no champion yet: {FIRST}; promoted at 2026-03-01T12:00:00+00:00"
    )
    assert approval["dataset"] == {
        "namespace": BUCKET,
        "name": "gemma4-26b/champions/test-deployment.json",
    }
    registry = chain["registry version"]
    assert (registry["text"], registry["dataset"], registry["missing"]) == (
        "not registered",
        None,
        False,
    )
    assert (
        registry["detail"] == "the deployment names no Vertex AI registry (TPU_RL_VERTEX_REGISTRY)"
    )
    assert chain["step"]["detail"] == f"{CHECKPOINT}; best mean_reward of the evaluated steps"


def test_a_champion_from_before_its_records_says_which_link_it_lacks(tutorial_conf):
    """A champion promoted by an older version: export's result cleared, no approval answer
    kept, a record without a registry_version field. The step comes from the record; those
    three links say what they lack."""
    record = promoted()
    del record["registry_version"]
    chain = by_label(RunRecords(layout(tutorial_conf), promoted=record))
    assert [label for label, link in chain.items() if link["missing"]] == [
        "step",
        "approval",
        "registry version",
    ]
    assert chain["step"]["text"] == "step 40"
    assert chain["step"]["dataset"]["name"] == f"gemma4-26b/trained/{SLUG}/checkpoints/actor/40"
    assert chain["step"]["detail"] == (
        f"{CHECKPOINT}; export kept no result: the step is the champion record's"
    )
    # the record's metrics are the evaluation it won on
    assert chain["evaluation"]["text"] == (
        "the trainer's evaluation of step 40: accuracy 18.75, mean_reward 0.1234"
    )
    assert chain["approval"]["text"] == (
        "not recorded: approve kept no answer (a run from before it kept one)"
    )
    assert chain["registry version"]["text"] == (
        "not recorded: the champion record was written before it kept a registry version"
    )
    assert chain["export"]["text"] == EXPORT


def test_a_heldout_run_that_kept_no_report_says_its_evaluation_is_missing(heldout_conf):
    chain = by_label(RunRecords(layout(heldout_conf), export=exported(), promoted=promoted()))
    evaluation = chain["evaluation"]
    assert evaluation["missing"] and evaluation["task"] == "wait_for_rewards"
    assert evaluation["detail"] == (
        "evaluate_heldout kept no report (the run's heldout_tasks asked for one); no held-out "
        "evaluation: MaxText's own evaluation on its test set"
    )
    no_metrics = by_label(
        RunRecords(layout(heldout_conf), export={**exported(), "metrics": None}, promoted=None)
    )["evaluation"]
    assert no_metrics["text"] == (
        "not recorded: evaluate_heldout kept no report (the run's heldout_tasks asked for one); "
        "no evaluation of step 40 was kept"
    )


def test_an_export_not_promoted_names_no_record_and_no_version(tutorial_conf):
    records = RunRecords(
        layout(tutorial_conf),
        export=exported(),
        approval={"chosen_options": ["Reject"], "responded_by_user": {"id": "8", "name": "bob"}},
    )
    chain = by_label(records)
    assert chain["approval"]["text"] == "not promoted: rejected by bob; the export stays"
    assert chain["approval"]["dataset"] is None and not chain["approval"]["missing"]
    assert chain["registry version"]["text"] == "not registered: the export was not promoted"
    lost = RunRecords(
        layout(tutorial_conf),
        export=exported(),
        comparison={"beats": False, "reason": "not promoted: loses to the champion from run r0"},
        approval={"approval": "none"},
    )
    assert by_label(lost)["approval"]["text"] == "not promoted: loses to the champion from run r0"


def test_a_training_dataset_named_by_the_runs_arguments(tutorial_conf):
    run = layout(tutorial_conf, extra_train_args=["dataset_name=my-org/math-rl"])
    dataset = by_label(RunRecords(run, export=exported()))["dataset"]
    assert dataset["dataset"] == {
        "namespace": "https://huggingface.co",
        "name": "datasets/my-org/math-rl@main",
    }
    assert (dataset["text"], dataset["url"]) == (
        "my-org/math-rl@main",
        "https://huggingface.co/datasets/my-org/math-rl",
    )
    assert dataset["detail"].startswith("named by extra_train_args dataset_name, at the Hub's")


@pytest.mark.parametrize(
    ("records", "error"),
    [
        (
            {},
            "No provenance: export kept no result naming the step it exported, and promote no "
            "champion record: no link of the chain can be named",
        ),
        (
            # the held-out evaluation scored steps 20 and 30, export says it took 40
            {"heldout": heldout(GSM8K, step=30, step_scores={"20": 0.6, "30": 0.7})},
            "No provenance: provenance chain broken at 'evaluation': evaluate_heldout does not "
            f"read {CHECKPOINT.removesuffix('/')}",
        ),
    ],
    ids=["no-step", "broken"],
)
def test_records_that_name_no_chain_say_why_and_show_no_link(tutorial_conf, records, error):
    found = RunRecords(layout(tutorial_conf), **records)
    if records:
        found = RunRecords(found.layout, export=exported(), **records)
    view = provenance_view(found, {"text": "kept as given"})
    assert (view["links"], view["error"]) == ([], error)
    assert view["champion"] == {"text": "kept as given"} and view["run_id"] == RUN


def test_training_files_lineage_does_not_name_are_said(tutorial_conf):
    run = layout(tutorial_conf, extra_train_args=["hf_train_files=gs://b/train.parquet"])
    view = provenance_view(RunRecords(run, export=exported()), {})
    assert view["error"] == (
        "No provenance: extra_train_args set hf_train_files: training reads those files, which "
        "lineage does not name yet"
    )


def test_the_views_links_are_the_graphs_chain(heldout_conf):
    """One place names the links: each label graph.provenance_chain gives has a reader, and
    the registry version the view adds when none was registered is the graph's label."""
    run = layout(heldout_conf)
    datasets = run_datasets(run, committed=[40], exported=40, scored=[40], registry_version=VERSION)
    chain = provenance_chain(run_lineage(datasets), datasets)
    assert [link.label for link in chain] == list(READERS) == CHAIN
    assert chain[-1].label == REGISTRY_VERSION


def champion(run_id: str) -> ChampionRecord:
    return ChampionRecord.from_dict(
        {k: v for k, v in promoted(run_id=run_id).items() if k != "champion_uri"}
    )


def test_the_champions_status_says_whose_export_the_record_names(tutorial_conf):
    run = layout(tutorial_conf)
    current = champion_status(run, RECORD, champion(RUN), promoted())
    assert current == {
        "uri": RECORD,
        "url": f"{CONSOLE}_details/{RECORD.removeprefix('gs://')}",
        "run_id": RUN,
        "current": True,
        "text": "This run's export is the deployment test-deployment's champion for gemma4-26b "
        "(promoted at 2026-03-01T12:00:00+00:00).",
    }
    replaced = champion_status(run, RECORD, champion("manual__2"), promoted())
    assert (replaced["run_id"], replaced["current"]) == ("manual__2", False)
    assert replaced["text"] == (
        "The deployment test-deployment's champion for gemma4-26b is run manual__2's export "
        "(promoted at 2026-03-01T12:00:00+00:00); this run's export was promoted at "
        "2026-03-01T12:00:00+00:00."
    )
    never = champion_status(run, RECORD, champion("manual__2"), None)
    assert never["text"].endswith(
        "export (promoted at 2026-03-01T12:00:00+00:00); this run is not promoted."
    )
    none = champion_status(run, RECORD, None, None)
    assert none["text"] == (
        f"The deployment test-deployment's champion for gemma4-26b has no record ({RECORD} does "
        "not exist)."
    )
    assert (none["run_id"], none["current"]) == (None, False)
    unread = champion_status(run, RECORD, None, promoted(), "PermissionError: 403 denied")
    assert unread["text"] == "The champion record could not be read: PermissionError: 403 denied."
