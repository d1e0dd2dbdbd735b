"""The sandbox's GRPO client tells a training run's stories: varying step times, a noisy
falling loss, TensorBoard event files, Orbax's rotation, and each training fault's lines and
files."""

from __future__ import annotations

import itertools
import math
import re
import statistics
import struct
from dataclasses import dataclass, field

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from sandbox.ledger import Ledger
from sandbox.orbax_saves import COMMIT_FILE, checkpoint_uris, steps_to_remove
from sandbox.pod_scripts import PodInfo, PodScript
from sandbox.tensorboard_events import (
    FLUSH_SECS,
    EventFile,
    FlushClock,
    file_version_event,
    masked_crc32c,
    scalar_event,
)
from sandbox.training_curve import (
    LR_COLLAPSE_LOSS,
    VARIED_JITTER,
    VARIED_SLOW_EVERY,
    TrainingCurve,
    TrainingFaults,
)
from sandbox.workloads import grpo_client_script

BASE = "gs://b/gemma4-26b/trained/"
RUN = "rl"
INFO = PodInfo("tpu-rl", "rl-train-0-0-ab1cd", "rl-train-0", 0, 0, {})
STEP = re.compile(r"Train step (\d+) training loss: (\S+)  - training perplexity: (\S+)$")
EVAL = re.compile(r"Intermediate Eval \(step=(\d+)\): .*mean_reward=(\S+)$")
POST = re.compile(r"Post RL Training: .*mean_reward=(\S+)$")
CHECKPOINTS = f"{BASE}{RUN}/checkpoints/actor/"
TENSORBOARD = f"{BASE}{RUN}/tensorboard/"


@dataclass
class MemoryBucket:
    """A PodStorage over a dict: what the bucket holds, each upload in order."""

    objects: dict[str, bytes] = field(default_factory=dict)
    uploads: list[str] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)  # `write <uri>`, `delete <uri>`, in order

    def write(self, info: PodInfo, uri: str, data: bytes) -> None:
        self.objects[uri] = data
        self.uploads.append(uri)
        self.calls.append(f"write {uri}")

    def read(self, info: PodInfo, uri: str) -> bytes:
        return self.objects[uri]

    def delete(self, info: PodInfo, uri: str) -> None:
        del self.objects[uri]
        self.calls.append(f"delete {uri}")

    def steps(self) -> list[int]:
        """The committed checkpoint steps on the bucket."""
        parts = [uri[len(CHECKPOINTS) :].split("/") for uri in self.objects]
        return sorted(int(p[0]) for p in parts if p[1:] == [COMMIT_FILE] and p[0].isdigit())

    def event_files(self) -> dict[str, bytes]:
        return {u: d for u, d in self.objects.items() if u.startswith(TENSORBOARD)}


@dataclass
class Ran:
    """A script run without a clock: its log lines, sleeps, and whether it ended in a hang."""

    lines: list[str]
    sleeps: list[float]
    hung: bool


def run(script: PodScript) -> Ran:
    lines: list[str] = []
    sleeps: list[float] = []
    for step in script.steps:
        if step.action == "log":
            lines += (step.text() if callable(step.text) else step.text).splitlines()
        elif step.action == "sleep":
            sleeps.append(step.seconds)
        elif step.action == "call" and step.fn is not None:
            step.fn(INFO)
        elif step.action == "forever":
            return Ran(lines, sleeps, hung=True)
    return Ran(lines, sleeps, hung=False)


def client(bucket: MemoryBucket | None = None, **kwargs) -> Ran:
    kwargs.setdefault("num_batches", 40)
    kwargs.setdefault("checkpoint_period", 10)
    return run(
        grpo_client_script(
            base_output_directory=BASE,
            run_name=RUN,
            write_object=bucket,
            event_clock=lambda: 1_764_410_400.5,
            **kwargs,
        )
    )


def losses(ran: Ran) -> dict[int, tuple[str, str]]:
    """Each step line's loss and perplexity text, by step."""
    return {
        int(m.group(1)): (m.group(2), m.group(3)) for line in ran.lines if (m := STEP.search(line))
    }


def post_rewards(ran: Ran) -> list[float]:
    return [float(m.group(1)) for line in ran.lines if (m := POST.search(line))]


def step_sleeps(ran: Ran, num_batches: int) -> list[float]:
    """The sleeps of the training updates (the last `num_batches` before close's 5 s and 30 s)."""
    return ran.sleeps[-num_batches - 2 : -2]


# -- the healthy run -----------------------------------------------------------------------------


def test_step_times_vary_deterministically_with_occasional_slow_steps():
    def varied(seed: int) -> list[float]:
        curve = TrainingCurve(60.0, seed, jitter=VARIED_JITTER, slow_every=VARIED_SLOW_EVERY)
        return [curve.seconds(s) for s in range(1, 201)]

    times = varied(7)
    assert times == varied(7) and times != varied(8)
    assert len(set(times)) == len(times)
    assert 54.0 <= statistics.median(times) <= 66.0
    slow = [t for t in times if t > 66.0]
    assert 1 <= len(slow) <= 25  # about one in 25
    # the script sleeps them: simulated, not wall time
    ran = client(
        num_batches=20,
        step_seconds=60.0,
        step_jitter=VARIED_JITTER,
        slow_step_every=VARIED_SLOW_EVERY,
        seed=7,
    )
    assert step_sleeps(ran, 20) == times[:20]
    assert set(step_sleeps(client(num_batches=20), 20)) == {60.0}  # steady by default


def test_the_loss_sits_near_zero_changes_sign_and_perplexity_is_its_exp():
    """GRPO's loss as the real trainer logs it (sandbox/corpus): beta * KL plus a zero-mean
    policy term, not a falling curve."""
    ran = client(num_batches=120, checkpoint_period=50)
    values = [float(loss) for loss, _ in losses(ran).values()]
    assert len(values) == 120
    assert max(abs(v) for v in values) < 0.36  # the corpus's healthy runs' largest
    assert any(v < 0 for v in values) and any(v > 0 for v in values)
    assert any(b > a for a, b in itertools.pairwise(values))  # noisy, not monotonic
    loss, ppl = losses(ran)[5]
    assert abs(float(ppl) - math.exp(float(loss))) < 1e-5


# -- the faults ----------------------------------------------------------------------------------


def test_nan_prints_nan_loss_and_perplexity_from_its_step_on():
    ran = client(faults=TrainingFaults(nan_at_step=12))
    by_step = losses(ran)
    assert all(v != ("nan", "nan") for s, v in by_step.items() if s < 12)
    assert all(v == ("nan", "nan") for s, v in by_step.items() if s >= 12)
    assert by_step[12] == ("nan", "nan") and len(by_step) == 40
    # the model is garbage: the evaluations after it score nothing
    evals = {int(m.group(1)): m.group(2) for line in ran.lines if (m := EVAL.search(line))}
    assert evals[10] != "0.0000" and evals[20] == evals[30] == "0.0000"
    assert post_rewards(ran) == [0.0]


def test_an_infinite_loss_prints_inf():
    ran = client(faults=TrainingFaults(nan_at_step=3, nan_value=math.inf))
    assert losses(ran)[3] == ("inf", "inf")


def test_a_loss_spike_logs_the_real_diverged_loss_for_one_step():
    ran = client(faults=TrainingFaults(loss_spike_at_step=25))
    values = {s: float(loss) for s, (loss, _) in losses(ran).items()}
    assert values[25] == LR_COLLAPSE_LOSS  # fault-lr-collapse.json's step 3
    assert abs(values[26]) < 1.0  # one step (loss_spike_steps), back near zero


def test_a_stall_leaves_the_pod_running_and_silent_after_the_step_before():
    bucket, ledger = MemoryBucket(), Ledger()
    ran = client(bucket, checkpoints=ledger, faults=TrainingFaults(stall_at_step=23))
    assert ran.hung
    assert max(losses(ran)) == 22 and ran.lines[-1].endswith(losses_line_tail(ran, 22))
    assert not any("Completed" in line for line in ran.lines)
    assert bucket.steps() == [10, 20]  # nothing saved after
    assert ledger.poisoned_steps(RUN) == set()  # a hang does not damage the model


def losses_line_tail(ran: Ran, step: int) -> str:
    loss, ppl = losses(ran)[step]
    return f"Train step {step} training loss: {loss}  - training perplexity: {ppl}"


def test_slow_steps_take_a_multiple_of_the_base_time_from_their_step_on():
    varied = {"step_jitter": VARIED_JITTER, "slow_step_every": VARIED_SLOW_EVERY}
    healthy = step_sleeps(client(num_batches=30, step_seconds=60.0, **varied), 30)
    slow = step_sleeps(
        client(
            num_batches=30,
            step_seconds=60.0,
            faults=TrainingFaults(slow_from_step=21, slow_factor=4),
            **varied,
        ),
        30,
    )
    assert slow[:20] == healthy[:20]
    assert slow[20:] == [t * 4 for t in healthy[20:]]
    assert min(slow[20:]) > 3 * max(healthy[:20]) / 1.6  # beyond any jittered or slow step


def test_a_reward_collapse_drops_mean_reward_from_the_best_at_its_evaluation():
    ran = client(
        num_batches=50,
        eval_every=10,
        faults=TrainingFaults(reward_collapse_at_eval=30, reward_collapse_by=0.1),
    )
    evals = {int(m.group(1)): float(m.group(2)) for line in ran.lines if (m := EVAL.search(line))}
    best = max(evals[10], evals[20])
    assert evals[30] == round(best - 0.1, 4) and evals[40] == evals[30]
    assert post_rewards(ran) == [evals[30]]


def test_a_kl_blowup_grows_the_kl_and_scores_every_completion_0():
    """As the corpus's fault-kl-blowup: the policy leaves the reference and its reward."""
    bucket = MemoryBucket()
    client(bucket, faults=TrainingFaults(kl_blowup_at_step=20, kl_blowup_factor=100.0))
    board = scalars(only_file(bucket))
    kl = board["actor/train/kl"]
    assert min(kl[s] for s in range(20, 41)) > 50 * max(kl[s] for s in range(1, 20))
    # global step k's rewards are at TensorBoard step k - 1
    assert {board["rewards/train/score/max"][s] for s in range(19, 40)} == {0.0}
    assert max(board["rewards/train/score/mean"][s] for s in range(0, 19)) > 0


# -- checkpoints: poisoned steps and Orbax's rotation --------------------------------------------


def test_latest_n_drops_the_oldest_steps_the_new_one_included():
    assert steps_to_remove([25, 50, 75], 3) == []
    assert steps_to_remove([25, 50, 75, 100], 3) == [25]
    assert steps_to_remove([25, 50, 75, 100], None) == []


def test_nan_at_30_of_500_steps_rotates_every_healthy_checkpoint_away():
    """A NaN run's story: NaN at step 30, a save every 25, MaxText keeps 10: the one healthy
    checkpoint (25) is deleted once 275 commits; what is left is all poisoned."""
    bucket, ledger = MemoryBucket(), Ledger()
    client(
        bucket,
        checkpoints=ledger,
        num_batches=500,
        checkpoint_period=25,
        max_to_keep=10,
        faults=TrainingFaults(nan_at_step=30),
    )
    assert bucket.steps() == list(range(275, 501, 25))
    assert ledger.poisoned_steps(RUN) == set(range(50, 501, 25))
    [healthy] = [c for c in ledger.checkpoints if not c.poisoned]
    assert healthy.step == 25 and healthy.deleted is not None
    assert not any(uri.startswith(f"{CHECKPOINTS}25/") for uri in bucket.objects)


def test_the_rotation_counts_the_steps_already_on_the_bucket_and_deletes_after_the_commit():
    bucket = MemoryBucket()
    for uri in checkpoint_uris(BASE, RUN, 5):
        bucket.write(INFO, uri, b"\0")
    client(bucket, num_batches=30, checkpoint_period=10, max_to_keep=2, existing_steps=(5,))
    assert bucket.steps() == [20, 30]
    # 5 goes once 20 (the third known step) commits: Orbax deletes in _finalize, after the commit
    commit_20 = bucket.calls.index(f"write {CHECKPOINTS}20/{COMMIT_FILE}")
    delete_5 = bucket.calls.index(f"delete {CHECKPOINTS}5/{COMMIT_FILE}")
    assert commit_20 < delete_5 < bucket.calls.index(f"write {CHECKPOINTS}30/{COMMIT_FILE}")
    assert not any(uri.startswith(f"{CHECKPOINTS}5/") for uri in bucket.objects)


def test_without_a_fault_no_checkpoint_is_poisoned():
    ledger = Ledger()
    client(MemoryBucket(), checkpoints=ledger, num_batches=25)
    assert [c.step for c in ledger.checkpoints] == [10, 20, 25]
    assert ledger.poisoned_steps(RUN) == set()


# -- TensorBoard ---------------------------------------------------------------------------------


def event_classes():
    """tensorboard's Event/Summary/Value (event.proto, summary.proto), their fields used here,
    built with the protobuf runtime: an independent decoder of what the sandbox writes."""
    proto = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(
        name="sandbox_event_test.proto", package="sandboxtest", syntax="proto3"
    )
    value = fdp.message_type.add(name="Value")
    value.field.add(name="tag", number=1, type=proto.TYPE_STRING, label=proto.LABEL_OPTIONAL)
    value.field.add(
        name="simple_value", number=2, type=proto.TYPE_FLOAT, label=proto.LABEL_OPTIONAL
    )
    summary = fdp.message_type.add(name="Summary")
    summary.field.add(
        name="value",
        number=1,
        type=proto.TYPE_MESSAGE,
        label=proto.LABEL_REPEATED,
        type_name=".sandboxtest.Value",
    )
    event = fdp.message_type.add(name="Event")
    for name, number, type_ in (
        ("wall_time", 1, proto.TYPE_DOUBLE),
        ("step", 2, proto.TYPE_INT64),
        ("file_version", 3, proto.TYPE_STRING),
    ):
        event.field.add(name=name, number=number, type=type_, label=proto.LABEL_OPTIONAL)
    event.field.add(
        name="summary",
        number=5,
        type=proto.TYPE_MESSAGE,
        label=proto.LABEL_OPTIONAL,
        type_name=".sandboxtest.Summary",
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("sandboxtest.Event"))


Event = event_classes()


def records(data: bytes) -> list[bytes]:
    """TFRecord frames, their masked CRC32Cs checked."""
    out, at = [], 0
    while at < len(data):
        header = data[at : at + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack("<I", data[at + 8 : at + 12])
        assert header_crc == masked_crc32c(header)
        payload = data[at + 12 : at + 12 + length]
        (payload_crc,) = struct.unpack("<I", data[at + 12 + length : at + 16 + length])
        assert payload_crc == masked_crc32c(payload)
        out.append(payload)
        at += 16 + length
    assert at == len(data)
    return out


def scalars(data: bytes) -> dict[str, dict[int, float]]:
    """{tag: {step: value}} of an event file."""
    out: dict[str, dict[int, float]] = {}
    for frame in records(data)[1:]:
        event = Event.FromString(frame)
        for value in event.summary.value:
            out.setdefault(value.tag, {})[event.step] = value.simple_value
    return out


def only_file(bucket: MemoryBucket) -> bytes:
    [data] = bucket.event_files().values()
    return data


def test_the_masked_crc_is_tensorflow_s():
    """crc32c("123456789") is 0xE3069283 (RFC 3720 B.4); Mask rotates it right 15 bits and adds
    0xa282ead8 (tensorflow core/lib/hash/crc32c.h)."""
    crc = 0xE3069283
    assert masked_crc32c(b"123456789") == (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def test_events_round_trip_through_the_protobuf_runtime():
    data = scalar_event(1_764_410_400.25, 42, "actor/train/loss", 0.5)
    event = Event.FromString(data)
    assert (event.wall_time, event.step) == (1_764_410_400.25, 42)
    assert [(v.tag, v.simple_value) for v in event.summary.value] == [("actor/train/loss", 0.5)]
    assert event.SerializeToString() == data  # byte for byte what protobuf writes
    first = Event.FromString(file_version_event(1.5))
    assert (first.file_version, first.step) == ("brain.Event:2", 0)
    nan = Event.FromString(scalar_event(1.0, 3, "actor/train/loss", math.nan))
    assert math.isnan(nan.summary.value[0].simple_value)
    huge = Event.FromString(scalar_event(1.0, 3, "actor/train/perplexity", 1e300))
    assert huge.summary.value[0].simple_value == math.inf
    events = EventFile("events.out.tfevents.0000000001.host")
    for frame in (file_version_event(1.0), data, scalar_event(2.0, 43, "actor/train/kl", 0.25)):
        events.add(frame)
    assert scalars(events.contents()) == {
        "actor/train/loss": {42: 0.5},
        "actor/train/kl": {43: 0.25},
    }


def test_the_client_writes_tunix_s_tags_to_one_event_file_named_as_tensorboardx_names_it():
    bucket = MemoryBucket()
    client(bucket, num_batches=40)
    [(uri, data)] = bucket.event_files().items()
    assert uri == f"{TENSORBOARD}events.out.tfevents.1764410400.rl-train-0-0"
    assert Event.FromString(records(data)[0]).file_version == "brain.Event:2"
    tags = scalars(data)
    assert set(tags) == {
        "actor/train/loss",
        "actor/train/perplexity",
        "actor/train/kl",
        "rewards/train/score/mean",
        "rewards/train/score/max",
        "rewards/train/score/min",
        "completions/train/mean_length",
    }
    assert sorted(tags["actor/train/loss"]) == list(range(1, 41))  # the actor's steps
    assert sorted(tags["rewards/train/score/mean"]) == list(range(0, 40))  # global_steps - 1


def test_the_event_file_reaches_the_bucket_at_each_flush_and_at_close():
    bucket = MemoryBucket()
    client(bucket, num_batches=100, step_seconds=10.0, log_period=20)
    uploads = [u for u in bucket.uploads if u.startswith(TENSORBOARD)]
    # 10 s steps: tensorboardX's 120 s flush and metrax's every 20 steps, then the close
    assert 8 <= len(uploads) <= 100 * 10 / FLUSH_SECS + 100 / 20 + 1
    assert max(scalars(only_file(bucket))["actor/train/loss"]) == 100


def test_a_nan_run_s_event_file_holds_nan_losses():
    bucket = MemoryBucket()
    client(bucket, faults=TrainingFaults(nan_at_step=12))
    loss = scalars(only_file(bucket))["actor/train/loss"]
    assert not any(math.isnan(loss[s]) for s in range(1, 12))
    assert all(math.isnan(loss[s]) for s in range(12, 41))


def test_a_stalled_pod_flushes_nothing_after_its_hang():
    bucket = MemoryBucket()
    client(bucket, num_batches=40, faults=TrainingFaults(stall_at_step=30), log_period=20)
    loss = scalars(only_file(bucket))["actor/train/loss"]
    assert max(loss) < 29  # the hang's pending events never reach the bucket


def test_the_flush_clock_follows_tensorboardx_and_metrax():
    clock = FlushClock(log_period=20)
    assert not clock.due(60.0, 1)
    assert clock.due(120.0, 2)  # tensorboardX's 120 s
    assert clock.due(130.0, 20)  # metrax's log_period step, 30 s since its last
    assert not clock.due(140.0, 40)  # metrax: under 30 s since its last flush


def test_first_attempt_only_faults_leave_a_resumed_attempt_healthy():
    transient = TrainingFaults(nan_at_step=40, first_attempt_only=True)
    assert transient.for_attempt(0) is transient
    assert transient.for_attempt(1).poisoned_from() is None
    assert TrainingFaults(nan_at_step=40).for_attempt(1).poisoned_from() == 40  # it comes back
