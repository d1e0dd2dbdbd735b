"""tpu-rl-airflow: the tutorial's GRPO post-training on Cloud TPU in GKE, as Airflow steps.

One subpackage per concern of the tutorial; each `__init__.py` says what lives where. The top
level holds what every concern shares: `layout.py` (every name and path of a run), `names.py`,
`deployment.py` (the deployer's settings), `run_record.py`, `storage.py`, `bucket.py`,
`conversion_lock.py`, `include_files.py`, `token_masking.py`, `tpu.py` (TPU slice facts),
`prices.py` (the TPU price table), `plan.py` (`make plan`) and `airflow_plugin.py` (the UI
plugin). Which imports which: the six layers of pyproject.toml's [tool.importlinter] contract,
each importing only from those below it.
"""
