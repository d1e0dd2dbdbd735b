"""The held-out evaluation Job in the sandbox: MaxText 0.2.4's evaluator (`maxtext.eval.runner.run
--runner lm_eval`, docs/maxtext_eval.md) run through the product's samples keeper
(tpu_rl.jobs.heldout_job.SAMPLES_KEEPER), one model after the other, on every host of the slice.

The pod's `bash -c` script is split into its models' commands (`TPU_RL_SAMPLES_URI=<uri> python3
-c <keeper> <flags>`, joined by ` && `); each command's flags go through MaxText's own argparse
rules, so an unknown or missing flag ends the container with exit 2 and argparse's message, the
earlier models' output kept. Every host starts the in-process server; JOB_COMPLETION_INDEX 0
(JAX's process 0) alone evaluates: it writes, as the pod, each task's logged samples as the keeper
keeps them and MaxText's results JSON; the other hosts wait as long and write nothing. What each
model answers is drawn per item, deterministically, from the accuracies a test sets
(HeldoutWorkload).

Sources, relative to `.venv-maxtext/lib/python3.12/site-packages/maxtext/eval/` (MaxText 0.2.4):
runner/run.py:74-106, runner/common.py:27-29 and 106-150, runner/harness_runner.py:46-100,
135-221 and 224-301, runner/server_manager.py:549-699, reporting/json_reporter.py:28-84; and
lm-eval 0.4.13's (`.venv/lib/python3.11/site-packages/lm_eval/`) evaluator.py:627-667,
evaluator_utils.py:205-285 and api/metrics.py:337-343. Not modelled (a ValueError says so):
another runner or backend, `--gcs_results_path`. lm-eval groups (mmlu's subtasks) are scored as
one task.
"""

from __future__ import annotations

import argparse
import base64
import functools
import hashlib
import json
import math
import re
import shlex
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NoReturn

from sandbox.pod_scripts import (
    ContainerExit,
    PodInfo,
    PodScript,
    Step,
    call,
    exit,
    log,
    run_forever,
    sleep,
)
from sandbox.workloads import Storage, put_object

# The keeper sets sys.argv[0] to it (heldout_job.SAMPLES_KEEPER): argparse's prog in every message
PROG = "maxtext.eval.runner.run"
SAMPLES_ENV = "TPU_RL_SAMPLES_URI"  # the keeper's `OUT = os.environ[...]`: the model's folder
# argparse's width in a pod without a terminal: shutil.get_terminal_size's 80 columns, less 2
# (argparse.HelpFormatter), whatever terminal the sandbox runs in
USAGE_WIDTH = 78
TOKEN_ENV = "HF_TOKEN"  # common.py:27-29: the token when --hf_token is not given
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")  # a shell word setting the command's env
# The keeper's masking of lm-eval's model_args (heldout_job.SAMPLES_KEEPER, `re.sub(...)`)
TOKEN_ARG, MASKED_TOKEN = re.compile("token=[^,]*"), "token=<masked>"

GSM8K = "gsm8k"
# GSM8K's test split: MaxText's own GSM8K asserts 1319 items
# (simple_evals_template/gsm8k_eval.py:87-88; docs/maxtext_eval.md section 4)
GSM8K_ITEMS = 1319
OTHER_ITEMS = 200  # assumption: any other task's documents
# lm-eval's gsm8k filters (tasks/gsm8k/gsm8k.yaml:33-42), each item logged under both
STRICT, FLEXIBLE = "strict-match", "flexible-extract"
KEYS = ("doc_id", "doc_hash", "filter")  # what the keeper keeps besides the metric values
# _map_results' choice of a task's `{task}_accuracy` (harness_runner.py:54-61)
REPORTED = (
    "acc,none",
    "exact_match,strict-match",
    "exact_match,flexible-extract",
    "exact_match,none",
    "acc",
    "score",
)
DEFAULT_ACCURACY = 0.5  # a task the workload does not name
# Assumptions: the share of items a model answers by its own draw rather than by the items'
# shared difficulty (two models of close accuracy then disagree on some items, as real models
# do); the share of GSM8K's strict-match misses whose last number is still right
# (flexible-extract).
OWN_SHARE = 0.08
FLEXIBLE_RESCUE = 0.25
# Assumptions: simulated seconds per model, the in-process vLLM's start on every host, then the
# evaluation (900 s a model)
SERVER_START_S = 300.0
EVALUATE_S = 600.0
# Loggers by module (logging.getLogger(__name__)) and harness_runner.py:292-295's format
SERVER_LOG = "maxtext.eval.runner.server_manager"
HARNESS_LOG = "maxtext.eval.runner.harness_runner"
REPORTER_LOG = "maxtext.eval.reporting.json_reporter"
SITE = "/usr/local/lib/python3.12/site-packages/maxtext/eval/runner"
# Rank 0's server thread dying before /health answers (server_manager.py:670-671), unhandled:
# the process's traceback (MaxText's frames), exit 1 (docs/maxtext_eval.md section 5)
SERVER_DIED = (
    "Traceback (most recent call last):\n"
    f'  File "{SITE}/run.py", line 96, in main\n'
    "    _main()\n"
    f'  File "{SITE}/harness_runner.py", line 301, in main\n'
    "    run_harness(cfg, hf_token=args.hf_token)\n"
    f'  File "{SITE}/harness_runner.py", line 150, in run_harness\n'
    '    with build_server_manager(cfg, token, enable_chat_api=backend == "evalchemy") as server:\n'
    f'  File "{SITE}/server_manager.py", line 695, in __enter__\n'
    "    self.start()\n"
    f'  File "{SITE}/server_manager.py", line 658, in start\n'
    "    self._wait_until_healthy()\n"
    f'  File "{SITE}/server_manager.py", line 671, in _wait_until_healthy\n'
    '    raise RuntimeError("vLLM HTTP server thread died before becoming healthy.")\n'
    "RuntimeError: vLLM HTTP server thread died before becoming healthy.\n"
)


@dataclass(frozen=True)
class HeldoutWorkload:
    """What each model scores, per lm-eval task (the reported metric: strict-match for gsm8k,
    acc otherwise; DEFAULT_ACCURACY for a task not named): `base`, `champion`, and any
    `step-<N>` (`steps`, then `per_step[N]`'s tasks over them). `exit_code` != 0: rank 0's
    evaluator of the first model dies so once the server should be up (1: its server thread
    died, with the traceback), the other hosts hang in their sync until the Job fails."""

    base: Mapping[str, float] = field(default_factory=lambda: {GSM8K: 0.70})
    champion: Mapping[str, float] = field(default_factory=lambda: {GSM8K: 0.78})
    steps: Mapping[str, float] = field(default_factory=lambda: {GSM8K: 0.80})
    per_step: Mapping[int, Mapping[str, float]] = field(default_factory=dict)
    exit_code: int = 0

    def accuracy(self, label: str, task: str) -> float:
        """The accuracy of the model MaxText runs as `label` (its run_name) on `task`."""
        if label == "base":
            table = self.base
        elif label == "champion":
            table = self.champion
        elif found := re.fullmatch(r"step-(\d+)", label):
            table = {**self.steps, **self.per_step.get(int(found.group(1)), {})}
        else:
            raise ValueError(f"held-out model {label!r} is none of step-<N>, base, champion")
        return table.get(task, DEFAULT_ACCURACY)


@dataclass(frozen=True)
class ModelCommand:
    """One model's command in the pod's script: its environment prefix and the evaluator's
    argv (the keeper's sys.argv[1:])."""

    env: dict[str, str]
    argv: list[str]


@dataclass(frozen=True)
class Evaluation:
    """One model's evaluation as MaxText parsed it: its config (harness_runner.py:297-299),
    the token lm-eval is given and the folder the keeper writes the samples to."""

    cfg: dict[str, Any]
    token: str | None
    samples_uri: str


class _Parser(argparse.ArgumentParser):
    """argparse whose error ends the container as it ends the process: usage and message on
    stderr, exit 2 (argparse.ArgumentParser.error)."""

    def error(self, message: str) -> NoReturn:
        raise ContainerExit(2, f"{self.format_usage()}{self.prog}: error: {message}\n")


def runner_parser() -> argparse.ArgumentParser:
    """run.py:75-84: the entry point's pre-parser of the required --runner."""
    parser = _Parser(
        prog=PROG,
        description="MaxText eval unified entry point.",
        add_help=False,
        formatter_class=functools.partial(argparse.HelpFormatter, width=USAGE_WIDTH),
    )
    parser.add_argument(
        "--runner", required=True, choices=["eval", "lm_eval", "evalchemy", "simple_evals"]
    )
    return parser


def harness_parser() -> argparse.ArgumentParser:
    """harness_runner.py:224-285: the lm_eval runner's parser, common.add_server_args' flags
    (common.py:106-150) then its own (harness_runner.py:231-284)."""
    parser = _Parser(
        prog=PROG,
        description="MaxText lm-eval / evalchemy runner.",
        formatter_class=functools.partial(
            argparse.ArgumentDefaultsHelpFormatter, width=USAGE_WIDTH
        ),
    )
    add = parser.add_argument
    add("--checkpoint_path")  # common.py:108
    add("--model_name", required=True)  # 109
    add("--hf_path", required=True)  # 110
    add("--base_output_directory", required=True)  # 111-115
    add("--run_name", required=True)  # 116
    add("--max_model_len", type=int, required=True)  # 117
    add("--tensor_parallel_size", type=int, default=4)  # 118
    add("--server_host", default="localhost")  # 119
    add("--server_port", type=int, default=8000)  # 120
    add("--max_num_batched_tokens", type=int)  # 121
    add("--max_num_seqs", type=int)  # 122
    add("--hf_mode", action="store_true")  # 123
    add("--expert_parallel_size", type=int, default=0)  # 124-129
    add("--data_parallel_size", type=int, default=1)  # 130-135
    add("--hbm_memory_utilization", type=float, default=0.3)  # 136-141
    add("--hf_token")  # 142
    add("--skip_warmup", action="store_true")  # 143
    add("--gcs_results_path")  # 144
    add("--log_level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])  # 145-150
    add("--backend", choices=["lm_eval", "evalchemy"], default="lm_eval")  # harness 231-240
    add("--tasks", nargs="+", default=["mmlu"])  # 241-249
    add("--num_fewshot", type=int, default=0)  # 250
    add("--num_samples", type=int)  # 251
    add("--apply_chat_template", action="store_true", default=False)  # 252-262
    add("--fewshot_as_multiturn", action="store_true", default=False)  # 263-272
    add("--gen_kwargs", type=str, default=None)  # 273-284
    return parser


def container_env(
    container: Mapping[str, Any], secret: Callable[[str], Mapping[str, Any] | None]
) -> dict[str, str]:
    """The container's environment as the kubelet sets it: plain values, and Secret keys
    (`secret(name)`: the Secret, its data base64); a missing Secret or key leaves it unset."""
    env: dict[str, str] = {}
    for var in container.get("env") or []:
        ref = (var.get("valueFrom") or {}).get("secretKeyRef")
        if ref is None:
            env[var["name"]] = var.get("value", "")
        elif (value := ((secret(ref["name"]) or {}).get("data") or {}).get(ref["key"])) is not None:
            env[var["name"]] = base64.b64decode(value).decode()
    return env


def model_commands(command: Sequence[str]) -> list[ModelCommand]:
    """The models' commands of the container's `bash -c <script>`: the script split on ` && `,
    each shell-split, its leading `NAME=value` words its environment."""
    if len(command) != 3 or list(command[:2]) != ["bash", "-c"]:
        raise ValueError(f"the held-out pod's command is not `bash -c <script>`: {command!r}")
    commands = []
    for line in command[2].split(" && "):
        words = shlex.split(line)
        assigned = 0
        while assigned < len(words) and ASSIGNMENT.match(words[assigned]):
            assigned += 1
        env = dict(word.split("=", 1) for word in words[:assigned])
        program = words[assigned:]
        if SAMPLES_ENV not in env or program[:2] != ["python3", "-c"] or len(program) < 3:
            raise ValueError(
                f"a held-out command is not `{SAMPLES_ENV}=<uri> python3 -c <source> <flags>`: "
                f"{line[:200]!r}"
            )
        if PROG not in program[2]:
            raise ValueError(f"the held-out command's source does not run {PROG}")
        commands.append(ModelCommand(env, program[3:]))
    return commands


def parse_evaluation(command: ModelCommand, env: Mapping[str, str]) -> Evaluation:
    """MaxText's parse of one command (`env`: the container's); raises ContainerExit(2) as
    argparse exits."""
    runner, remaining = runner_parser().parse_known_args(command.argv)  # run.py:85
    args = harness_parser().parse_args(remaining)  # run.py:87, 93-96; harness_runner.py:289-290
    if runner.runner != "lm_eval" or args.backend != "lm_eval" or args.gcs_results_path:
        raise ValueError(
            "the sandbox models MaxText's lm_eval runner on the lm_eval backend, without "
            f"--gcs_results_path: {' '.join(command.argv)[:300]}"
        )
    cfg = {k: v for k, v in vars(args).items() if k not in ("log_level", "hf_token")}
    cfg["results_path"] = f"{args.base_output_directory.rstrip('/')}/{args.run_name}/eval_results"
    token = args.hf_token or {**env, **command.env}.get(TOKEN_ENV) or None  # common.py:27-29
    return Evaluation(cfg, token, command.env[SAMPLES_ENV])


def unit(*key: object) -> float:
    """A uniform draw in [0, 1) fixed by `key`."""
    digest = hashlib.sha256(json.dumps(key).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def answered(label: str, task: str, doc_id: int, accuracy: float) -> bool:
    """Whether model `label` answers item `doc_id` of `task` right: the item's difficulty
    (shared by all models) under `accuracy`, but for the model's own OWN_SHARE of items an
    answer drawn afresh at the same accuracy (a flip would pull the accuracy towards 0.5)."""
    if unit("own", label, task, doc_id) < OWN_SHARE:
        return unit("answer", label, task, doc_id) < accuracy
    return unit("difficulty", task, doc_id) < accuracy


def doc_hash(task: str, doc_id: int) -> str:
    """The document's hash: lm-eval's is the sha256 hex of its JSON (evaluator.py:655-662)."""
    return hashlib.sha256(
        json.dumps({"task": task, "doc_id": doc_id}, indent=2).encode()
    ).hexdigest()


def task_samples(label: str, task: str, accuracy: float, limit: int | None) -> list[dict[str, Any]]:
    """One task's logged samples as the keeper keeps them (doc_id, doc_hash, filter, each metric's
    value): lm-eval logs one record per filter and document, filters outermost
    (evaluator.py:628-667), the first `limit` documents (`--num_samples`: lm-eval's limit,
    harness_runner.py:183). gsm8k: exact_match under strict-match and flexible-extract (right
    under flexible whenever right under strict); any other task: acc under "none"."""
    docs = range(GSM8K_ITEMS if task == GSM8K else OTHER_ITEMS)[:limit]
    right = {d: answered(label, task, d, accuracy) for d in docs}
    if task == GSM8K:
        flexible = {d: right[d] or unit("flexible", label, task, d) < FLEXIBLE_RESCUE for d in docs}
        by_filter = {STRICT: right, FLEXIBLE: flexible}
        metric = "exact_match"
    else:
        by_filter, metric = {"none": right}, "acc"
    return [
        {"doc_id": d, "doc_hash": doc_hash(task, d), "filter": name, metric: float(ok[d])}
        for name, ok in by_filter.items()
        for d in docs
    ]


def task_results(task: str, samples: list[dict[str, Any]]) -> dict[str, Any]:
    """lm-eval's results[task] (evaluator_utils.py:280-285): name, alias, sample_len, then each
    metric's mean and stderr under each filter (`<metric>,<filter>`; mean_stderr,
    api/metrics.py:337-343, "N/A" for one item, evaluator_utils.py:220-227)."""
    values: dict[str, list[float]] = {}
    for record in samples:
        for name in record.keys() - set(KEYS):
            values.setdefault(f"{name},{record['filter']}", []).append(record[name])
    results: dict[str, Any] = {
        "name": task,
        "alias": task,
        "sample_len": max(map(len, values.values()), default=0),
    }
    for key, xs in values.items():
        metric, _, filter_name = key.partition(",")
        results[key] = statistics.fmean(xs)
        stderr = statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else "N/A"
        results[f"{metric}_stderr,{filter_name}"] = stderr
    return results


def mapped_scores(results: Mapping[str, Mapping[str, Any]], tasks: list[str]) -> dict[str, float]:
    """harness_runner.py:46-75 _map_results: `{task}_accuracy` = round(x * 100, 2) of the first
    REPORTED key a task's results hold."""
    scores = {}
    for task in tasks:
        task_r = results.get(task, {})
        acc = next((task_r[k] for k in REPORTED if task_r.get(k) is not None), None)
        if acc is not None:
            scores[f"{task}_accuracy"] = round(float(acc) * 100, 2)
    return scores


def maxtext_line(
    clock: Callable[[], datetime], logger: str, message: str | Callable[[], str]
) -> Callable[[], str]:
    """An INFO line of MaxText's logging (`%(asctime)s %(levelname)s %(name)s: %(message)s`,
    harness_runner.py:292-295), stamped by the sandbox clock and rendered when printed."""

    def render() -> str:
        now, text = clock(), message() if callable(message) else message
        return f"{now:%Y-%m-%d %H:%M:%S},{now.microsecond // 1000:03d} INFO {logger}: {text}\n"

    return render


def model_steps(
    rank: int,
    evaluation: Evaluation,
    workload: HeldoutWorkload,
    storage: Storage,
    clock: Callable[[], datetime],
) -> list[Step]:
    """One model's evaluation on host `rank`: the server's start (server_manager.py:549-631)
    on every host; rank 0 then evaluates (harness_runner.py:156-194), the keeper writing each
    task's samples, the others wait in sync_global_devices (199); every host stops its server
    (server_manager.py:698-699, 676-692); rank 0 maps and logs the scores
    (harness_runner.py:206-207) and writes the results JSON (209-219; json_reporter.py:54-76)."""
    cfg = evaluation.cfg
    tasks, label, model = cfg["tasks"], cfg["run_name"], cfg["model_name"]
    base_url = f"http://{cfg['server_host']}:{cfg['server_port']}"  # server_manager.py:527-528
    ep = cfg["expert_parallel_size"] or 1  # common.py:70
    started = (
        f"Initializing in-process vLLM (tp={cfg['tensor_parallel_size'] // ep}, ep={ep}, "
        f"dp={cfg['data_parallel_size']}, max_len={cfg['max_model_len']})"  # 563-564, 608-614
    )
    steps = [
        log(maxtext_line(clock, SERVER_LOG, started)),
        sleep(SERVER_START_S),
        log(maxtext_line(clock, SERVER_LOG, f"Rank {rank}: vLLM LLM ready.")),
    ]
    if workload.exit_code:
        if rank:
            return [*steps, run_forever()]  # the collective rank 0 never joins
        died = SERVER_DIED if workload.exit_code == 1 else ""
        return [*steps, log(died), exit(workload.exit_code)]
    stopped = maxtext_line(clock, SERVER_LOG, "VllmServerManager stopped.")
    if rank:
        return [*steps, sleep(EVALUATE_S), log(stopped)]
    samples = {
        task: task_samples(label, task, workload.accuracy(label, task), cfg["num_samples"])
        for task in tasks
    }
    results = {task: task_results(task, records) for task, records in samples.items()}
    scores = mapped_scores(results, tasks)
    # harness_runner.py:161-169, masked by the keeper
    model_args = ",".join(
        [
            f"model={model}",
            f"base_url={base_url}/v1/completions",
            "tokenizer_backend=huggingface",
            f"tokenizer={cfg['hf_path']}",
            *([f"token={evaluation.token}"] if evaluation.token else []),
        ]
    )
    lm_eval_config = {  # lm-eval's config (evaluator.py:394-417): the keys the sandbox fills
        "model": "local-completions",
        "model_args": TOKEN_ARG.sub(MASKED_TOKEN, model_args),
        "batch_size": cfg["max_num_seqs"],  # harness_runner.py:186-187
        "limit": cfg["num_samples"],
        "gen_kwargs": cfg["gen_kwargs"],
    }
    written: list[str] = []

    def keep_samples(info: PodInfo) -> None:
        for task, records in samples.items():
            uri = f"{evaluation.samples_uri}samples_{task}.json"
            put_object(storage, info, uri, json.dumps(records).encode())

    def write_results(info: PodInfo) -> None:
        timestamp = clock().strftime("%Y%m%dT%H%M%SZ")  # json_reporter.py:54-56
        safe_model = model.replace("/", "_").replace(":", "_")
        uri = f"{cfg['results_path'].rstrip('/')}/{'+'.join(tasks)}_{safe_model}_{timestamp}.json"
        document = {  # json_reporter.py:58-65
            "benchmark": "+".join(tasks),
            "model_name": model,
            "timestamp_utc": timestamp,
            "scores": scores,
            "generation_stats": {"lm_eval_config": lm_eval_config, "lm_eval_results": results},
            "config": cfg,
        }
        put_object(storage, info, uri, json.dumps(document, indent=2).encode())
        written.append(uri)

    running = f"Running lm_eval tasks {tasks} via local-completions at {base_url}"
    return [
        *steps,
        log(maxtext_line(clock, SERVER_LOG, f"vLLM HTTP server is healthy at {base_url}")),
        log(maxtext_line(clock, HARNESS_LOG, running)),
        sleep(EVALUATE_S),
        call(keep_samples),
        log(maxtext_line(clock, SERVER_LOG, "Stopping vLLM HTTP server.")),
        log(stopped),
        log(maxtext_line(clock, HARNESS_LOG, f"lm_eval scores: {scores}")),
        call(write_results),
        log(maxtext_line(clock, REPORTER_LOG, lambda: f"Results written to {written[-1]}")),
    ]


def heldout_evaluation_script(
    info: PodInfo,
    command: Sequence[str],
    env: Mapping[str, str],
    workload: HeldoutWorkload,
    storage: Storage,
    clock: Callable[[], datetime],
) -> PodScript:
    """One host of the held-out Job (`command`: its container's, `env`: its environment,
    container_env): each model's evaluation in turn (model_steps; rank: the pod's completion
    index), until a command's flags are refused (argparse's message, exit 2, bash's `&&` runs
    no more) or the workload's fault. `clock`: the sandbox's now (UTC), for log lines and the
    results' timestamp."""
    rank = info.index or 0
    steps: list[Step] = []
    for command_ in model_commands(command):
        try:
            evaluation = parse_evaluation(command_, env)
        except ContainerExit as refused:
            return PodScript([*steps, log(refused.output), exit(refused.code)])
        steps += model_steps(rank, evaluation, workload, storage, clock)
        if workload.exit_code:
            break
    return PodScript(steps)
