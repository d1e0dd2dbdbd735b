"""`make preflight CONF=<json>`: the run's read-only checks against the real project, from a
terminal, with the deployment's connections (tpu_rl.deployment): one line per check, PASS or
FAIL or SKIPPED (with why), what was read, and on FAIL the fix; every check that can run runs,
a missing connection or credential being one FAIL line. Exit status 1 when a check failed, 2
when the settings are unusable. The same checks as the DAG's `preflight` task.

Usage: python -m tools.preflight SETTINGS.json
"""

from __future__ import annotations

import sys
from pathlib import Path

# What the checks name the run's objects after (the stored identity lives in a deployment's
# metadata DB, which a terminal tool does not read: tpu_rl.deployment.deployment_id).
PREFLIGHT_RUN_ID = "manual__preflight"
GCP_HINT = (
    "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT='google-cloud-platform://' uses your gcloud "
    "application-default credentials (the connection's name: TPU_RL_GCP_CONN_ID)"
)
HF_HINT = (
    'AIRFLOW_CONN_HUGGINGFACE_DEFAULT=\'{"conn_type": "generic", "password": "hf_..."}\' holds '
    "the Hugging Face token (the connection's name: TPU_RL_HF_CONN_ID)"
)


def main(argv: list[str]) -> int:
    from tpu_rl import deployment
    from tpu_rl.layout import RunLayout
    from tpu_rl.preflight.result import failed, report_lines
    from tpu_rl.preflight.run import run_preflight
    from tpu_rl.report.estimate import estimate_run, format_estimate
    from tpu_rl.settings.run_settings import SettingsError, load_settings_file

    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    try:
        settings = load_settings_file(Path(argv[0]))
        identity = deployment.configured_deployment_id() or "preflight"
    except (SettingsError, deployment.DeploymentError) as err:
        problems = getattr(err, "errors", None) or [str(err)]
        for problem in problems:
            print(f"FAIL settings: {problem}")
        print("SKIPPED every cloud check: they need valid settings")
        print(f"0 checks run: {argv[0]} has {len(problems)} problem(s); make plan lists them too")
        return 2
    try:
        gcp = deployment.check_gcp_connection()
    except deployment.DeploymentError as err:
        gcp = failed("google connection", str(err), GCP_HINT)
    try:
        token = deployment.hf_token()
    except deployment.DeploymentError as err:
        token = failed("hf connection", str(err), HF_HINT)
    results = run_preflight(RunLayout(settings, PREFLIGHT_RUN_ID, identity), gcp, token)
    for line in report_lines(results, format_estimate(estimate_run(settings))):
        print(line)
    return 1 if any(r.failed for r in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
