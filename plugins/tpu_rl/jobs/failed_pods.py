"""What a failed Job leaves in its task's log: each failed pod's why and last lines, redacted."""

from __future__ import annotations

from typing import Any, Protocol

from kubernetes.client import CoreV1Api
from kubernetes.client import models as k8s
from kubernetes.client.rest import ApiException

from tpu_rl.names import CONTAINER
from tpu_rl.token_masking import redact

# Per failed pod and in all.
FAILED_POD_LOG_LINES = 50
FAILED_POD_LOG_CHARS = 8000
FAILED_PODS_SHOWN = 3


class ErrorLog(Protocol):
    """What the failed pods are told with: a `logging.Logger`, or an operator's `self.log`
    (Airflow's Logger, airflow/sdk/_shared/logging/types.py: `error(self, event, *args, **kw)`)."""

    def error(self, message: str, /, *args: Any) -> Any: ...


def log_failed_pods(client: CoreV1Api, log: ErrorLog, job: str | None, namespace: str) -> None:
    """Logs the failed pods of `job` (the first FAILED_PODS_SHOWN) with their last lines."""
    pods = client.list_namespaced_pod(namespace=namespace, label_selector=f"job-name={job}").items
    failed = [p for p in pods if pod_failed(p)][:FAILED_PODS_SHOWN]
    if not failed:
        log.error("Job %s failed; none of its %d pods shows a failure.", job, len(pods))
    for pod in failed:
        name = pod.metadata.name
        try:
            text = pod_log_text(client, name, namespace, tail_lines=FAILED_POD_LOG_LINES)
        except ApiException as err:
            log.error("Pod %s failed; its log is not readable: %s", name, err.reason)
            continue
        log.error(
            "Pod %s failed (%s). Last log lines:\n%s",
            name,
            pod_failure(pod),
            redact(text.rstrip()[-FAILED_POD_LOG_CHARS:]),
        )


def pod_log_text(client: CoreV1Api, name: str, namespace: str, **kwargs: Any) -> str:
    """The MaxText container's log as text. Read raw: kubernetes 36's "str" deserialization of a
    log is str(bytes), the repr b'...\\n...' (kubernetes/client/api_client.py
    ApiClient.__call_api decodes no "str" response; deserialize -> __deserialize_primitive:
    str(data) of the bytes RESTResponse keeps)."""
    response = client.read_namespaced_pod_log(
        name=name, namespace=namespace, container=CONTAINER, _preload_content=False, **kwargs
    )
    text: str = response.data.decode("utf-8", "replace")
    return text


def _terminated(pod: k8s.V1Pod) -> list[Any]:
    statuses = (pod.status.container_statuses if pod.status else None) or []
    return [c.state.terminated for c in statuses if c.state and c.state.terminated]


def pod_failed(pod: k8s.V1Pod) -> bool:
    """The pod failed, or one of its containers ended with a non-zero exit code."""
    phase = pod.status.phase if pod.status else None
    return phase == "Failed" or any(t.exit_code for t in _terminated(pod))


def pod_failure(pod: k8s.V1Pod) -> str:
    """A short why: the container's exit code and reason, else the pod's reason."""
    for t in _terminated(pod):
        if t.exit_code:
            return f"exit code {t.exit_code}" + (f", {t.reason}" if t.reason else "")
    return (pod.status.reason if pod.status else None) or "phase Failed"
