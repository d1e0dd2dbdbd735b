"""tpu_rl.settings.grpo_rules: the GRPO rules on the settings alone (each rule's refusal through
validate: test_validation.py's RULE_CASES): the tutorial's settings break none, a role gets whole
devices of its slice, and the trainer's ICI axes must fill them."""

from __future__ import annotations

import pytest

from tpu_rl.settings import grpo_rules
from tpu_rl.settings.grpo_rules import GRPO_RULES
from tpu_rl.settings.run_settings import RunSettings


def settings(conf: dict, **changes: object) -> RunSettings:
    return RunSettings(**{**conf, **changes})


def test_the_tutorials_settings_break_no_grpo_rule(tutorial_conf):
    s = settings(tutorial_conf)
    assert {rule.__name__: list(rule(s)) for rule in GRPO_RULES} == {
        rule.__name__: [] for rule in GRPO_RULES
    }


def test_a_one_slice_run_splits_its_devices_by_the_fractions(tutorial_conf):
    s = settings(tutorial_conf)  # v6e-32: 32 devices, half each
    assert grpo_rules._role_devices(s, "trainer_devices_fraction") == 16
    quarter = settings(tutorial_conf, sampler_devices_fraction=0.25)
    assert grpo_rules._role_devices(quarter, "sampler_devices_fraction") == 8


def test_a_fraction_of_no_whole_device_is_refused_by_the_mesh_rule(tutorial_conf):
    s = settings(tutorial_conf, trainer_devices_fraction=0.3)
    assert list(grpo_rules.trainer_mesh(s)) == [
        "trainer_devices_fraction: 0.3 of the 32 devices of a v6e-32 is not a whole number of "
        "devices"
    ]


@pytest.mark.parametrize(
    ("axes", "filled"),
    [
        ((4, 4, -1), {"tensor": 4, "expert": 4, "fsdp": 1}),
        ((2, 4, 2), {"tensor": 2, "expert": 4, "fsdp": 2}),
        ((3, 4, -1), None),  # 12 does not divide 16
        ((2, 4, 4), None),  # 32, not 16
        ((-1, 4, -1), None),  # two axes auto
        ((0, 4, 4), None),
    ],
)
def test_the_trainers_axes_fill_its_devices_as_maxtext_fills_them(tutorial_conf, axes, filled):
    tensor, expert, fsdp = axes
    s = settings(
        tutorial_conf,
        ici_tensor_parallelism=tensor,
        ici_expert_parallelism=expert,
        ici_fsdp_parallelism=fsdp,
    )
    found = grpo_rules._filled_axes(s, 16)
    expected = filled and {f"ici_{k}_parallelism": v for k, v in filled.items()}
    assert found == expected
    assert bool(list(grpo_rules.trainer_mesh(s))) is (filled is None)


def test_fractions_may_fill_the_slice_but_not_exceed_it(tutorial_conf):
    assert list(grpo_rules.device_fractions(settings(tutorial_conf))) == []
    over = settings(tutorial_conf, trainer_devices_fraction=0.75)
    assert list(grpo_rules.device_fractions(over)) == [
        "trainer_devices_fraction + sampler_devices_fraction: 1.25 exceeds 1 (the trainer and "
        "sampler would share chips)"
    ]
