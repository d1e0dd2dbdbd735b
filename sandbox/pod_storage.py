"""GCS as a simulated pod sees it: calls carry the pod's Google identity (cluster_model).

A refused call ends the container the way MaxText does: a traceback ending in the storage
client's exception, exit code 1.
"""

from __future__ import annotations

from google.api_core import exceptions

from sandbox.cloud import GcsEmulator
from sandbox.kube_emulator import KubeEmulator
from sandbox.pod_scripts import ContainerExit, PodInfo

GCS_URL = "https://storage.googleapis.com"


class PodStorage:
    """read/write/delete for a pod; without a cluster model every pod acts as the project owner."""

    def __init__(self, emu: KubeEmulator, gcs: GcsEmulator, entrypoint: str) -> None:
        self.emu, self.gcs, self.entrypoint = emu, gcs, entrypoint

    def principal(self, info: PodInfo) -> str | None:
        model = self.emu.cluster
        return model.principal_of(self.emu, info.namespace, info.pod) if model else None

    def write(self, info: PodInfo, uri: str, data: bytes) -> None:
        try:
            self.gcs.write(uri, data, self.principal(info))
        except exceptions.GoogleAPICallError as error:
            raise ContainerExit(1, self._traceback(error)) from error

    def read(self, info: PodInfo, uri: str) -> bytes:
        try:
            return self.gcs.read(uri, self.principal(info))
        except exceptions.GoogleAPICallError as error:
            raise ContainerExit(1, self._traceback(error)) from error

    def delete(self, info: PodInfo, uri: str) -> None:
        try:
            self.gcs.delete(uri, self.principal(info))
        except exceptions.GoogleAPICallError as error:
            raise ContainerExit(1, self._traceback(error)) from error

    def _traceback(self, error: exceptions.GoogleAPICallError) -> str:
        """What the Python process prints as it dies (Orbax goes through google-cloud-storage)."""
        detail = (error.errors or [{}])[0].get("message") or error.message
        method = getattr(error.response, "request", None)
        verb = getattr(method, "method", "GET")
        url = str(getattr(method, "url", "")).split("?")[0]
        url = GCS_URL + url[url.find("/", len("http://")) :] if url else GCS_URL
        return (
            "Traceback (most recent call last):\n"
            f'  File "{self.entrypoint}", line 861, in <module>\n'
            "    app.run(main)\n"
            '  File "/usr/local/lib/python3.12/site-packages/orbax/checkpoint/_src/path/'
            'gcs_utils.py", line 88, in _retry\n'
            f"google.api_core.exceptions.{type(error).__name__}: {error.code} {verb} {url}: "
            f"{detail}\n"
        )
