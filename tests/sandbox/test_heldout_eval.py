"""The held-out evaluation Job in the sandbox (sandbox/heldout_eval.py): the product's Job
(tpu_rl.jobs.heldout_job) run as MaxText 0.2.4's lm_eval runner through the samples keeper
would run it: rank 0 writes each model's samples where tpu_rl.heldout.samples reads them, at the
accuracies the workload sets, and MaxText's results JSON with the token masked; argparse refuses
what MaxText's parser refuses (exit 2); the other hosts write nothing."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from sandbox.cloud import GcsEmulator
from sandbox.cluster_model import ClusterModel
from sandbox.controller import INDEX_LABEL as INDEX
from sandbox.controller import Controller
from sandbox.harness import HELDOUT, Workloads, build_scenario
from sandbox.heldout_eval import (
    GSM8K_ITEMS,
    OTHER_ITEMS,
    HeldoutWorkload,
    container_env,
    heldout_evaluation_script,
)
from sandbox.kube_emulator import KubeEmulator, running_emulator
from sandbox.pod_scripts import ContainerExit, PodInfo, PodScript
from sandbox.project import HF_TOKEN, SETTINGS
from tests.support.sandbox_cluster import VARS, wait_for
from tpu_rl.heldout.samples import item_results, reported_metric
from tpu_rl.jobs.heldout_job import HeldoutModel, heldout_evaluation_job
from tpu_rl.jobs.manifests import Manifest, token_secret
from tpu_rl.layout import RunLayout
from tpu_rl.settings.run_settings import load_settings

TASKS = ("gsm8k", "arc_easy")  # a generative task with two filters, a multiple-choice guard
NOW = datetime(2026, 11, 29, 10, 0, 0, tzinfo=UTC)
WORKLOAD = HeldoutWorkload(per_step={40: {"gsm8k": 0.60, "arc_easy": 0.90}})
# label -> task -> what WORKLOAD makes of it: the defaults, step 40's overrides, 0.5 unnamed
EXPECTED = {
    "step-30": {"gsm8k": 0.80, "arc_easy": 0.5},
    "step-40": {"gsm8k": 0.60, "arc_easy": 0.90},
    "base": {"gsm8k": 0.70, "arc_easy": 0.5},
    "champion": {"gsm8k": 0.78, "arc_easy": 0.5},
}


def layout(**changes: Any) -> RunLayout:
    """The sandbox's run scoring gsm8k with the arc_easy guard."""
    conf = {
        **SETTINGS,
        "heldout_tasks": ["gsm8k"],
        "heldout_timeout_minutes": HELDOUT["heldout_timeout_minutes"],  # for a loaded machine
        "heldout_guard_tasks": ["arc_easy"],
        "kueue_queue": "",
        **changes,
    }
    return RunLayout(load_settings(conf), "manual__heldout", "test-deployment")


def models(lay: RunLayout) -> list[HeldoutModel]:
    return [
        HeldoutModel("step-30", lay.checkpoint_params(30)),
        HeldoutModel("step-40", lay.checkpoint_params(40)),
        HeldoutModel("base", f"{lay.maxtext_dir}0/items"),
        HeldoutModel("champion", "gs://bucket/gemma4-26b/trained/rl-old/checkpoints/actor/50/"),
    ]


def container(job: Manifest) -> dict[str, Any]:
    [first] = job["spec"]["template"]["spec"]["containers"]
    return first


def pod_env(lay: RunLayout, job: Manifest) -> dict[str, str]:
    """The container's environment with the run's Secret holding the token."""
    secrets = {lay.token_secret: token_secret(lay, HF_TOKEN)}
    return container_env(container(job), secrets.get)


@dataclass
class Ran:
    """A script run without a clock: its output, its sleeps and how it ended (None: hung)."""

    output: str
    sleeps: list[float]
    code: int | None


def run(script: PodScript, info: PodInfo) -> Ran:
    """The steps as the controller runs them: a call's ContainerExit ends the container."""
    output: list[str] = []
    sleeps: list[float] = []
    for step in script.steps:
        if step.action == "log":
            output.append(step.text() if callable(step.text) else step.text)
        elif step.action == "sleep":
            sleeps.append(step.seconds)
        elif step.action == "call" and step.fn is not None:
            try:
                step.fn(info)
            except ContainerExit as ended:
                return Ran("".join([*output, ended.output]), sleeps, ended.code)
        elif step.action == "exit":
            return Ran("".join(output), sleeps, step.code)
        elif step.action == "forever":
            return Ran("".join(output), sleeps, None)
    return Ran("".join(output), sleeps, 0)


def host(job: Manifest, index: int) -> PodInfo:
    name = job["metadata"]["name"]
    return PodInfo("default", f"{name}-{index}-abcde", name, index, 0, {})


def evaluate(
    gcs: GcsEmulator,
    lay: RunLayout,
    job: Manifest,
    index: int = 0,
    workload: HeldoutWorkload = WORKLOAD,
    command: list[str] | None = None,
) -> Ran:
    """One host of `job` writing into `gcs` as the project's owner, at NOW."""
    script = heldout_evaluation_script(
        host(job, index),
        command or container(job)["command"],
        pod_env(lay, job),
        workload,
        gcs.write,
        lambda: NOW,
    )
    return run(script, host(job, index))


def objects(gcs: GcsEmulator, lay: RunLayout) -> list[str]:
    """Every object under the run's held-out folder."""
    bucket, _, folder = lay.heldout_dir.removeprefix("gs://").partition("/")
    return gcs.names(bucket, folder)


def samples(gcs: GcsEmulator, lay: RunLayout, label: str, task: str) -> list[dict[str, Any]]:
    return json.loads(gcs.read(f"{lay.heldout_samples_dir(label)}samples_{task}.json"))


def results_json(gcs: GcsEmulator, lay: RunLayout, label: str) -> tuple[str, dict[str, Any]]:
    """The name and content of the one results JSON MaxText wrote for `label`."""
    bucket, _, folder = lay.heldout_samples_dir(label).removeprefix("gs://").partition("/")
    [name] = gcs.names(bucket, f"{folder}eval_results/")
    return name, json.loads(gcs.read(f"gs://{bucket}/{name}"))


@pytest.fixture
def gcs() -> Iterator[GcsEmulator]:
    emulator = GcsEmulator()
    yield emulator
    emulator.stop()


def test_each_models_items_land_where_the_verdict_reads_them_at_its_accuracy(
    gcs: GcsEmulator,
) -> None:
    """Per model and task, the samples the product's reader reads: every item once, under the
    metric MaxText reports, right as often as the workload says (within 4 standard errors)."""
    lay = layout()
    job = heldout_evaluation_job(lay, models(lay))
    ran = evaluate(gcs, lay, job)
    assert ran.code == 0, ran.output
    results: dict[str, dict[str, dict[str, bool]]] = {}
    for label, tasks in EXPECTED.items():
        for task, accuracy in tasks.items():
            records = samples(gcs, lay, label, task)
            metric, filter_name = reported_metric(records)
            assert (metric, filter_name) == (
                ("exact_match", "strict-match") if task == "gsm8k" else ("acc", "none")
            )
            items = item_results(records, metric, filter_name)
            assert len(items) == (GSM8K_ITEMS if task == "gsm8k" else OTHER_ITEMS)
            share = sum(items.values()) / len(items)
            assert abs(share - accuracy) < 4 * math.sqrt(accuracy * (1 - accuracy) / len(items))
            results.setdefault(label, {})[task] = items
    # flexible-extract is right wherever strict-match is, and more often
    base = samples(gcs, lay, "base", "gsm8k")
    flexible = item_results(base, "exact_match", "flexible-extract")
    strict = results["base"]["gsm8k"]
    assert all(flexible[item] for item, right in strict.items() if right)
    assert sum(flexible.values()) > sum(strict.values())
    # the same items pair across models, and close models still disagree on some
    champion = results["champion"]["gsm8k"]
    assert champion.keys() == strict.keys()
    only_base = sum(strict[i] and not champion[i] for i in strict)
    only_champion = sum(champion[i] and not strict[i] for i in strict)
    assert 0 < only_base < only_champion


def test_the_results_json_is_maxtexts_with_the_token_masked(gcs: GcsEmulator) -> None:
    """json_reporter's file under <label>/eval_results/, its scores from the same samples, the
    config without the token, lm-eval's model_args with it masked as the keeper masks it."""
    lay = layout()
    job = heldout_evaluation_job(lay, models(lay))
    ran = evaluate(gcs, lay, job)
    name, written = results_json(gcs, lay, "base")
    assert name.endswith(
        "/heldout/base/eval_results/gsm8k+arc_easy_gemma4-26b_20261129T100000Z.json"
    )
    assert set(written) == {
        "benchmark",
        "model_name",
        "timestamp_utc",
        "scores",
        "generation_stats",
        "config",
    }
    assert (written["benchmark"], written["timestamp_utc"]) == (
        "gsm8k+arc_easy",
        "20261129T100000Z",
    )
    strict = item_results(samples(gcs, lay, "base", "gsm8k"))
    acc = item_results(samples(gcs, lay, "base", "arc_easy"), "acc", "none")
    assert written["scores"] == {
        "gsm8k_accuracy": round(sum(strict.values()) / len(strict) * 100, 2),
        "arc_easy_accuracy": round(sum(acc.values()) / len(acc) * 100, 2),
    }
    assert f"lm_eval scores: {written['scores']}" in ran.output
    stats = written["generation_stats"]
    gsm8k = stats["lm_eval_results"]["gsm8k"]
    assert gsm8k["sample_len"] == GSM8K_ITEMS
    assert gsm8k["exact_match,strict-match"] <= gsm8k["exact_match,flexible-extract"]
    config = written["config"]
    assert config["run_name"] == "base" and config["tasks"] == list(TASKS)
    assert config["results_path"] == f"{lay.heldout_dir}base/eval_results"
    assert "hf_token" not in config and "log_level" not in config
    assert stats["lm_eval_config"]["model_args"].endswith(",token=<masked>")
    raw = gcs.read(f"gs://{SETTINGS['gcs_bucket']}/{name}").decode()
    assert HF_TOKEN not in raw and HF_TOKEN not in ran.output
    assert f"Results written to gs://{SETTINGS['gcs_bucket']}/{name}" in ran.output


def test_num_samples_keeps_the_first_items(gcs: GcsEmulator) -> None:
    lay = layout(heldout_num_samples=50)
    job = heldout_evaluation_job(lay, models(lay)[:1])
    assert evaluate(gcs, lay, job).code == 0
    for task in TASKS:
        records = samples(gcs, lay, "step-30", task)
        assert sorted({r["doc_id"] for r in records}) == list(range(50))
    _, written = results_json(gcs, lay, "step-30")
    assert written["generation_stats"]["lm_eval_config"]["limit"] == 50


@pytest.mark.parametrize(
    ("edit", "error", "models_written"),
    [
        # the lm_eval runner has no temperature flag (docs/maxtext_eval.md section 1): the last
        # model's command fails, the earlier ones ran
        (
            lambda script: f"{script} --temperature=0",
            "unrecognized arguments: --temperature=0",
            3,
        ),
        (
            lambda script: re.sub(r" --max_model_len=\d+", "", script, count=1),
            "the following arguments are required: --max_model_len",
            0,
        ),
    ],
)
def test_a_flag_maxtext_refuses_ends_the_container_with_argparses_exit_2(
    gcs: GcsEmulator, edit: Callable[[str], str], error: str, models_written: int
) -> None:
    lay = layout()
    job = heldout_evaluation_job(lay, models(lay))
    bash, dash_c, script = container(job)["command"]
    ran = evaluate(gcs, lay, job, command=[bash, dash_c, edit(script)])
    assert ran.code == 2
    refusal = ran.output[ran.output.rindex("usage: ") :]  # argparse's usage, then its error
    assert refusal.startswith("usage: maxtext.eval.runner.run [-h] [--checkpoint_path ")
    assert refusal.endswith(f"\nmaxtext.eval.runner.run: error: {error}\n")
    written = {name.split("/heldout/")[1].split("/")[0] for name in objects(gcs, lay)}
    assert len(written) == models_written


def test_the_other_hosts_wait_as_long_and_write_nothing(gcs: GcsEmulator) -> None:
    lay = layout()
    job = heldout_evaluation_job(lay, models(lay))
    other = evaluate(gcs, lay, job, index=1)
    assert other.code == 0 and "Rank 1: vLLM LLM ready." in other.output
    assert objects(gcs, lay) == []
    first = evaluate(gcs, lay, job, index=0)
    assert sum(other.sleeps) == sum(first.sleeps) == 4 * 900
    assert len(objects(gcs, lay)) == 4 * (len(TASKS) + 1)


class Refusing:
    """GCS refusing the pod: PodStorage's ContainerExit on each write."""

    def write(self, info: PodInfo, uri: str, data: bytes) -> None:
        raise ContainerExit(1, f"google.api_core.exceptions.Forbidden: 403 POST {uri}\n")

    def read(self, info: PodInfo, uri: str) -> bytes:
        raise AssertionError("the evaluation reads nothing from GCS")

    def delete(self, info: PodInfo, uri: str) -> None:
        raise AssertionError("the evaluation deletes nothing")


def test_a_refused_write_fails_the_pod() -> None:
    lay = layout()
    job = heldout_evaluation_job(lay, models(lay))
    script = heldout_evaluation_script(
        host(job, 0), container(job)["command"], {}, WORKLOAD, Refusing(), lambda: NOW
    )
    ran = run(script, host(job, 0))
    assert ran.code == 1
    assert ran.output.endswith(f"403 POST {lay.heldout_samples_dir('step-30')}samples_gsm8k.json\n")
    assert "lm_eval scores" not in ran.output


def test_the_workloads_exit_code_fails_rank_0_and_hangs_the_others(gcs: GcsEmulator) -> None:
    lay = layout()
    job = heldout_evaluation_job(lay, models(lay))
    failing = HeldoutWorkload(exit_code=1)
    first = evaluate(gcs, lay, job, workload=failing)
    assert first.code == 1
    assert first.output.endswith(
        "RuntimeError: vLLM HTTP server thread died before becoming healthy.\n"
    )
    assert evaluate(gcs, lay, job, index=3, workload=failing).code is None
    assert objects(gcs, lay) == []


def finished(job: Manifest) -> str | None:
    """The Job's terminal condition, once it has one."""
    ended = [c["type"] for c in job["status"].get("conditions", []) if c["status"] == "True"]
    return next((c for c in ended if c in ("Complete", "Failed")), None)


@pytest.fixture
def emu() -> Iterator[KubeEmulator]:
    with running_emulator() as emulator:
        yield emulator


@pytest.mark.parametrize("refused", [False, True])
def test_the_job_runs_in_the_sandbox_as_the_pods_identity(
    emu: KubeEmulator, gcs: GcsEmulator, refused: bool
) -> None:
    """build_scenario's `-heldout` rule: the Job completes with every host, rank 0 having
    written each model's files; with GCS refusing the pods' identity, rank 0 fails and the Job
    with it."""
    lay = layout()
    ClusterModel.described(VARS).provision(emu)
    gcs.client().create_bucket(lay.settings.gcs_bucket)
    if refused:
        gcs.gate.roles_of = lambda principal: set()
    job = heldout_evaluation_job(lay, models(lay)[2:])
    scenario = build_scenario({"gcs_bucket": lay.settings.gcs_bucket}, gcs, Workloads(), emu)
    name = job["metadata"]["name"]
    with Controller(emu, scenario, time_scale=0.0005):
        emu.create(token_secret(lay, HF_TOKEN))
        emu.create(job)
        ended = wait_for(lambda: finished(emu.get("jobs", "default", name)))
    if refused:
        assert ended == "Failed" and objects(gcs, lay) == []
        [pod] = emu.list("pods", "default", f"job-name={name},{INDEX}=0")
        [status] = pod["status"]["containerStatuses"]
        assert status["state"]["terminated"]["exitCode"] == 1
        return
    assert ended == "Complete"
    assert emu.get("jobs", "default", name)["status"]["succeeded"] == 8
    assert len(objects(gcs, lay)) == 2 * (len(TASKS) + 1)
    _, written = results_json(gcs, lay, "champion")
    assert written["generation_stats"]["lm_eval_config"]["model_args"].endswith("token=<masked>")
