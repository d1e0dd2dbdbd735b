"""promote changes the champion only as compared, and wholly or not at all:
against the record generation compare_champion compared with, the
Vertex AI registration before the record (the alias moved back when the record cannot be
written), a corrupt record named with its fix, the failed state in the run's note."""

from __future__ import annotations

import json
import logging

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from tests.support.promotion import MODEL_ID, MemoryChampionStore, compared, exported, layout
from tpu_rl.layout import RunLayout
from tpu_rl.names import Step
from tpu_rl.operators.champion import CompareChampionOperator, EvaluateChampionOperator
from tpu_rl.operators.promotion import PromoteExportOperator
from tpu_rl.promotion import promote
from tpu_rl.promotion.approval_text import run_promotion
from tpu_rl.promotion.champion import ChampionStore

LOG = logging.getLogger(__name__)


class TaskInstance:
    """xcom_pull and xcom_push over a dict keyed by (task id, key); pushes are `task_id`'s."""

    map_index = -1

    def __init__(self, task_id: str, values: dict) -> None:
        self.task_id, self.values = task_id, values

    def xcom_pull(self, task_ids: str, key: str = "return_value"):
        return self.values.get((task_ids, key))

    def xcom_push(self, key: str, value) -> None:
        self.values[(self.task_id, key)] = value


def run_promote(monkeypatch, run: RunLayout, step: int, comparison: dict) -> TaskInstance:
    """promote's execute for `run`, its export and compare_champion's `comparison` as XComs;
    its return value pushed as Airflow does."""
    export = exported(run, step, 0.5)
    ti = TaskInstance(
        Step.PROMOTE,
        {
            (Step.EXPORT, "return_value"): {
                "export_uri": export.export_uri,
                "checkpoint_uri": export.checkpoint_uri,
                "step": step,
                "metrics": export.metrics,
            },
            (Step.COMPARE_CHAMPION, "return_value"): comparison,
            (Step.APPROVE, "answer"): {"approval": "none"},
        },
    )
    op = PromoteExportOperator()
    monkeypatch.setattr(op, "run_layout", lambda context: run)
    ti.xcom_push("return_value", op.execute({"ti": ti, "outlet_events": {}}))
    return ti


def record_now() -> dict:
    ((_, record),) = MemoryChampionStore.records.values()
    return record


def aliases(registry) -> list[list[str]]:
    """Each version's aliases in the fake registry's model, oldest first."""
    return [v["versionAliases"] for v in registry.models[MODEL_ID].versions]


@pytest.fixture
def registry(vertex, monkeypatch):
    """The Vertex fake, reached through the connection its fixture defines."""
    monkeypatch.setenv("TPU_RL_GCP_CONN_ID", "gcp")
    return vertex


def test_promote_refuses_a_champion_promoted_since_its_comparison(
    tutorial_conf,
    store,
    registry,
    monkeypatch,
):
    """Run `late` compared with A0; A1 was promoted since (a person approving an older run's
    approval a day later): promote fails, naming both, and changes nothing."""
    a0, late, a1 = (layout(tutorial_conf, r) for r in ("run-a0", "run-late", "run-a1"))
    run_promote(monkeypatch, a0, 50, compared(0))
    comparison = {
        "beats": True,
        "champion": {"run_id": "run-a0", "export_uri": a0.export_dir},
        "champion_generation": 1,
    }
    run_promote(monkeypatch, a1, 60, compared(1))  # generation 2: promoted after the comparison
    registry.calls.clear()
    with pytest.raises(AirflowFailException) as failed:
        run_promote(monkeypatch, late, 70, comparison)
    message = str(failed.value)
    assert "the champion changed since compare_champion compared with" in message
    assert a0.export_dir in message and "(run run-a1)" in message and "\n" not in message
    assert record_now()["run_id"] == "run-a1"
    assert [c.method for c in registry.calls] == []  # not even a read: nothing registered
    assert aliases(registry) == [["default"], ["champion"]]


def test_the_first_champion_promoted_since_a_comparison_with_none_is_not_replaced(
    tutorial_conf,
    store,
    monkeypatch,
):
    monkeypatch.delenv("TPU_RL_VERTEX_REGISTRY", raising=False)
    first, late = layout(tutorial_conf, "run-first"), layout(tutorial_conf, "run-late")
    run_promote(monkeypatch, first, 50, compared(0))
    with pytest.raises(AirflowFailException, match="compared with no champion"):
        run_promote(monkeypatch, late, 60, compared(0))
    assert record_now()["run_id"] == "run-first"
    # the same comparison, retried after its own record was written, is a success
    assert record_now()["export_uri"] == first.export_dir
    run_promote(monkeypatch, first, 50, compared(0))


def test_a_failed_upload_leaves_the_record_and_says_so_in_the_note(
    tutorial_conf,
    store,
    registry,
    monkeypatch,
):
    """The registration comes first: when Vertex refuses it, the record still names the old
    champion (the next run is scored against the model the registry serves)."""
    first, second = layout(tutorial_conf, "run-1"), layout(tutorial_conf, "run-2")
    run_promote(monkeypatch, first, 50, compared(0))
    registry.fail_next("upload")
    with pytest.raises(AirflowFailException) as failed:
        run_promote(monkeypatch, second, 100, compared(1))
    assert "the Vertex AI upload to model gemma-rl failed" in str(failed.value)
    assert record_now()["run_id"] == "run-1"
    assert aliases(registry) == [["default", "champion"]]


def test_the_note_says_which_state_a_failed_promotion_left(
    tutorial_conf,
    store,
    registry,
    monkeypatch,
):
    first, second = layout(tutorial_conf, "run-1"), layout(tutorial_conf, "run-2")
    run_promote(monkeypatch, first, 50, compared(0))
    registry.fail_next("mergeVersionAliases")
    export = exported(second, 100, 0.5)
    ti = TaskInstance(
        Step.PROMOTE,
        {
            (Step.EXPORT, "return_value"): {"export_uri": export.export_uri, "step": 100},
            (Step.COMPARE_CHAMPION, "return_value"): compared(1),
            (Step.APPROVE, "answer"): {"approval": "none"},
        },
    )
    op = PromoteExportOperator()
    monkeypatch.setattr(op, "run_layout", lambda context: second)
    with pytest.raises(AirflowFailException, match="the champion alias was not moved"):
        op.execute({"ti": ti, "outlet_events": {}})
    assert record_now()["run_id"] == "run-1"
    # the new version is there, without the alias; the champion is still version 1's
    versions = registry.models[MODEL_ID].versions
    assert [v["versionAliases"] for v in versions] == [["default", "champion"], []]
    line = run_promotion(ti)
    assert line.startswith("not promoted: promote failed (approval not required); ")
    assert f"the champion record still names {first.export_dir} (run run-1)" in line
    assert "version" in line and "uploaded without the champion alias" in line


def test_a_record_that_cannot_be_written_moves_the_alias_back(
    tutorial_conf,
    store,
    registry,
    monkeypatch,
):
    first, second = layout(tutorial_conf, "run-1"), layout(tutorial_conf, "run-2")
    run_promote(monkeypatch, first, 50, compared(0))

    def refused(self, record):
        raise RuntimeError("412 Precondition Failed")

    monkeypatch.setattr(MemoryChampionStore, "write", refused)
    with pytest.raises(AirflowFailException) as failed:
        run_promote(monkeypatch, second, 100, compared(1))
    message = str(failed.value)
    assert "was not written (412 Precondition Failed)" in message
    assert "champion alias back on version 1 (version 2 stays, unaliased)" in message
    assert record_now()["run_id"] == "run-1"
    assert aliases(registry) == [["default", "champion"], []]


def test_a_first_registration_whose_record_fails_removes_the_alias(
    tutorial_conf,
    store,
    registry,
    monkeypatch,
):
    run = layout(tutorial_conf, "run-1")

    def refused(self, record):
        raise RuntimeError("503 Service Unavailable")

    monkeypatch.setattr(MemoryChampionStore, "write", refused)
    with pytest.raises(AirflowFailException, match="champion alias removed"):
        run_promote(monkeypatch, run, 50, compared(0))
    assert MemoryChampionStore.records == {} and aliases(registry) == [["default"]]


class StoredObject:
    """JsonObject over one stored text: read parses it as JsonObject does (json.loads)."""

    text: str | None = None

    def __init__(self, uri: str, gcp_conn_id: str) -> None:
        self.uri, self.generation = uri, 0

    def read(self):
        if self.text is None:
            return None
        self.generation = 1764876543210000
        return json.loads(self.text)


GOOD = {
    "run_id": "run-1",
    "export_uri": "gs://b/m/hf-trained/rl-1/",
    "checkpoint_uri": "gs://b/m/trained/rl-1/checkpoints/actor/50/",
    "step": 50,
    "metrics": {"mean_reward": 0.2},
    "promoted_at": "2026-11-26T08:00:00+00:00",
    "previous": [],
}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"run_id": "run-1", "export_', "not JSON (Unterminated string"),
        ("[]", "a JSON object expected, got list"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "export_uri"}), "no 'export_uri'"),
        (json.dumps({**GOOD, "step": "50"}), "'step' must be an integer or null (got '50')"),
        (json.dumps({**GOOD, "metrics": {"mean_reward": "high"}}), "'metrics' must be an object"),
        (json.dumps({**GOOD, "exprot_uri": "x"}), "unknown field(s) 'exprot_uri'"),
    ],
)
def test_a_corrupt_record_is_named_with_what_is_wrong_and_the_fix(monkeypatch, text, problem):
    import tpu_rl.storage

    monkeypatch.setattr(tpu_rl.storage, "JsonObject", StoredObject)
    monkeypatch.setattr(StoredObject, "text", text)
    store = ChampionStore("gs://b/m", "prod", "gcp")
    with pytest.raises(ValueError) as failed:
        store.read()
    message = str(failed.value)
    assert "\n" not in message and problem in message
    assert message.startswith(
        "champion record gs://b/m/champions/prod.json (generation 1764876543210000) is not one: "
    )
    assert "Delete it (`gcloud storage rm gs://b/m/champions/prod.json`" in message
    assert "restore an earlier generation (`gcloud storage ls -a gs://b/m/champions/prod" in message
    monkeypatch.setattr(StoredObject, "text", json.dumps(GOOD))
    assert store.read().export_uri == GOOD["export_uri"]


def test_a_corrupt_record_fails_the_champion_steps_in_one_line(
    tutorial_conf,
    monkeypatch,
    store,
):
    """evaluate_champion and promote name the record and the fix; neither crashes."""
    import tpu_rl.storage

    monkeypatch.setattr(tpu_rl.storage, "JsonObject", StoredObject)
    monkeypatch.setattr(StoredObject, "text", json.dumps({**GOOD, "step": None, "metrics": 1}))
    monkeypatch.setattr(promote, "ChampionStore", ChampionStore)
    monkeypatch.delenv("TPU_RL_VERTEX_REGISTRY", raising=False)
    run = layout(tutorial_conf, "run-2")
    uri = f"{run.model_root}/champions/test-deployment.json"
    op = EvaluateChampionOperator()
    with pytest.raises(AirflowFailException) as failed:
        op.prepare(run, {"ti": TaskInstance(Step.EVALUATE_CHAMPION, {})})
    assert str(failed.value).startswith(f"champion record {uri} (generation ")
    assert "'metrics' must be an object of numbers (got 1)" in str(failed.value)
    with pytest.raises(AirflowFailException) as failed:
        run_promote(monkeypatch, run, 60, compared(1764876543210000))
    assert str(failed.value).startswith(f"champion record {uri} (generation ")


def test_compare_champion_records_the_generation_it_compared_with(tutorial_conf, monkeypatch):
    run = layout(tutorial_conf, "run-2")
    op = CompareChampionOperator()
    monkeypatch.setattr(op, "run_layout", lambda context: run)
    challenger = {(Step.EXPORT, "return_value"): {"metrics": {"mean_reward": 0.3}}}
    champion = {
        (Step.EVALUATE_CHAMPION, "champion"): {"run_id": "run-1", "export_uri": "gs://b/x/"},
        (Step.EVALUATE_CHAMPION, "metrics"): {"mean_reward": 0.2},
        (Step.EVALUATE_CHAMPION, "champion_generation"): 17,
    }
    ti = TaskInstance(Step.COMPARE_CHAMPION, {**challenger, **champion})
    assert op.execute({"ti": ti})["champion_generation"] == 17
    first = TaskInstance(Step.COMPARE_CHAMPION, dict(challenger))
    assert op.execute({"ti": first})["champion_generation"] == 0  # none: it must not exist
