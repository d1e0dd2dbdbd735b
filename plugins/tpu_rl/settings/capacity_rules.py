"""Rules on the TPU capacity settings: the ladder's rungs, and the reservation and checkpoints a
capacity mode needs."""

from __future__ import annotations

import re
from collections.abc import Iterator

from tpu_rl.settings.capacity_modes import CAPACITY_MODES, CapacityEnd, capacity_mode
from tpu_rl.settings.choices import ClusterMode
from tpu_rl.settings.fields import SETTING_FIELDS, RunSettings
from tpu_rl.settings.metadata import default_of
from tpu_rl.settings.rungs import EXAMPLE, LadderError, parse_ladder

RESERVATION_NAME = re.compile(
    r"([a-z]([-a-z0-9]{0,61}[a-z0-9])?)|projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/reservations/"
    r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?"
)


def ladder(s: RunSettings) -> Iterator[str]:
    """Rungs well-formed, distinct, in the run's region (checkpoints stay in its regional
    bucket), the first one the run's capacity and zone; one rung only on an existing cluster."""
    try:
        rungs = parse_ladder(s.capacity_ladder)
    except LadderError as err:
        yield f"capacity_ladder: {err}; write rungs as mode@zone, comma-separated: {EXAMPLE!r}"
        return
    if not rungs:
        return
    for i, rung in enumerate(rungs, 1):
        if s.region and rung.zone.rsplit("-", 1)[0] != s.region:
            yield (
                f"capacity_ladder: rung {i} {rung} is outside the run's region {s.region}: "
                f"checkpoints stay in the regional bucket gs://{s.gcs_bucket}, so training "
                f"there would move them across regions; use zones of {s.region} only"
            )
        if rung in rungs[: i - 1]:
            yield f"capacity_ladder: rung {i} {rung} repeats an earlier rung; list each once"
        if i > 1 and capacity_mode(rung.mode).ends is CapacityEnd.WINDOW_END:
            yield (
                f"capacity_ladder: rung {i} {rung} is a calendar reservation after the first "
                "rung; a run waits for a calendar window only before its first deploy, so "
                "put it first (the run's capacity) or leave it out"
            )
    first = rungs[0]
    if (first.mode, first.zone) != (s.capacity, s.zone):
        yield (
            f"capacity_ladder: its first rung {first} must be the run's capacity and zone "
            f"({s.capacity}@{s.zone}), where the cluster is first made; set capacity="
            f"{first.mode} and zone={first.zone}, or put {s.capacity}@{s.zone} first"
        )
    if s.cluster_mode == ClusterMode.EXISTING and len(rungs) > 1:
        yield (
            "capacity_ladder: more than one rung with cluster_mode=existing; the run moves "
            "between rungs by redeploying its own cluster's TPU pool, and an existing cluster "
            "is not the run's to change; leave capacity_ladder empty, or use cluster_mode=create"
        )


def _modes(s: RunSettings) -> set[str]:
    """The capacity modes the run may use: its ladder's, or its one capacity."""
    try:
        return {r.mode for r in parse_ladder(s.capacity_ladder)} or {s.capacity}
    except LadderError:  # the ladder rule names it
        return {s.capacity}


def reservation(s: RunSettings) -> Iterator[str]:
    modes = _modes(s)
    reserved = bool(modes & {c for c, mode in CAPACITY_MODES.items() if mode.takes_reservation})
    if s.reservation and not reserved:
        yield (
            f"reservation: {s.reservation!r} given with capacity={s.capacity}, which takes no "
            "reservation (flex-start and Spot VMs are not drawn from one); leave reservation "
            "empty, or set capacity=reservation"
        )
    elif s.cluster_mode == ClusterMode.CREATE and reserved and not s.reservation:
        yield (
            "reservation: required with cluster_mode=create and capacity=reservation or "
            "calendar, or such a rung in capacity_ladder (the "
            "blueprint's TPU pool consumes a SPECIFIC_RESERVATION); without one, choose "
            "capacity=flex_start or capacity=spot"
        )
    elif s.reservation and not RESERVATION_NAME.fullmatch(s.reservation):
        yield f"reservation: {s.reservation!r} is not a reservation name"


def checkpoints(s: RunSettings) -> Iterator[str]:
    """A resume restores the newest checkpoint before the loss: one must come before the last
    step. Any capacity mode resumes (WaitForRewardsSensor.resume_after_loss acts on a node
    removed or shut down, a reservation's maintenance too) while max_training_restarts > 0.

    A refusal only when the user chose checkpoint_period or max_training_restarts: with both at
    their defaults a short run (a 1- or 20-step smoke run) is accepted, and
    `short_run_warnings` says it cannot resume.
    """
    if not resumes_without_checkpoint(s) or both_at_defaults(s):
        return
    fix = (
        f"set checkpoint_period below num_batches (e.g. {s.num_batches // 2}), or "
        if s.num_batches > 1
        else ""
    )
    yield (
        f"checkpoint_period: {s.checkpoint_period} is not below num_batches {s.num_batches}, "
        "so training's only checkpoint is its last step's and a resume after lost TPU "
        f"capacity (max_training_restarts={s.max_training_restarts}) starts over from step 0; "
        f"{fix}set max_training_restarts=0"
    )


def short_run_warnings(s: RunSettings) -> list[str]:
    """A short run left at the default checkpoint settings: accepted, but it cannot resume."""
    if not (resumes_without_checkpoint(s) and both_at_defaults(s)):
        return []
    return [
        f"num_batches {s.num_batches} is not above the default checkpoint_period "
        f"{s.checkpoint_period}: no checkpoint before the last step, so a resume after lost TPU "
        "capacity starts over from step 0 (fine for a smoke run; for a resumable run set "
        "checkpoint_period below num_batches)"
    ]


def resumes_without_checkpoint(s: RunSettings) -> bool:
    """Training may resume, but no checkpoint comes before its last step."""
    return s.max_training_restarts > 0 and s.checkpoint_period >= s.num_batches


def both_at_defaults(s: RunSettings) -> bool:
    """checkpoint_period and max_training_restarts hold their declared defaults (not chosen)."""
    return all(
        getattr(s, name) == default_of(SETTING_FIELDS[name])
        for name in ("checkpoint_period", "max_training_restarts")
    )


CAPACITY_RULES = (ladder, reservation, checkpoints)
