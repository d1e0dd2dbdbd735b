"""Names the run's objects and the operators that make them share, cheap to import at parse."""

from __future__ import annotations

CONTAINER = "maxtext"  # the MaxText container of every Job the run submits
DAG_ID = "tpu_rl_post_training"  # the run's DAG: its labels, the janitor's and the UI's queries
