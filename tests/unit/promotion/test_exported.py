"""tpu_rl.promotion.exported: the export's result as promotion reads it."""

from __future__ import annotations

import pytest

from tests.support.approval import XComs
from tpu_rl.names import Step
from tpu_rl.promotion.exported import ExportedModel, exported_model


def test_the_export_result_is_what_promotion_reads_and_without_one_it_refuses():
    shaped = {
        "step": 50,
        "checkpoint_uri": "gs://b/ck/50/",
        "export_uri": "gs://b/hf/",
        "metrics": {"accuracy": 0.5},
        "choice": "best",
    }
    got = exported_model(XComs({(Step.EXPORT, "return_value"): shaped}))
    assert got == ExportedModel("gs://b/hf/", "gs://b/ck/50/", 50, {"accuracy": 0.5})
    with pytest.raises(ValueError, match="export left no result"):
        exported_model(XComs({(Step.EXPORT, "checkpoint_step"): 75}))
