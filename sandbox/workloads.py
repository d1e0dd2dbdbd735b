"""Ready pod scripts for the product's workloads: the MaxText GRPO client, the two checkpoint
conversions and the Pathways servers, printing MaxText's real line formats (maxtext-v0.2.4).

Objects the jobs "write" go through an ObjectWriter(uri, data) that the end-to-end tests wire
to the GCS emulator, or through a PodStorage that reads and writes as the pod's own identity
(sandbox/pod_storage.py) and ends the container when GCS refuses.
"""

import datetime as dt
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from sandbox.orbax_saves import (
    COMMIT_FILE,
    checkpoint_uris,
    join,
    orbax_step_uris,
    steps_to_remove,
)
from sandbox.pod_scripts import PodInfo, PodScript, Step, call, exit, log, run_forever, sleep
from sandbox.tensorboard_events import (
    EventFile,
    FlushClock,
    event_file_name,
    file_version_event,
    scalar_event,
)
from sandbox.training_curve import NO_FAULTS, TrainingCurve, TrainingFaults, perplexity

ObjectWriter = Callable[[str, bytes], None]


class PodStorage(Protocol):
    """GCS with the calling pod's identity; raises ContainerExit when the call is refused."""

    def write(self, info: PodInfo, uri: str, data: bytes) -> None: ...

    def read(self, info: PodInfo, uri: str) -> bytes: ...

    def delete(self, info: PodInfo, uri: str) -> None: ...


Storage = ObjectWriter | PodStorage


class CheckpointRecord(Protocol):
    """Where the client records its commits and Orbax's deletions (sandbox.ledger.Ledger)."""

    def checkpoint_committed(self, run_name: str, step: int, poisoned: bool) -> None: ...

    def checkpoint_deleted(self, run_name: str, step: int) -> None: ...


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


def put_object(storage: Storage, info: PodInfo, uri: str, data: bytes) -> None:
    """Upload as the pod (a refusal ends the container) or through a plain writer."""
    if callable(storage):
        storage(uri, data)
    else:
        storage.write(info, uri, data)


def _writes(write: Storage | None, uris: list[str]) -> list[Step]:
    if write is None:
        return []

    def write_all(info: PodInfo) -> None:
        for uri in uris:
            put_object(write, info, uri, b"{}" if uri.endswith(".json") else b"\0")

    return [call(write_all)]


def _deletes(storage: Storage | None, uris: list[str]) -> list[Step]:
    """Delete objects as the pod; a plain ObjectWriter cannot (nothing is deleted)."""
    if storage is None or callable(storage):
        return []

    def delete_all(info: PodInfo) -> None:
        for uri in uris:
            storage.delete(info, uri)

    return [call(delete_all)]


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


def saved_line(step_dir: str) -> str:
    """Orbax's line once a step's save is committed (google/orbax
    checkpoint/orbax/checkpoint/_src/path/atomicity.py:845-851 at 20be488a, 0.12.2:
    on_commit_callback, in the AsyncCheckpointer's `async_save` thread,
    _src/checkpointers/async_checkpointer.py:256-257): Tunix saves through Orbax's asynchronous
    path, so CheckpointManager.save's `Finished synchronous save.` is never logged."""
    return (
        "[process=0][thread=async_save] Finished saving checkpoint (finalized tmp dir) "
        f"to `{step_dir}`."
    )


SAVED_SOURCE = "atomicity.py:845"
# MaxText's hook (maxtext-v0.2.4 src/maxtext/trainers/post_train/rl/hooks.py:98-102,
# max_logging.warning: absl names the caller)
EVAL_SOURCE = "hooks.py:98"
# Tunix's actor trainer, one line per update (google/tunix tunix/sft/peft_trainer.py:735-740
# at c4ec573, pinned by maxtext-v0.2.4 src/dependencies/extra_deps/post_train_github_deps.txt:1)
STEP_FORMAT = "Train step %d training loss: %f  - training perplexity: %f"
STEP_SOURCE = "peft_trainer.py:735"


def step_line(step: int, loss: float) -> Callable[[], str]:
    """Tunix's step line, through absl (`from absl import logging`, peft_trainer.py:24), with
    perplexity `np.exp(loss)` (peft_trainer.py:719); `%f` prints `nan` and `inf` as such."""
    return absl("I", STEP_FORMAT % (step, loss, perplexity(loss)), STEP_SOURCE)


NAN_EVAL = EvalResult(corr=0, partial_accuracy=0, format_accuracy=0, mean_reward=0.0)


def faulted_eval(result: EvalResult, step: int, faults: TrainingFaults, best: float) -> EvalResult:
    """What an evaluation of the model at `step` reports under `faults`: nothing right once the
    weights are NaN; `reward_collapse_by` below `best` (the best mean_reward reported before)
    from the collapse on."""
    if faults.non_finite(step):
        return NAN_EVAL
    if faults.collapsed(step):
        collapsed = max(round(best - faults.reward_collapse_by, 4), 0.0)
        return EvalResult(
            result.corr,
            result.total,
            result.partial_accuracy,
            result.format_accuracy,
            collapsed,
        )
    return result


# Tunix's TensorBoard tags (`<prefix>/<mode>/<name>`, tunix/sft/metrics_logger.py:282-284):
# the actor trainer's at its (one update late) step, peft_trainer.py:720-742 and
# grpo_learner.py:211-216; the RL cluster's at global_steps, 0-based: global step k's at k-1
# (rl_cluster.py:745-755, grpo_learner.py:376-403)
ACTOR_TAGS = ("actor/train/loss", "actor/train/perplexity", "actor/train/kl")
# grpo_learner.py:376-383 at tunix c4ec573: the batch's mean, max and min score (no std)
CLUSTER_TAGS = (
    "rewards/train/score/mean",
    "rewards/train/score/max",
    "rewards/train/score/min",
    "completions/train/mean_length",
)
LOG_PERIOD = 20  # MaxText rl.yml:96 log_period (the TensorBoard flush cadence)
MAX_TO_KEEP = 10  # MaxText rl.yml:187 max_num_checkpoints_to_keep


def pod_hostname(info: PodInfo | None) -> str:
    """The pod's hostname: `<job>-<index>` for an Indexed Job's pod (controller._pod_from_job,
    as Kubernetes sets it), else the pod's name."""
    if info is None:
        return "localhost"
    return f"{info.job}-{info.index}" if info.index is not None else info.pod


class TensorboardWriter:
    """Process 0's one event file per process start, under `<dir>/` (metrax's backend on
    tensorboardX, see sandbox.tensorboard_events); one file per pod, made at its start."""

    def __init__(
        self,
        directory: str,
        storage: Storage,
        clock: Callable[[], float],
        name_clock: Callable[[], float] | None = None,
    ) -> None:
        """`clock`: the events' wall_time; `name_clock`: the epoch in the file's name (the pod
        process's clock when the writer starts, tensorboardX event_file_writer.py:37-38),
        `clock` when not given."""
        self.directory, self.storage, self.clock = directory, storage, clock
        self.name_clock = name_clock or clock
        self.files: dict[str, EventFile] = {}

    def _key(self, info: PodInfo | None) -> str:
        return f"{info.namespace}/{info.pod}" if info is not None else ""

    def start(self, info: PodInfo) -> None:
        now, name = self.clock(), event_file_name(self.name_clock(), pod_hostname(info))
        events = self.files[self._key(info)] = EventFile(name)
        events.add(file_version_event(now))

    def add(self, info: PodInfo, step: int, scalars: dict[str, float]) -> None:
        events, now = self.files[self._key(info)], self.clock()
        for tag, value in scalars.items():
            events.add(scalar_event(now, step, tag, value))

    def flush(self, info: PodInfo) -> None:
        events = self.files[self._key(info)]
        put_object(self.storage, info, join(self.directory, events.name), events.contents())


def grpo_client_script(
    *,
    base_output_directory: str = "gs://bucket/gemma4-26b/trained/",
    run_name: str = "rl",
    num_batches: int = 50,
    eval_every: int = 10,
    checkpoint_period: int = 50,
    step_seconds: float = 60.0,
    step_jitter: float = 0.0,
    slow_step_every: int = 0,
    seed: int = 0,
    faults: TrainingFaults = NO_FAULTS,
    max_to_keep: int | None = MAX_TO_KEEP,
    existing_steps: tuple[int, ...] = (),
    log_period: int = LOG_PERIOD,
    pre: EvalResult | None = DEFAULT_PRE,
    post: EvalResult | None = DEFAULT_POST,
    evals: dict[int, EvalResult] | None = None,
    fail_at_step: int | None = None,
    exit_code: int = 0,
    write_object: Storage | None = None,
    checkpoints: CheckpointRecord | None = None,
    event_clock: Callable[[], float] = time.time,
    event_file_clock: Callable[[], float] | None = None,
    container: str | None = None,
    load_parameters_path: str | None = None,
    cut_saves: dict[int, int] | None = None,
    resume_from: int | None = None,
    before_step: Callable[[PodInfo, int], None] | None = None,
    after_step: Callable[[PodInfo, int], None] | None = None,
) -> PodScript:
    """`train_rl` in headless Pathways mode, over simulated time.

    Step times and metrics come from a training_curve.TrainingCurve: `step_seconds` each,
    +-`step_jitter` and one in `slow_step_every` 1.6x slow when set (VARIED_JITTER,
    VARIED_SLOW_EVERY), a loss falling with noise (deterministic given `seed`).
    `faults` (training_curve.TrainingFaults) injects NaN, a loss spike, a stall (the pod runs
    on, silent), slow steps, a reward collapse at an evaluation or a KL blow-up (TensorBoard
    only).

    `cut_saves` {step: n}: that step's save is cut after its first n objects (an asynchronous
    save the process did not live to finish; orbax_step_uris gives the order).
    Checkpoints are saved every `checkpoint_period` steps and at the last (rl.yml: 50); once
    one commits, Orbax deletes the steps beyond the newest `max_to_keep` (rl.yml: 10;
    orbax_saves.steps_to_remove), counting `existing_steps` (the complete steps on the bucket
    at start); deletions go through a PodStorage only. `checkpoints` (the ledger) records each
    commit, poisoned when at or after `faults.poisoned_from()`, and each deletion.

    With a `write_object`, process 0's TensorBoard event file
    `<base>/<run_name>/tensorboard/events.out.tfevents.<epoch>.<hostname>` (epoch from
    `event_clock`) is re-uploaded whole at each flush (every 120 simulated s, or at a step
    that is a multiple of `log_period`, tensorboard_events.FlushClock) and at close, with
    ACTOR_TAGS at the actor's step and CLUSTER_TAGS of global step k at step k-1 (the batch's
    worst completion scores 0, its best twice the mean: all 0 once the weights are NaN, all the
    mean from a reward-spread collapse on).
    `event_file_clock`: the epoch in the file's name, when not `event_clock`'s (a scenario's
    simulated clock runs ahead of the wall clock its Kubernetes objects are stamped with).

    With a PodStorage as `write_object`, the converted checkpoint at `load_parameters_path`
    is read first, as the pod.

    `resume_from`: the newest complete checkpoint of this run_name; Tunix's checkpoint manager
    restores it after the base model is loaded (its `Restored params from step` line), the
    Pre line reports the restored model and training continues at the next step.
    `before_step(info, step)` may raise ContainerExit (the backend went away);
    `after_step(info, step)` runs once the step is computed (records, faults), before its
    checkpoint's save.

    Each update N logs step N-1's line (Tunix's, STEP_FORMAT: one update late, skipping the
    first update after a start, tunix/sft/peft_trainer.py:770-787 _write_train_metrics), then
    step N-1's Intermediate Eval (the hook runs from that metrics write with the late step,
    peft_trainer.py:843-844), then starts checkpoint N's save (peft_trainer.py:1016-1027), its
    commit line (saved_line) once written. At close the last step's line is logged, then its
    forced save when the period did not make one (peft_trainer.py:1078-1079, close), then
    `RL Training Completed Successfully!`.

    `evals` {step: result}: what that step's Intermediate Eval reports (else the Post line's,
    or the Pre line's); there is none at the last step.

    `pre=None, post=None` is a run with num_test_batches=0 (neither line); `post=None` alone
    completes without a Post line; `fail_at_step` dies with a gRPC error (a backend worker
    crashed); `exit_code` is how the process ends after the last line.
    """
    curve = TrainingCurve(
        step_seconds, seed, jitter=step_jitter, slow_every=slow_step_every, faults=faults
    )
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
    board = (
        TensorboardWriter(
            join(base_output_directory, run_name, "tensorboard"),
            write_object,
            event_clock,
            event_file_clock,
        )
        if write_object is not None
        else None
    )
    flushes = FlushClock(log_period)
    elapsed = 0.0  # simulated seconds since the writer started
    if board is not None:
        steps.append(call(board.start))
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
                    "checkpoint_manager.py:292",  # tunix/sft/checkpoint_manager.py at c4ec573
                )
            ),
        ]
        first = resume_from + 1
        if pre:
            pre = restored_eval(pre, post, resume_from, num_batches)
    if pre:
        steps.append(log(absl("W", f"Pre RL Training: {pre.fields()}", "train_rl.py:785")))
    best_reward = pre.mean_reward if pre else 0.0
    known = sorted(existing_steps)
    poisoned_from = faults.poisoned_from()

    def record(what: Callable[[], None]) -> list[Step]:
        return [call(lambda _info: what())] if checkpoints is not None else []

    def step_objects(step: int) -> list[str]:
        """A committed step's objects, each once (the step's metadata is written twice)."""
        return list(dict.fromkeys(checkpoint_uris(base_output_directory, run_name, step)))

    def save(step: int) -> list[Step]:
        """Checkpoint `step`'s objects in Orbax's order, then its commit line unless cut; once
        committed, the steps the rotation drops are deleted."""
        uris = checkpoint_uris(base_output_directory, run_name, step)
        kept = min(len(uris), (cut_saves or {}).get(step, len(uris)))
        step_dir = join(base_output_directory, run_name, "checkpoints", "actor", str(step))
        written = _writes(write_object, uris[:kept])
        known.append(step)
        dropped = steps_to_remove(known, max_to_keep)
        known[:] = [s for s in known if s not in dropped]
        if kept < len(uris):
            return written  # the commit never came: no commit line, no deletion
        poisoned = poisoned_from is not None and step >= poisoned_from
        return [
            *written,
            log(absl("I", saved_line(step_dir), SAVED_SOURCE)),
            *record(lambda: checkpoints.checkpoint_committed(run_name, step, poisoned)),
            *(
                deleted
                for old in dropped
                for deleted in (
                    *_deletes(write_object, step_objects(old)),
                    *record(lambda old=old: checkpoints.checkpoint_deleted(run_name, old)),
                )
            ),
        ]

    def logged(step: int) -> list[Step]:
        """Step `step`'s line, its TensorBoard scalars and, every `eval_every` steps but the
        last, its evaluation."""
        nonlocal best_reward
        loss = curve.loss(step)
        out = [log(step_line(step, loss))]
        if board is not None:
            scalars = dict(zip(ACTOR_TAGS, (loss, perplexity(loss), curve.kl(step)), strict=True))
            out.append(call(lambda info: board.add(info, step, scalars)))
        mid = (evals or {}).get(step) or post or pre
        if step % eval_every == 0 and step < num_batches and mid:
            mid = faulted_eval(mid, step, faults, best_reward)
            best_reward = max(best_reward, mid.mean_reward)
            line = f"Intermediate Eval (step={step}): {mid.fields()}"
            out.append(log(absl("W", line, EVAL_SOURCE)))
        return out

    def rewarded(step: int) -> list[Step]:
        """Global step `step`'s rewards and completions, at TensorBoard step `step` - 1, then a
        flush when one is due."""
        if board is None:
            return []
        reward = curve.reward(step)
        best, worst = (reward, reward) if faults.flat_rewards(step) else (2 * reward, 0.0)
        values = (reward, best, worst, curve.mean_length(step))
        scalars = dict(zip(CLUSTER_TAGS, values, strict=True))
        out = [call(lambda info: board.add(info, step - 1, scalars))]
        return [*out, call(board.flush)] if flushes.due(elapsed, step - 1) else out

    for step in range(first, num_batches + 1):
        seconds = curve.seconds(step)
        elapsed += seconds
        steps.append(sleep(seconds))
        if before_step is not None:
            steps.append(call(lambda info, n=step: before_step(info, n)))
        if step > first:
            steps += logged(step - 1)
        if step == faults.stall_at_step:
            steps.append(run_forever())  # hung in the update: Running, silent, nothing saved
            return PodScript(steps, container)
        if after_step is not None:
            steps.append(call(lambda info, n=step: after_step(info, n)))
        if step == fail_at_step:
            steps += [log(GRPC_UNAVAILABLE), exit(1)]
            return PodScript(steps, container)
        if step % checkpoint_period == 0:
            steps += save(step)
        steps += rewarded(step)
    if first <= num_batches:
        steps += logged(num_batches)
        if num_batches % checkpoint_period:
            steps += save(num_batches)
    if board is not None:
        steps.append(call(board.flush))  # the metrics logger's close flushes the writer
    steps += [sleep(5), log(absl("W", "RL Training Completed Successfully!", "train_rl.py:810"))]
    if post:
        post = faulted_eval(post, num_batches, faults, best_reward)
        steps += [
            sleep(30),
            log(absl("W", f"Post RL Training: {post.fields()}", "train_rl.py:823")),
        ]
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
