"""The catalogue of models and TPU cells a run can choose, as data: each model's Hugging Face
repository, MaxText name, conversion and export routes, tokenizer, chat template and gating
(models.py), and each cell model x TPU type/topology with the settings its source sets (trainer
mesh, rollout parallelism, vLLM memory share, rollout engine path: `overrides`, keyed by setting
name) and whether it ran on Pathways, citing the public run or script it follows and its date
(cells.py). docs/catalogue.md says how to add a cell.

Below the settings (tpu_rl.settings fills a run's unset settings from its cell): it imports only
tpu_rl.tpu.
"""
