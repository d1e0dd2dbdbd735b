"""A slice larger than any of its generation's is refused by validate."""

from __future__ import annotations

import pytest

from tpu_rl.settings.run_settings import SettingsError, load_settings

SPOT = {"capacity": "spot", "reservation": ""}


@pytest.mark.parametrize(
    ("tpu_type", "topology", "compute_type", "chips", "most"),
    [
        ("v5p-12800", "16x20x20", "ct5p-hightpu-4t", 6400, 6144),
        ("tpu7x-1769472", "96x96x96", "tpu7x-standard-4t", 884736, 9216),
    ],
)
def test_a_slice_larger_than_its_generations_largest_is_refused(
    tutorial_conf, tpu_type, topology, compute_type, chips, most
):
    conf = {**tutorial_conf, **SPOT, "tpu_type": tpu_type, "topology": topology}
    with pytest.raises(SettingsError) as refused:
        load_settings({**conf, "compute_type": compute_type})
    assert f"topology: {topology} ({chips} chips) is larger than any " in str(refused.value)
    assert f"(at most {most} chips" in str(refused.value)


@pytest.mark.parametrize(
    ("tpu_type", "topology", "compute_type"),
    [
        ("v5p-12288", "16x16x24", "ct5p-hightpu-4t"),
        ("tpu7x-18432", "16x24x24", "tpu7x-standard-4t"),
    ],
)
def test_the_largest_slice_of_a_generation_passes(tutorial_conf, tpu_type, topology, compute_type):
    conf = {**tutorial_conf, **SPOT, "tpu_type": tpu_type, "topology": topology}
    assert load_settings({**conf, "compute_type": compute_type}).chips in (6144, 9216)
