"""approve's facts and task instances shared by its tests: an export, its gate, its comparison
with the champion, its TPU cost, and task instances over fixed XComs."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

from tpu_rl.names import Step
from tpu_rl.operators.promotion import ApproveExportOperator
from tpu_rl.promotion.approval_text import ApprovalCase
from tpu_rl.promotion.exported import ExportedModel

EXPORT = ExportedModel("gs://b/m/hf-trained/rl-1/", "gs://b/m/ck/100/", 100, {"accuracy": 0.41})


COMPARISON = {
    "champion": {"run_id": "scheduled__last-week", "export_uri": "gs://b/m/hf-trained/rl-0/"},
    "champion_metrics": {"accuracy": 0.38, "mean_reward": 1.1},
    "challenger_metrics": {"accuracy": 0.41, "mean_reward": 1.2},
    "beats": True,
    "reason": "accuracy +0.03 >= +0.01",
}


TPU = {
    "chip_hours": 16.0,
    "host_hours": 4.0,
    "hosts": 8,
    "pool_seconds": 1800.0,
    "estimated_cost_usd": None,
    "price": None,
    "tpu_type": "v6e-32",
}


GATE = {
    "pre_mean_reward": 0.9,
    "post_mean_reward": 1.2,
    "gain": 0.3,
    "candidate": "post-training",
    "metrics": {
        "accuracy": {"pre": 0.3, "candidate": 0.41, "gain": 0.11, "min_gain": None, "passed": None},
        "mean_reward": {"pre": 0.9, "candidate": 1.2, "gain": 0.3, "min_gain": 0.1, "passed": True},
    },
}


DEADLINE = datetime(2026, 5, 2, 12, 30, tzinfo=UTC)


def case(**changes) -> ApprovalCase:
    facts = {
        "run_id": "manual__1",
        "export": EXPORT,
        "gate": GATE,
        "comparison": COMPARISON,
        "tpu": TPU,
        "capacity": "spot",
        "deadline": DEADLINE,
    }
    return ApprovalCase(**(facts | changes))


class XComs:
    """A task instance's xcom_pull over fixed values by (task id, key)."""

    def __init__(self, values: dict) -> None:
        self.values = values

    def xcom_pull(self, task_ids: str, key: str = "return_value"):
        return self.values.get((task_ids, key))


class PushingTI(XComs):
    map_index = -1

    def __init__(self) -> None:
        super().__init__({})

    def xcom_push(self, key: str, value) -> None:
        self.values[(Step.APPROVE, key)] = value


RUN_ID = "manual__2026-05-01T10:00:00+00:00"


DECISION = f"/dags/tpu_rl_post_training/runs/{RUN_ID}/tasks/approve/required_actions"


def asking_context(op: ApproveExportOperator) -> dict:
    ti = SimpleNamespace(
        id="0190-ti", dag_id="tpu_rl_post_training", run_id=RUN_ID, task_id=op.task_id, map_index=-1
    )
    return {
        "dag": SimpleNamespace(dag_id=ti.dag_id),
        "run_id": RUN_ID,
        "task": op,
        "task_instance": ti,
    }
