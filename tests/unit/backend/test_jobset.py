"""The headless Pathways backend JobSet (tpu_rl.backend.jobset), as gcluster's
pathways_jobset.tmpl builds it; its schema and the run's other objects:
tests/unit/jobs/test_manifests.py."""

from __future__ import annotations

from tpu_rl.backend import jobset as pw


def test_backend_is_headless_pathways_as_gcluster_builds_it(layout):
    js = pw.backend_jobset(layout)
    spec = js["spec"]
    assert spec["coordinator"] == {"replicatedJob": "pathways-head"}
    assert spec["network"] == {"enableDNSHostnames": True}
    assert spec["startupPolicy"] == {"startupPolicyOrder": "InOrder"}
    assert spec["failurePolicy"] == {"maxRestarts": 0}
    assert js["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "user-queue"
    head = spec["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert head["nodeSelector"] == {"cloud.google.com/gke-nodepool": "cpu-np"}
    assert [c["name"] for c in head["containers"]] == ["pathways-proxy", "pathways-rm"]
    proxy = head["containers"][0]
    assert proxy["image"] == (  # pinned as MaxText 0.2.4 pins it, not :latest
        "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server"
        "@sha256:6342a3cae2818d2f887d396e9ae4156b3316f79fef186d71ff16d535b44e1724"
    )
    assert head["containers"][1]["image"] == layout.settings.pathways_server_image
    assert proxy["args"] == [
        "--server_port=29000",
        "--resource_manager_address=$(PATHWAYS_HEAD):29001",
        "--gcs_scratch_location=" + layout.pathways_scratch,
    ]
    assert layout.pathways_scratch.startswith("gs://my-tpu-project-rl/pathways/")


def env_names(container: dict) -> dict[str, str]:
    """A container's variables: each value, or the field a label variable reads."""
    return {
        e["name"]: e.get("value") or e["valueFrom"]["fieldRef"]["fieldPath"]
        for e in container["env"]
    }


def test_the_workers_learn_their_slice_and_coordinator_from_the_jobsets_labels(layout):
    head_job, worker_job = pw.backend_jobset(layout)["spec"]["replicatedJobs"]
    (worker,) = worker_job["template"]["spec"]["template"]["spec"]["containers"]
    env = env_names(worker)
    assert env["PATHWAYS_HEAD"] == "metadata.labels['jobset.sigs.k8s.io/coordinator']"
    assert env["MEGASCALE_SLICE_ID"] == "metadata.labels['jobset.sigs.k8s.io/job-index']"
    assert env["MEGASCALE_NUM_SLICES"] == (
        "metadata.labels['jobset.sigs.k8s.io/replicatedjob-replicas']"
    )
    assert worker["args"][1] == "--resource_manager_address=$(PATHWAYS_HEAD):29001"
    rm = head_job["template"]["spec"]["template"]["spec"]["containers"][1]
    assert "--instance_count=1" in rm["args"] and env_names(rm)["TPU_SKIP_MDS_QUERY"] == "true"


def test_one_backend_to_a_node_pool_labelled_as_the_run(layout):
    jobset = pw.backend_jobset(layout)
    annotations = jobset["metadata"]["annotations"]
    assert annotations["alpha.jobset.sigs.k8s.io/exclusive-topology"] == (
        "cloud.google.com/gke-nodepool"
    )
    assert jobset["metadata"]["name"] == layout.backend_jobset
    for replicated in jobset["spec"]["replicatedJobs"]:
        assert replicated["template"]["metadata"]["labels"] == layout.labels
        assert replicated["template"]["spec"]["template"]["metadata"]["labels"] == layout.labels
