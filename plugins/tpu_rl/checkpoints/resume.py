"""Training that survives capacity loss: the record of the training attempts, and the rules.

The reward wait (WaitForRewardsSensor) resumes training after a `capacity_lost` event at most
`max_training_restarts` times. What it must remember across deferrals and retries is one
record: the attempts, the first attempt's Pre metrics (the base model's: a
resumed attempt's Pre line reports the restored model), and whether a resume is half done (a
retry finishes it instead of following a deleted Job).

The record is a JSON object in the run's own output folder in GCS (`RunLayout.
training_attempts`, beside the checkpoints it explains), not in Airflow: the task state store
exists only from Airflow 3.3 (Composer 3 ships 3.1 and 3.2), XComs are cleared at each new
try, and the training Job and backend, whose annotations could hold it, are deleted by every
resume. GCS outlives retries and triggerer or worker restarts on every Airflow version, and a
run's folder is its own (named from its run id), so runs never share a record.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tpu_rl.training_log.evaluations import attempt_lines

if TYPE_CHECKING:
    from tpu_rl.storage import JsonObject

XCOM_KEY = "attempts"
COMPLETED, CAPACITY_LOST, FAILED = "completed", "capacity_lost", "failed"
STOPPED_AT_SAVE = "stopped_at_save"  # stopped right after a save, before its capacity ended
STOPPED_UNHEALTHY = "stopped_by_watchdog"  # a fatal training health rule stopped it
# an attempt's key once it resumes after a fatal training health rule (health_action=resume):
# {rule, step, anomaly_step, moved: the steps quarantined (None: not yet), quarantine: where}
HEALTH_RESUME = "health_resume"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class History:
    """The training attempts so far; the last one is open while `ended` is None."""

    attempts: list[dict[str, Any]] = field(default_factory=list)
    first_pre: dict[str, Any] | None = None
    resuming: bool = False  # old attempt being removed, new one not submitted yet
    # every evaluation line of every ended attempt (tpu_rl.training_log.evaluations.attempt_lines)
    evaluations: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def load(cls, record: JsonObject) -> History:
        """The history in `record` (the run's `training_attempts` object); empty before the first
        save."""
        data = record.read()
        return cls(**data) if isinstance(data, dict) else cls()

    def save(self, record: JsonObject) -> None:
        record.write(asdict(self))

    @property
    def resumes(self) -> int:
        """Resumes made so far (attempts after the first)."""
        return max(0, len(self.attempts) - 1)

    @property
    def losses(self) -> int:
        """Attempts that lost their capacity (a stop at a save before it ended is not one)."""
        return sum(a["outcome"] == CAPACITY_LOST for a in self.attempts)

    def end(
        self, event: dict[str, Any], outcome: str, tpu_hosts: int, rung: str | None = None
    ) -> dict[str, Any]:
        """Close the open attempt (attempt 1 is opened here, from its backend's creation) with
        what the event says (`why`: its message's first line, for an attempt that did not
        complete); keeps the first Pre metrics seen and the attempt's evaluations."""
        if not self.attempts or self.attempts[-1]["ended"] is not None:
            self.begin(None, tpu_hosts, started=event.get("backend_created"), rung=rung)
        attempt = self.attempts[-1]
        why = None if outcome == COMPLETED else str(event.get("message") or "").split("\n")[0]
        attempt.update(
            ended=now_iso(), outcome=outcome, reached_step=event.get("reached_step"), why=why
        )
        if self.first_pre is None:
            self.first_pre = event.get("pre")
        self.evaluations += attempt_lines(attempt["attempt"], attempt["resumed_from_step"], event)
        return attempt

    def begin(
        self,
        resumed_from_step: int | None,
        tpu_hosts: int,
        started: str | None,
        rung: str | None = None,
    ) -> None:
        """Open the next attempt; `started`: when its backend was submitted (None: not yet);
        `rung`: the capacity mode@zone it runs on."""
        self.attempts.append(
            {
                "attempt": len(self.attempts) + 1,
                "started": started,
                "ended": None,
                "outcome": None,
                "resumed_from_step": resumed_from_step,
                "reached_step": None,
                "tpu_hosts": tpu_hosts,
                "rung": rung,
                "why": None,
            }
        )

    def summary(self) -> str:
        """One line per attempt, for failure messages."""
        return "; ".join(
            f"attempt {a['attempt']}: from step {a['resumed_from_step'] or 0}, reached "
            f"{a['reached_step'] if a['reached_step'] is not None else '?'}, {a['outcome']}"
            for a in self.attempts
        )


def may_resume(history: History, max_restarts: int) -> bool:
    """Another resume after the capacity loss that ended the last attempt is allowed: at most
    `max_restarts` losses (stops at a save before the capacity ended are not counted)."""
    return history.losses <= max_restarts


def resume_line(step: int | None, history: History, max_restarts: int, why: str) -> str:
    """The task log's line for a resume after a capacity loss (the last attempt's): from which
    checkpoint step, which resume, why."""
    where = f"checkpoint step {step}" if step is not None else "the start (no checkpoint yet)"
    return (
        f"Resuming training from {where} (resume {history.losses} of {max_restarts}) "
        f"after capacity loss: {why}"
    )


def health_resumed(history: History) -> bool:
    """Training was resumed once after a fatal health rule: a second anomaly ends the run
    (health_action=resume resumes once, never in a loop)."""
    return any(attempt.get(HEALTH_RESUME) for attempt in history.attempts)


def without_poisoned(
    evaluations: list[dict[str, Any]], attempt: int, anomaly_step: int
) -> list[dict[str, Any]]:
    """The evaluation lines but those of `attempt` at or after `anomaly_step` (its poisoned
    model's): the gate never reads them, even for a step the next attempt does not evaluate."""
    return [
        line
        for line in evaluations
        if not (
            line.get("attempt") == attempt
            and isinstance(line.get("step"), int)
            and line["step"] >= anomaly_step
        )
    ]


def health_resume_line(step: int | None, healthy: str | None, moved: list[int], where: str) -> str:
    """The task log's line for the resume after a fatal health rule: from which checkpoint,
    where the poisoned saves went, and what changes for the new attempt."""
    start = (
        f"healthy checkpoint step {step} ({healthy})"
        if step is not None
        else "the converted checkpoint (no healthy save: training starts over)"
    )
    saves = (
        f"the {'save' if len(moved) == 1 else 'saves'} of step{'s'[: len(moved) - 1]} "
        f"{', '.join(map(str, moved))} moved to {where}"
        if moved
        else "no save at or after the anomaly step to move"
    )
    return (
        f"Resuming training from {start} on the same slice: {saves}; the watchdog starts "
        "afresh; health_action is stop for this attempt (a second anomaly ends the run)."
    )


def exhausted(history: History, max_restarts: int, why: str) -> str:
    """The failure once capacity was lost more often than a run may resume."""
    return (
        f"training lost its TPU capacity {history.losses} times; max_training_restarts="
        f"{max_restarts} allows {max_restarts} resume(s). Attempts: {history.summary()}. "
        f"Last loss: {why}"
    )


def _hours(attempt: dict[str, Any]) -> float | None:
    """Hours from the attempt's backend submission to its end; None while unknown."""
    if not attempt.get("started") or not attempt.get("ended"):
        return None
    started, ended = (datetime.fromisoformat(attempt[k]) for k in ("started", "ended"))
    return max(0.0, (ended - started).total_seconds() / 3600)


def costed(attempts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each attempt with `tpu_node_hours` (its TPU hosts x its span, the wait for capacity
    included) and `steps_recomputed` (steps it reached past the checkpoint the next attempt
    resumed from: work the capacity loss cost; None for the last attempt or when unknown)."""
    rows = []
    for i, attempt in enumerate(attempts):
        hours = _hours(attempt)
        nxt = attempts[i + 1] if i + 1 < len(attempts) else None
        reached = attempt.get("reached_step")
        redone = None
        if nxt is not None and reached is not None:
            redone = max(0, reached - (nxt.get("resumed_from_step") or 0))
        rows.append(
            {
                **attempt,
                "tpu_node_hours": None if hours is None else hours * attempt.get("tpu_hosts", 0),
                "steps_recomputed": redone,
            }
        )
    return rows


def steps_recomputed(costed_attempts: list[dict[str, Any]]) -> int:
    """All steps the run computed again after capacity losses, from `costed` rows."""
    return sum(a["steps_recomputed"] or 0 for a in costed_attempts)
