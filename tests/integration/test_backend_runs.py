"""start_backend does not defer a wait that is already met: a retry whose JobSet runs goes on.

A wait deferred when it is met ends at once, and Airflow 3.3's scheduler can fail the resumed
try (apache/airflow#72716): seen in a process scenario on a loaded machine, on both tries.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import kubernetes
import pytest
from kubernetes.client import CustomObjectsApi

from sandbox.harness import SETTINGS
from sandbox.kube_emulator import KubeEmulator, running_emulator
from tpu_rl.backend.lifecycle import backend_pod_count, backend_runs, submit_backend
from tpu_rl.kube.objects import JOBSET_NAME_LABEL
from tpu_rl.layout import RunLayout
from tpu_rl.settings.run_settings import load_settings

LOG = logging.getLogger("test.backend")


@pytest.fixture
def emu() -> Iterator[KubeEmulator]:
    with running_emulator(token="t-1") as emulator:
        yield emulator


@pytest.fixture
def custom(emu: KubeEmulator) -> CustomObjectsApi:
    """As the google provider's GKE hooks configure it: host, CA file, bearer api_key."""
    config = kubernetes.client.Configuration(
        host=emu.url, api_key={"authorization": f"Bearer {emu.token}"}
    )
    config.ssl_ca_cert = emu.ca_file
    return CustomObjectsApi(kubernetes.client.ApiClient(config))


LAYOUT = RunLayout(load_settings({**SETTINGS, "kueue_queue": ""}), "manual__1", "test-deployment")


def backend_pods(emu: KubeEmulator, phases: list[str]) -> None:
    namespace, name = LAYOUT.settings.namespace, LAYOUT.backend_jobset
    for i, phase in enumerate(phases):
        emu.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-{i}",
                    "namespace": namespace,
                    "labels": {JOBSET_NAME_LABEL: name},
                },
                "spec": {"containers": [{"name": "c", "image": "pathways"}]},
            }
        )
        if phase != "Pending":
            emu.set_pod_phase(namespace, f"{name}-{i}", phase)


def test_a_new_backend_is_waited_for(emu, custom):
    assert submit_backend(custom, LAYOUT, LOG) is True
    assert backend_runs(custom, LAYOUT) is False  # no pods yet


def test_a_kept_backend_whose_pods_all_run_is_not_waited_for(emu, custom):
    submit_backend(custom, LAYOUT, LOG)
    backend_pods(emu, ["Running"] * backend_pod_count(LAYOUT))
    assert submit_backend(custom, LAYOUT, LOG) is False  # the earlier try's, kept
    assert backend_runs(custom, LAYOUT) is True


@pytest.mark.parametrize("phases", [["Running"] * 8 + ["Pending"], ["Running"] * 8])
def test_a_kept_backend_with_a_pod_pending_or_missing_is_waited_for(emu, custom, phases):
    assert backend_pod_count(LAYOUT) == 9  # a head and 8 v6e-32 hosts
    submit_backend(custom, LAYOUT, LOG)
    backend_pods(emu, phases)
    assert backend_runs(custom, LAYOUT) is False


def test_no_backend_is_not_running(emu, custom):
    assert backend_runs(custom, LAYOUT) is False
