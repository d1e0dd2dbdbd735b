"""Settings generated around every cell (tests/maxtext/judging.py GENERATED, valid and invalid):
`validate` passes none that MaxText refuses, refuses what MaxText accepts only by the product's own
stricter policies (POLICIES), and each rule it learned from MaxText is MaxText's own refusal."""

from __future__ import annotations

import pytest

# the session's judge (conftest.judged) runs in the first test: up to about 15 minutes
pytestmark = pytest.mark.timeout(1800)

# validate's rules stricter than MaxText on purpose: a problem text, and why
POLICIES = {
    "num_trainer_slices: -1 with": "one device list cut across slices by the fractions: MaxText "
    "builds each role's mesh when the cut falls at a slice's last device in JAX's device order "
    "(libtpu's here), which the product does not rely on",
    "exceeds 1 (the trainer and sampler would share chips)": "MaxText lets both roles use the "
    "same devices; the product gives each its own chips",
    "is not a whole number of devices": "MaxText takes int(devices x fraction) silently; the "
    "product asks for the share that is meant",
}
# the rules validate learned from MaxText: a problem text, and where MaxText (or JAX under it)
# refuses such a run (its stage and innermost line, tools/maxtext_judge)
LEARNED = {
    "builds no mesh on trainer and sampler slices": {
        *(("trainer_mesh", f"maxtext/utils/max_utils.py:{line}") for line in (464, 471, 479)),
        *(("config", f"maxtext/utils/model_creation_utils.py:{line}") for line in (714, 718)),
    },
    "but not the sampler's": {("sampler_mesh", "maxtext/utils/max_utils.py:479")},
    "they do not fill a box of chips": {
        ("trainer_mesh", "jax/_src/mesh_utils.py:726"),
        ("sampler_mesh", "jax/_src/mesh_utils.py:726"),
    },
    "Failed to find assignment": {
        ("trainer_mesh", "jax/_src/mesh_utils.py:372"),
        ("sampler_mesh", "jax/_src/mesh_utils.py:372"),
    },
}


def test_at_least_200_settings_valid_and_invalid_are_judged(judged):
    cases = judged.generated
    valid = [c for c in cases if not c.problems]
    accepted = [c for c in cases if judged.maxtext_accepts(c)]
    assert len(cases) >= 200
    assert len(valid) >= 50 and len(cases) - len(valid) >= 50, len(valid)
    assert len(accepted) >= 50 and len(cases) - len(accepted) >= 50, len(accepted)


def test_validate_passes_no_setting_maxtext_refuses(judged):
    missed = [
        f"{c.id}: {judged.refusal(c)}"
        for c in judged.generated
        if not c.problems and not judged.maxtext_accepts(c)
    ]
    assert missed == [], "\n".join(missed)


def test_validate_refuses_what_maxtext_accepts_only_by_its_policies(judged):
    stricter = [c for c in judged.generated if c.problems and judged.maxtext_accepts(c)]
    unexplained = [
        f"{c.id}: {p}"
        for c in stricter
        for p in c.problems
        if not any(text in p for text in POLICIES)
    ]
    assert unexplained == [], "\n".join(unexplained)


@pytest.mark.parametrize("text", LEARNED)
def test_a_learned_rule_is_maxtexts_own_refusal(judged, text):
    """Among the generated cases some are refused by this rule alone, and MaxText refuses each
    of them where the rule says."""
    alone = [c for c in judged.generated if c.problems and all(text in p for p in c.problems)]
    assert alone, f"no generated case is refused by {text!r} alone: widen judging.CHOICES"
    for case in alone:
        verdict = judged.verdicts[case.id]
        assert (verdict["stage"], verdict["where"]) in LEARNED[text], (case.id, verdict)
