"""The reward sensor with its intervals and limits taken from the run's settings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tpu_rl.reward_sensor import RewardSensor
from tpu_rl.runtime import layout_from_context

if TYPE_CHECKING:
    from airflow.sdk import Context


class RunRewardSensor(RewardSensor):
    """RewardSensor whose poll interval, pending and total timeouts are the run's settings."""

    def execute(self, context: Context) -> Any:
        s = layout_from_context(context).settings
        self.poll_interval = self.poke_interval = float(s.poll_interval_seconds)
        self.pending_timeout = s.pending_timeout_minutes * 60.0
        self.timeout = s.training_timeout_minutes * 60.0
        return super().execute(context)
