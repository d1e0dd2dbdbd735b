"""A catalogue cell's settings (tpu_rl.settings.cell_defaults): its overrides keyed by setting
name, checked against the settings' declaration, the settings' defaults for the rest."""

from __future__ import annotations

import pytest

from tpu_rl.catalogue.cells import CELL_SETTINGS, CELLS, RL_YML, Cell, find_cell, over_rl_yml
from tpu_rl.settings.cell_defaults import cell_defaults, cell_problems, cell_settings
from tpu_rl.settings.fields import SETTING_FIELDS
from tpu_rl.settings.metadata import default_of, plain

CELL_IDS = [f"{c.model_name}@{c.tpu_type}" for c in CELLS]


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
def test_every_cells_overrides_are_settings_of_their_type_and_pass_their_rules(cell):
    assert cell_problems(cell) == []


def test_a_cell_naming_an_unknown_setting_or_a_wrong_type_is_refused():
    made_up = Cell(
        "gemma4-26b",
        "v6e-32",
        "4x8",
        "a made-up source",
        "2026-12-06",
        over_rl_yml(
            ici_tensor_paralelism=2,  # a typo
            num_batches=3,  # a setting, not one a cell sets
            rollout_tensor_parallelism="4",
            scan_layers=1,
            trainer_devices_fraction=1,
            rollout_expert_parallelism=0,
            hbm_utilization_vllm=1.5,
            optimizer="sgd",
            vllm_hf_overrides="[]",
        ),
    )
    assert cell_problems(made_up) == [
        "gemma4-26b on v6e-32: trainer_devices_fraction: must be of type float, got 1",
        "gemma4-26b on v6e-32: rollout_tensor_parallelism: must be of type int, got '4'",
        "gemma4-26b on v6e-32: ici_tensor_paralelism: names no setting (tpu_rl.settings.fields)",
        "gemma4-26b on v6e-32: num_batches: not a setting a cell sets "
        "(tpu_rl.catalogue.cells.SOURCE_SETTINGS; the trigger form gives a run every other "
        "setting, so a cell's value would never apply)",
        "gemma4-26b on v6e-32: scan_layers: must be of type bool, got 1",
        "gemma4-26b on v6e-32: rollout_expert_parallelism: must be at least 1, got 0",
        "gemma4-26b on v6e-32: hbm_utilization_vllm: must be in (0, 1), got 1.5",
        "gemma4-26b on v6e-32: optimizer: must be 'adafactor' or 'adamw', got 'sgd'",
        "gemma4-26b on v6e-32: vllm_hf_overrides: must be a JSON object",
    ]


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
def test_a_setting_a_cell_does_not_set_is_the_settings_default(cell):
    settings = cell_settings(cell)
    assert list(settings) == ["model_name", *CELL_SETTINGS]
    for name in CELL_SETTINGS:
        if name not in cell.settings():
            assert settings[name] == plain(default_of(SETTING_FIELDS[name])), name


def test_a_cell_whose_source_runs_rl_yml_takes_maxtexts_values_where_it_sets_none():
    """The Llama 8B tutorial sets no mesh: rl.yml's and the trainer's default mesh, not the
    settings' (the Gemma tutorial's) 2 x 4 trainer mesh, 4-way rollout and adafactor."""
    settings = cell_settings(find_cell("llama3.1-8b", "v6e-8"))
    assert {name: settings[name] for name in RL_YML} == dict(RL_YML)
    assert settings["vllm_hf_overrides"] == "{}"


def test_a_run_keeps_the_values_it_gives_and_takes_the_cells_for_the_rest():
    cell = find_cell("gpt-oss-20b", "v5p-64")
    raw = {"model_name": "gpt-oss-20b", "tpu_type": "v5p-64", "scan_layers": False}
    filled = cell_defaults(raw)
    assert "scan_layers" not in filled and "tpu_type" not in filled
    assert filled["rollout_model_impl"] == "flax_nnx"
    assert filled == {k: v for k, v in cell_settings(cell).items() if k not in raw}
