"""Training progress from the step lines the follower already read: step, steps per hour, the
ETA, the spend so far and projected, and whether the projection passes the run's spend limit.

No I/O and no second read of the log: it reads the follower's step marks (`FollowState.
step_marks`, [step, epoch] of each Tunix `Train step N` line, tpu_rl.training_log.train_step) and
keeps its own state in `FollowState.progress`, which the saved position carries, so a rebuilt
trigger goes on with the same first mark, the same cadence and the same saves judged.

The spend limit is judged at each committed save, once, on the projection at that time
(tpu_rl.watch.core, its PollDone step), never on a verdict an earlier step left: the mean pace is
slow after one slow early step (a recompile), so the first projections run high and come down
as the steps go on. A projection passing the limit between saves is a warning; one back under
it, a line saying no stop is due.

The pace is the mean since the first step line of this attempt: (last step - first step) over
the time between their lines. A mean over every step so far follows variable step times better
than the newest gaps do (one slow step, a save, moves it little). Times are the lines'
Kubernetes timestamps, not the triggerer's clock, so a slow poll does not shift the ETA.

What the training's TPUs cost comes from the operator (tpu_rl.prices, a floor above):
`Spend`, plain numbers. Spot and flex-start bill per chip-hour while the slice is up (from the
backend JobSet's creation); a calendar window bills its whole length, known in advance; a
reservation is paid by its commitment, so a run has no spend of its own ("reserved").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tpu_rl.settings.capacity_modes import COMMITMENT, USAGE, WINDOW
from tpu_rl.settings.choices import SpendLimitAction
from tpu_rl.watch.capacity_end import epoch

EXPORT, FAIL = SpendLimitAction.EXPORT, SpendLimitAction.FAIL
# The reward trigger's event that reports progress while training runs on: the wait resumes in a
# worker to write it to the run's page and note, then defers again. Each resume takes a worker
# slot for a few seconds, so it comes every REPORT_EVERY_FRACTION of the steps or every
# `progress_report_minutes` of training (15 by default), whichever comes first: about ten
# reports for a run of any length (the tutorial's 2.4 h, the sandbox's 50 steps in compressed
# time), more for a run over 2.5 h. The first once the pace is known.
PROGRESS_EVENT = "training_progress"
REPORT_EVERY_FRACTION = 0.1
TELL_EVERY_S = 600.0  # a progress line at least every 10 minutes of training...
TELL_EVERY_FRACTION = 0.05  # ...or every 5% of the steps, whichever comes first


@dataclass(frozen=True)
class Spend:
    """How the run's training TPUs bill (from the operator: tpu_rl.prices), and the
    limit. `usd_per_hour`: the slice's price an hour (usage); `window_usd`: a calendar window's
    whole price; `max_usd` 0: no limit; `after_usd`: what the slice bills after training that
    the limit counts too (the held-out evaluation's estimate), added to each projection."""

    capacity: str = ""
    billed_as: str = USAGE
    usd_per_hour: float | None = None
    window_usd: float | None = None
    max_usd: float = 0.0
    action: SpendLimitAction = EXPORT
    after_usd: float = 0.0

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Spend:
        known = {k: v for k, v in (data or {}).items() if k in cls.__dataclass_fields__}
        if "action" in known:
            known["action"] = SpendLimitAction(known["action"])
        return cls(**known)

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True)
class Progress:
    """Where training is: its step and total, its pace, its ETA and its spend (None: unknown)."""

    step: int
    total: int | None
    at: float  # the newest step line's time
    steps_per_hour: float | None
    eta: float | None  # when the last step's line is due (epoch seconds)
    spent_usd: float | None
    projected_usd: float | None
    billed_as: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "total_steps": self.total,
            "steps_per_hour": self.steps_per_hour,
            "eta": _iso(self.eta) if self.eta is not None else None,
            "spent_usd": self.spent_usd,
            "projected_usd": self.projected_usd,
            "billed_as": self.billed_as,
        }


def measure(
    marks: list[list[float]], first: list[float], total: int | None, up_since: float, spend: Spend
) -> Progress:
    """The progress at the newest mark: the mean pace since `first` ([step, at] of this
    attempt's first step line); spend from `up_since` (epoch seconds the slice is up)."""
    step, at = int(marks[-1][0]), marks[-1][1]
    rate = (step - first[0]) / (at - first[1]) * 3600 if at > first[1] else None
    eta = None
    if rate and total is not None:
        eta = at + max(0, total - step) / rate * 3600
    spent = _spent(spend, up_since, at)
    projected = _spent(spend, up_since, eta) if eta is not None else None
    return Progress(step, total, at, rate, eta, spent, projected, spend.billed_as)


def _spent(spend: Spend, up_since: float, until: float) -> float | None:
    if spend.billed_as == WINDOW:
        return spend.window_usd
    if spend.billed_as == COMMITMENT or spend.usd_per_hour is None:
        return None
    return spend.usd_per_hour * max(0.0, until - up_since) / 3600


def observe(
    state: Any, total: int | None, spend: Spend, *, up_since: float | None = None
) -> tuple[Progress | None, list[str], bool]:
    """Update `state.progress` (a FollowState's) from its step marks: the progress (None
    before any step line), the lines due to the task log now, and whether the projected spend
    has just passed the limit (said each time it passes; its line last). The dict is replaced,
    never changed in place (the saved position compares the old value with the new)."""
    if not state.step_marks:
        return None, [], False
    kept = dict(state.progress or {})
    first = kept.get("first") or list(state.step_marks[0])
    newest = state.step_marks[-1]
    if kept.get("last") == list(newest):
        return None, [], False
    start = up_since if up_since is not None else _backend_up(state, first[1])
    now = measure(state.step_marks, first, total, start, spend)
    lines = []
    if _due(kept.get("told"), newest, total):
        lines.append(progress_line(now, spend))
        kept["told"] = list(newest)
    over = over_limit(now, spend)
    passed = over and not kept.get("over")
    if passed:  # [step, time] it passed at, until it is back under
        kept["over"] = [now.step, now.at]
        lines.append(limit_line(now, spend))
    elif kept.get("over") and not over:
        kept["over"] = None
        lines.append(under_line(now, spend))
    # the line for the newest step, said or not: what a progress report shows (report_due)
    line = progress_line(now, spend)
    state.progress = {
        **kept,
        "first": list(first),
        "last": list(newest),
        **now.as_dict(),
        "line": line,
    }
    return now, lines, passed


def _backend_up(state: Any, fallback: float) -> float:
    """When the slice came up: the backend JobSet's creation, else the first step line."""
    try:
        return epoch(state.backend_created) if state.backend_created else fallback
    except ValueError:
        return fallback


def _due(told: list[float] | None, newest: list[float], total: int | None) -> bool:
    """A progress line is due: none yet, TELL_EVERY_S since the last, or a new 5% of steps."""
    if told is None:
        return True
    if newest[1] - told[1] >= TELL_EVERY_S:
        return True
    if not total:
        return False
    share = max(1, math.ceil(total * TELL_EVERY_FRACTION))
    return newest[0] // share > told[0] // share


def report_due(state: Any, every_s: float) -> dict[str, Any] | None:
    """The progress event due now (PROGRESS_EVENT), recorded as reported in `state.progress`;
    None before the pace is known, or within `every_s` of the last report (the lines' time) and
    REPORT_EVERY_FRACTION of the steps. Its `progress`: the figures (Progress.as_dict) and the
    task log's line of the newest step."""
    kept = dict(state.progress or {})
    last = kept.get("last")
    if not last or not kept.get("steps_per_hour"):
        return None
    reported = kept.get("reported")
    if reported is not None and not _report_due(reported, last, kept.get("total_steps"), every_s):
        return None
    state.progress = {**kept, "reported": list(last)}
    return {
        "status": "running",
        "reason": PROGRESS_EVENT,
        "progress": {k: kept.get(k) for k in REPORTED},
        "message": f"Training progress: step {last[0]}",
    }


def _report_due(
    reported: list[float], last: list[float], total: int | None, every_s: float
) -> bool:
    """A report is due at `last` ([step, time]): `every_s` since the last one, or a new
    REPORT_EVERY_FRACTION of the steps."""
    if last[1] - reported[1] >= every_s:
        return True
    share = max(1, math.ceil(total * REPORT_EVERY_FRACTION)) if total else 0
    return bool(share) and last[0] // share > reported[0] // share


# what a progress report carries: Progress.as_dict's figures and the line
REPORTED = (
    "step",
    "total_steps",
    "steps_per_hour",
    "eta",
    "spent_usd",
    "projected_usd",
    "billed_as",
    "line",
)


def reported_text(figures: dict[str, Any]) -> str | None:
    """A progress report's line without its task-log prefix (the run's note and page)."""
    line = figures.get("line")
    return line.removeprefix("Training progress: ") if isinstance(line, str) else None


def over_limit(now: Progress, spend: Spend) -> bool:
    """The projected spend passes the limit (a limit set, a projection known)."""
    return passes(now.projected_usd, spend)


def passes(projected: Any, spend: Spend) -> bool:
    """A projected spend (None: not known) passes the limit, when one is set."""
    if not spend.max_usd or not isinstance(projected, int | float):
        return False
    return projected + spend.after_usd > spend.max_usd


def after_words(spend: Spend) -> str:
    """What the limit counts after training, in a few words ("" when nothing)."""
    return f" + ${spend.after_usd:,.2f} for the held-out evaluation" if spend.after_usd else ""


def progress_line(now: Progress, spend: Spend) -> str:
    """The task log's progress line."""
    total = f"/{now.total} ({100 * now.step / now.total:.0f}%)" if now.total else ""
    pace = f"{now.steps_per_hour:.1f} steps/h" if now.steps_per_hour else "pace not known yet"
    eta = ""
    if now.eta is not None:
        eta = f", ETA {_iso(now.eta)} (in {max(0.0, now.eta - now.at) / 3600:.1f} h)"
    return f"Training progress: step {now.step}{total}, {pace}{eta}; {spend_words(now, spend)}"


def spend_words(now: Progress, spend: Spend) -> str:
    """The spend so far and projected, in a few words, with how the capacity mode bills."""
    if now.billed_as == COMMITMENT:
        return f"spend: reserved ({spend.capacity}: paid by its commitment, no spend of its own)"
    if now.billed_as == WINDOW:
        whole = "not known" if now.spent_usd is None else f"${now.spent_usd:,.2f}"
        return f"spend: {whole} (the calendar window bills its whole length)"
    if now.spent_usd is None:
        return f"spend: no price known for {spend.capacity}"
    projected = (
        ""
        if now.projected_usd is None
        else f", projected ${now.projected_usd:,.2f}{after_words(spend)}"
    )
    limit = f" of the ${spend.max_usd:,.2f} limit" if spend.max_usd else ""
    rate = f"${spend.usd_per_hour:,.2f}/h" if spend.usd_per_hour else ""
    return f"spend so far ${now.spent_usd:,.2f}{projected}{limit} ({spend.capacity} {rate})"


def limit_line(now: Progress, spend: Spend) -> str:
    """The warning when the projected spend passes max_spend_usd."""
    then = "export it" if spend.action == EXPORT else "fail the run"
    return (
        f"Projected spend ${now.projected_usd:,.2f}{after_words(spend)} passes max_spend_usd "
        f"${spend.max_usd:,.2f} at step {now.step}: training stops right after the next "
        f"committed save if the projection then still passes it, and the run will {then} "
        f"(spend_limit_action={spend.action})"
    )


def under_line(now: Progress, spend: Spend) -> str:
    """The line when the projected spend is back under max_spend_usd."""
    projected = "not known" if now.projected_usd is None else f"${now.projected_usd:,.2f}"
    return (
        f"Projected spend {projected} is back under max_spend_usd ${spend.max_usd:,.2f} at "
        f"step {now.step}: no stop at the next save unless it passes again"
    )


def stop_line(step: int, judged: dict[str, Any], spend: Spend) -> str:
    """The stop's line, for the log, the event and the note: the projection judged at the save
    (`judged`: the progress figures, its step and projected_usd)."""
    then = "exported" if spend.action == EXPORT else "not exported: the run fails"
    return (
        f"Spend limit: ${judged['projected_usd']:,.2f} projected at step {judged['step']}"
        f"{after_words(spend)} passes max_spend_usd ${spend.max_usd:,.2f}; training stopped "
        f"right after the committed save of step {step}, which is {then} "
        f"(spend_limit_action={spend.action})"
    )


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")
