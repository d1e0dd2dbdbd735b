"""A setting's field metadata: everything the form, the reference and the command line read of a
setting is declared on its field, once."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from tpu_rl.settings.metadata import Section, describe, maxtext_flag
from tpu_rl.settings.param_specs import param_spec


def test_a_setting_declared_once_carries_its_description_and_its_flag():
    """The description lives in the field's declaration, not in a second table keyed
    by the setting's name; the Param's text and the MaxText flag come from the field alone."""

    @dataclass(frozen=True)
    class Declared:
        new_knob: int = Section.GRPO.maxtext(
            3, "New knob", description="What the new knob does, in one place.", bounds=(1, 9)
        )

    (f,) = dataclasses.fields(Declared)
    assert maxtext_flag(f) == "new_knob"
    assert describe(f) == "What the new knob does, in one place. MaxText flag: new_knob."
    spec = param_spec(f)
    assert (spec["title"], spec["section"], spec["default"]) == ("New knob", "GRPO", 3)
    assert spec["description"] == (
        "What the new knob does, in one place. MaxText flag: new_knob. From 1 to 9."
    )


@pytest.mark.parametrize(
    "declare",
    [
        lambda: Section.RUN.setting(1, "Knob", bounds=(1, 2)),
        lambda: Section.GRPO.maxtext(1.0, "Knob"),
        lambda: Section.RUN.limit(5, "Step", 10),
        lambda: Section.MODEL.image("registry/image:tag", "Image"),
    ],
)
def test_a_setting_cannot_be_declared_without_its_description(declare):
    with pytest.raises(TypeError, match="description"):
        declare()
