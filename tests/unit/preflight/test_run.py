"""tpu_rl.preflight.run: the runner iterates the declared checks, skipping what a failed one
leaves without its need."""

from __future__ import annotations

from tpu_rl.layout import RunLayout
from tpu_rl.preflight import run
from tpu_rl.preflight.checks import CHECKS, Check, Need
from tpu_rl.preflight.result import failed, passed
from tpu_rl.settings.choices import ClusterMode
from tpu_rl.settings.run_settings import load_settings

NO_GOOGLE = failed("google connection", "no connection", "define it")


NO_TOKEN = failed("hf connection", "no connection", "define it")


def layout(conf: dict, **more: object) -> RunLayout:
    return RunLayout(load_settings({**conf, **more}), "manual__p", "dep")


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
