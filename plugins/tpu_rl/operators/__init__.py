"""The DAG's operators: one class per step, each declaring its task id, doc, time limit and
console links (tpu_rl.operators.run_step.RunStep); what a step needs where it runs is imported
in its methods, so parsing the DAG file imports none of it.

- run_step: the steps' shared base (declarations, run limits, the run's layout once per task)
- checks: validate, gate, verify, outcome (Python steps)
- preflight: preflight (read-only checks of the real project, tpu_rl.preflight)
- cluster: ensure_bucket, create_cluster, cleanup_cluster (Cluster Toolkit)
- cluster_objects: hf_token_secret, cleanup_kubernetes
- backend: start_backend, stop_backend (the Pathways JobSet)
- jobs, job_steps: convert, train, export (GKEStartJobOperator)
- rewards: wait_for_rewards (the reward sensor, with its resume after a capacity loss)
- champion: evaluate_champion, compare_champion
- promotion: approve, promote
- rung_move, training_resume: bases of steps (leaving a capacity ladder's rung; resuming
  training)
- janitor: the janitor DAG's sweep
"""

# The run's cluster, from its Params, as the GKE operators' fields (rendered when a task runs).
RUN_CLUSTER = {
    "project_id": "{{ params.project }}",
    "location": "{{ params.region }}",
    "cluster_name": "{{ params.cluster_name }}",
}
