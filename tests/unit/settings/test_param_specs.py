"""tpu_rl.settings.param_specs: params.json is what the settings declare, each Param's schema
as Airflow's form reads it."""

from __future__ import annotations

from tpu_rl.dag.params import dag_params
from tpu_rl.settings.choices import EVAL_METRICS, Capacity
from tpu_rl.settings.fields import SETTING_FIELDS
from tpu_rl.settings.param_specs import param_spec, param_specs
from tpu_rl.settings.params import SPECS_FILE


def test_the_params_file_is_what_the_settings_declare():
    """The parse reads params.json, not the settings' declaration: run `make params` after
    changing a setting."""
    import json

    assert json.loads(SPECS_FILE.read_text()) == param_specs(), "params.json is stale: make params"
    assert all(
        type(p.value) is type(spec["default"])
        for p, spec in zip(dag_params().values(), param_specs().values(), strict=True)
    )


def spec_of(name: str) -> dict:
    return param_spec(SETTING_FIELDS[name])


def test_only_a_required_settings_type_excludes_null():
    assert spec_of("project")["type"] == "string"
    assert spec_of("num_batches")["type"] == ["null", "integer"]


def test_bounds_sit_inside_all_of_where_the_form_does_not_clamp_them():
    num_batches = spec_of("num_batches")
    assert num_batches["allOf"] == [{"minimum": 1, "maximum": 10_000_000}]
    assert "minimum" not in num_batches and "maximum" not in num_batches
    assert num_batches["description"].endswith(" From 1 to 10,000,000.")
    assert spec_of("max_spend_usd")["allOf"] == [{"minimum": 0}]


def test_a_setting_the_catalogue_cell_gives_starts_empty_saying_the_tutorials():
    topology = spec_of("topology")
    assert topology["default"] is None
    assert topology["description"].endswith("Empty: the catalogue cell's (the tutorial's: 4x8).")


def test_lists_and_metric_objects_carry_their_item_rules():
    args = spec_of("extra_train_args")
    assert args["maxItems"] == 256 and args["items"]["type"] == "string"
    gains = spec_of("min_gain_over_champion")
    assert gains["propertyNames"] == {"enum": list(EVAL_METRICS)}
    assert gains["additionalProperties"] == {"type": "number"}
    assert spec_of("capacity")["enum"] == [c.value for c in Capacity]
