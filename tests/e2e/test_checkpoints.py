"""Whole DAG runs whose checkpoints are cut mid-save, as Orbax leaves them on Cloud Storage:
`_CHECKPOINT_METADATA` first, `commit_success.txt` last (orbax_saves.orbax_step_uris).

A product that does not wait for a step's `commit_success.txt` fails each: the second run skips
the conversion the first left half-written; export takes the cut step; the resume reports the
cut step while the client restored none; the run beside another deployment's conversion trains
from it before it is committed.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from sandbox.harness import (
    CONVERTED_ARRAYS,
    SETTINGS,
    SPOT,
    RunResult,
    Sandbox,
    Workloads,
    converted_folder,
)
from sandbox.orbax_saves import COMMIT_FILE, orbax_step_uris
from tests.support.e2e_runs import attempts

BUCKET = SETTINGS["gcs_bucket"]


def names_under(box: Sandbox, uri: str) -> list[str]:
    return box.gcs.names(BUCKET, uri.removeprefix(f"gs://{BUCKET}/"))


def test_a_conversion_killed_mid_save_is_converted_again(airflow_db, tmp_path, capfd):
    """Run 1's conversion is killed after the step metadata and one array (both tries), and
    its lock is left behind as a lost worker would; run 2 converts again (the lock's run has
    ended) and trains from the committed model."""
    conf = dict(SETTINGS)
    folder = converted_folder(conf)
    with Sandbox(tmp_path).up() as box:
        first = box.run(conf, Workloads(convert_cut_after=2))
        assert first.task_states["convert"] == "failed", first.task_states
        left = names_under(box, folder)
        assert f"{folder}0/_CHECKPOINT_METADATA".removeprefix(f"gs://{BUCKET}/") in left, left
        assert not any(n.endswith(f"0/{COMMIT_FILE}") for n in left), left
        stale = {
            "run_id": first.run_id,
            "dag_id": "tpu_rl_post_training",
            "deployment": first.xcoms["validate.return_value"]["deployment_id"],
            "expires": time.time() + 3600,
        }
        box.gcs.write(f"{folder}conversion.lock", json.dumps(stale).encode())
        capfd.readouterr()
        second = box.run(conf)
        assert second.state == "success", second.why()
        assert second.task_states["convert"] == "success", second.task_states  # not skipped
        assert any(n.endswith(f"0/{COMMIT_FILE}") for n in names_under(box, folder))
        assert not any(n.endswith("conversion.lock") for n in names_under(box, folder))


def test_export_after_a_cut_asynchronous_save_takes_the_newest_committed_step(airflow_db, tmp_path):
    """Checkpoints at 25 and 50; the save of 50 was cut after its metadata and one array."""
    conf = {**SETTINGS, "checkpoint_period": 25}
    with Sandbox(tmp_path).up() as box:
        result = box.run(conf, Workloads(train_save_cuts={50: 2}))
    assert result.state == "success", result.why()
    assert result.xcoms.get("export.checkpoint_step") == 25, result.xcoms


def test_a_resume_after_a_cut_save_reports_the_step_restored(airflow_db, tmp_path, capfd):
    """Spot, 100 steps, a checkpoint every 50: the save of 50 is cut (its metadata and two
    arrays) when the node is preempted at step 52. The client restores nothing (no committed
    step); the record, the log and the run report say so."""
    with Sandbox(tmp_path).up() as box:
        result = box.run(SPOT, Workloads(preempt_at_steps=(52,), train_save_cuts={50: 3}))
        log = capfd.readouterr().out
        assert result.state == "success", result.why()
        restored = [a.restored_step for a in result.ledger.attempts]
        assert restored == [None, None], restored
        record = attempts(result)
        assert [a["resumed_from_step"] for a in record] == restored, record
        assert "Resuming training from the start (no checkpoint yet)" in log
        report = _run_report(box, result)
        assert [a["resumed_from_step"] for a in report["attempts"]] == restored, report
        assert result.xcoms.get("export.checkpoint_step") == 100, result.xcoms


def test_a_run_waits_for_another_runs_conversion_into_the_same_folder(airflow_db, tmp_path, capfd):
    """Another deployment's run holds the folder's lock and has begun its save (metadata and
    one array written). This run waits, does not convert, and trains only once the other
    conversion is committed."""
    conf = dict(SETTINGS)
    folder = converted_folder(conf)
    with Sandbox(tmp_path).up() as box:
        other = OtherDeploymentConversion(box, folder)
        other.start()
        result = box.run(conf, Workloads(during_training=other.training_started))
        other.join()
        log = capfd.readouterr().out
    assert result.state == "success", result.why()
    assert other.committed_at is not None and other.trained_at is not None
    assert other.trained_at > other.committed_at, "trained from an uncommitted conversion"
    assert result.task_states["convert"] == "skipped", result.task_states
    assert "is being converted by run 'scheduled__other'" in log


class OtherDeploymentConversion:
    """A conversion by another Airflow deployment sharing the bucket: it takes the lock,
    writes the start of its save, and finishes it (commit, then lock removed) once this run
    asked for the lock twice (it waited a poll), or once this run trains (whichever comes
    first)."""

    def __init__(self, box: Sandbox, folder: str) -> None:
        self.box, self.folder = box, folder
        self.uris = orbax_step_uris(f"{folder}0", "items", CONVERTED_ARRAYS)
        self.trained = threading.Event()
        self.committed_at: float | None = None
        self.trained_at: float | None = None
        self.thread = threading.Thread(target=self.finish, daemon=True)

    def start(self) -> None:
        owner = {
            "run_id": "scheduled__other",
            "dag_id": "tpu_rl_post_training",
            "deployment": "other-composer",
            "expires": time.time() + 3600,
        }
        blob = self.box.gcs.client().bucket(BUCKET).blob(self._name("conversion.lock"))
        self.box.gcs.write(self.uris[0])  # the bucket, and Orbax's step metadata
        blob.upload_from_string(json.dumps(owner), if_generation_match=0)
        self.box.gcs.write(self.uris[1])
        self.asked_before = self._lock_requests()
        self.thread.start()

    def training_started(self) -> None:
        self.trained_at = time.monotonic()
        self.trained.set()

    def finish(self) -> None:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not self.trained.is_set():
            if self._lock_requests() > self.asked_before + 1:
                break  # the other run was told to wait, and asked again a poll later
            time.sleep(0.1)
        for uri in self.uris[2:]:
            self.box.gcs.write(uri)
        self.committed_at = time.monotonic()
        self.box.gcs.client().bucket(BUCKET).blob(self._name("conversion.lock")).delete()

    def join(self) -> None:
        self.thread.join(timeout=200)

    def _name(self, leaf: str) -> str:
        return f"{self.folder}{leaf}".removeprefix(f"gs://{BUCKET}/")

    def _lock_requests(self) -> int:
        return sum("ifGenerationMatch=0" in r for r in list(self.box.gcs.traffic.requests))


def _run_report(box: Sandbox, result: RunResult) -> dict[str, Any]:
    from tpu_rl.layout import run_slug

    identity = result.xcoms["validate.return_value"]["deployment_id"]  # the run's own
    slug = run_slug(result.run_id, identity)
    uri = f"gs://{BUCKET}/gemma4-26b/hf-trained/{slug}/run-report.json"
    return json.loads(box.gcs.read(uri))
