"""Walking the capacity ladder at deploy: each rung's TPU pool deployed in turn until one gets
the whole slice; a rung GKE refuses for lack of capacity is left for the next.

A rung that cannot give the slice at deploy is a stockout GKE reports on the node pool (a static
Spot or reservation pool gets its VMs at creation or not at all, tpu_rl.cluster.capacity), or
terraform's create timeout on the pool (it is still waiting for its VMs; the product sets the
timeout above GKE's own wait, so GKE's stockout answer normally comes first). The next rung's
`gcluster deploy` replaces that rung's TPU pool (each rung's pool has its own name, which
forces a new pool, tpu_rl.cluster.blueprint; the cluster's zones and its other pools stay), so
nothing of the abandoned rung is left billing; when no
rung is left, the run fails naming each rung's reason, and `cleanup_cluster` destroys what was
made. The task log says each change; the tries are the ladder's one record
(tpu_rl.cluster.rung_record: the run report and the RL page show them), whose newest is the rung
the pool stands on (later tasks run on it, tpu_rl.dag.runtime.layout_from_context).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tpu_rl.cluster import capacity, ladder
from tpu_rl.cluster.toolkit import ClusterToolkitError
from tpu_rl.settings.rungs import Rung

if TYPE_CHECKING:
    from tpu_rl.settings.fields import RunSettings

# a rung's deploy stood; was refused for lack of capacity; stood but gave no slice in time
READY, STOCKOUT, NO_SLICE = "ready", "stockout", "no_slice"
ENDED = "capacity_ended"  # stood, trained, and its capacity ended (a calendar window)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def change_line(index: int, rung: Rung, reason: str, nxt: Rung) -> str:
    """The task log's line for a rung change."""
    return (
        f"Capacity ladder: rung {index + 1} {rung} could not give the whole slice ({reason}); "
        f"its TPU pool is released and the run moves to rung {index + 2} {nxt}"
    )


def exhausted(tries: list[dict[str, Any]]) -> str:
    """The failure once every rung was refused, with each rung's reason."""
    reasons = "; ".join(f"rung {i} {t['rung']}: {t['reason']}" for i, t in enumerate(tries, 1))
    return (
        f"Capacity ladder: none of its {len(tries)} rungs could give the whole slice, so the run "
        f"stops here (cleanup_cluster destroys what was made). {reasons}"
    )


def climb(
    settings: RunSettings,
    deploy: Callable[[RunSettings], None],
    log: Any,
    record: Callable[[list[dict[str, Any]]], None],
    start: int = 0,
    tries: list[dict[str, Any]] | None = None,
) -> Rung:
    """Deploy the run's rungs in order from `start` until one stands; the rung it stands on.
    One rung (no ladder) fails as its deploy fails; a ladder fails once every rung was refused.
    `record`: keeps the tries after each rung (tpu_rl.cluster.rung_record.write_tries), with a
    ladder only. `tries`: the rungs tried before `start` (a rung left after its deploy stood,
    tpu_rl.operators.rung_move.RungMove)."""
    rungs = ladder.rungs(settings)
    tries = list(tries or [])
    for i, rung in enumerate(rungs):
        if i < start:
            continue
        started = now()
        try:
            deploy(ladder.at_rung(settings, rung))
        except ClusterToolkitError as err:
            reason = capacity.no_capacity_line(str(err))
            if reason is None or len(rungs) == 1:
                raise
            tries.append(rung_try(rung, started, STOCKOUT, reason))
            record(list(tries))
            if i + 1 < len(rungs):
                log.warning(change_line(i, rung, reason, rungs[i + 1]))
            continue
        if len(rungs) > 1:
            tries.append(rung_try(rung, started, READY, None))
            record(list(tries))
            log.info("Capacity ladder: the TPU pool stands on rung %d %s", i + 1, rung)
        return rung
    raise ClusterToolkitError(exhausted(tries))


def rung_try(rung: Rung, started: str, outcome: str, reason: str | None) -> dict[str, Any]:
    """One rung as tried: when, how it ended, and GKE's reason when it gave no slice."""
    return {
        "rung": str(rung),
        "started": started,
        "ended": now(),
        "outcome": outcome,
        "reason": reason,
    }


def left_rung(
    tries: list[dict[str, Any]], rung: Rung, outcome: str, reason: str
) -> list[dict[str, Any]]:
    """The ladder's tries with `rung` ended (`outcome`, GKE's or the run's `reason`), its try
    started at the deploy that made it stand when that is the last one recorded."""
    tries = list(tries)
    started = tries.pop()["started"] if tries and tries[-1]["rung"] == str(rung) else None
    return [*tries, rung_try(rung, started or now(), outcome, reason)]
