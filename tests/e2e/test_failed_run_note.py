"""A failed run's note leads with the first error's text, not only "validate failed; verify is
upstream_failed; ... and 14 more" with the reason in validate's log alone."""

from __future__ import annotations

import logging

from sandbox.harness import SETTINGS, Sandbox, logged_note


def test_a_failed_runs_note_leads_with_the_first_error(airflow_db, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="tpu_rl")
    with Sandbox(tmp_path).up() as box:
        result = box.run({**SETTINGS, "cluster_name": "-not-a-valid-name-"})
    assert result.state == "failed", result.why()
    # no Airflow API connection under dag.test: outcome logs the note it could not set
    note = logged_note(caplog.records)
    verdict = note.split("\n\n")[0]
    assert verdict.startswith(
        "**failed: validate: 1 invalid setting(s): cluster_name: '-not-a-valid-name-'"
    ), note
    assert "(validate failed; " in verdict, note
    assert "All runs: [RL post-training page](/plugin/rl-post-training)" in note
