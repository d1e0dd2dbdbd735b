"""The janitor: which leftover objects of this deployment it sweeps (rules) and its DAG's
Params (params); its sweep step is tpu_rl.operators.janitor."""
