"""The sandbox's Google side: GCS emulator, the Cluster Toolkit bundle server, the GKE seam.

The one seam patched is the GKE control plane (cluster endpoint + CA) and Google credentials;
everything after it (Kubernetes API, GCS JSON API, gcluster) is real traffic on loopback.
"""

from __future__ import annotations

import functools
import http.server
import io
import json
import os
import re
import socket
import tarfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import google.auth.credentials
from google.api_core.exceptions import NotFound
from google.cloud.container_v1.types import (
    Cluster,
    DeleteClusterRequest,
    GetClusterRequest,
    ListClustersRequest,
    ListClustersResponse,
    Operation,
)

from sandbox import discovery, gke_contract
from sandbox.autopilot import is_autopilot
from sandbox.cluster_addons import node_pools
from sandbox.cluster_model import POOL_LABEL, ClusterModel
from sandbox.gcs_iam import MULTI_REGIONS, TOKEN_PREFIX, GcsGate
from sandbox.gcs_policy import bucket_settings
from sandbox.gcs_rules import (
    GcsTraffic,
    download_headers,
    paged_list,
    precondition_failed,
    unsatisfiable_range,
    with_error_body,
)
from sandbox.kube_emulator import KubeEmulator
from sandbox.paths import BLUEPRINT_FIXTURES

SANDBOX_BIN = Path(__file__).parent / "bin"
GCS_HOST = "storage.googleapis.com"


def write_whole(path: Path, state: dict[str, Any]) -> None:
    """The cloud state written whole, then renamed: the Airflow processes' fake gcluster and
    the tests read it at any time, and a half-written file is not JSON."""
    part = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}")
    part.write_text(json.dumps(state))
    os.replace(part, path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_bundle(members: dict[str, tuple[bytes, int]]) -> bytes:
    """A .tgz with {name: (content, mode)}."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, (data, mode) in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def fake_bundle() -> bytes:
    """Like the release bundle: gcluster at the top, the tutorial's example folder."""
    example = "examples/gke-tpu-v6e/"
    return make_bundle(
        {
            "gcluster": ((SANDBOX_BIN / "gcluster").read_bytes(), 0o755),
            # Cluster Toolkit's expansion rules, which the fake gcluster applies
            "toolkit_expansion.py": (
                (Path(__file__).with_name("toolkit_expansion.py")).read_bytes(),
                0o644,
            ),
            # GKE's TPU machine types and their topologies, which the fake gcluster checks
            "tpu_machines.py": (
                (Path(__file__).with_name("tpu_machines.py")).read_bytes(),
                0o644,
            ),
            # the stockout windows per zone and mode, which the fake gcluster reads
            "zone_capacity.py": (
                (Path(__file__).with_name("zone_capacity.py")).read_bytes(),
                0o644,
            ),
            example + "gke-tpu-v6e-advanced.yaml": (
                (BLUEPRINT_FIXTURES / "gke-tpu-v6e-advanced.yaml").read_bytes(),
                0o644,
            ),
            example + "kueue-configuration.yaml.tftpl": (
                (BLUEPRINT_FIXTURES / "kueue-configuration.yaml.tftpl").read_bytes(),
                0o644,
            ),
        }
    )


class BundleServer:
    """Serves {path: bytes} on loopback and counts the requests."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.requests: list[str] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests.append(self.path)
                body = server.files.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/mirror"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class GcsEmulator:
    """gcp-storage-emulator on loopback behind Cloud Storage's IAM and bucket checks (gcs_iam).

    google-cloud-storage finds it by STORAGE_EMULATOR_HOST. `gate.roles_of` (principal ->
    roles) is set once a cluster model exists; calls made `as_principal` are then checked.
    """

    def __init__(self) -> None:
        from gcp_storage_emulator.server import RequestHandler
        from gcp_storage_emulator.storage import Storage

        self.gate = GcsGate()
        # where write() makes a missing bucket: a harness sets the run's region (as an earlier
        # run's ensure_bucket made it), else Cloud Storage's default
        self.location = "US"
        self.storage = Storage(use_memory_fs=True)
        gate, storage = self.gate, self.storage
        creating: list[dict[str, Any]] = []  # the bucket create being handled (one at a time)
        store_bucket = storage.create_bucket

        def create_bucket(name: str, bucket: dict[str, Any]) -> None:
            """Keep the location, storage class and settings asked for (the emulator drops
            them)."""
            if creating:
                bucket.update(_bucket_class(creating[0]))
                bucket.update(bucket_settings(creating[0], gate.constraints))
            store_bucket(name, bucket)

        storage.create_bucket = create_bucket

        traffic = self.traffic = GcsTraffic()

        class GatedHandler(RequestHandler):
            def end_headers(self) -> None:
                for header, value in download_headers(storage, self.command, self.path).items():
                    self.send_header(header, value)
                super().end_headers()

            def _answer(self, status: int, payload: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _gated(self, method: str) -> None:
                traffic.requests.append(f"{method} {self.path}")
                body = b""
                if method in ("POST", "PUT", "PATCH") and self.headers.get("Content-Length"):
                    body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                    self.rfile = io.BytesIO(body)
                # every request checked against storage.v1's discovery document
                if refused := discovery.refusal(GCS_HOST, method, self.path, body):
                    self._answer(refused[0], json.dumps(refused[2]).encode())
                    return
                creates = method == "POST" and re.match(r"^(/storage/v1)?/b(\?|$)", self.path)
                name = json.loads(body).get("name", "") if creates and body else ""
                # a taken name answers 409 first
                asked = b"" if not creates or storage.get_bucket(name) else body
                authorization = self.headers.get("Authorization", "")
                answer = gate.check(method, self.path, authorization, asked)
                if answer is None:
                    answer = precondition_failed(storage, method, self.path, body)
                if answer is None and method == "GET":
                    answer = unsatisfiable_range(storage, self.path, self.headers.get("Range"))
                if answer is None and method == "GET":
                    answer = paged_list(storage, self.path)
                    if answer is not None and answer[0] == 200:
                        page = json.loads(answer[1])
                        traffic.listed += len(page["items"]) + len(page["prefixes"])
                if answer is not None:
                    self._checked(method, lambda: self._answer(*answer))
                    return
                creating[:] = [json.loads(body)] if creates and body else []
                self._checked(method, getattr(super(), f"do_{method}"))

            def _checked(self, method: str, respond: Callable[[], None]) -> None:
                """The answer `respond` writes, sent once storage.v1's document allows it."""
                wire, self.wfile = self.wfile, io.BytesIO()
                try:
                    respond()
                finally:
                    written, self.wfile = self.wfile.getvalue(), wire
                written = with_error_body(written, self.path)
                self.wfile.write(
                    discovery.checked_response_bytes(GCS_HOST, method, self.path, written)
                )

            def do_GET(self) -> None:
                self._gated("GET")

            def do_POST(self) -> None:
                self._gated("POST")

            def do_PUT(self) -> None:
                self._gated("PUT")

            def do_PATCH(self) -> None:
                self._gated("PATCH")

            def do_DELETE(self) -> None:
                self._gated("DELETE")

        self.port = free_port()
        self.host = f"http://127.0.0.1:{self.port}"
        self.httpd = http.server.HTTPServer(
            ("127.0.0.1", self.port), functools.partial(GatedHandler, storage)
        )
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def client(self, principal: str | None = None) -> Any:
        """A storage client as the product (None) or as a workload's Google principal.

        Its session reads no proxy settings from os.environ: the pods' clients run on the
        controller's thread while Airflow's in-process task runner edits os.environ, and
        requests' proxy lookup, iterating it, once raised KeyError('__AIRFLOW_SUPERVISOR_FD'),
        which stopped the controller and left the run waiting for pods forever."""
        from google.auth.credentials import AnonymousCredentials
        from google.auth.transport.requests import AuthorizedSession
        from google.cloud import storage

        credentials = AnonymousCredentials() if principal is None else PrincipalToken(principal)
        session = AuthorizedSession(credentials)
        session.trust_env = False
        return storage.Client(
            project="sandbox",
            credentials=credentials,
            client_options={"api_endpoint": self.host},
            _http=session,
        )

    def write(self, uri: str, data: bytes = b"x", principal: str | None = None) -> None:
        """Upload an object; as the owner (principal None) the bucket is made if missing."""
        bucket, _, name = uri.removeprefix("gs://").partition("/")
        client = self.client(principal)
        b = client.bucket(bucket)
        if principal is None and not b.exists():
            client.create_bucket(bucket, location=self.location)
        b.blob(name).upload_from_string(data)

    def read(self, uri: str, principal: str | None = None) -> bytes:
        bucket, _, name = uri.removeprefix("gs://").partition("/")
        return self.client(principal).bucket(bucket).blob(name).download_as_bytes()

    def delete(self, uri: str, principal: str | None = None) -> None:
        bucket, _, name = uri.removeprefix("gs://").partition("/")
        self.client(principal).bucket(bucket).blob(name).delete()

    def bucket_metadata(self, bucket: str) -> dict[str, Any] | None:
        return self.storage.get_bucket(bucket)

    def names(self, bucket: str, prefix: str = "") -> list[str]:
        client = self.client()
        if not client.bucket(bucket).exists():
            return []
        return [b.name for b in client.list_blobs(bucket, prefix=prefix)]

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class PrincipalToken(google.auth.credentials.Credentials):
    """What a pod's GKE metadata server hands out: a token naming its Google principal."""

    def __init__(self, principal: str) -> None:
        super().__init__()
        self.token = TOKEN_PREFIX + principal

    @property
    def expired(self) -> bool:
        return False

    def refresh(self, request: Any) -> None:
        pass


def _bucket_class(request: dict[str, Any]) -> dict[str, str]:
    location = str(request.get("location") or "US").upper()
    return {
        "location": location,
        "storageClass": str(request.get("storageClass") or "STANDARD").upper(),
        "locationType": "multi-region" if location in MULTI_REGIONS else "region",
    }


class SandboxCredentials(google.auth.credentials.Credentials):
    """Google credentials whose token is whatever the emulator accepts right now."""

    def __init__(self, emu: KubeEmulator) -> None:
        super().__init__()
        self._emu = emu

    @property
    def expired(self) -> bool:
        return self.token != self._emu.token

    def refresh(self, request: Any) -> None:
        self.token = self._emu.token


class GkeControlPlane:
    """Answers GKEHook.get_cluster from the fake cloud's state: the emulator's URL and CA."""

    def __init__(self, emu: KubeEmulator, state_file: Path) -> None:
        self.emu = emu
        self.state_file = state_file
        self.lookups = 0
        self.deleted: list[str] = []  # clusters GKEHook.delete_cluster was asked to delete
        self.endpoints: dict[str, KubeEmulator] = {}  # per-cluster API servers (default: emu)
        self.generation: int | None = None  # the deploy the running cluster's pools are from
        self._synced: tuple[object, int, bool] | None = None  # what the last sync saw and left

    def get_cluster(self, hook: Any, name: str, project_id: str | None = None, **_: Any) -> Cluster:
        """GKEHook.get_cluster: its clusters.get request (provider google 22.8.0,
        hooks/kubernetes_engine.py lines 329-333) and this answer, both held to container.v1."""
        request = GetClusterRequest(name=gke_contract.cluster_path(hook, name, project_id))
        return gke_contract.checked_rpc(
            "GetCluster", request, lambda: self._cluster(hook, name, project_id)
        )

    def _cluster(self, hook: Any, name: str, project_id: str | None) -> Cluster:
        self.lookups += 1
        state = json.loads(self.state_file.read_text()) if self.state_file.exists() else {}
        cluster = state.get("clusters", {}).get(name)
        if cluster and cluster.get("status") == "STOPPING":  # a deletion under way
            return Cluster(name=name, status=Cluster.Status.STOPPING)
        if not cluster or cluster.get("status") != "RUNNING":
            raise NotFound(f"cluster {name} not found")
        if self.emu.cluster is None or not self.emu.cluster.running:  # nodes, accounts, Kueue
            self.model(name, cluster).provision(self.emu)
            self.generation = cluster.get("generation")
        return Cluster(
            name=name,
            endpoint=self.emu.url.removeprefix("https://"),
            master_auth={"cluster_ca_certificate": self.emu.ca_b64},
            status=Cluster.Status.RUNNING,
            autopilot={"enabled": self.emu.cluster.autopilot},
            node_pools=node_pools(self.emu.cluster),
            resource_labels=cluster.get("labels") or {},
        )

    def delete_cluster(
        self, hook: Any, name: str, project_id: str | None = None, **_: Any
    ) -> Operation | None:
        """GKEHook.delete_cluster: GKE deletes the cluster with its node pools (its nodes go
        at the next sync); None for a cluster that does not exist, as the hook answers
        NotFound. What terraform made beside the cluster stays in its state. Its clusters.delete
        request (kubernetes_engine.py lines 233-237) and the Operation are held to container.v1."""
        self.deleted.append(name)
        path = gke_contract.cluster_path(hook, name, project_id)
        try:
            return gke_contract.checked_rpc(
                "DeleteCluster",
                DeleteClusterRequest(name=path),
                lambda: self._delete(path, name, project_id),
            )
        except NotFound:  # the hook's own answer to it (kubernetes_engine.py lines 242-244)
            return None

    def _delete(self, path: str, name: str, project_id: str | None) -> Operation:
        state = json.loads(self.state_file.read_text()) if self.state_file.exists() else {}
        record = state.get("clusters", {}).pop(name, None)
        if record is None or record.get("project") != project_id:
            raise NotFound(f"cluster {name} not found")
        write_whole(self.state_file, state)
        operation = f"operation-delete-{name}"
        location_path = path.partition("/clusters/")[0]  # projects/P/locations/L
        # links are URLs (container.v1.json Operation.targetLink: "a URI to the resource
        # being modified ... https://container.googleapis.com/v1/projects/123/locations/
        # us-central1/clusters/my-cluster"; Operation.selfLink likewise for the operation)
        return Operation(
            name=operation,
            operation_type=Operation.Type.DELETE_CLUSTER,
            status=Operation.Status.RUNNING,
            location=location_path.rpartition("/")[2],
            target_link=gke_contract.link(path),
            self_link=gke_contract.link(f"{location_path}/operations/{operation}"),
        )

    def sync(self) -> None:
        """The cloud as time passes: a cluster gcluster deployed has its nodes from then on
        (not from the first lookup); a destroyed cluster's nodes go with it. Node lifetimes
        land in the emulator's ledger. A tick that finds the state file and the cluster model as
        the last sync left them changes nothing, and reads nothing (50 ticks a second): the
        file's inode, size and modification time tell (write_whole renames a new file in)."""
        seen = self._seen()
        if seen == self._synced:
            return
        text = self.state_file.read_bytes() if seen[0] else b""
        try:
            state = json.loads(text) if text else {}
        except json.JSONDecodeError:
            return  # gcluster is writing it
        self._apply(state)
        self._synced = (seen[0], *self._seen()[1:])  # the file as read: a later write is seen

    def _seen(self) -> tuple[object, int, bool]:
        """The state file's identity (None when absent) and the cluster model's."""
        try:
            stat = self.state_file.stat()
        except FileNotFoundError:
            file = None
        else:
            file = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        model = self.emu.cluster
        return file, id(model), bool(model and model.running)

    def _apply(self, state: dict[str, Any]) -> None:
        """Bring the emulator's cluster to the state file's."""
        model = self.emu.cluster
        clusters = state.get("clusters", {})
        if model is None or not model.running:
            deployed = [
                (name, c)
                for name, c in clusters.items()
                if c.get("blueprint") and c.get("status") == "RUNNING"
            ]
            if len(deployed) == 1:
                self.model(*deployed[0]).provision(self.emu)
                self.generation = deployed[0][1].get("generation")
            return
        record = clusters.get(model.name) or {}
        if record.get("status") == "RUNNING":
            if record.get("blueprint") and record.get("generation") != self.generation:
                self.replace_pools(self.model(model.name, record), record.get("generation"))
            return
        model.running = False
        for node in self.emu.list("nodes"):
            self.emu.delete("nodes", "", node["metadata"]["name"])

    def replace_pools(self, deployed: ClusterModel, generation: int | None) -> None:
        """A deploy of the running cluster with other TPU pool settings (a capacity ladder's
        next rung): terraform replaces the changed pools (a TPU pool whose zone moved too), so
        their nodes go and the new pools' static nodes come, in the new zone."""
        model = self.emu.cluster
        moved = deployed.zone != model.zone
        replaced = {
            p.name for p in model.pools if p not in deployed.pools or (moved and p.slice_hosts)
        }
        for node in self.emu.list("nodes"):
            if (node["metadata"].get("labels") or {}).get(POOL_LABEL) in replaced:
                self.emu.delete("nodes", "", node["metadata"]["name"])
        model.zone, model.pools = deployed.zone, deployed.pools
        model.provision(self.emu)
        self.generation = generation

    @staticmethod
    def model(name: str, record: dict[str, Any]) -> ClusterModel:
        """What gcluster deployed, or an existing cluster described by its vars."""
        if record.get("blueprint"):
            return ClusterModel.from_blueprint(record["blueprint"], record.get("staged") or {})
        variables = {"deployment_name": name, "project_id": record.get("project", "")}
        return ClusterModel.described({**variables, **(record.get("vars") or {})})

    def list_clusters(self, parent: str) -> ListClustersResponse:
        """ClusterManagerClient.list_clusters: the project's clusters, with what deploy recorded.

        A record's `create_time` (RFC 3339) is the cluster's; node pools come from its `vars`.
        The clusters.list request and its answer are held to container.v1.
        """
        return gke_contract.checked_rpc(
            "ListClusters", ListClustersRequest(parent=parent), lambda: self._clusters(parent)
        )

    def _clusters(self, parent: str) -> ListClustersResponse:
        project = parent.split("/")[1]
        state = json.loads(self.state_file.read_text()) if self.state_file.exists() else {}
        clusters = []
        for name, record in state.get("clusters", {}).items():
            if record.get("project") != project:
                continue
            v = record.get("vars") or {}
            emu = self.endpoints.get(name, self.emu)
            zones = [v["zone"]] if v.get("zone") else []
            capacity = _capacity_of(v)
            pool = {
                "locations": zones,
                "config": {
                    "machine_type": v.get("machine_type", ""),
                    "reservation_affinity": {"values": [v["reservation"]]}
                    if v.get("reservation") and capacity == "reservation"
                    else {},
                    "spot": capacity == "spot",
                    "flex_start": capacity == "flex_start",
                },
                "placement_policy": {"tpu_topology": v.get("tpu_topology", "")},
                # only flex-start scales from zero: gcluster gives Spot a static count
                "autoscaling": {"enabled": True, "min_node_count": 0}
                if capacity == "flex_start"
                else {},
            }
            cidr = v.get("authorized_cidr")
            clusters.append(
                Cluster(
                    name=name,
                    location=record.get("location", ""),
                    locations=zones,
                    resource_labels=record.get("labels") or {},
                    create_time=record.get("create_time", ""),
                    status=Cluster.Status.RUNNING
                    if record.get("status") == "RUNNING"
                    else Cluster.Status.ERROR,
                    endpoint=emu.url.removeprefix("https://"),
                    master_auth={"cluster_ca_certificate": emu.ca_b64},
                    node_pools=[
                        {"name": f"tpu-pool-{i}", **pool}
                        for i in range(int(v.get("num_slices") or 0))
                    ],
                    master_authorized_networks_config={"cidr_blocks": [{"cidr_block": cidr}]}
                    if cidr
                    else {},
                    autopilot={"enabled": is_autopilot(v)},
                )
            )
        return ListClustersResponse(clusters=clusters)


def _capacity_of(variables: dict[str, Any]) -> str:
    """An existing cluster's `capacity` var, else what a deployment's vars switch on."""
    if variables.get("capacity"):
        return str(variables["capacity"])
    switched = [
        m
        for m, key in (("flex_start", "enable_flex_start"), ("spot", "spot"))
        if variables.get(key)
    ]
    return switched[0] if switched else "reservation"


def add_running_cluster(
    state_file: Path, name: str, project: str, variables: dict[str, Any] | None = None
) -> None:
    """Record a cluster as existing before the run (for cluster_mode=existing).

    `variables` describe it as tutorial-blueprint vars (zone, num_slices, tpu_topology, ...).
    """
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    record: dict[str, Any] = {"status": "RUNNING", "project": project, "labels": {}}
    if variables:
        record["vars"] = variables
    state.setdefault("clusters", {})[name] = record
    write_whole(state_file, state)


def sandbox_env(tmp: Path, bundle_url: str, gcs_host: str) -> dict[str, str]:
    """Environment for the fakes on PATH and for the product's config."""
    python_bin = str(Path(os.sys.executable).parent)
    return {
        "PATH": f"{SANDBOX_BIN}:{python_bin}:/usr/bin:/bin",
        "FAKE_CLOUD_LOG": str(tmp / "calls.jsonl"),
        "FAKE_CLOUD_STATE": str(tmp / "cloud.json"),
        "AIRFLOW__TPU_RL__GCLUSTER_RELEASE_BASE_URL": bundle_url,
        "AIRFLOW__TPU_RL__GCLUSTER_CACHE_DIR": str(tmp / "gcluster-cache"),
        "STORAGE_EMULATOR_HOST": gcs_host,
    }
