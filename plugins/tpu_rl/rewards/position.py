"""The reward follower's position, saved on the training Job: a rebuilt trigger (triggerer
restart, task retry) resumes there instead of reading and logging the whole log again."""

from __future__ import annotations

import json
import logging
from typing import Any

from tpu_rl.kube import objects as kube
from tpu_rl.kube.async_client import AsyncKube, KubeApiError
from tpu_rl.rewards.follower import FollowState

POSITION_ANNOTATION = "tpu-rl.dev/reward-follow-position"
# Fields that move with every log line: saved with the rest, but no reason for a PATCH of
# their own. A rebuilt trigger then reads again the lines since the last one it logged
# (`consume` logs only reward and cut lines) and logs none of them twice.
EVERY_LINE = frozenset({"last_time", "seen_at_last_time", "reached_step"})
FIELDS = tuple(FollowState.__dataclass_fields__)


def _fields(state: FollowState) -> dict[str, Any]:
    """The state's fields as they are now (a shallow copy: no `asdict` on every poll; the
    state's values are replaced, never changed in place)."""
    return {name: getattr(state, name) for name in FIELDS}


def _moved(position: dict[str, Any], saved: dict[str, Any], every_line: bool) -> bool:
    keys = FIELDS if every_line else (name for name in FIELDS if name not in EVERY_LINE)
    return any(position[key] != saved.get(key) for key in keys)


class SavedPosition:
    """The position on the training Job's annotation: read once at the start, written when
    something was logged (or the instance, the Pre metrics, a wait or the backend changed)."""

    def __init__(self, namespace: str, job_name: str, log: logging.Logger) -> None:
        self.path = kube.job_path(namespace, job_name)
        self.log = log
        self.saved: dict[str, Any] | None = None  # the position last saved or resumed from
        self.saving = True  # off once the API refuses the Job annotation

    def resume(self, job: dict[str, Any], state: FollowState) -> FollowState | None:
        """The position saved on the Job, when this follower starts from nothing."""
        text = ((job.get("metadata") or {}).get("annotations") or {}).get(POSITION_ANNOTATION)
        if not text or state.pod_uid is not None or self.saved is not None:
            return None
        resumed = FollowState.from_dict(json.loads(text))
        self.saved = _fields(resumed)
        self.log.info("Resuming the log after %s (position saved on the Job)", resumed.last_time)
        return resumed

    async def save(self, api: AsyncKube, state: FollowState, *, every_line: bool = False) -> None:
        """PATCH the position when it moved (`every_line`: by any line, else by a logged
        one); a transient error leaves it for the next save."""
        if not self.saving or state.pod_uid is None:
            return
        position = _fields(state)
        if self.saved is not None and not _moved(position, self.saved, every_line):
            return
        text = json.dumps(state.as_dict(), sort_keys=True)
        body = {"metadata": {"annotations": {POSITION_ANNOTATION: text}}}
        try:
            await api.merge_patch(self.path, body)
        except KubeApiError as error:  # a restart then reads from the last saved position
            if not error.transient:
                self.log.warning("Cannot save the log position on the Job (%s): not saving", error)
                self.saving = False
            return
        self.saved = position
