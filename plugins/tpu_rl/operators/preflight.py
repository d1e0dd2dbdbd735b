"""The run's preflight: read-only checks against the real project before anything costs money.

A task of its own, right after `validate`, rather than more checks inside it: validate lists
every problem of the settings and connections before any cloud call (a one-try step); preflight
is the run's first cloud read, so it may meet a passing network or API error: it gets tries of
its own (a failed check does not retry: only a read that got no answer does) and its own time
limit, and its lines show on their own in the run's log. Its modules (tpu_rl.preflight) are
imported in execute: they bring the Google and Kubernetes clients (tests/dags/
test_parse_imports.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tpu_rl.dag.limits import short_step
from tpu_rl.names import Step
from tpu_rl.operators.run_step import RunStep

if TYPE_CHECKING:
    from airflow.sdk import Context


class PreflightOperator(RunStep):
    """Runs tpu_rl.preflight.run.run_preflight; fails listing each failed check with its fix."""

    step_id = Step.PREFLIGHT
    step_doc = """
Reads the real project before anything is spent, and changes nothing: the APIs enabled, the
caller's IAM permissions, v6e offered in the zone, the reservation (or the TPU quota for
flex-start and Spot), the bucket's region and policy, for an existing cluster GKE Standard, its
node pools, JobSet, Kueue, the ClusterQueue and the priority class, the images, the Hugging
Face token and the model's licence, and the deployment's Vertex AI registry settings (which
`promote` needs at the end). One line per check: PASS/FAIL, what was read, the fix.

**Failed?** Its log ends with each failed check and the command or console step that fixes it;
`make preflight CONF=<json>` runs the same checks from a terminal.
"""
    limit = short_step(3)

    def execute(self, context: Context) -> list[dict[str, Any]]:
        from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

        from tpu_rl import deployment
        from tpu_rl.preflight.result import report_lines
        from tpu_rl.preflight.run import run_preflight
        from tpu_rl.report.estimate import estimate_run, format_estimate

        layout = self.run_layout(context)
        try:
            connections = deployment.check_gcp_connection(), deployment.hf_token()
        except deployment.DeploymentError as err:  # a setting to correct: no try clears it
            raise AirflowFailException(str(err)) from err
        results = run_preflight(layout, *connections)
        estimate = format_estimate(estimate_run(layout.settings))
        for line in report_lines(results, estimate):
            self.log.info("%s", line)
        failures = [r for r in results if r.failed]
        if failures:
            listed = "\n".join(r.line() for r in failures)
            if any(r.transient for r in failures):
                raise AirflowException(f"preflight could not read everything:\n{listed}")
            raise AirflowFailException(f"preflight found {len(failures)} problem(s):\n{listed}")
        return [r.to_dict() for r in results]
