"""FastAPI app mounted by the api-server under /tpu-rl: the page and the JSON it reads.

The page is static (no data in it); /api/runs serves what the runs' XComs hold (rewards, gate
verdicts), so it needs a user allowed to read this DAG's runs AND its XComs (what Airflow's own
XCom endpoints require), authenticated like Airflow's API (the UI's session cookie or a token).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
from airflow.api_fastapi.common.db.common import SessionDep
from airflow.api_fastapi.core_api.security import GetUserDep
from airflow.models.dag import DagModel
from fastapi import Depends, FastAPI, HTTPException, Query, status
from fastapi.responses import FileResponse

from tpu_rl.names import DAG_ID
from tpu_rl.ui.runs import fetch_runs

STATIC = Path(__file__).parent / "static"
MAX_RUNS = 2000


def may_read(entity: DagAccessEntity) -> Any:
    """A dependency that answers 403 unless the user may GET this DAG's `entity`: the check of
    Airflow's requires_access_dag (airflow/api_fastapi/core_api/security.py), made here for the
    DAG this app serves: Airflow 3.3's requires_access_dag takes a fixed DAG id (`param_dag_id`),
    Airflow 3.1's reads it from the route's path or query only."""

    def check(user: GetUserDep) -> None:
        details = DagDetails(id=DAG_ID, team_name=DagModel.get_team_name(DAG_ID))
        allowed = get_auth_manager().is_authorized_dag(
            method="GET", access_entity=entity, details=details, user=user
        )
        if not allowed:
            raise HTTPException(status.HTTP_403_FORBIDDEN, "Forbidden")

    return Depends(check)


app = FastAPI(title="RL post-training", docs_url=None, redoc_url=None, openapi_url=None)
can_read_runs = may_read(DagAccessEntity.RUN)
can_read_xcoms = may_read(DagAccessEntity.XCOM)


@app.get("/", include_in_schema=False)
def page() -> FileResponse:
    return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})


@app.get("/page.js", include_in_schema=False)
def script() -> FileResponse:
    return FileResponse(STATIC / "page.js", headers={"Cache-Control": "no-cache"})


@app.get("/evals.js", include_in_schema=False)
def evaluations_script() -> FileResponse:
    return FileResponse(STATIC / "evals.js", headers={"Cache-Control": "no-cache"})


@app.get("/api/runs", dependencies=[can_read_runs, can_read_xcoms])
def runs(
    session: SessionDep, limit: Annotated[int, Query(ge=1, le=MAX_RUNS)] = 500
) -> dict[str, Any]:
    """The newest runs of the DAG, newest first: metrics, verdict, chip-hours, host-hours, links."""
    return {"dag_id": DAG_ID, "runs": fetch_runs(session, limit)}
