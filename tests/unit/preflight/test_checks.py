"""The preflight checks declared once (issue 45, item 2): the runner iterates the declaration,
skipping what lacks a need with why, and the README's list, docs/operations.md's table and the
`preflight` task's doc are generated from it; the result a frozen dataclass (item 3)."""

from __future__ import annotations

import dataclasses

import pytest

from tests.conftest import REPO
from tpu_rl.layout import RunLayout
from tpu_rl.operators.preflight import PreflightOperator
from tpu_rl.preflight import run
from tpu_rl.preflight.checks import CHECKS, Check, Need
from tpu_rl.preflight.checks_doc import TARGETS, with_current_blocks
from tpu_rl.preflight.result import CheckResult, failed, passed
from tpu_rl.settings.choices import ClusterMode
from tpu_rl.settings.run_settings import load_settings

NO_GOOGLE = failed("google connection", "no connection", "define it")
NO_TOKEN = failed("hf connection", "no connection", "define it")


def layout(conf: dict, **more: object) -> RunLayout:
    return RunLayout(load_settings({**conf, **more}), "manual__p", "dep")


@pytest.mark.parametrize("target", TARGETS)
def test_the_generated_lists_are_current(target):
    """Generated: python -m tpu_rl.preflight.checks_doc (at the repository's root)."""
    text = (REPO / target).read_text()
    assert "preflight-" in text and ":start (generated: " in text, target
    assert text == with_current_blocks(text), f"{target} is stale: regenerate it"


def test_every_check_is_named_in_each_list():
    operations = (REPO / "docs" / "operations.md").read_text()
    readme = (REPO / "README.md").read_text()
    for check in CHECKS:
        assert f"`{check.name}`" in PreflightOperator.step_doc, check.name
        assert f"| `{check.name}` |" in operations, check.name
        assert f"`{check.name}`" in " ".join(readme.split()), check.name


def test_the_checks_have_one_name_each_and_what_the_docs_show():
    assert len({check.name for check in CHECKS}) == len(CHECKS)
    for check in CHECKS:
        assert check.checks and check.reads and check.fix and "|" not in check.checks, check


def test_without_connections_every_check_that_needs_one_is_skipped_saying_which(tutorial_conf):
    results = run.run_preflight(layout(tutorial_conf, cluster_mode="existing"), NO_GOOGLE, NO_TOKEN)
    assert results[:2] == [NO_GOOGLE, NO_TOKEN]
    lines = {r.name: r for r in results[2:]}
    assert list(lines) == [check.name for check in CHECKS]
    assert lines["vertex registry"].passed
    assert lines["priority class"].line() == (
        "SKIPPED priority class: needs Google credentials (google connection failed)"
    )
    assert lines["hf token"].evidence == "needs the Hugging Face token (hf connection failed)"
    assert [r.name for r in results if r.failed] == ["google connection", "hf connection"]


def test_a_check_is_one_entry_the_runner_iterates(tutorial_conf, monkeypatch):
    """A check added to the declaration runs, in its place, for the cluster mode it names; a
    failed one that gives a Need skips the checks needing it, and a raising read is its FAIL."""

    def entry(name: str, run_it, needs=(), **more: object) -> Check:
        return Check(name, "what", "where", needs, "the fix", run_it, **more)

    def broken(reads):
        raise ConnectionError("reset")

    declared = (
        entry("first", lambda reads: [passed("first", reads.settings.project)]),
        entry("gate", lambda reads: [failed("gate", "no", "fix")], gives=Need.CLUSTER),
        entry("behind", lambda reads: [passed("behind", "ran")], (Need.CLUSTER,)),
        entry("raises", broken),
        entry("existing only", lambda reads: [passed("x", "")], cluster_mode=ClusterMode.EXISTING),
    )
    monkeypatch.setattr(run, "CHECKS", declared)
    monkeypatch.setattr(run, "_google_session", lambda conn: (None, conn))  # no credentials
    results = run.run_preflight(layout(tutorial_conf), "gcp", "hf_x")
    assert [r.line() for r in results] == [
        f"PASS first: {load_settings(tutorial_conf).project}",
        "FAIL gate: no -> fix: fix",
        "SKIPPED behind: needs an existing GKE Standard cluster (gate failed)",
        f"FAIL raises: the read failed: reset -> fix: {run.RETRY}",
    ]
    assert results[3].transient


def test_a_check_result_is_a_frozen_dataclass_with_its_evidence_masked():
    result = CheckResult("hf token", False, "sent Bearer hf_SECRETtoken123456", "fix")
    assert dataclasses.is_dataclass(result) and "SECRET" not in result.evidence
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.passed = True  # type: ignore[misc]
    assert dataclasses.replace(result, name="b").evidence == result.evidence
