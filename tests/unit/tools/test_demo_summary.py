"""`make demo`'s closing lines for a failed run: the first error, not empty rewards."""

from __future__ import annotations

from types import SimpleNamespace

from tools.demo import summary

REASON = (
    "2 invalid setting(s): num_batchs: unknown setting (did you mean num_batches?); "
    "project: required, and empty"
)


def failed_validate() -> SimpleNamespace:
    """What the sandbox harness returns for a run whose settings were refused."""
    return SimpleNamespace(
        state="failed",
        task_states={"validate": "failed", "outcome": "failed", "create_cluster": None},
        xcoms={"validate.failure": REASON},
        calls=[],
        leftovers=[],
    )


def test_a_failed_run_shows_its_first_error_line():
    lines = summary(failed_validate(), {}, 12.0, "none (no export)", ["validate", "outcome"])
    assert lines[0].startswith("tpu_rl_post_training: FAILED in 12 s (failed: validate, outcome)")
    assert lines[1] == f"error:    validate: {REASON}"
    assert lines[2] == "rewards:  none (the run stopped before training reported them)"
    assert not any("None" in line for line in lines), lines


def test_the_sandboxs_compressed_clock_is_said_under_the_report():
    """The report's "8 hosts x 0.00 h" comes with why: the sandbox's clock runs 1000x fast."""
    lines = summary(failed_validate(), {}, 12.0, "none (no export)", ["validate", "outcome"])
    report = next(i for i, line in enumerate(lines) if line.startswith("report:"))
    assert lines[report + 1].startswith("sandbox:  time compressed about 1000x")
    assert '"8 hosts x 0.00 h"' in lines[report + 1]
