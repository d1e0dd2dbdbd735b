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

# The checks, from their declaration (tpu_rl.preflight.checks), which imports the Google and
# Kubernetes clients: generated here so that the parse reads it without them.
# preflight-step-doc:start (generated: python -m tpu_rl.preflight.checks_doc)
CHECKS_DOC = """
- `apis enabled`: the APIs a run calls are enabled (Compute Engine, GKE, Cloud Storage, IAM,
  Resource Manager; Cloud Quotas when a rung draws on quota)
- `caller permissions`: the deployment's credentials hold the permissions of the tutorial's roles
  (those of creating a cluster too, with `cluster_mode=create`)
- `tpu in zone`: the slice's machine type (its TPU generation's: `ct6e-standard-4t`,
  `ct5p-hightpu-4t`, `tpu7x-standard-4t`) is offered in the zone of every rung
- `reservation`: each rung's capacity: the reservation (in the zone, of the machine type, enough
  free VMs), the calendar reservation's window, or for `flex_start` and `spot` the region's quota of
  the slice's TPU generation (its lines: `reservation`, `tpu quota`)
- `bucket`: the bucket, if it exists, is in the run's region; without uniform access or public
  access prevention it passes with a warning, as a run uses it (its lines: `bucket location`,
  `bucket policy`)
- `gke standard` (`cluster_mode=existing`): the cluster exists in the run's region and is GKE
  Standard (not Autopilot, not zonal)
- `node pools` (`cluster_mode=existing`): the slice's node pools (machine type, topology,
  `cluster_nodepool_count`) and `cpu-np`, without taints the run's pods do not tolerate
- `node pool roles` (`cluster_mode=existing`): the node pools' service accounts may write the
  bucket's objects (a storage write role on the project or the bucket)
- `jobset installed` (`cluster_mode=existing`): the JobSet controller runs, v0.10.1 or later
- `kueue installed` (`cluster_mode=existing`): the Kueue controller runs, v0.15.0 or later
- `kueue queue covers the run` (`cluster_mode=existing`): the LocalQueue `kueue_queue` leads to a
  ClusterQueue covering what the Pathways backend requests, with TPU quota for the run's chips (none
  named: it passes)
- `priority class` (`cluster_mode=existing`): the PriorityClass `TPU_RL_PRIORITY_CLASS` names exists
  (optional: every pod of the run gets it)
- `image pullable`: each image setting's manifest exists and the caller may pull it (a registry
  outside Google that asks for credentials passes: the nodes pull with their own); its lines:
  `image pullable (<setting>)`
- `hf token`: the Hugging Face token is valid and may read the model and the tokenizer (the licence
  accepted, for a gated model); its lines: `hf token`, `hf model access (<repo>)`
- `vertex registry`: the deployment's Vertex AI Model Registry settings, which `promote` needs at
  the end
"""
# preflight-step-doc:end


class PreflightOperator(RunStep):
    """Runs tpu_rl.preflight.run.run_preflight; fails listing each failed check with its fix."""

    step_id = Step.PREFLIGHT
    step_doc = f"""
Reads the real project before anything is spent, and changes nothing.

One line per check: PASS, FAIL or SKIPPED (what it needs failed), what was read, and on FAIL the
fix. In order:
{CHECKS_DOC}
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
