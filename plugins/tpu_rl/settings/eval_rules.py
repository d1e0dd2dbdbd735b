"""Rules on the evaluation settings: the gate's metrics (an error when unknown), the held-out
benchmarks and their level, and whether export_checkpoint=best has a step to choose besides the
last (a warning, never a refusal)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

from tpu_rl.settings.choices import EVAL_METRICS, ExportCheckpoint
from tpu_rl.settings.fields import RunSettings

# MaxText's default (src/maxtext/configs/post_train/rl.yml: `eval_interval: 10`); a run sets
# another with extra_train_args `eval_interval=N` (train_rl reads trainer_config.eval_interval:
# trainers/post_train/rl/utils_rl.py, install_training_hooks).
RL_EVAL_INTERVAL = 10
# an lm-eval task or group name as its YAML files spell them (`task: gsm8k`, `arc_easy`,
# `mmlu_pro`, `leaderboard_ifeval`): it reaches maxtext.eval's --tasks on a shell line
TASK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


def _metric_gains(setting: str, gains: dict[str, float]) -> Iterator[str]:
    """Each metric is one MaxText's evaluation lines carry, with a finite number."""
    for name, gain in gains.items():
        if name not in EVAL_METRICS:
            yield (
                f"{setting}: {name!r} is not an evaluation metric (known: "
                f"{', '.join(EVAL_METRICS)})"
            )
        elif isinstance(gain, bool) or not isinstance(gain, int | float) or not math.isfinite(gain):
            yield f"{setting}: {name}'s minimum gain must be a finite number, got {gain!r}"


def gate_metric_names(s: RunSettings) -> Iterator[str]:
    """The gate's metrics and their minimum gains (empty: min_reward_gain on mean_reward)."""
    yield from _metric_gains("gate_metrics", s.gate_metrics)


def champion_gains(s: RunSettings) -> Iterator[str]:
    """The gains over the champion: at least one metric, each known, each a finite number."""
    if not s.min_gain_over_champion:
        yield 'min_gain_over_champion: name at least one metric (e.g. {"mean_reward": 0})'
    yield from _metric_gains("min_gain_over_champion", s.min_gain_over_champion)


def heldout_benchmarks(s: RunSettings) -> Iterator[str]:
    """The held-out task names are lm-eval names, each once, guards apart from the scored ones;
    guards need scored benchmarks beside them; the level is a probability."""
    for setting in ("heldout_tasks", "heldout_guard_tasks"):
        for name in getattr(s, setting):
            if not TASK_NAME.match(name):
                yield f"{setting}: {name!r} is not an lm-eval task name (letters, digits, _.-)"
    named = [*s.heldout_tasks, *s.heldout_guard_tasks]
    if twice := sorted({name for name in named if named.count(name) > 1}):
        yield f"heldout_tasks: {', '.join(twice)} named twice (a benchmark is scored once)"
    if s.heldout_guard_tasks and not s.heldout_tasks:
        yield "heldout_guard_tasks: guards are scored beside heldout_tasks; name one there too"
    if not 0 < s.heldout_significance < 1:
        yield f"heldout_significance: {s.heldout_significance:g} is not between 0 and 1"


def eval_interval(s: RunSettings) -> int | None:
    """Steps between intermediate evaluations: extra_train_args' eval_interval, else rl.yml's
    (None: a value that is not an integer, which MaxText will refuse itself)."""
    for arg in s.extra_train_args:
        key, _, value = arg.partition("=")
        if key == "eval_interval":
            try:
                return int(value)
            except ValueError:
                return None
    return RL_EVAL_INTERVAL


def best_checkpoint_warnings(s: RunSettings) -> list[str]:
    """With export_checkpoint=best: a warning when no step before the last has both an
    intermediate evaluation (every eval_interval steps, none at the last: MaxText's hook runs
    from the next update, hooks.py) and a checkpoint (every checkpoint_period steps), saying
    which values would give one. The last step always has both (Post line, final save)."""
    interval, period, steps = eval_interval(s), s.checkpoint_period, s.num_batches
    if s.export_checkpoint != ExportCheckpoint.BEST or interval is None:
        return []
    if interval > 0 and math.lcm(interval, period) < steps:
        return []
    evals = f"eval_interval={interval}" if interval > 0 else f"eval_interval={interval} (off)"
    fixes = []
    if 0 < interval < steps:
        fixes.append(f"checkpoint_period={interval * ((steps - 1) // interval)}")
    if period < steps:
        fixes.append(f"extra_train_args eval_interval={period}")
    would = f"; {' or '.join(fixes)} would give one" if fixes else ""
    return [
        f"export_checkpoint=best: with {evals} and checkpoint_period={period}, no step before "
        f"the last ({steps}) has both an evaluation and a checkpoint, so the last step is the "
        f"only choice{would}"
    ]
