"""dag.test()'s pause between its scheduling passes, at the sandbox's pace.

DAG.test (airflow/sdk/definitions/dag.py: Airflow 3.3.2 lines 1422 and 1425, 3.1.8 line 1295)
sleeps one second whenever a pass finds no task instance to run:
- while the tasks below a failure become upstream_failed, a level a pass (a run refused at
  validate took 6 passes, 6 s of its 6.3 s);
- while a retry waits for its delay;
- while an approval waits for an answer (Airflow 3.3.2 only; 3.1.8 takes it for the case above).

The scheduler that dag.test() stands in for loops about that often (scheduler_idle_sleep_time, 1 s),
but the sandbox's pods and clocks run 1000 times faster than the wall, and those seconds were
about a tenth of the end-to-end tier's wall time. A shorter pause changes no state a pass reads:
the same passes run, only sooner.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import time
from collections.abc import Iterator
from unittest import mock

# Wall seconds between dag.test()'s passes that found nothing to run: a pass (the run's state and
# its task instances read from the database) costs a few milliseconds of CPU, so an approval that
# waits a minute for its timeout makes 300 passes instead of 60.
PASS_PAUSE_S = 0.2


@contextlib.contextmanager
def sandbox_paced_dag_test() -> Iterator[None]:
    """Inside: DAG.test's own sleeps last at most PASS_PAUSE_S; every other sleep is unchanged
    (time.sleep is one function for every thread, so the caller's code object tells them apart)."""
    from airflow.sdk.definitions.dag import DAG

    test_code = inspect.unwrap(DAG.test).__code__
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        if sys._getframe(1).f_code is test_code:
            seconds = min(seconds, PASS_PAUSE_S)
        real_sleep(seconds)

    with mock.patch.object(time, "sleep", sleep):
        yield
