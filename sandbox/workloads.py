"""Ready pod scripts for the product's workloads: the MaxText GRPO client, the two checkpoint
conversions and the Pathways servers, printing MaxText's real line formats (maxtext-v0.2.4).

Objects the jobs "write" go through an ObjectWriter(uri, data) that the end-to-end tests wire
to the GCS emulator, or through a PodStorage that reads and writes as the pod's own identity
(sandbox/pod_storage.py) and ends the container when GCS refuses.
"""

import datetime as dt
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from sandbox.controller import PodInfo, PodScript, Step, call, exit, log, run_forever, sleep
from sandbox.orbax_saves import COMMIT_FILE, checkpoint_uris, join, orbax_step_uris

ObjectWriter = Callable[[str, bytes], None]


class PodStorage(Protocol):
    """GCS with the calling pod's identity; raises ContainerExit when the call is refused."""

    def write(self, info: PodInfo, uri: str, data: bytes) -> None: ...

    def read(self, info: PodInfo, uri: str) -> bytes: ...


Storage = ObjectWriter | PodStorage


def absl(level: str, message: str, source: str = "train_rl.py:824") -> Callable[[], str]:
    """An absl log line, stamped when printed: `W1129 10:00:00.123456 140213 train_rl.py:824] m`."""

    def render() -> str:
        now = dt.datetime.now(dt.UTC)
        thread = threading.get_ident() % 1_000_000 + 140_000_000_000_000
        return f"{level}{now:%m%d %H:%M:%S.%f} {thread} {source}] {message}\n"

    return render


def _percent(value: float) -> str:
    return "0%" if value == 0 else f"{float(value)}%"


@dataclass(frozen=True)
class EvalResult:
    """The fields of MaxText's Pre/Intermediate/Post RL evaluation lines."""

    corr: int
    total: int = 64
    partial_accuracy: float = 20.3125
    format_accuracy: float = 85.9375
    mean_reward: float = 0.1234

    def fields(self) -> str:
        return (
            f"corr={self.corr}, total={self.total}, "
            f"accuracy={_percent(self.corr / self.total * 100)}, "
            f"partial_accuracy={_percent(self.partial_accuracy)}, "
            f"format_accuracy={_percent(self.format_accuracy)}, "
            f"mean_reward={self.mean_reward:.4f}"
        )


DEFAULT_PRE = EvalResult(
    corr=8, partial_accuracy=14.0625, format_accuracy=79.6875, mean_reward=0.0821
)
DEFAULT_POST = EvalResult(corr=12)

STDERR_NOISE = (
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
    "I0000 00:00:1764410400.123456      42 pjrt_api.cc:112] GetPjrtApi was found for proxy\n"
    "/usr/local/lib/python3.12/site-packages/jax/_src/cloud_tpu_init.py:86: UserWarning: "
    "Transparent hugepages are not enabled.\n"
    "  warnings.warn(\n"
)


def _writes(write: Storage | None, uris: list[str]) -> list[Step]:
    if write is None:
        return []

    def write_all(info: PodInfo) -> None:
        for uri in uris:
            data = b"{}" if uri.endswith(".json") else b"\0"
            if callable(write):
                write(uri, data)
            else:
                write.write(info, uri, data)

    return [call(write_all)]


def _reads(storage: Storage | None, uri: str | None) -> list[Step]:
    """Read an object first (a checkpoint to load), as the pod; only a PodStorage reads."""
    if storage is None or callable(storage) or not uri:
        return []
    return [call(lambda info: storage.read(info, uri))]


HF_EXPORT_FILES = (
    "config.json",
    "generation_config.json",
    "model-00001-of-00002.safetensors",
    "model-00002-of-00002.safetensors",
    "model.safetensors.index.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)


GRPC_UNAVAILABLE = (
    "Traceback (most recent call last):\n"
    '  File "/deps/src/maxtext/trainers/post_train/rl/train_rl.py", line 790\n'
    "jaxlib.xla_extension.XlaRuntimeError: UNAVAILABLE: Pathways worker "
    "disconnected (slice 0, host 3): Socket closed\n"
)


def restored_eval(pre: EvalResult, post: EvalResult | None, step: int, total: int) -> EvalResult:
    """What the Pre line reports for a model restored at `step`: part way from pre to post."""
    end = post or pre
    share = min(step / total, 1.0) if total else 1.0
    return EvalResult(
        corr=round(pre.corr + (end.corr - pre.corr) * share),
        total=pre.total,
        partial_accuracy=pre.partial_accuracy,
        format_accuracy=pre.format_accuracy,
        mean_reward=round(pre.mean_reward + (end.mean_reward - pre.mean_reward) * share, 4)
        or 0.0001,
    )


def saved_line(step: int) -> str:
    """Orbax's line once a synchronous save is finalized, commit file written (google/orbax
    checkpoint/orbax/checkpoint/checkpoint_manager.py, CheckpointManager.save)."""
    return f"[process=0][thread=MainThread][step={step}] Finished synchronous save."


def grpo_client_script(
    *,
    base_output_directory: str = "gs://bucket/gemma4-26b/trained/",
    run_name: str = "rl",
    num_batches: int = 50,
    eval_every: int = 10,
    checkpoint_period: int = 50,
    step_seconds: float = 60.0,
    pre: EvalResult | None = DEFAULT_PRE,
    post: EvalResult | None = DEFAULT_POST,
    evals: dict[int, EvalResult] | None = None,
    fail_at_step: int | None = None,
    exit_code: int = 0,
    write_object: Storage | None = None,
    container: str | None = None,
    load_parameters_path: str | None = None,
    cut_last_save: bool = False,
    cut_saves: dict[int, int] | None = None,
    resume_from: int | None = None,
    before_step: Callable[[PodInfo, int], None] | None = None,
    after_step: Callable[[PodInfo, int], None] | None = None,
) -> PodScript:
    """`train_rl` in headless Pathways mode, over simulated time (steps of `step_seconds`).

    `cut_last_save`: the last checkpoint's save is cut off just before Orbax's commit file.
    `cut_saves` {step: n}: that step's save is cut after its first n objects (an asynchronous
    save the process did not live to finish; orbax_step_uris gives the order).
    Checkpoints are saved every `checkpoint_period` steps and at the last (rl.yml: 50).

    With a PodStorage as `write_object`, the converted checkpoint at `load_parameters_path`
    is read first, as the pod.

    `resume_from`: the newest complete checkpoint of this run_name; Tunix's checkpoint manager
    restores it after the base model is loaded (its `Restored params from step` line), the
    Pre line reports the restored model and training continues at the next step.
    `before_step(info, step)` may raise ContainerExit (the backend went away);
    `after_step(info, step)` runs once the step is logged (records, faults).

    `evals` {step: result}: what that step's Intermediate Eval reports (else the Post line's,
    or the Pre line's). Like MaxText's, the line of step N comes after checkpoint N's save
    (its hook runs from the next update's metrics write: tunix/sft/peft_trainer.py, train;
    rl.yml saves synchronously), and there is none at the last step.

    `pre=None, post=None` is a run with num_test_batches=0 (neither line); `post=None` alone
    completes without a Post line; `fail_at_step` dies with a gRPC error (a backend worker
    crashed); `exit_code` is how the process ends after the last line.
    """
    steps: list[Step] = [
        log(STDERR_NOISE),
        log(absl("I", f"Config param run_name: {run_name}", "pyconfig.py:1068")),
        log(absl("I", "Loading checkpoint from load_parameters_path", "checkpointing.py:611")),
        *_reads(
            write_object, load_parameters_path and f"{load_parameters_path.rstrip('/')}/_METADATA"
        ),
        log("Loading checkpoint shards:  50%|#####     | 1/2 [00:41<00:41, 41.0s/it]"),
        sleep(45),
        log("\rLoading checkpoint shards: 100%|##########| 2/2 [01:20<00:00, 40.1s/it]\n"),
        sleep(30),
    ]
    first = 1
    if resume_from is not None:
        step_dir = join(base_output_directory, run_name, "checkpoints", "actor", str(resume_from))
        steps += [
            *_reads(write_object, join(step_dir, COMMIT_FILE)),
            sleep(40),
            log(
                absl(
                    "I",
                    f"Restored params from step: {resume_from} in 40.127 seconds",
                    "checkpoint_manager.py:243",
                )
            ),
        ]
        first = resume_from + 1
        if pre:
            pre = restored_eval(pre, post, resume_from, num_batches)
    if pre:
        steps.append(log(absl("W", f"Pre RL Training: {pre.fields()}")))
    for step in range(first, num_batches + 1):
        steps.append(sleep(step_seconds))
        if before_step is not None:
            steps.append(call(lambda info, n=step: before_step(info, n)))
        steps.append(log(absl("I", f"Train step {step}/{num_batches} done", "rl_cluster.py:573")))
        if after_step is not None:
            steps.append(call(lambda info, n=step: after_step(info, n)))
        if step == fail_at_step:
            steps += [log(GRPC_UNAVAILABLE), exit(1)]
            return PodScript(steps, container)
        if step % checkpoint_period == 0 or step == num_batches:
            uris = checkpoint_uris(base_output_directory, run_name, step)
            if cut_last_save and step == num_batches:
                uris = uris[:-1]
            uris = uris[: (cut_saves or {}).get(step, len(uris))]
            steps += _writes(write_object, uris)
            steps.append(log(absl("I", saved_line(step), "checkpoint_manager.py:2049")))
        mid = (evals or {}).get(step) or post or pre
        if step % eval_every == 0 and step < num_batches and mid:
            steps.append(
                log(
                    absl("W", f"Intermediate Eval (step={step}): {mid.fields()}", "train_rl.py:702")
                )
            )
    steps += [sleep(5), log(absl("W", "RL Training Completed Successfully!", "train_rl.py:815"))]
    if post:
        steps += [sleep(30), log(absl("W", f"Post RL Training: {post.fields()}"))]
    steps += [log(absl("I", "Shutting down Pathways client", "pathways.py:201")), exit(exit_code)]
    return PodScript(steps, container)


KILLED = 137  # SIGKILL: a deadline, a node taken away


def to_maxtext_script(
    base_output_directory: str = "gs://bucket/gemma4-26b/max-text-format/",
    write_object: Storage | None = None,
    exit_code: int = 0,
    cut_after: int | None = None,
) -> PodScript:
    """`to_maxtext`: an Orbax checkpoint at step 0 (`<base>/0/items`), in Orbax's order.

    `exit_code` != 0: it fails loading the Hugging Face model (a traceback), before any save.
    `cut_after` n: killed (exit 137) after the first n objects of its save.
    """
    step = join(base_output_directory, "0")
    items = join(step, "items")
    arrays = ("_METADATA", "_sharding", "params.params.decoder.layers_0.mlp.wi_0.kernel/.zarray")
    uris = orbax_step_uris(step, "items", arrays)
    loading = [
        log(absl("I", "Loading HF model google/gemma-4-26b-a4b-it", "to_maxtext.py:402")),
        sleep(60),
    ]
    if exit_code:
        return PodScript([*loading, log(CONVERSION_FAILURE), exit(exit_code)])
    if cut_after is not None:
        return PodScript([*loading, *_writes(write_object, uris[:cut_after]), exit(KILLED)])
    ending = log(absl("I", f"Saved MaxText checkpoint to {items}", "to_maxtext.py:655"))
    return PodScript([*loading, *_writes(write_object, uris), ending, exit(0)])


CONVERSION_FAILURE = (
    "Traceback (most recent call last):\n"
    '  File "/deps/src/maxtext/checkpoint_conversion/to_maxtext.py", line 702, in <module>\n'
    "    app.run(main)\n"
    '  File "/deps/src/maxtext/checkpoint_conversion/to_maxtext.py", line 431, in main\n'
    "    hf_model = AutoModelForCausalLM.from_pretrained(model_id, token=hf_token)\n"
    "RuntimeError: Error(s) in loading state_dict for Gemma4ForCausalLM:\n"
    "\tsize mismatch for model.layers.0.mlp.experts.gate_up_proj: copying a param with shape "
    "torch.Size([128, 2816, 1408]) from checkpoint, the shape in current model is "
    "torch.Size([128, 2816, 2816]).\n"
)


def to_huggingface_script(
    base_output_directory: str = "gs://bucket/gemma4-26b/hf-trained/",
    write_object: Storage | None = None,
    exit_code: int = 0,
    load_parameters_path: str | None = None,
) -> PodScript:
    """`to_huggingface`: config, safetensors and tokenizer files straight into the base dir."""
    uris = [join(base_output_directory, f) for f in HF_EXPORT_FILES]
    return PodScript(
        [
            log(absl("I", "Loading MaxText checkpoint", "to_huggingface.py:311")),
            *_reads(
                write_object,
                load_parameters_path and f"{load_parameters_path.rstrip('/')}/_METADATA",
            ),
            sleep(60),
            *([] if exit_code else _writes(write_object, uris)),
            log(absl("I", f"Saved HF model to {base_output_directory}", "to_huggingface.py:480")),
            exit(exit_code),
        ]
    )


def pathways_server_script(
    role: str = "resource_manager",
    container: str | None = None,
    check: Callable[[PodInfo], None] | None = None,
) -> PodScript:
    """A Pathways proxy, resource manager or worker: starts, listens, runs until deleted;
    `check` runs every 10 s and may end it (a worker whose slice lost a host)."""
    return PodScript(
        [
            log(absl("I", f"Pathways {role} server listening", "server_main.cc:87")),
            run_forever(check),
        ],
        container,
    )


def crashing_worker_script(
    after_s: float = 300.0, container: str | None = None
) -> Callable[[PodInfo], PodScript]:
    """A worker that dies once (exit 1 after `after_s`) and then runs normally when restarted."""

    def script(info: PodInfo) -> PodScript:
        if info.attempt > 0:
            return pathways_server_script("worker", container)
        return PodScript(
            [
                log(absl("I", "Pathways worker server listening", "server_main.cc:87")),
                sleep(after_s),
                log(absl("F", "Check failed: tpu_driver ok: TPU chip halted", "tpu_worker.cc:412")),
                exit(1),
            ],
            container,
        )

    return script
