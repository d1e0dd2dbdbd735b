"""How the reward wait ends: every reason one kind, declared once (the trigger's event, the
sensor's retry rule and the task's branches all read this table)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from tpu_rl.token_masking import redact

Result = dict[str, Any]  # an event of the wait, as the trigger yields it (JSON)


class WaitEnd(StrEnum):
    """The `reason` of an event that ends the wait without rewards."""

    TIMEOUT = "timeout"  # no Post line before the wait's deadline
    JOB_FAILED = "job_failed"
    POD_FAILED = "pod_failed"
    BACKEND_FAILED = "backend_failed"
    COMPLETED_WITHOUT_RESULT = "completed_without_result"
    UNSCHEDULABLE = "unschedulable"  # still pending past pending_timeout
    API_ERROR = "api_error"  # a Kubernetes API error no retry fixes
    CAPACITY_LOST = "capacity_lost"  # the TPUs were taken: a resume needs the run
    CAPACITY_ENDING = "capacity_ending"  # stopped at the last save before the capacity ends
    SPEND_LIMIT = "spend_limit"  # stopped at a save for max_spend_usd
    TRAINING_UNHEALTHY = "training_unhealthy"  # a fatal watchdog rule stopped training


# Retrying the wait cannot fix these: the training run itself is over.
FINAL = frozenset(
    {
        WaitEnd.JOB_FAILED,
        WaitEnd.POD_FAILED,
        WaitEnd.BACKEND_FAILED,
        WaitEnd.COMPLETED_WITHOUT_RESULT,
        WaitEnd.CAPACITY_LOST,
        WaitEnd.CAPACITY_ENDING,
        WaitEnd.SPEND_LIMIT,
        WaitEnd.TRAINING_UNHEALTHY,
    }
)
# The wait stopped training itself: the Job is deleted right after the event (no step past it).
STOPS_TRAINING = frozenset(
    {WaitEnd.CAPACITY_ENDING, WaitEnd.SPEND_LIMIT, WaitEnd.TRAINING_UNHEALTHY}
)
# Suspected capacity losses: a failure the cluster may show was the TPUs taken away.
CAPACITY_SUSPECTS = frozenset({WaitEnd.JOB_FAILED, WaitEnd.POD_FAILED, WaitEnd.BACKEND_FAILED})


def error_event(reason: WaitEnd | str, message: str) -> Result:
    """An event that ends the wait without rewards; secrets masked in its message. The reason
    is stored as its plain string: the event is JSON in the triggerer's table."""
    return {"status": "error", "reason": str(reason), "message": redact(message)}
