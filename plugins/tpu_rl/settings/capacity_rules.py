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
    """Preemptible capacity resumes from a checkpoint: one must come before the last step."""
    resumes = s.capacity != Capacity.RESERVATION and s.max_training_restarts > 0
    if resumes and s.checkpoint_period > s.num_batches:
        yield (
            f"checkpoint_period: {s.checkpoint_period} is more than num_batches "
            f"{s.num_batches}, so training writes no checkpoint before its last step and a "
            f"resume after {s.capacity} capacity is taken away starts over from step 0; set "
            "checkpoint_period below num_batches, or max_training_restarts=0"
        )


CAPACITY_RULES = (reservation, checkpoints)
