"""The reward follower's position, saved on the training Job: a rebuilt trigger (triggerer
restart, task retry) resumes there instead of reading and logging the whole log again."""

from __future__ import annotations

import json
from typing import Any

from tpu_rl.kube import objects as kube
from tpu_rl.kube.async_client import AsyncKube, KubeApiError
from tpu_rl.rewards.held_log import Log
from tpu_rl.rewards.line_reader import time_key
from tpu_rl.watch.state import FollowState

POSITION_ANNOTATION = "tpu-rl.dev/reward-follow-position"
# Saved by each poll that read a line (one PATCH a poll at most, none for a quiet one): a
# rebuilt trigger reads again at most the lines since the last poll, and logs none of them
# twice, since what is said of them is held until the position past them is saved
# (tpu_rl.rewards.held_log). The Job's watch ignores the PATCH: it is no status change
# (tpu_rl.kube.watch).
FIELDS = tuple(FollowState.__dataclass_fields__)
# the JSON types of FollowState's annotations ("str | None", "list[list[float]]"...)
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "dict": (dict,),
    "Memory": (dict,),  # the watchdog's memory (tpu_rl.watch.health.Memory): a JSON object
    "list": (list,),
    "None": (type(None),),
}


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def parse_position(text: str) -> FollowState:
    """The position a follower saved; ValueError saying why `text` is not one (edited by
    hand, or written by a version with other fields)."""
    data = json.loads(text, parse_constant=_no_constant)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    state = FollowState.from_dict(data)
    for name, spec in FollowState.__dataclass_fields__.items():
        value, kinds = getattr(state, name), str(spec.type).split(" | ")
        allowed = tuple(t for kind in kinds for t in _JSON_TYPES[kind.split("[")[0]])
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            raise ValueError(f"{name} is {value!r}, not {spec.type}")
    if state.last_time is not None:
        time_key(state.last_time)  # ValueError: not the RFC 3339 time of a log line
    for pair in [*state.step_marks, *([state.saved] if state.saved is not None else [])]:
        if len(pair) != 2 or not all(isinstance(n, int | float) for n in pair):
            raise ValueError(f"{pair!r} is not [step, epoch seconds]")
    return state


def _fields(state: FollowState) -> dict[str, Any]:
    """The state's fields as they are now (a shallow copy: no `asdict` on every poll; the
    state's values are replaced, never changed in place)."""
    return {name: getattr(state, name) for name in FIELDS}


def _further(saved: FollowState, state: FollowState) -> bool:
    """The saved position is further along the same container's log than `state`."""
    same = (saved.pod_uid, saved.container_id) == (state.pod_uid, state.container_id)
    if not same or saved.last_time is None:
        return False
    return state.last_time is None or time_key(saved.last_time) > time_key(state.last_time)


def _moved(position: dict[str, Any], saved: dict[str, Any]) -> bool:
    return any(position[key] != saved.get(key) for key in FIELDS)


class SavedPosition:
    """The position on the training Job's annotation: read once at the start, written when
    it moved (a line read, the instance, a wait or the backend changed)."""

    def __init__(self, namespace: str, job_name: str, log: Log) -> None:
        self.path = kube.job_path(namespace, job_name)
        self.log = log
        self.saved: dict[str, Any] | None = None  # the position last saved or resumed from
        self.saving = True  # off once the API refuses the Job annotation

    def resume(self, job: dict[str, Any], state: FollowState) -> FollowState | None:
        """The position saved on the Job, when this follower starts from nothing or from an
        older point of the same container's log: a wait that reported progress defers again
        from its state then (tpu_rl.watch.progress.PROGRESS_EVENT), and a triggerer restarted
        later rebuilds the trigger from that state, behind what the Job's position says."""
        text = ((job.get("metadata") or {}).get("annotations") or {}).get(POSITION_ANNOTATION)
        if not text or self.saved is not None:
            return None
        try:
            resumed = parse_position(text)
        except (ValueError, TypeError) as error:
            self.log.warning(
                "The log position saved on the Job is unreadable (%s): reading the log from "
                "its start",
                error,
            )
            return None
        if state.pod_uid is not None and not _further(resumed, state):
            return None
        self.saved = _fields(resumed)
        self.log.info("Resuming the log after %s (position saved on the Job)", resumed.last_time)
        return resumed

    async def save(self, api: AsyncKube, state: FollowState) -> bool:
        """PATCH the position when it moved; a transient error leaves it for the next save
        (False: what was read since the last save may be read again by a rebuilt trigger)."""
        if not self.saving or state.pod_uid is None:
            return True  # never saved: nothing a rebuilt trigger would skip either
        position = _fields(state)
        if self.saved is not None and not _moved(position, self.saved):
            return True
        text = json.dumps(state.as_dict(), sort_keys=True)
        body = {"metadata": {"annotations": {POSITION_ANNOTATION: text}}}
        try:
            await api.merge_patch(self.path, body)
        except KubeApiError as error:  # a restart then reads from the last saved position
            if not error.transient:
                self.log.warning("Cannot save the log position on the Job (%s): not saving", error)
                self.saving = False
            return not self.saving
        self.saved = position
        return True
