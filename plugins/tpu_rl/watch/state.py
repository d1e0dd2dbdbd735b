"""Where the reward wait is in the training: the pod and container followed, the last line
read, what the log showed (evaluations, steps, saves), and the watch's memories (progress,
health, curves). JSON-safe (`as_dict`, `from_dict`): the saved position on the training Job
carries it, so a rebuilt trigger or the next poke goes on from it. Each field holding a list
or dict is replaced, never changed in place: a step of the watch copies the state shallowly
(tpu_rl.watch.core) and the saved position compares the old value with the new.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from tpu_rl.watch.health import Memory, Rules


@dataclass
class FollowState:
    """Where the follower is: the pod and container instance, and the last line consumed."""

    pod_uid: str | None = None
    pod_name: str | None = None
    restart_count: int | None = None
    container_id: str | None = None
    last_time: str | None = None  # RFC3339Nano of the last consumed line
    seen_at_last_time: int = 0  # lines consumed at last_time (a re-read sends them again)
    pre: dict[str, Any] | None = None
    # the Intermediate Eval lines so far (step, metrics, time: ~200 bytes each), which the event
    # reports. Saved on the Job: past Kubernetes' 256 KiB of annotations (apimachinery's
    # api/validation/objectmeta.go, TotalAnnotationSizeLimitB), ~1000 lines, the PATCH is refused
    # and SavedPosition stops saving (a rebuilt trigger then reads the log from its start).
    intermediate: list[dict[str, Any]] = field(default_factory=list)
    pending_since: float | None = None  # epoch seconds something has been waiting to run
    backend_pods_seen: bool = False
    reward_lines: int = 0  # reward lines logged so far (a checkpoint is due after each)
    cut_lines: int = 0  # lines logged as cut so far
    reached_step: int | None = None  # the highest training step the log showed
    capacity_evidence: str | None = None  # the first sign the backend lost its capacity
    backend_created: str | None = None  # the backend JobSet's creationTimestamp
    step_marks: list[list[float]] = field(default_factory=list)  # the newest [step, epoch]s
    saved: list[float] | None = None  # the newest finished save: [step, epoch]
    judged_save: int | None = None  # the save whose stop-or-go was decided
    # training's pace, ETA, spend and the cadence of its lines (tpu_rl.watch.progress)
    progress: dict[str, Any] | None = None
    # the training health watchdog's rules and memory (tpu_rl.watch.health); None: off
    health: Memory | None = None
    # the TensorBoard event files read (tpu_rl.rewards.event_files): each one's name and the
    # bytes of it consumed, in whole records (one file per pod start)
    event_offsets: dict[str, int] = field(default_factory=dict)
    # the training's curves for the RL page and the saves the log showed (tpu_rl.watch.curves)
    curves: dict[str, Any] | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> FollowState:
        known = set(cls.__dataclass_fields__)
        values = {k: v for k, v in (data or {}).items() if k in known}
        if isinstance(values.get("seen_at_last_time"), list):  # saved as hashes before
            values["seen_at_last_time"] = len(values["seen_at_last_time"])
        if "rules" in (memory := values.get("health") or {}):  # saved as a dict (as_dict)
            values["health"] = {**memory, "rules": Rules.from_dict(memory["rules"])}
        return cls(**values)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def attempt_facts(self) -> dict[str, Any]:
        """What an event ending the attempt carries: its Pre line, evaluations, reach, backend."""
        return {
            "pre": self.pre,
            "intermediate": self.intermediate,
            "reached_step": self.reached_step,
            "backend_created": self.backend_created,
        }

    def adopt(self, newer: FollowState) -> None:
        """Take on the state a step of the watch returned (tpu_rl.watch.core.advance): the
        shells share this one object (the reader, its stream, the saved position)."""
        self.__dict__.update(newer.__dict__)

    def start_container(self, restart_count: int | None, container_id: str | None) -> None:
        """Read a new container instance's log from its beginning."""
        self.restart_count, self.container_id = restart_count, container_id
        self.last_time, self.seen_at_last_time = None, 0
