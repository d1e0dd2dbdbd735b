"""The champion record: which export a deployment promoted last for a model, with the
evaluation it won on. One JSON object per deployment and model in the run's bucket."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


def champion_uri(model_root: str, deployment: str) -> str:
    """gs://<bucket>/<model>/champions/<deployment>.json: per deployment, so staging's promotions
    never replace production's champion in a shared bucket."""
    return f"{model_root}/champions/{deployment}.json"


@dataclass(frozen=True)
class ChampionRecord:
    """A promoted export: where it is, which run and step made it, and its evaluation metrics
    (the fields of MaxText's evaluation lines: accuracy, format_accuracy, mean_reward, ...)."""

    run_id: str
    export_uri: str
    checkpoint_uri: str
    step: int | None
    metrics: dict[str, float | int | None]
    promoted_at: str
    previous: list[str] = field(default_factory=list)  # earlier champions' export_uri, newest 1st

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> ChampionRecord:
        return cls(**{name: value[name] for name in cls.__dataclass_fields__ if name in value})

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class ChampionStore:
    """The deployment's champion record for one model. `write` succeeds only if nobody promoted
    since this store's `read` (JsonObject's generation precondition: 412, never an overwrite)."""

    def __init__(self, model_root: str, deployment: str, gcp_conn_id: str) -> None:
        # where a store is made: `make plan` names the record's place without Airflow's GCS hook
        from tpu_rl.storage import JsonObject

        self._object = JsonObject(champion_uri(model_root, deployment), gcp_conn_id)

    @property
    def uri(self) -> str:
        return self._object.uri

    def read(self) -> ChampionRecord | None:
        """The current champion, or None before the deployment's first promotion."""
        value = self._object.read()
        return None if value is None else ChampionRecord.from_dict(value)

    def write(self, record: ChampionRecord) -> None:
        self._object.write(record.as_dict())
