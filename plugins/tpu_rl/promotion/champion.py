"""The champion record: which export a deployment promoted last for a model, with the
evaluation it won on. One JSON object per deployment and model in the run's bucket."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


def champion_uri(model_root: str, deployment: str) -> str:
    """gs://<bucket>/<model>/champions/<deployment>.json: per deployment, so staging's promotions
    never replace production's champion in a shared bucket."""
    return f"{model_root}/champions/{deployment}.json"


PROBLEM_SHOWN = 160  # characters of what is wrong, in the error


class ChampionRecordError(ValueError):
    """The champion record exists but is not one: one line naming its gs:// path, what is
    wrong, and how to fix it."""


def _number(value: Any) -> bool:
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool))


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


# each field: what its value must be, in words, and the test of it
_FIELDS: dict[str, tuple[str, Any]] = {
    "run_id": ("a non-empty string", lambda v: isinstance(v, str) and bool(v)),
    "export_uri": ("a gs:// URI", lambda v: isinstance(v, str) and v.startswith("gs://")),
    "checkpoint_uri": ("a string", lambda v: isinstance(v, str)),
    "step": ("an integer or null", lambda v: v is None or type(v) is int),
    "metrics": (
        "an object of numbers",
        lambda v: isinstance(v, dict) and all(_number(x) for x in v.values()),
    ),
    "promoted_at": ("a string", lambda v: isinstance(v, str)),
    "previous": ("a list of strings", _strings),
    "registry_version": ("a string or null", lambda v: v is None or isinstance(v, str)),
}
_OPTIONAL = {"previous", "registry_version"}  # absent from records written by earlier versions


def record_problems(value: Any) -> list[str]:
    """What keeps `value` (a parsed JSON value) from being a champion record; [] if nothing."""
    if not isinstance(value, dict):
        return [f"a JSON object expected, got {type(value).__name__}"]
    problems = [f"no {name!r}" for name in _FIELDS if name not in value and name not in _OPTIONAL]
    problems += [
        f"{name!r} must be {words} (got {value[name]!r:.60})"
        for name, (words, fits) in _FIELDS.items()
        if name in value and not fits(value[name])
    ]
    if unknown := sorted(set(value) - set(_FIELDS)):
        problems.append(f"unknown field(s) {', '.join(map(repr, unknown))}")
    return problems


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
    registry_version: str | None = None  # its Vertex AI model version, when registered

    @classmethod
    def from_dict(cls, value: Any) -> ChampionRecord:
        """The record `value` holds; ValueError naming every field that is missing or wrong."""
        if problems := record_problems(value):
            raise ValueError("; ".join(problems))
        return cls(**value)

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

    @property
    def generation(self) -> int | None:
        """The record's GCS generation as `read` found it (0: there was none)."""
        return self._object.generation

    def read(self) -> ChampionRecord | None:
        """The current champion, or None before the deployment's first promotion.
        ChampionRecordError when the object is not a champion record."""
        try:
            value = self._object.read()
        except ValueError as err:  # json.JSONDecodeError, UnicodeDecodeError
            raise self.unreadable(f"not JSON ({err})") from None
        if value is None:
            return None
        try:
            return ChampionRecord.from_dict(value)
        except ValueError as err:
            raise self.unreadable(str(err)) from None

    def unreadable(self, problem: str) -> ChampionRecordError:
        """The one-line error for a record that cannot be read, with the ways to fix it, the
        shortest first (a failed run's note keeps a reason's first 500 characters)."""
        return ChampionRecordError(
            f"champion record {self.uri} (generation {self.generation}) is not one: "
            f"{problem[:PROBLEM_SHOWN]}. Delete it (`gcloud storage rm {self.uri}`: the next "
            "run's export becomes the first champion) or, if the bucket keeps versions, restore "
            f"an earlier generation (`gcloud storage ls -a {self.uri}`, then `cp` one over it)"
        )

    def write(self, record: ChampionRecord) -> None:
        self._object.write(record.as_dict())
