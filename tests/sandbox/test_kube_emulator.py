"""The Kubernetes emulator on its own, through the real sync and asyncio clients."""

import asyncio
import datetime as dt
from collections.abc import Iterator

import kubernetes
import kubernetes_asyncio
import pytest
import urllib3
from kubernetes.client import ApiException

from sandbox.kube_emulator import KubeEmulator, running_emulator

NS = "default"
T0 = dt.datetime(2026, 1, 1, 10, 0, 0, tzinfo=dt.UTC)


@pytest.fixture
def emu() -> Iterator[KubeEmulator]:
    with running_emulator(token="t-1") as emulator:
        yield emulator


def sync_client(emu: KubeEmulator) -> kubernetes.client.ApiClient:
    """Configured as the google provider's GKE hooks do it: host, CA file, bearer api_key."""
    config = kubernetes.client.Configuration(
        host=emu.url, api_key={"authorization": f"Bearer {emu.token}"}
    )
    config.ssl_ca_cert = emu.ca_file
    return kubernetes.client.ApiClient(config)


def async_client(emu: KubeEmulator) -> kubernetes_asyncio.client.ApiClient:
    config = kubernetes_asyncio.client.Configuration(
        host=emu.url, api_key={"BearerToken": emu.token}, api_key_prefix={"BearerToken": "Bearer"}
    )
    config.ssl_ca_cert = emu.ca_file
    return kubernetes_asyncio.client.ApiClient(config)


def pod(name: str, labels: dict[str, str], containers: tuple[str, ...] = ("base",)) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {"containers": [{"name": c, "image": "busybox"} for c in containers]},
    }


def job(name: str) -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "base", "image": "x"}]}
            }
        },
    }


def owned(obj: dict, owner: dict) -> dict:
    meta = owner["metadata"]
    obj["metadata"]["ownerReferences"] = [
        {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
        }
    ]
    return obj


def test_gke_hook_style_client_lists_pods_by_label(emu: KubeEmulator) -> None:
    emu.create(pod("train-0-abcde", {"job-name": "train", "role": "client"}))
    emu.create(pod("train-1-fghij", {"job-name": "train", "role": "worker"}))
    emu.create(pod("other-0-klmno", {"job-name": "other"}))
    core = kubernetes.client.CoreV1Api(sync_client(emu))

    def names(selector: str) -> list[str]:
        return [
            p.metadata.name for p in core.list_namespaced_pod(NS, label_selector=selector).items
        ]

    assert names("job-name=train") == ["train-0-abcde", "train-1-fghij"]
    assert names("job-name=train,role!=worker") == ["train-0-abcde"]
    assert names("job-name in (other, nope)") == ["other-0-klmno"]
    assert names("role") == ["train-0-abcde", "train-1-fghij"]
    assert names("!role") == ["other-0-klmno"]
    all_ns = core.list_pod_for_all_namespaces(label_selector="role=worker").items
    assert [p.metadata.name for p in all_ns] == ["train-1-fghij"]
    assert emu.requests[-1].path == "/api/v1/pods"
    assert emu.requests[-1].response_bytes > 0


def test_objects_have_metadata_and_errors_are_status_objects(emu: KubeEmulator) -> None:
    batch = kubernetes.client.BatchV1Api(sync_client(emu))
    created = batch.create_namespaced_job(NS, job("job-abc"))
    assert created.metadata.uid and created.metadata.resource_version
    assert created.metadata.creation_timestamp is not None
    assert created.spec.template.metadata.labels["batch.kubernetes.io/job-name"] == "job-abc"
    assert created.spec.selector.match_labels == {
        "batch.kubernetes.io/controller-uid": created.metadata.uid
    }
    with pytest.raises(ApiException) as conflict:
        batch.create_namespaced_job(NS, job("job-abc"))
    assert conflict.value.status == 409 and '"reason": "AlreadyExists"' in conflict.value.body
    with pytest.raises(ApiException) as missing:
        batch.read_namespaced_job("nope", NS)
    assert missing.value.status == 404 and '"kind": "Status"' in missing.value.body
    with pytest.raises(ApiException) as invalid:
        batch.create_namespaced_job(NS, job("x" * 64))
    assert invalid.value.status == 422
    with pytest.raises(ApiException) as no_ns:
        batch.create_namespaced_job("absent", {**job("job-b"), "metadata": {"name": "job-b"}})
    assert no_ns.value.status == 404
    patched = batch.patch_namespaced_job("job-abc", NS, {"spec": {"suspend": True}})
    assert patched.spec.suspend is True
    assert int(patched.metadata.resource_version) > int(created.metadata.resource_version)
    emu.set_job_condition(NS, "job-abc", "Complete", reason="CompletionsReached")
    status = batch.read_namespaced_job_status("job-abc", NS).status
    assert status.conditions[0].type == "Complete" and status.completion_time is not None
    assert kubernetes.client.CoreV1Api(sync_client(emu)).read_namespace(NS).status.phase == "Active"
    assert kubernetes.client.VersionApi(sync_client(emu)).get_code().minor == "35"


def test_secrets_and_events(emu: KubeEmulator) -> None:
    core = kubernetes.client.CoreV1Api(sync_client(emu))
    body = {"metadata": {"name": "hf-token"}, "stringData": {"token": "hf_abc"}}
    assert core.create_namespaced_secret(NS, body).data == {"token": "aGZfYWJj"}
    core.patch_namespaced_secret("hf-token", NS, {"metadata": {"labels": {"run": "r1"}}})
    replaced = core.replace_namespaced_secret(
        "hf-token", NS, {"metadata": {"name": "hf-token"}, "data": {"token": "eHl6"}}
    )
    assert replaced.data == {"token": "eHl6"} and replaced.metadata.labels is None
    core.delete_namespaced_secret("hf-token", NS)
    assert emu.get("secrets", NS, "hf-token") is None
    for name, target in (("e1", "pod-a"), ("e2", "pod-b"), ("e3", "pod-a")):
        emu.create(
            {
                "kind": "Event",
                "metadata": {"name": name, "namespace": NS},
                "reason": "Started",
                "involvedObject": {"kind": "Pod", "name": target, "namespace": NS},
            }
        )
    events = core.list_namespaced_event(NS, field_selector="involvedObject.name=pod-a").items
    assert [e.metadata.name for e in events] == ["e1", "e3"]


def test_log_slicing(emu: KubeEmulator) -> None:
    emu.create(pod("p", {}))
    with pytest.raises(ApiException) as waiting:
        kubernetes.client.CoreV1Api(sync_client(emu)).read_namespaced_pod_log("p", NS)
    assert waiting.value.status == 400 and "waiting to start" in waiting.value.body
    emu.set_pod_phase(NS, "p", "Running")
    emu.append_log(NS, "p", "base", "one\ntwo\n", at=T0.replace(microsecond=100_000))
    emu.append_log(
        NS, "p", "base", "three\nfour-part", at=T0.replace(second=1, microsecond=500_000)
    )
    emu.append_log(NS, "p", "base", "-rest\nfive\n", at=T0.replace(second=2))
    core = kubernetes.client.CoreV1Api(sync_client(emu))

    def read(**kwargs: object) -> str:
        response = core.read_namespaced_pod_log("p", NS, _preload_content=False, **kwargs)
        return response.data.decode()

    def read_since(since_time: str, timestamps: bool = False) -> str:
        """Neither kubernetes client offers sinceTime: a raw GET, as a trigger would do it."""
        http = urllib3.PoolManager(ca_certs=emu.ca_file)
        response = http.request(
            "GET",
            f"{emu.url}/api/v1/namespaces/{NS}/pods/p/log",
            fields={"sinceTime": since_time, "timestamps": str(timestamps).lower()},
            headers={"Authorization": f"Bearer {emu.token}"},
        )
        return response.data.decode()

    assert read() == "one\ntwo\nthree\nfour-part-rest\nfive\n"
    stamped = read(timestamps=True).splitlines()
    assert stamped[0] == "2026-01-01T10:00:00.1Z one"
    assert stamped[3] == "2026-01-01T10:00:01.5Z four-part-rest"  # continuation has no stamp
    # sinceTime reaches the kubelet with whole seconds: 10:00:01.9 selects from 10:00:01
    assert read_since("2026-01-01T10:00:01.900000Z") == "three\nfour-part-rest\nfive\n"
    assert read_since("2026-01-01T10:00:02Z", timestamps=True) == (
        "-rest\n2026-01-01T10:00:02Z five\n"
    )
    assert read(tail_lines=2) == "four-part-rest\nfive\n"
    assert read(limit_bytes=5) == "one\ntw"[:5]
    assert read(since_seconds=5) == ""
    emu.append_log(NS, "p", "base", "partial")
    assert read().endswith("five\npartial")
    emu.restart_container(NS, "p", "base")
    emu.append_log(NS, "p", "base", "after restart\n")
    assert read() == "after restart\n"
    assert read(previous=True).startswith("one\n")
    assert core.read_namespaced_pod("p", NS).status.container_statuses[0].restart_count == 1


def test_log_container_choice_and_follow(emu: KubeEmulator) -> None:
    emu.create(pod("multi", {}, containers=("pathways-proxy", "pathways-rm")))
    emu.set_pod_phase(NS, "multi", "Running")
    emu.append_log(NS, "multi", "pathways-rm", "rm up\n")
    core = kubernetes.client.CoreV1Api(sync_client(emu))
    with pytest.raises(ApiException) as choose:
        core.read_namespaced_pod_log("multi", NS)
    assert "choose one of: [pathways-proxy pathways-rm]" in choose.value.body
    stream = core.read_namespaced_pod_log(
        "multi", NS, container="pathways-rm", follow=True, _preload_content=False
    )
    emu.append_log(NS, "multi", "pathways-rm", "more\n")
    emu.set_pod_phase(NS, "multi", "Succeeded")
    assert b"".join(stream.stream()) == b"rm up\nmore\n"
    assert emu.requests[-1].response_bytes == len("rm up\nmore\n")


def test_follow_stops_and_is_recorded_when_the_client_hangs_up(
    emu: KubeEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    """A follower that closes its stream is recorded with the bytes it was sent, not a 500."""
    emu.create(pod("p", {}))
    emu.set_pod_phase(NS, "p", "Running")
    emu.append_log(NS, "p", "base", "one\n")

    async def hang_up() -> None:
        async with async_client(emu) as api:
            stream = await kubernetes_asyncio.client.CoreV1Api(api).read_namespaced_pod_log(
                "p", NS, follow=True, _preload_content=False
            )
            assert await stream.content.readany() == b"one\n"
            stream.close()
        for _ in range(100):
            if emu.requests:
                break
            await asyncio.sleep(0.02)

    asyncio.run(hang_up())
    emu.append_log(NS, "p", "base", "two\n")  # nobody is listening: nothing to send it to
    (record,) = emu.requests
    assert (record.status, record.response_bytes, record.query) == (200, 4, {"follow": "True"})
    assert "failed" not in caplog.text


def test_token_rotation_answers_401(emu: KubeEmulator) -> None:
    core = kubernetes.client.CoreV1Api(sync_client(emu))
    core.list_namespaced_pod(NS)
    emu.set_token("t-2")
    with pytest.raises(ApiException) as denied:
        core.list_namespaced_pod(NS)
    assert denied.value.status == 401 and '"reason": "Unauthorized"' in denied.value.body
    assert kubernetes.client.CoreV1Api(sync_client(emu)).list_namespaced_pod(NS).items == []


def test_injected_faults(emu: KubeEmulator) -> None:
    emu.create(pod("p", {}))
    core = kubernetes.client.CoreV1Api(sync_client(emu))
    emu.inject_faults(429, count=1, path_regex=r"/pods/p$", retry_after=3)
    # urllib3 (under the sync client) would sleep Retry-After and retry 429s by itself
    throttled = urllib3.PoolManager(ca_certs=emu.ca_file, retries=False).request(
        "GET", f"{emu.url}/api/v1/namespaces/{NS}/pods/p"
    )
    assert throttled.status == 429 and throttled.headers["Retry-After"] == "3"
    emu.inject_faults(500, count=1, path_regex=r"/pods/p$")
    emu.inject_faults(503, count=1, path_regex=r"/pods/p$")
    assert core.list_namespaced_pod(NS).items  # another path is not affected
    for status in (500, 503):
        with pytest.raises(ApiException) as failed:
            core.read_namespaced_pod("p", NS)
        assert failed.value.status == status and f'"code": {status}' in failed.value.body
    assert core.read_namespaced_pod("p", NS).metadata.name == "p"
    assert [r.status for r in emu.requests] == [429, 200, 500, 503, 200]


def test_cascading_deletes(emu: KubeEmulator) -> None:
    jobset = emu.create(
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "pw"},
            "spec": {"replicatedJobs": [{"name": "worker", "replicas": 1}]},
        }
    )
    child = emu.create(owned(job("pw-worker-0"), jobset))
    emu.create(owned(pod("pw-worker-0-0-abcde", {"job-name": "pw-worker-0"}), child))
    lone = emu.create(job("lone"))
    emu.create(owned(pod("lone-0-abcde", {"job-name": "lone"}), lone))
    custom = kubernetes.client.CustomObjectsApi(sync_client(emu))
    custom.delete_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", NS, "jobsets", "pw")
    assert emu.list("jobs", NS) == [emu.get("jobs", NS, "lone")]
    assert [p["metadata"]["name"] for p in emu.list("pods", NS)] == ["lone-0-abcde"]
    batch = kubernetes.client.BatchV1Api(sync_client(emu))
    batch.delete_namespaced_job("lone", NS)  # batch/v1 default policy: Orphan
    assert emu.get("pods", NS, "lone-0-abcde")["metadata"]["ownerReferences"] == []
    again = emu.create(job("lone"))
    emu.create(owned(pod("lone-0-fghij", {"job-name": "lone"}), again))
    batch.delete_namespaced_job(
        "lone", NS, body=kubernetes.client.V1DeleteOptions(propagation_policy="Foreground")
    )
    assert [p["metadata"]["name"] for p in emu.list("pods", NS)] == ["lone-0-abcde"]


def test_asyncio_client(emu: KubeEmulator) -> None:
    emu.create(pod("train-0-abcde", {"job-name": "train"}))
    emu.create(job("train"))
    emu.set_pod_phase(NS, "train-0-abcde", "Running")
    emu.append_log(NS, "train-0-abcde", "base", "hello\n", at=T0)

    async def scenario() -> None:
        async with async_client(emu) as api:
            core = kubernetes_asyncio.client.CoreV1Api(api)
            pods = await core.list_namespaced_pod(NS, label_selector="job-name=train")
            assert [p.metadata.name for p in pods.items] == ["train-0-abcde"]
            raw = await core.read_namespaced_pod_log(
                "train-0-abcde", NS, timestamps=True, _preload_content=False
            )
            assert await raw.read() == b"2026-01-01T10:00:00Z hello\n"
            status = await kubernetes_asyncio.client.BatchV1Api(api).read_namespaced_job_status(
                "train", NS
            )
            assert status.metadata.name == "train"
            custom = kubernetes_asyncio.client.CustomObjectsApi(api)
            group = ("jobset.x-k8s.io", "v1alpha2", NS, "jobsets")
            body = {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "metadata": {"name": "pw"},
                "spec": {"replicatedJobs": []},
            }
            await custom.create_namespaced_custom_object(*group, body)
            listed = await custom.list_namespaced_custom_object(*group)
            assert [i["metadata"]["name"] for i in listed["items"]] == ["pw"]
            emu.set_jobset_condition(NS, "pw", "Completed")
            got = await custom.get_namespaced_custom_object_status(*group, "pw")
            assert got["status"]["conditions"][0]["type"] == "Completed"
            with pytest.raises(kubernetes_asyncio.client.ApiException) as unsupported:
                await custom.patch_namespaced_custom_object(*group, "pw", {"spec": {}})
            assert unsupported.value.status == 400  # a dict sent as JSON patch, as the real API
            await custom.patch_namespaced_custom_object(
                *group,
                "pw",
                {"metadata": {"labels": {"a": "b"}}},
                _content_type="application/merge-patch+json",
            )
            await custom.delete_namespaced_custom_object(*group, "pw")
            emu.set_token("t-2")
            with pytest.raises(kubernetes_asyncio.client.ApiException) as denied:
                await core.read_namespaced_pod("train-0-abcde", NS)
            assert denied.value.status == 401

    asyncio.run(scenario())
    assert emu.get("jobsets", NS, "pw") is None


def test_watch_streams_changes(emu: KubeEmulator) -> None:
    emu.create(pod("a", {"app": "x"}))
    core = kubernetes.client.CoreV1Api(sync_client(emu))
    watch = kubernetes.watch.Watch()
    seen = []
    for event in watch.stream(
        core.list_namespaced_pod, NS, label_selector="app=x", timeout_seconds=1
    ):
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 1:
            emu.create(pod("b", {"app": "x"}))
            emu.create(pod("c", {"app": "other"}))
            emu.delete("pods", NS, "a")
        if len(seen) == 3:
            watch.stop()
    assert seen == [("ADDED", "a"), ("ADDED", "b"), ("DELETED", "a")]


def test_stop_ends_open_streams() -> None:
    emu = KubeEmulator().start_in_thread()
    emu.create(pod("p", {}))
    emu.set_pod_phase(NS, "p", "Running")
    stream = kubernetes.client.CoreV1Api(sync_client(emu)).read_namespaced_pod_log(
        "p", NS, follow=True, _preload_content=False
    )
    emu.stop()
    assert b"".join(stream.stream()) == b""
