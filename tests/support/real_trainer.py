"""The real trainer's runs (tests/trainer): the settings of a whole run on Tunix's toy model."""

from __future__ import annotations

from sandbox.harness import SETTINGS

STEPS = 20
# 20 steps, a save every 5 (Tunix also saves step 1), an Intermediate Eval every 5 (the toy's
# own eval_interval flag, through extra_train_args as a run sets it); a progress report about
# every 1.2 s of the lines' time: the toy trains a step in 10-30 ms once compiled
CONF = {
    **SETTINGS,
    "num_batches": STEPS,
    "checkpoint_period": 5,
    "extra_train_args": ["eval_interval=5"],
    "progress_report_minutes": 0.02,
}
