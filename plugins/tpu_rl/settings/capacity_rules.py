"""Rules on the TPU capacity settings: the reservation and checkpoints a capacity mode needs."""

from __future__ import annotations

import re
from collections.abc import Iterator

from tpu_rl.settings.choices import Capacity, ClusterMode
from tpu_rl.settings.fields import RunSettings

RESERVATION_NAME = re.compile(
    r"([a-z]([-a-z0-9]{0,61}[a-z0-9])?)|projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/reservations/"
    r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?"
)


def reservation(s: RunSettings) -> Iterator[str]:
    if s.reservation and s.capacity != Capacity.RESERVATION:
        yield (
            f"reservation: {s.reservation!r} given with capacity={s.capacity}, which takes no "
            "reservation (flex-start and Spot VMs are not drawn from one); leave reservation "
            "empty, or set capacity=reservation"
        )
    elif (
        s.cluster_mode == ClusterMode.CREATE
        and s.capacity == Capacity.RESERVATION
        and not s.reservation
    ):
        yield (
            "reservation: required with cluster_mode=create and capacity=reservation (the "
            "blueprint's TPU pool consumes a SPECIFIC_RESERVATION); without one, choose "
            "capacity=flex_start or capacity=spot"
        )
    elif s.reservation and not RESERVATION_NAME.fullmatch(s.reservation):
        yield f"reservation: {s.reservation!r} is not a reservation name"


def checkpoints(s: RunSettings) -> Iterator[str]:
    """A resume restores the newest checkpoint before the loss: one must come before the last
    step. Any capacity mode resumes (WaitForRewardsSensor.resume_after_loss acts on a node
    removed or shut down, a reservation's maintenance too) while max_training_restarts > 0."""
    if s.max_training_restarts == 0 or s.checkpoint_period < s.num_batches:
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


CAPACITY_RULES = (reservation, checkpoints)
