"""The run's settings, declared once and derived from there.

- choices.py: the StrEnums of the settings with a closed set of values (and EVAL_METRICS, the
  evaluation metrics in the tables' order).
- rungs.py: the capacity_ladder setting's text, rungs `mode@zone` (what a rung does: cluster).
- metadata.py: what each field's metadata holds (title, form section, bounds, required-ness,
  MaxText flag, choices, text rule) and the helpers that declare and read it.
- fields.py: RunSettings, the frozen dataclass: every setting with its default and metadata,
  its description (what it does, in a user's words) and its MaxText flag among them.
- run_settings.py: load_settings / load_settings_file (JSON types, then validation) and
  SettingsError.
- text_rules.py: each free-text setting's length limit and character class (its field's `text`),
  for the Params' JSON schema and for validation.
- validation.py, grpo_rules.py, capacity_rules.py, references.py: the rules a run's settings meet.
- device_mesh.py: JAX's device mesh on a role's share of a TPU slice, as MaxText builds it (the
  physical rules of grpo_rules.physical_meshes).
- param_specs.py: generates params.json (`make params`); params.py reads it for the DAG files'
  parse (each Param as data, and the defaults), which imports nothing else from here (the run
  DAG's Params, with the cost estimate: tpu_rl.dag.params).
- table.py: generates docs/settings.md, the settings reference.

Import-free: the DAG files' parse imports tpu_rl.settings.params alone.
"""
