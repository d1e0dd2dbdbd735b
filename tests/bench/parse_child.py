"""One DAG processor, reduced to what a parse costs: python -m tests.bench.parse_child FILE RUNS.

As Airflow's DAG processor does (dag_processing/manager.py and processor.py): the parent has
the manager's modules imported and calls `_pre_import_airflow_modules(FILE)`, which imports
every `airflow.*` module the file names; `gc.freeze()`; then each parse is a forked child that
runs the processor's own `_parse_file` (DagBag + serialization) and reports its time. The first
child is not timed: it writes the byte-code caches a long-running processor would have.
With IMPORTTIME set, the timed children print `python -X importtime` lines after a marker.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from pathlib import Path

MARK = "BENCH-PARSE "
CHILD_START = "BENCH-CHILD-START"


def parse_in_child(path: Path, log: object) -> dict[str, object]:
    from airflow.dag_processing.processor import DagFileParseRequest, _parse_file

    os.environ["_AIRFLOW_PROCESS_CONTEXT"] = "client"  # as _parse_file_entrypoint sets
    request = DagFileParseRequest(file=str(path), bundle_path=path.parent, bundle_name="bench")
    start, cpu = time.perf_counter(), time.process_time()
    result = _parse_file(request, log)  # type: ignore[arg-type]
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    tasks = sum(len(d.data["dag"]["tasks"]) for d in result.serialized_dags) if result else 0
    errors = list(result.import_errors) if result else ["no result"]
    return {"seconds": seconds, "cpu_seconds": cpu_seconds, "tasks": tasks, "errors": errors}


def fork_parse(path: Path, log: object) -> dict[str, object]:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        code = 0
        try:
            print(CHILD_START, file=sys.stderr, flush=True)
            payload = parse_in_child(path, log)
        except BaseException as err:  # reported to the parent, which raises
            payload, code = {"errors": [repr(err)]}, 1
        os.write(write_end, json.dumps(payload).encode())
        os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(data)


def main(path: Path, runs: int) -> None:
    import airflow
    import airflow.dag_processing.manager  # noqa: F401  (the manager process has these)
    import structlog
    from airflow.dag_processing.processor import _pre_import_airflow_modules

    log = structlog.get_logger()
    _pre_import_airflow_modules(str(path), log)  # type: ignore[arg-type]
    gc.freeze()
    fork_parse(path, log)  # byte-code caches
    for _ in range(runs):
        _pre_import_airflow_modules(str(path), log)  # type: ignore[arg-type]
        print(MARK + json.dumps(fork_parse(path, log)), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
