"""`make demo`: one whole tpu_rl_post_training run with the tutorial's settings, in the sandbox.

Prints the tasks with their states and durations, the rewards, and what cleanup removed.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from tests.conftest import TUTORIAL_CONF  # sets Airflow's environment before it is imported
from tests.sandbox.harness import DAG_ID, Sandbox

# The sandbox compresses time: poll every second, give up on pending pods after a minute.
SANDBOX_OVERRIDES = {"poll_interval_seconds": 1, "pending_timeout_minutes": 1}


def task_rows(run_id: str) -> list[tuple[str, str, float]]:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = session.query(TaskInstance).filter_by(dag_id=DAG_ID, run_id=run_id).all()
        rows = [
            (
                ti.task_id,
                str(getattr(ti.state, "value", ti.state)),
                (ti.end_date - ti.start_date).total_seconds()
                if ti.start_date and ti.end_date
                else 0.0,
                ti.start_date,
            )
            for ti in tis
        ]
    rows.sort(key=lambda r: (r[3] is None, r[3]))
    return [(task, state, seconds) for task, state, seconds, _ in rows]


def start_execution_api() -> float:
    """Seconds Airflow's in-process Execution API (dag.test's) takes to build its routes.

    It builds them on its first request; doing that before the run keeps those seconds out of
    the first task's time. A real deployment's API server does it once, at start.
    """
    import httpx
    from airflow.sdk.execution_time.supervisor import in_process_api_server

    started = time.monotonic()
    with httpx.Client(transport=in_process_api_server().transport, base_url="http://api") as client:
        client.get("/health").raise_for_status()
    return time.monotonic() - started


def main() -> int:
    from airflow.utils import db

    db.resetdb()
    conf = {**json.loads(TUTORIAL_CONF.read_text()), **SANDBOX_OVERRIDES}
    api_seconds = start_execution_api()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tpu-rl-demo-") as tmp, Sandbox(Path(tmp)).up() as box:
        result = box.run(conf)
    rows = task_rows(result.run_id)
    took = time.monotonic() - started
    print(f"\ntpu_rl_post_training in the sandbox: {result.state.upper()} in {took:.0f} s")
    print(f"(before it: {api_seconds:.0f} s for Airflow's in-process Execution API to start)\n")
    print(f"{'task':<22}{'state':<18}{'seconds':>8}")
    for task, state, seconds in rows:
        print(f"{task:<22}{state:<18}{seconds:>8.1f}")
    rewards = result.xcoms.get("wait_for_rewards.return_value") or {}
    pre, post = (rewards.get(k) or {} for k in ("pre", "post"))
    print(f"\nmean_reward: pre {pre.get('mean_reward')} -> post {post.get('mean_reward')}")
    print(f"export: {result.xcoms.get('verify.return_value')}")
    removed = result.xcoms.get("cleanup_kubernetes.return_value") or {}
    print(f"cleanup removed: {json.dumps(removed)}")
    destroyed = [
        c["argv"][1] for c in result.calls if c["tool"] == "gcluster" and c["argv"][0] == "destroy"
    ]
    print(f"cluster destroyed: {', '.join(destroyed) or 'none'}")
    print(f"left in the sandbox: {', '.join(result.leftovers) or 'nothing'}")
    return 0 if result.state == "success" else 1


if __name__ == "__main__":
    sys.exit(main())
