"""A DAG processor reduced to what a parse costs: python -m tools.bench.parse_child RUNS FILE...

As Airflow's DAG processor does (dag_processing/manager.py and processor.py): the parent has
the manager's modules imported; before each parse it calls `_pre_import_airflow_modules(FILE)`,
which imports every `airflow.*` module the file names, and `gc.freeze()`; then the parse is a
forked child that runs the processor's own `_parse_file` (DagBag + serialization) and reports
its time. Files take turns, RUNS rounds, the order reversed every other round. One untimed
parse of each file first writes the byte-code caches a long-running processor would have.
Under `python -X importtime`, each child's import lines follow a marker on stderr.
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


def main(runs: int, paths: list[Path]) -> None:
    import airflow
    import airflow.dag_processing.manager  # noqa: F401  (the manager process has these)
    import structlog
    from airflow.dag_processing.processor import _pre_import_airflow_modules

    log = structlog.get_logger()

    def parse(path: Path) -> dict[str, object]:
        _pre_import_airflow_modules(str(path), log)  # type: ignore[arg-type]
        gc.freeze()
        return fork_parse(path, log)

    for path in paths:
        parse(path)  # byte-code caches
    for round_ in range(runs):
        for path in paths if round_ % 2 == 0 else paths[::-1]:
            print(MARK + json.dumps({"file": str(path), **parse(path)}), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), [Path(a) for a in sys.argv[2:]])
