"""The DAG's documentation and each task's, shown in the UI: what it does, and what to do when
it fails."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow.sdk import DAG

DAG_DOC = """
### GRPO post-training on Cloud TPU (MaxText + Pathways)
The tutorial "Gemma 4 26B multi-host RL on TPU v6e", unattended: validate the settings, ensure
the bucket, deploy the cluster with Cluster Toolkit (or use an existing one), convert the model
to MaxText (skipped when converted already), start a headless Pathways backend, run the GRPO
client, follow its log until `Post RL Training` (the backend is deleted the moment the wait
ends), gate on the reward, export to Hugging Face format and check the files.

`cleanup_kubernetes` and `cleanup_cluster` are teardowns: they run however the run ends (a
failed step, "mark failed") and remove what the run created. `outcome` makes the run's state
the truth: failed unless `verify` succeeded and every cleanup did its part. Every task's time
limit comes from the run's settings, capped so the work ends before `dagrun_timeout`
(TPU_RL_DAGRUN_TIMEOUT_MINUTES) leaves the cleanups too little time.

Outputs: `gs://<gcs_bucket>/<model_name>/trained/<run>/` (checkpoints) and
`gs://<gcs_bucket>/<model_name>/hf-trained/<run>/` (export); `<run>` is `rl-` + a hash of the
run id, shown in every task's log and as the `tpu-rl.dev/run` label on every object.
"""

TASK_DOCS = {
    "validate": """
Checks the run's settings (the trigger form's fields and the run's conf) before anything costs
money, and lists every problem at once. Returns the settings the other tasks use.

**Failed?** Its log lists each invalid setting and why; trigger again with them fixed.
""",
    "ensure_bucket": """
Creates the `gcs_bucket` in `region` unless it exists. Checkpoints, the export and
the cluster's terraform state live there.

**Failed?** Usually the connection's account lacks `storage.buckets.create`, or the name is
taken by another project.
""",
    "create_cluster": """
Deploys the tutorial's GKE cluster with Cluster Toolkit (`gcluster deploy`) on the TPU capacity
in `capacity` (the reservation in `reservation`, flex-start or Spot); does nothing with
`cluster_mode=existing`. Safe to re-run.

**Failed?** The log holds gcluster's and terraform's output: quota, reservation name or zone,
or missing IAM roles are the usual causes. `cleanup_cluster` still removes what was created.
""",
    "hf_token_secret": """
Copies the Hugging Face token from the Airflow connection into a Secret of this run, for the
conversion and export Jobs. The token is never a Param and never logged.
""",
    "convert": """
Converts the Hugging Face model to a MaxText checkpoint in `gs://<bucket>/<model>/max-text-format/`
with a Kubernetes Job. Skipped when a complete conversion is already there.

**Failed?** The task log says how the Job ended; the *Pod logs* link opens the pod's log in
Cloud Logging. A wrong token or model id fails here.
""",
    "start_backend": """
Starts the headless Pathways backend (a JobSet holding the TPU slice) and waits until all its
pods run, at most `pending_timeout_minutes` (TPU capacity or Kueue can hold them).

**Failed?** Pending pods: the log names the condition (Kueue admission, TPU capacity).
""",
    "train": """
Submits the GRPO client Job (`train_rl`) against the backend and returns at once;
`wait_for_rewards` follows it.
""",
    "wait_for_rewards": """
Follows the training Job's log (deferred: no worker slot while it waits) until the
`Post RL Training` line, and returns the pre- and post-training rewards. When training loses
its TPU capacity (preempted or removed nodes, evicted pods), it resumes from the newest complete
checkpoint with a new backend and Job under the same names, at most `max_training_restarts`
times; the result's `pre` is the first attempt's and `attempts` lists each attempt. Fails when
the Job fails for another reason or `training_timeout_minutes` passes.

**Failed?** The reason is in the task log; *Pod logs* opens the Job's log in Cloud Logging.
""",
    "stop_backend": """
Deletes the Pathways JobSet once the reward wait ended, beside the gate and the export, so the
TPUs stop billing; the wait already released it, so this only makes sure.
""",
    "gate": """
Stops the run before export unless the post-training `mean_reward` is at least the
pre-training one plus `min_reward_gain`. A stop is a failure on purpose: the run is marked
failed and the notification says why, with both rewards.
""",
    "export": """
Exports the newest checkpoint of this run to Hugging Face format in
`gs://<bucket>/<model>/hf-trained/<run>/`.

**Re-running it?** Clearing export clears the cluster and Secret setups too (the run's cleanup
removed them): it waits for them to run again instead of racing the redeploy.
""",
    "verify": """
Checks the exported files, writes `run-report.json` and `run-report.md` next to them, and emits
the `tpu_rl_exported_model` asset event (which can trigger downstream DAGs). It only reads the
bucket, so the cleanups do not wait for it: the TPUs go the moment export ends.
""",
    "cleanup_kubernetes": """
A teardown: runs however the run ends (failed, marked failed) once the cluster or the token
Secret was set up. Deletes every Job, JobSet and Secret labelled with this run. Retries; whatever it
cannot remove, the `tpu_rl_janitor` DAG removes later.
""",
    "cleanup_cluster": """
A teardown: runs however the run ends once the bucket (terraform's state) exists, so a
half-deployed cluster is destroyed too. Destroys the cluster this run created
(`gcluster destroy`), unless `keep_cluster` is set or the cluster was an existing one.

**Failed?** The cluster still bills: re-run this task, or let `tpu_rl_janitor` destroy it.
""",
    "outcome": """
The run's verdict, a teardown and the DAG's one leaf: fails, naming them, unless `verify`
succeeded and no step or cleanup failed. So a marked-failed, stopped or half-cleaned run ends
failed, and a successful cleanup never hides a failed step.
""",
}


def document(dag: DAG) -> None:
    """Sets each task's doc_md from TASK_DOCS."""
    for task in dag.tasks:
        task.doc_md = TASK_DOCS.get(task.task_id)
