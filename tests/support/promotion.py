"""promote's doubles: the champion record in memory with GCS's generation precondition, the
comparison's result, a run's layout and its export (the fixtures `store` and `vertex`, the
Vertex AI registry's fake, are tests/integration/conftest.py's)."""

from __future__ import annotations

import json

from tpu_rl.layout import RunLayout
from tpu_rl.promotion.champion import ChampionRecord
from tpu_rl.promotion.exported import ExportedModel
from tpu_rl.settings.run_settings import load_settings

MODEL_ID = "gemma-rl"
IMAGE = "us-docker.pkg.dev/serving/vllm@sha256:" + "a" * 64


class MemoryChampionStore:
    """ChampionStore's read and write over one in-memory record per URI, with its generation
    precondition (a write after another's fails, as GCS answers 412)."""

    records: dict[str, tuple[int, dict]] = {}

    def __init__(self, model_root: str, deployment: str, gcp_conn_id: str) -> None:
        self.uri = f"{model_root}/champions/{deployment}.json"
        self.generation = 0

    def read(self) -> ChampionRecord | None:
        self.generation, value = self.records.get(self.uri, (0, None))
        return None if value is None else ChampionRecord.from_dict(value)

    def write(self, record: ChampionRecord) -> None:
        current = self.records.get(self.uri, (0, None))[0]
        assert current == self.generation, "412 Precondition Failed"
        self.records[self.uri] = (current + 1, json.loads(json.dumps(record.as_dict())))


def compared(generation: int) -> dict:
    """compare_champion's result as promote reads it: the record generation it compared with."""
    return {"beats": True, "champion_generation": generation}


def layout(tutorial_conf, run_id: str) -> RunLayout:
    return RunLayout(load_settings(tutorial_conf), run_id, "test-deployment")


def exported(run: RunLayout, step: int, accuracy: float) -> ExportedModel:
    return ExportedModel(
        export_uri=run.export_dir,
        checkpoint_uri=f"{run.checkpoints_dir}{step}/",
        step=step,
        metrics={"accuracy": accuracy, "mean_reward": 1.25},
    )
