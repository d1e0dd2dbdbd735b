"""Every preflight check, declared once, in the order a run would meet the problem: its name,
what it checks and reads, what it needs, the usual fix, and the function that runs it.

tpu_rl.preflight.run runs them in this order; the `preflight` task's doc, the README's list
and docs/operations.md's table are generated from them (tpu_rl.preflight.checks_doc, a test
keeps them current). Adding a check: its function in the module of its concern, one entry
here, then `python -m tpu_rl.preflight.checks_doc` to regenerate the three.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from functools import cached_property
from typing import Any

from tpu_rl.layout import RunLayout
from tpu_rl.preflight import (
    apis,
    bucket,
    capacity,
    cluster,
    cluster_software,
    huggingface,
    iam,
    images,
    vertex,
)
from tpu_rl.preflight.google_api import GoogleApi
from tpu_rl.preflight.result import CheckResult
from tpu_rl.settings.choices import ClusterMode
from tpu_rl.settings.fields import RunSettings


class Need(Enum):
    """What a check needs before it can run; a check lacking one is SKIPPED, saying why."""

    GOOGLE = "Google credentials"  # the GCP connection's (tpu_rl.preflight.run)
    HF_TOKEN = "the Hugging Face token"  # the Hugging Face connection's password
    CLUSTER = "an existing GKE Standard cluster"  # given by the `gke standard` check passing


@dataclass(frozen=True)
class Reads:
    """What the checks read from: the run, the deployment's connections, and the existing
    cluster, read once for every check that looks at it. `api` is None and the token empty
    when their Need is missing: no check needing them runs then."""

    layout: RunLayout
    api: GoogleApi | None
    gcp_conn_id: str
    hf_token: str

    @property
    def settings(self) -> RunSettings:
        return self.layout.settings

    @property
    def google(self) -> GoogleApi:
        """The Google APIs of a check that needs GOOGLE (run_preflight runs none without)."""
        if self.api is None:
            raise LookupError("no Google credentials: a check needing them ran without them")
        return self.api

    @cached_property
    def cluster(self) -> Any | None:
        """The Container API's Cluster of an existing cluster (None when there is none)."""
        return cluster.read_cluster(self.settings, self.gcp_conn_id)

    @cached_property
    def kube(self) -> Any:
        """A Kubernetes client on the existing cluster."""
        return cluster.kube_client(self.cluster, self.gcp_conn_id)


@dataclass(frozen=True, slots=True)
class Check:
    """One check: `name` (its result lines start with it, or with it and a detail in
    parentheses), `checks` and `reads` (what it verifies and the API or object it reads: the
    docs), `needs`, `fix` (what its FAIL lines usually say to do; each names its own),
    `cluster_mode` (the only mode it applies to, or None: every run), `gives` (the Need its
    passing meets for the checks after it), and `run`."""

    name: str
    checks: str
    reads: str
    needs: tuple[Need, ...]
    fix: str
    run: Callable[[Reads], Iterable[CheckResult]]
    cluster_mode: ClusterMode | None = None
    gives: Need | None = None

    def applies_to(self, s: RunSettings) -> bool:
        return self.cluster_mode in (None, s.cluster_mode)


EXISTING = ClusterMode.EXISTING
GOOGLE, HF_TOKEN, CLUSTER = Need.GOOGLE, Need.HF_TOKEN, Need.CLUSTER

CHECKS: tuple[Check, ...] = (
    Check(
        apis.NAME,
        "the APIs a run calls are enabled (Compute Engine, GKE, Cloud Storage, IAM, Resource "
        "Manager; Cloud Quotas when a rung draws on quota)",
        "Service Usage `services.batchGet`",
        (GOOGLE,),
        "`gcloud services enable` the APIs it names",
        lambda r: apis.check_apis(r.google, r.settings),
    ),
    Check(
        iam.CALLER,
        "the deployment's credentials hold the permissions of the tutorial's roles (those of "
        "creating a cluster too, with `cluster_mode=create`)",
        "Resource Manager `projects.testIamPermissions`",
        (GOOGLE,),
        "grant the tutorial's roles to the GCP connection's account",
        lambda r: iam.check_caller(r.google, r.settings),
    ),
    Check(
        capacity.OFFERED,
        "the slice's machine type (its TPU generation's: `ct6e-standard-4t`, "
        "`ct5p-hightpu-4t`, `tpu7x-standard-4t`) is offered in the zone of every rung",
        "Compute Engine `machineTypes.get` (and `aggregatedList`: the zones that offer it)",
        (GOOGLE,),
        "set `zone` to one of the zones it names",
        lambda r: capacity.check_offered(r.google, r.settings),
    ),
    Check(
        capacity.RESERVATION,
        "each rung's capacity: the reservation (in the zone, of the machine type, enough free "
        "VMs), the calendar reservation's window, or for `flex_start` and `spot` the region's "
        "quota of the slice's TPU generation (its lines: `reservation`, `tpu quota`)",
        "Compute Engine `reservations.get`, `futureReservations.get`; Cloud Quotas "
        "`quotaInfos.get`",
        (GOOGLE,),
        "name a reservation that fits or resize it, request a new window, or request quota",
        lambda r: capacity.check_capacity(r.google, r.settings),
    ),
    Check(
        "bucket",
        "the bucket, if it exists, is in the run's region; without uniform access or public "
        "access prevention it passes with a warning, as a run uses it (its lines: `bucket "
        "location`, `bucket policy`)",
        "Cloud Storage `buckets.get` (GCSHook)",
        (GOOGLE,),
        "name a bucket in the run's region (or one not made yet: `ensure_bucket` makes it)",
        lambda r: bucket.check_bucket(r.settings, r.gcp_conn_id),
    ),
    Check(
        cluster.STANDARD,
        "the cluster exists in the run's region and is GKE Standard (not Autopilot, not zonal)",
        "GKE `clusters.get` (GKEHook)",
        (GOOGLE,),
        "name an existing regional Standard cluster, or set `cluster_mode=create`",
        lambda r: [cluster.check_standard(r.settings, r.cluster)],
        cluster_mode=EXISTING,
        gives=CLUSTER,
    ),
    Check(
        cluster.POOLS,
        "the slice's node pools (machine type, topology, `cluster_nodepool_count`) and "
        "`cpu-np`, without taints the run's pods do not tolerate",
        "the cluster's node pools (GKE `clusters.get`)",
        (GOOGLE, CLUSTER),
        "deploy the tutorial's blueprint, remove the extra taints, or set `cluster_mode=create`",
        lambda r: [cluster.check_pools(r.settings, r.cluster)],
        cluster_mode=EXISTING,
    ),
    Check(
        iam.POOLS,
        "the node pools' service accounts may write the bucket's objects (a storage write "
        "role on the project or the bucket)",
        "Resource Manager `projects.getIamPolicy`; Cloud Storage `buckets.getIamPolicy`",
        (GOOGLE, CLUSTER),
        "grant `roles/storage.objectUser` on the bucket to the accounts it names",
        lambda r: [
            iam.check_pool_roles(
                r.google, r.settings, cluster.pool_accounts(r.settings, r.cluster), r.gcp_conn_id
            )
        ],
        cluster_mode=EXISTING,
    ),
    Check(
        "jobset installed",
        "the JobSet controller runs, v0.10.1 or later",
        "Deployment `jobset-system/jobset-controller-manager` (its image's tag)",
        (GOOGLE, CLUSTER),
        "`kubectl apply` JobSet's release manifests",
        lambda r: [cluster_software.check_controller(r.kube, "jobset")],
        cluster_mode=EXISTING,
    ),
    Check(
        "kueue installed",
        "the Kueue controller runs, v0.15.0 or later",
        "Deployment `kueue-system/kueue-controller-manager` (its image's tag)",
        (GOOGLE, CLUSTER),
        "`kubectl apply` Kueue's release manifests (or the blueprint's kubectl-apply)",
        lambda r: [cluster_software.check_controller(r.kube, "kueue")],
        cluster_mode=EXISTING,
    ),
    Check(
        cluster_software.QUEUE,
        "the LocalQueue `kueue_queue` leads to a ClusterQueue covering what the Pathways "
        "backend requests, with TPU quota for the run's chips (none named: it passes)",
        "Kueue `localqueues`, `clusterqueues`",
        (GOOGLE, CLUSTER),
        "apply Cluster Toolkit's Pathways Kueue configuration, or raise the TPU quota",
        lambda r: [cluster_software.check_queue(r.kube, r.layout)],
        cluster_mode=EXISTING,
    ),
    Check(
        cluster_software.PRIORITY,
        "the PriorityClass `TPU_RL_PRIORITY_CLASS` names exists (optional: every pod of the "
        "run gets it)",
        "`scheduling.k8s.io` PriorityClass",
        (GOOGLE, CLUSTER),
        "`kubectl create priorityclass`, or unset `TPU_RL_PRIORITY_CLASS`",
        lambda r: [cluster_software.check_priority_class(r.kube)],
        cluster_mode=EXISTING,
    ),
    Check(
        images.NAME,
        "each image setting's manifest exists and the caller may pull it (a registry outside "
        "Google that asks for credentials passes: the nodes pull with their own); its lines: "
        "`image pullable (<setting>)`",
        "the registry's `HEAD /v2/<name>/manifests/<reference>`",
        (GOOGLE,),
        "set the image to one that exists, or grant `roles/artifactregistry.reader`",
        lambda r: images.check_images(r.google, r.settings),
    ),
    Check(
        huggingface.TOKEN,
        "the Hugging Face token is valid and may read the model and the tokenizer (the "
        "licence accepted, for a gated model); its lines: `hf token`, `hf model access (<repo>)`",
        "huggingface.co `/api/whoami-v2`, `/api/models/<repo>/auth-check`",
        (HF_TOKEN,),
        "a Read token in the Hugging Face connection; accept the licence on the model's page",
        lambda r: huggingface.check_huggingface(r.settings, r.hf_token),
    ),
    Check(
        vertex.NAME,
        "the deployment's Vertex AI Model Registry settings, which `promote` needs at the end",
        "the deployment's `TPU_RL_VERTEX_*` settings (no API call)",
        (),
        "correct the setting, or unset `TPU_RL_VERTEX_REGISTRY`",
        lambda r: [vertex.check_registry_settings(r.settings)],
    ),
)
