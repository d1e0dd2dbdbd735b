"""Nodes and step marks as the tests of the capacity's end (tpu_rl.watch.capacity_end) and of
the stop at a save (tpu_rl.rewards.save_stop) write them."""

from __future__ import annotations

from tpu_rl.watch import capacity_end

T0 = 1_800_000_000.0  # epoch seconds the marks count from


def node(name: str, annotation: str | None = None, label: str | None = None) -> dict:
    """A Node created 2027-01-15T08:00Z, with GKE's termination annotation or max-run label."""
    meta: dict = {"name": name, "creationTimestamp": "2027-01-15T08:00:00Z"}
    if annotation:
        meta["annotations"] = {capacity_end.TERMINATION_ANNOTATION: annotation}
    if label:
        meta["labels"] = {capacity_end.MAX_RUN_LABEL: label}
    return {"metadata": meta}


def marks(*steps: tuple[int, float]) -> list[list[float]]:
    """FollowState.step_marks of (step, seconds after T0)."""
    return [[s, T0 + at] for s, at in steps]
