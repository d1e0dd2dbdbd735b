"""The cluster's nodes, service accounts and Kueue objects in the emulator once gcluster made it.

In-process runs provision them when GKEHook.get_cluster first finds the cluster RUNNING
(tests.sandbox.cloud.GkeControlPlane). `make demo-ui`'s Airflow workers ask in their own
processes, so this thread, in the process that holds the emulator, asks the same control plane
every `poll_s` and writes `ready_file` once the cluster is provisioned; the seam's get_cluster
waits for that file before it answers, so no pod reaches the emulator before the cluster does.
"""

from __future__ import annotations

import threading
from pathlib import Path

from google.api_core.exceptions import NotFound

from tests.sandbox.cloud import GkeControlPlane


class ClusterProvisioner(threading.Thread):
    def __init__(
        self, control_plane: GkeControlPlane, cluster_name: str, ready_file: Path, poll_s: float
    ) -> None:
        super().__init__(name="cluster-provisioner", daemon=True)
        self.control_plane, self.cluster_name = control_plane, cluster_name
        self.ready_file, self.poll_s = ready_file, poll_s
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                self.control_plane.get_cluster(None, self.cluster_name)
            except NotFound:
                self.ready_file.unlink(missing_ok=True)
            else:
                self.ready_file.touch()
            self.stopped.wait(self.poll_s)

    def __enter__(self) -> ClusterProvisioner:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.join()
