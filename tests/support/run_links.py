"""The console links each step of the run DAG declares, by task id (the bucket's link is the
provider's own)."""

from __future__ import annotations

from tests.run_steps import RUN_STEPS
from tpu_rl.operators.cluster import EnsureBucketOperator

LINKS_BY_TASK = {
    step.step_id: tuple(step.operator_extra_links)
    for step in RUN_STEPS
    if step is not EnsureBucketOperator
}
