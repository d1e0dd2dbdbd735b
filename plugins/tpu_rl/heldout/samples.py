"""Per-item results from lm-eval's logged samples: which held-out items a model answered right.

lm-eval (0.4.13, lm_eval/evaluator.py lines 627-667) logs one record per document and filter:
`doc_id`, `filter` (for GSM8K "strict-match" or "flexible-extract", tasks/gsm8k/gsm8k.yaml),
`doc_hash` (of the document's JSON) and each metric's value for that document, such as
`exact_match` (0.0 or 1.0). MaxText's evaluator runs lm-eval with `log_samples` off
(maxtext/eval/runner/harness_runner.py line 184, MaxText 0.2.4), so the evaluation step keeps
these records itself (docs/maxtext_eval.md)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

KEYS = ("doc_id", "doc_hash", "filter")  # what identifies a record; the rest are its scores

STRICT = "strict-match"  # GSM8K's `#### N` answer, the filter MaxText reports as gsm8k_accuracy
EXACT_MATCH = "exact_match"
# The metric and filter MaxText reports as a task's `{task}_accuracy`: the first of these the
# task's results have (maxtext/eval/runner/harness_runner.py:54-61, MaxText 0.2.4; lm-eval keys a
# result "<metric>,<filter>", a filterless one "none"). The items are scored on the same one.
REPORTED = (
    ("acc", "none"),
    (EXACT_MATCH, STRICT),
    (EXACT_MATCH, "flexible-extract"),
    (EXACT_MATCH, "none"),
)


def reported_metric(samples: Iterable[Mapping[str, Any]]) -> tuple[str, str]:
    """(metric, filter) of the score MaxText reports for the task these samples are of."""
    logged = {(name, r.get("filter")) for r in samples for name in r if name not in KEYS}
    for metric, filter_name in REPORTED:
        if (metric, filter_name) in logged:
            return metric, filter_name
    raise ValueError(
        f"no sample carries a score MaxText reports (one of "
        f"{', '.join(f'{m},{f}' for m, f in REPORTED)}); logged: {sorted(map(str, logged))[:6]}"
    )


def item_results(
    samples: Iterable[Mapping[str, Any]], metric: str = EXACT_MATCH, filter_name: str = STRICT
) -> dict[str, bool]:
    """Item id -> answered right, from one task's logged samples under one filter. An item's id
    is its doc_id and the start of its document's hash, so that two models' results pair only
    on the same document; a record without the metric, a value other than 0 or 1, or an item
    logged twice is refused by its doc_id."""
    results: dict[str, bool] = {}
    for record in samples:
        if record.get("filter") != filter_name:
            continue
        doc_id = record.get("doc_id")
        value = record.get(metric)
        if value not in (0, 1):
            raise ValueError(
                f"doc_id {doc_id}: {metric} is {value!r} under {filter_name}, not 0 or 1 "
                f"(its metrics: {record.get('metrics')})"
            )
        item = f"{doc_id}:{str(record.get('doc_hash', ''))[:12]}"
        if item in results:
            raise ValueError(f"doc_id {doc_id} is logged twice under {filter_name}")
        results[item] = bool(value)
    if not results:
        raise ValueError(f"no sample was logged under the filter {filter_name}")
    return results
