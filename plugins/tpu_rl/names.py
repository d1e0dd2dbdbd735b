"""Names the run's objects and the operators that make them share, cheap to import at parse."""

from __future__ import annotations

from enum import StrEnum

CONTAINER = "maxtext"  # the MaxText container of every Job the run submits
BACKEND_PODS = "backend"  # a step whose links show the Pathways JobSet's pods (RunStep.pods_of)
DAG_ID = "tpu_rl_post_training"  # the run's DAG: its labels, the janitor's and the UI's queries
JANITOR_DAG_ID = "tpu_rl_janitor"  # the DAG that sweeps what runs of DAG_ID left
UI_PREFIX = "/tpu-rl"  # where the api-server mounts the UI plugin's app (tpu_rl.airflow_plugin)
ESTIMATE_PAGE = f"{UI_PREFIX}/estimate"  # the estimate page (tpu_rl.ui.app), linked by the form


class Step(StrEnum):
    """The post-training DAG's task ids, declared once: each operator's `step_id` names its own,
    and the plan, the run report, the RL page and the janitor read the others' results by them.

    Each member is its task id as a str (equal to it, hashed and formatted as it), so a member
    looks up a task id's dict entry and goes into JSON and f-strings as the plain id."""

    VALIDATE = "validate"
    PREFLIGHT = "preflight"
    ENSURE_BUCKET = "ensure_bucket"
    CREATE_CLUSTER = "create_cluster"
    HF_TOKEN_SECRET = "hf_token_secret"
    CONVERT = "convert"
    START_BACKEND = "start_backend"
    TRAIN = "train"
    WAIT_FOR_REWARDS = "wait_for_rewards"
    GATE = "gate"
    EXPORT = "export"
    VERIFY = "verify"
    STOP_BACKEND = "stop_backend"
    EVALUATE_CHAMPION = "evaluate_champion"
    EVALUATE_HELDOUT = "evaluate_heldout"
    COMPARE_CHAMPION = "compare_champion"
    CLEANUP_KUBERNETES = "cleanup_kubernetes"
    CLEANUP_CLUSTER = "cleanup_cluster"
    APPROVE = "approve"
    PROMOTE = "promote"
    OUTCOME = "outcome"
