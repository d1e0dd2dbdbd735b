"""Parse the training step line Tunix's trainer logs, the training's pace in the log.

Tunix's actor trainer logs one line per update (google/tunix tunix/sft/peft_trainer.py:735-740
at c4ec573, the commit MaxText 0.2.4 pins in src/dependencies/extra_deps/
post_train_github_deps.txt:1), through absl:
`logging.info("Train step %d training loss: %f  - training perplexity: %f", step, loss,
perplexity)`, e.g. `I1204 12:00:00.123456 140213 peft_trainer.py:735] Train step 12 training
loss: 0.012345  - training perplexity: 1.012421`. It is one update late: step N's line is
written during update N+1, after checkpoint N's save began (PeftTrainer._write_train_metrics
skips the first update "so we can overlap I/O with next step"), and the last step's at close.
The number is the global step (MaxText's rl.yml: num_iterations 1). No line carries the total.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# `%f` prints nan, inf and -inf as such; the perplexity part and the spaces before its dash are
# optional (the eval line of the same file has one space, tunix/sft/peft_trainer.py:1131), and
# `eval loss` lines (peft_trainer.py:1131, experimental/train/peft_trainer_v2.py:1375) are not
# training steps.
_NUM = r"[-+]?(?:nan|inf|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)"
_STEP_LINE = re.compile(
    rf"\bTrain step (?P<step>\d+) training loss: (?P<loss>{_NUM})"
    rf"(?:\s*-\s*training perplexity: (?P<perplexity>{_NUM}))?(?![\w.])",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class StepLine:
    """One training step line: the step and its loss (nan or inf when training diverged)."""

    step: int
    loss: float
    perplexity: float | None = None


def parse_step_line(text: str) -> StepLine | None:
    """The step line in `text` (with or without the absl or Kubernetes prefix); None if none."""
    match = _STEP_LINE.search(text)
    if match is None:
        return None
    perplexity = match.group("perplexity")
    return StepLine(
        step=int(match.group("step")),
        loss=float(match.group("loss")),
        perplexity=None if perplexity is None else float(perplexity),
    )
