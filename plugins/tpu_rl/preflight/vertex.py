"""The deployment's Vertex AI Model Registry settings, which `promote` needs at the run's very
end (tpu_rl.deployment.promotion_problems): refused here, before any spend."""

from __future__ import annotations

from tpu_rl import deployment
from tpu_rl.preflight.result import CheckResult, failed, passed
from tpu_rl.settings.fields import RunSettings

NAME = "vertex registry"


def check_registry_settings(s: RunSettings) -> CheckResult:
    """PASS with the model, region and serving image (or that none is set), else FAIL."""
    if problems := deployment.promotion_problems(s.region):
        return failed(
            NAME,
            "; ".join(problems),
            "fix the deployment's setting (TPU_RL_<NAME> in the scheduler's and workers' "
            "environment, or [tpu_rl] <name> in airflow.cfg), or unset TPU_RL_VERTEX_REGISTRY "
            "to promote to the champion record only",
        )
    model = deployment.vertex_registry()
    if not model:
        return passed(NAME, "not set: a promotion writes the champion record only")
    return passed(
        NAME,
        f"model {model} in {deployment.vertex_region(s.region)}, serving image "
        f"{deployment.vertex_serving_image()}",
    )
