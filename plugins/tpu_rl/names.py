"""Names the run's objects and the operators that make them share, cheap to import at parse."""

from __future__ import annotations

CONTAINER = "maxtext"  # the MaxText container of every Job the run submits
BACKEND_PODS = "backend"  # a step whose links show the Pathways JobSet's pods (RunStep.pods_of)
DAG_ID = "tpu_rl_post_training"  # the run's DAG: its labels, the janitor's and the UI's queries
