"""The DAG's documentation, shown in the UI (each task's is its operator's `step_doc`)."""

from __future__ import annotations

DAG_DOC = """
### GRPO post-training on Cloud TPU (MaxText + Pathways)
The tutorial "Gemma 4 26B multi-host RL on TPU v6e", unattended: validate the settings, check
the real project read-only (preflight: quota or reservation, IAM, images, licence), ensure the
bucket, deploy the cluster with Cluster Toolkit (or use an existing one), convert the model
to MaxText (skipped when converted already), start a headless Pathways backend, run the GRPO
client, follow its log until `Post RL Training` (the backend is deleted the moment the wait
ends, unless the deployment's champion is scored on it first: `evaluate_champion`), gate on the
reward, export to Hugging Face format, check the files and compare the export with the
champion (`compare_champion`: one that loses is kept but not promoted).

`cleanup_kubernetes` and `cleanup_cluster` are teardowns: they run however the run ends (a
failed step, "mark failed") and remove what the run created. `outcome` makes the run's state
the truth: failed unless `verify` succeeded and every cleanup did its part. Every task's time
limit comes from the run's settings, capped so the work ends before `dagrun_timeout`
(TPU_RL_DAGRUN_TIMEOUT_MINUTES) leaves the cleanups too little time (their tries and the waits
before retries). A run timed out anyway loses its Kubernetes objects and created cluster
through the DAG's failure callback.

Outputs: `gs://<gcs_bucket>/<model_name>/trained/<run>/` (checkpoints) and
`gs://<gcs_bucket>/<model_name>/hf-trained/<run>/` (export); `<run>` is `rl-` + a hash of the
deployment's identity and the run id, shown in every task's log and as the `tpu-rl.dev/run`
label on every object.
"""
