"""Which checkpoint step a run exports: the newest committed one (`last`), or the committed one
whose evaluation ranks first on `best_metric` (`best`, ties to the later step).

Committed is Orbax's rule, tpu_rl.storage's: `newest_committed_step` (also the step Tunix
restores) and `step_committed` (`<step>/commit_success.txt` exists). Which evaluation scores a
step's checkpoint:

- `Intermediate Eval (step=N)` scores the weights checkpoint N holds. MaxText's hook
  (trainers/post_train/rl/hooks.py, RLTrainingHooks.on_train_step_end) evaluates through the
  rollout engine when `rl_cluster.global_steps % eval_interval == 0`; Tunix's RLCluster.
  sync_weights copies the actor's weights to it and then counts the global step (`self.
  global_steps += 1`, tunix/rl/rl_cluster.py), so at global step N it holds the weights of N
  updates, which the actor's checkpoint N saved (tunix/sft/peft_trainer.py, train: `self.
  _train_steps += 1` then `checkpoint_manager.save(self._train_steps, ...)`). The hook runs from
  the next update's `_write_train_metrics`, so the line comes after checkpoint N's save (rl.yml:
  `async_checkpointing: false`), but a save can be cut, and rl.yml's
  `max_num_checkpoints_to_keep: 10` has Orbax delete older steps: whether a step is committed
  is read from the bucket once training is over, never inferred from the log.
- `Post RL Training` scores the final weights (train_rl.py logs it after `rl_trainer.train`
  returns), which Tunix saves last: PeftTrainer.close -> `_save_last_checkpoint` (force=True),
  then `checkpoint_manager.close()` waits for the save. So the final step is the newest step
  folder (committed or cut), or the last step the log showed if that is later.

A run the training health watchdog stopped (tpu_rl.watch.health) carries its anomaly in the
wait's result (`anomaly`, with `anomaly_step`): no step at or after it is chosen, evaluated or
exported. The newest healthy step is still on disk when training is stopped within one poll of
the anomaly. Orbax deletes only the OLDEST steps, and only once a newer save commits: Tunix maps
MaxText's `max_num_checkpoints_to_keep` to `LatestN(n)` (tunix/sft/checkpoint_options.py:180 at
c4ec573), which keeps the newest n and drops the rest from the front (orbax
_src/checkpoint_managers/preservation_policy.py:84-101 at 20be488a); `save()` first waits for
the previous save's finalize (checkpoint_manager.py:1441), and the steps to remove are deleted in
`_finalize` only after the new step's commit (2152-2167). Tunix logs step N's line during update
N+1, before save N+1 (tunix/sft/peft_trainer.py:1016-1027), so between a NaN line and the Job's
deletion at most one more save commits, which deletes the oldest of the n kept, never the newest
healthy one: a NaN at step N distrusts the saves from N-1 on (tpu_rl.watch.health), at most
three of them on disk with a save every step (N-1, N, N+1), so n = 10 in MaxText's rl.yml:187
keeps it (n >= 4 does).

A run resumed after its anomaly (health_action=resume) carries none in the wait's result: the
saves at or after the anomaly step were moved out of the checkpoints folder before the resumed
attempt started (tpu_rl.checkpoints.quarantine, once the old attempt's pods were gone), so every
step there is healthy, those at or after the anomaly step saved again by the resumed attempt, and
the poisoned model's evaluations were dropped from the record (tpu_rl.checkpoints.resume.
without_poisoned). A second anomaly fails the run: nothing is exported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tpu_rl.training_log.evaluations import metric

BEST, LAST, HELDOUT = "best", "last", "heldout"


@dataclass(frozen=True)
class Choice:
    """The step to export, how it was chosen (`choice`: best or last), its evaluation (None: it
    has none), why, the final step, and the newer steps Orbax never committed."""

    step: int
    choice: str
    metrics: dict[str, Any] | None
    reason: str
    final_step: int | None
    uncommitted: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "choice": self.choice,
            "metrics": self.metrics,
            "reason": self.reason,
            "final_step": self.final_step,
        }


def scored_steps(
    rewards: Mapping[str, Any] | None, final_step: int | None
) -> dict[int, dict[str, Any]]:
    """Each evaluated step's evaluation: its Intermediate Eval (the wait's `intermediate`: the
    latest attempt's, tpu_rl.training_log.evaluations.by_step), the Post line for the final step."""
    rewards = rewards or {}
    scored = {
        line["step"]: line
        for line in rewards.get("intermediate") or []
        if isinstance(line, dict) and isinstance(line.get("step"), int)
    }
    if final_step is not None and isinstance(rewards.get("post"), dict):
        scored[final_step] = rewards["post"]
    return scored


def final_step(step_folders: list[int], rewards: Mapping[str, Any] | None) -> int | None:
    """The step of the final weights: the newest step folder, or the last step the final
    attempt's log showed if that is later (None: neither is known)."""
    attempts = (rewards or {}).get("attempts") or [{}]
    reached = attempts[-1].get("reached_step") if isinstance(attempts[-1], dict) else None
    known = [*step_folders, *([reached] if isinstance(reached, int) else [])]
    return max(known, default=None)


def choose(
    policy: str,
    best_metric: str,
    scored: Mapping[int, Mapping[str, Any]],
    newest_committed: int,
    committed: Callable[[int], bool],
) -> tuple[int, str, str]:
    """(step, choice, reason). `committed(step)` asks the bucket, best-ranked step first, only
    for steps up to the newest committed one (none later is)."""
    if policy == LAST:
        return newest_committed, LAST, "export_checkpoint=last: the newest committed step"
    ranked = sorted(
        (
            (value, step)
            for step, line in scored.items()
            if step <= newest_committed and (value := metric(line, best_metric)) is not None
        ),
        reverse=True,  # highest value first; between equal values the later step
    )
    for value, step in ranked:
        if step == newest_committed or committed(step):
            return (
                step,
                BEST,
                f"export_checkpoint=best: {best_metric}={value:g}, the best committed",
            )
    return (
        newest_committed,
        LAST,
        (
            f"export_checkpoint=best found no committed step with an evaluation of {best_metric}: "
            "the newest committed step instead"
        ),
    )


def choose_for_run(
    checkpoints_uri: str,
    gcp_conn_id: str,
    rewards: Mapping[str, Any] | None,
    policy: str,
    best_metric: str,
    heldout: tuple[int, str] | None = None,
) -> Choice:
    """The run's export choice, read from its checkpoints folder; raises ValueError when no
    step was committed. `heldout`: the step the held-out evaluation scored best and why, which
    takes the place of `policy` (it scored committed steps only, before any anomaly)."""
    from tpu_rl import storage

    newest, uncommitted = storage.newest_committed_step(checkpoints_uri, gcp_conn_id)
    if newest is None:
        never = f" (steps {uncommitted} were never committed)" if uncommitted else ""
        raise ValueError(f"no committed checkpoint under {checkpoints_uri}{never}")
    final = final_step([newest, *uncommitted], rewards)
    scored = scored_steps(rewards, final)

    def committed(step: int) -> bool:
        return storage.step_committed(f"{checkpoints_uri.rstrip('/')}/{step}", gcp_conn_id)

    if (below := anomaly_step(rewards)) is not None:
        healthy, _ = healthy_checkpoint(checkpoints_uri, gcp_conn_id, below)
        if healthy is None:
            raise ValueError(
                f"no committed checkpoint before the anomaly at step {below} under "
                f"{checkpoints_uri}"
            )
        newest = healthy
        uncommitted = [step for step in uncommitted if step < below]
        scored = {step: line for step, line in scored.items() if step < below}
    step, choice, reason = choose(policy, best_metric, scored, newest, committed)
    if heldout is not None:
        step, choice, reason = heldout[0], HELDOUT, heldout[1]
    if below is not None:  # the report and the note say the choice was among the healthy steps
        reason = f"{reason} before the training health anomaly at step {below}"
    metrics = scored.get(step)
    return Choice(step, choice, dict(metrics) if metrics else None, reason, final, uncommitted)


def heldout_candidates(
    checkpoints_uri: str,
    gcp_conn_id: str,
    rewards: Mapping[str, Any] | None,
    best_metric: str,
    k: int,
) -> list[int]:
    """The committed steps the held-out evaluation scores, at most `k`: those whose trainer
    evaluation ranks best on `best_metric` (ties to the later step), then the newest; none at
    or after a training health anomaly. Ascending."""
    from tpu_rl import storage

    root = checkpoints_uri.rstrip("/")
    below = anomaly_step(rewards)
    steps = [
        step
        for step in reversed(storage.checkpoint_steps(checkpoints_uri, gcp_conn_id))
        if below is None or step < below
    ]
    committed = [step for step in steps if storage.step_committed(f"{root}/{step}", gcp_conn_id)]
    scored = scored_steps(rewards, final_step(steps, rewards))
    values = {
        step: value
        for step in committed
        if (value := metric(scored.get(step), best_metric)) is not None
    }
    ranked = sorted(values, key=lambda step: (values[step], step), reverse=True)
    chosen = [*ranked, *(step for step in committed if step not in ranked)][:k]
    return sorted(chosen)


def anomaly_step(rewards: Mapping[str, Any] | None) -> int | None:
    """The first step the training health watchdog distrusts (the wait's `anomaly`), if any."""
    anomaly = (rewards or {}).get("anomaly")
    step = anomaly.get("anomaly_step") if isinstance(anomaly, Mapping) else None
    return step if isinstance(step, int) else None


def healthy_checkpoint(
    checkpoints_uri: str, gcp_conn_id: str, below: int
) -> tuple[int | None, str | None]:
    """The newest step Orbax committed before step `below`, and its gs:// folder (None: none)."""
    from tpu_rl import storage

    root = checkpoints_uri.rstrip("/")
    for step in reversed(storage.checkpoint_steps(checkpoints_uri, gcp_conn_id)):
        if step < below and storage.step_committed(f"{root}/{step}", gcp_conn_id):
            return step, f"{root}/{step}/"
    return None, None
