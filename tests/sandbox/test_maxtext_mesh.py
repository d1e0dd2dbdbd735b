"""MaxText 0.2.4's trainer mesh with trainer and sampler slices in the sandbox: the
trainer's config is rebuilt per slice (fsdp = devices per slice // tensor, expert parallelism
kept) and keeps RLConfig's num_slices -1, so create_device_mesh's devices per slice are negative
and fill_unspecified_mesh_axes asserts whatever the axes; the training pod fails with MaxText's
traceback once the backend's slices are up (sandbox/maxtext_mesh.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from sandbox.cloud import GcsEmulator
from sandbox.cluster_model import ClusterModel
from sandbox.controller import Controller
from sandbox.harness import Workloads, build_scenario
from sandbox.kube_emulator import KubeEmulator, running_emulator
from sandbox.maxtext_mesh import FLAGS, MaxTextError, backend_slices, multi_slice_meshes
from tests.support.cells import cell_conf
from tests.support.sandbox_cluster import NS, VARS, wait_for
from tpu_rl.backend.jobset import backend_jobset
from tpu_rl.catalogue.cells import TUTORIAL_CELL
from tpu_rl.jobs import manifests
from tpu_rl.jobs.maxtext_flags import train_flags
from tpu_rl.layout import RunLayout
from tpu_rl.settings.run_settings import read_settings

TWO_SLICES = {"cluster_nodepool_count": 2, "num_trainer_slices": 1, "num_samplers_slices": 1}
ASSERTION = (
    "AssertionError: Number of devices per slice -32 does not match the product of the ICI "
    "parallelism 128"
)


def layout(**changes: object) -> RunLayout:
    """The tutorial cell (gemma4-26b on v6e-32: tensor 2, expert 4) with two slices, as the
    product renders it whatever its validation says."""
    settings, _ = read_settings({**cell_conf(TUTORIAL_CELL), **TWO_SLICES})
    return RunLayout(dataclasses.replace(settings, **changes), "manual__mesh", "test-deployment")


def flags(lay: RunLayout) -> dict[str, str]:
    """The product's train_rl flags that the meshes read."""
    given = dict(f.split("=", 1) for f in train_flags(lay))
    return {name: given[name] for name in FLAGS if name in given}


def pod_log(emu: KubeEmulator, pod: str) -> str:
    _, log_ = emu.read_log(NS, pod, "maxtext")
    return log_.render(log_.select(), timestamps=False).decode()


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        # model_creation_utils.py:724-732: fsdp 16 x tensor 2 x expert 4 on 32 // -1 devices
        ({}, ASSERTION),
        # no expert parallelism: 16 x 2 still does not make -32 (configs/types.py:4653)
        (
            {"ici_expert_parallelism": 1},
            "AssertionError: Number of devices per slice -32 does not match the product of the "
            "ICI parallelism 32",
        ),
        # an explicit fsdp that is not devices per slice // tensor (model_creation_utils.py:718)
        (
            {"ici_fsdp_parallelism": 8, "ici_expert_parallelism": 2},
            "ValueError: ici_fsdp_parallelism (8) * ici_tensor_parallelism (2) must equal "
            "devices_per_slice (32)",
        ),
        ({"num_trainer_slices": 2}, "ValueError: Not enough slices for trainer and samplers"),
    ],
)
def test_maxtexts_multi_slice_trainer_mesh(changes: dict[str, int], error: str) -> None:
    """The backend's slices as its resource manager counts them (two v6e 4x8: 32 devices each)."""
    lay = layout(**changes)
    slices = backend_slices(backend_jobset(lay))
    assert slices == [32, 32]
    with pytest.raises(MaxTextError) as raised:
        multi_slice_meshes(flags(lay), slices)
    assert raised.value.traceback().endswith(error)


def test_one_slice_is_not_refused_here() -> None:
    """Both slice counts -1 (the single-slice split) is not this module's."""
    lay = layout(cluster_nodepool_count=1, num_trainer_slices=-1, num_samplers_slices=-1)
    multi_slice_meshes(flags(lay), backend_slices(backend_jobset(lay)))


def test_a_tpu7x_slice_has_two_jax_devices_per_chip() -> None:
    """accelerator_to_spec_map.py:42: tpu7x-128 (4x4x4, 64 chips) is 128 devices."""
    jobset = backend_jobset(layout(tpu_type="tpu7x-128", topology="4x4x4"))
    assert backend_slices(jobset) == [128, 128]


@pytest.fixture
def emu() -> Iterator[KubeEmulator]:
    with running_emulator() as emulator:
        yield emulator


def test_a_two_slice_run_with_expert_parallelism_fails_as_maxtext_does(emu: KubeEmulator) -> None:
    """The product's backend JobSet (two slices up) and training Job of the tutorial cell with
    two slices: the training pod prints MaxText's multi-slice line and the traceback of
    fill_unspecified_mesh_axes' assertion, and fails (exit 1) before any step."""
    lay = layout()
    ClusterModel.described({**VARS, "num_slices": 2}).provision(emu)
    gcs = GcsEmulator()
    try:
        scenario = build_scenario({"gcs_bucket": lay.settings.gcs_bucket}, gcs, Workloads(), emu)
        with Controller(emu, scenario, time_scale=0.0005):
            emu.create(manifests.token_secret(lay, "hf_NotARealToken"))
            emu.create(backend_jobset(lay))
            emu.create(manifests.train_job(lay))
            job = f"job-{lay.train_job_base}"
            wait_for(lambda: emu.get("jobs", NS, job)["status"].get("failed"))
        [pod] = emu.list("pods", NS, f"job-name={job}")
    finally:
        gcs.stop()
    log = pod_log(emu, pod["metadata"]["name"])
    assert "model_creation_utils.py:692] Running with Multislice" in log
    assert 'utils/max_utils.py", line 479, in fill_unspecified_mesh_axes' in log
    assert log.rstrip().endswith(ASSERTION) and "Train step" not in log
    [status] = pod["status"]["containerStatuses"]
    assert status["state"]["terminated"]["exitCode"] == 1
