"""outcome's verdict, as the run's note and its failure read it: the failed task first."""

from __future__ import annotations

from tests.conftest import PIPELINE
from tpu_rl.operators.checks import failure_verdict

# every step a failed validate keeps from running but verify (named apart) and outcome
STEPS = [*PIPELINE[1:-1], "stop_backend", "cleanup_kubernetes", "cleanup_cluster"]


def test_a_failed_validate_names_it_first_and_counts_what_it_kept_from_running():
    states = {"validate": "failed", "verify": "upstream_failed"}
    states |= dict.fromkeys(STEPS, "upstream_failed")
    assert failure_verdict("verify", states) == (
        "the run did not succeed: validate failed; verify is upstream_failed; "
        "not run (upstream_failed): cleanup_cluster, cleanup_kubernetes, convert and 10 more"
    )


def test_a_failed_export_names_the_few_tasks_it_kept_from_running():
    states = {**dict.fromkeys(STEPS, "success"), "export": "failed", "verify": "upstream_failed"}
    assert failure_verdict("verify", states) == (
        "the run did not succeed: export failed; verify is upstream_failed"
    )


def test_a_failed_cleanup_after_a_verified_export_fails_the_run():
    states = {**dict.fromkeys(STEPS, "success"), "cleanup_cluster": "failed", "verify": "success"}
    assert failure_verdict("verify", states) == "the run did not succeed: cleanup_cluster failed"


def test_a_run_stopped_before_verify_ran_says_so_and_a_clean_run_has_no_verdict():
    states = dict.fromkeys(STEPS, "success")
    assert failure_verdict("verify", {**states, "verify": None}) == (
        "the run did not succeed: verify is None (stopped before it ran: marked failed?)"
    )
    assert failure_verdict("verify", {**states, "verify": "success"}) is None
