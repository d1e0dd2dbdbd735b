"""How the watch judges one attempt, from the run's settings: one frozen bundle that the task
builds (tpu_rl.operators.rewards), the trigger carries as JSON in its kwargs, and the follower
hands to the watch's steps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tpu_rl.watch.health import Rules
from tpu_rl.watch.progress import Spend


@dataclass(frozen=True)
class WatchRules:
    """What stops training or says its progress, for one attempt."""

    checkpoint_period: int = 0  # > 0: stop at the last save that ends before the capacity does
    total_steps: int | None = None  # the training's steps: the last one's save is never a stop
    capacity_ends_at: float | None = None  # an end known in advance (epoch seconds)
    spend: Spend = field(default_factory=Spend)  # how the TPUs bill; max_spend_usd
    health: Rules = field(default_factory=Rules.defaults)  # the watchdog's rules
    progress_every_s: float = 900.0  # how often the trigger reports progress to the task

    def as_dict(self) -> dict[str, Any]:
        """JSON, as the trigger's kwargs carry it."""
        return {
            "checkpoint_period": self.checkpoint_period,
            "total_steps": self.total_steps,
            "capacity_ends_at": self.capacity_ends_at,
            "spend": self.spend.as_dict(),
            "health": self.health.as_dict(),
            "progress_every_s": self.progress_every_s,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> WatchRules:
        """The bundle `as_dict` made; what it lacks is the default."""
        found = dict(data or {})
        plain = {k: found[k] for k in cls.__dataclass_fields__ if k in found}
        plain["spend"] = Spend.from_dict(found.get("spend"))
        plain["health"] = Rules.from_dict(found.get("health"))
        return cls(**plain)
