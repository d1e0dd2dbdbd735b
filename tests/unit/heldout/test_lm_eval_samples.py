"""lm-eval's own task code scores a scripted candidate and champion on the benchmark the
repository ships (tests/fixtures/heldout/depot_arithmetic.yaml, GSM8K's task with other data);
its logged samples, read by tpu_rl.heldout.samples, give the paired verdict its items."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.scripted_lm import (
    CANDIDATE_RIGHT,
    CANDIDATE_UNMARKED,
    CHAMPION_RIGHT,
    ITEMS,
    ScriptedModel,
    evaluate,
)
from tpu_rl.heldout.paired import PairedCounts, Verdict, paired_verdict
from tpu_rl.heldout.samples import item_results


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HF_DATASETS_OFFLINE", "1")
        env.setenv("HF_HUB_OFFLINE", "1")
        cache = tmp_path_factory.mktemp("hf-datasets")
        return {
            "candidate": evaluate(ScriptedModel(CANDIDATE_RIGHT, CANDIDATE_UNMARKED), cache),
            "champion": evaluate(ScriptedModel(CHAMPION_RIGHT), cache),
        }


def test_the_items_agree_with_lm_evals_own_score(scored):
    for output in scored.values():
        samples = output["samples"]["depot_arithmetic"]
        for name in ("strict-match", "flexible-extract"):
            items = item_results(samples, filter_name=name)
            assert len(items) == len(ITEMS)
            reported = output["results"]["depot_arithmetic"][f"exact_match,{name}"]
            assert sum(items.values()) / len(items) == pytest.approx(reported)


def test_the_strict_filter_counts_an_answer_without_its_mark_wrong(scored):
    samples = scored["candidate"]["samples"]["depot_arithmetic"]
    strict = item_results(samples)
    flexible = item_results(samples, filter_name="flexible-extract")
    missed = {item for item in strict if flexible[item] and not strict[item]}
    assert {int(item.split(":")[0]) for item in missed} == CANDIDATE_UNMARKED


def test_the_paired_verdict_counts_the_scripted_items(scored):
    candidate, champion = (
        item_results(scored[side]["samples"]["depot_arithmetic"], filter_name="flexible-extract")
        for side in ("candidate", "champion")
    )
    verdict = paired_verdict(candidate, champion, alpha=0.05)
    assert verdict.counts == PairedCounts(both=36, candidate_only=16, reference_only=4, neither=4)
    assert verdict.verdict is Verdict.BETTER, verdict.says("the champion")  # p = 0.012


def test_a_record_without_its_metric_or_logged_twice_is_refused_by_its_doc_id(scored):
    samples = [dict(s) for s in scored["champion"]["samples"]["depot_arithmetic"]]
    strict = [s for s in samples if s["filter"] == "strict-match"]
    with pytest.raises(ValueError, match="doc_id 0 is logged twice under strict-match"):
        item_results([*strict, strict[0]])
    del strict[3]["exact_match"]
    with pytest.raises(ValueError, match=r"doc_id 3: exact_match is None under strict-match"):
        item_results(strict)
    with pytest.raises(ValueError, match="no sample was logged under the filter strict-match"):
        item_results([s for s in samples if s["filter"] != "strict-match"])
