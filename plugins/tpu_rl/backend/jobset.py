"""The headless Pathways backend JobSet (gcluster's pathways_jobset.tmpl, headless mode)."""

from __future__ import annotations

from tpu_rl.cluster.blueprint import CPU_NODE_POOL
from tpu_rl.jobs.manifests import (
    PATHWAYS_ENV,
    Manifest,
    env_vars,
    object_metadata,
    pod_priority,
    queue_labels,
    tpu_limits,
    tpu_pod_spec,
)
from tpu_rl.layout import RunLayout
from tpu_rl.tpu import generation_for


def _label_env(name: str, label: str) -> Manifest:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{label}']"}}}


HEAD_ENV = _label_env("PATHWAYS_HEAD", "jobset.sigs.k8s.io/coordinator")


def backend_jobset(layout: RunLayout) -> Manifest:
    """The headless Pathways backend: proxy + resource manager on cpu-np, workers on the slice."""
    s = layout.settings
    scratch = f"--gcs_scratch_location={layout.pathways_scratch}"
    rm_address = "--resource_manager_address=$(PATHWAYS_HEAD):29001"
    common_env = env_vars(PATHWAYS_ENV)
    proxy = {
        "name": "pathways-proxy",
        "image": s.pathways_proxy_server_image,
        "args": ["--server_port=29000", rm_address, scratch],
        "ports": [{"containerPort": 29000}],
        "env": [HEAD_ENV, *common_env],
        "resources": {"limits": {"cpu": "16", "memory": "100Gi"}},
    }
    resource_manager = {
        "name": "pathways-rm",
        "image": s.pathways_server_image,
        "args": [
            "--server_port=29001",
            scratch,
            "--node_type=resource_manager",
            f"--instance_count={s.cluster_nodepool_count}",
            f"--instance_type={generation_for(s.tpu_type).pathways_instance_type}:{s.topology}",
        ],
        "ports": [{"containerPort": 29001}, {"containerPort": 29002}],
        "env": [HEAD_ENV, *env_vars({"TPU_SKIP_MDS_QUERY": "true"}), *common_env],
        "resources": {"limits": {"cpu": "8", "memory": "32Gi"}},
    }
    worker = {
        "name": "pathways-worker",
        "image": s.pathways_server_image,
        "args": ["--server_port=29005", rm_address, scratch],
        "ports": [{"containerPort": p} for p in (29005, 29006, 8471, 8080)],
        "env": [
            HEAD_ENV,
            _label_env("MEGASCALE_COORDINATOR_ADDRESS", "jobset.sigs.k8s.io/coordinator"),
            _label_env("MEGASCALE_NUM_SLICES", "jobset.sigs.k8s.io/replicatedjob-replicas"),
            _label_env("MEGASCALE_SLICE_ID", "jobset.sigs.k8s.io/job-index"),
            *env_vars({"XCLOUD_ENVIRONMENT": "GCP", "MEGASCALE_GRPC_ENABLE_XOR_TRACER": "false"}),
            *common_env,
        ],
        "resources": tpu_limits(s),
    }
    head_pod = {
        "restartPolicy": "Never",
        "hostNetwork": True,
        "dnsPolicy": "ClusterFirstWithHostNet",
        "nodeSelector": {"cloud.google.com/gke-nodepool": CPU_NODE_POOL},
        **pod_priority(),
        "containers": [proxy, resource_manager],
    }
    hosts = layout.hosts
    metadata = object_metadata(layout, layout.backend_jobset, queue_labels(layout))
    metadata["annotations"]["alpha.jobset.sigs.k8s.io/exclusive-topology"] = (
        "cloud.google.com/gke-nodepool"
    )
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": metadata,
        "spec": {
            "network": {"enableDNSHostnames": True},
            "coordinator": {"replicatedJob": "pathways-head"},
            "startupPolicy": {"startupPolicyOrder": "InOrder"},
            "failurePolicy": {"maxRestarts": s.backend_restarts},
            "replicatedJobs": [
                {
                    "name": "pathways-head",
                    "replicas": 1,
                    "template": {
                        "metadata": {"labels": dict(layout.labels)},
                        "spec": {
                            "parallelism": 1,
                            "completions": 1,
                            "backoffLimit": 0,
                            "template": {
                                "metadata": {"labels": dict(layout.labels)},
                                "spec": head_pod,
                            },
                        },
                    },
                },
                {
                    "name": "worker",
                    "replicas": s.cluster_nodepool_count,
                    "template": {
                        "metadata": {"labels": dict(layout.labels)},
                        "spec": {
                            "completionMode": "Indexed",
                            "parallelism": hosts,
                            "completions": hosts,
                            "backoffLimit": hosts * 4,
                            "template": {
                                "metadata": {"labels": dict(layout.labels)},
                                "spec": tpu_pod_spec(layout, [worker], "OnFailure"),
                            },
                        },
                    },
                },
            ],
        },
    }
