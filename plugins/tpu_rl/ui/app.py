"""FastAPI app mounted by the api-server under /tpu-rl: the page and the JSON it reads.

The page is static (no data in it); /api/runs serves what the runs' XComs hold (rewards, gate
verdicts), so it needs a user allowed to read this DAG's runs AND its XComs (what Airflow's own
XCom endpoints require), authenticated like Airflow's API (the UI's session cookie or a token).

The estimate page (/estimate, linked from the trigger form) is static too; /api/estimate takes
a run's settings (the form's Configuration JSON) and answers with every problem of them and
their cost estimate (tpu_rl.ui.estimate). It reads nothing of any run, so it needs a user
allowed to read this DAG (whose Params the form shows), authenticated the same way. The page
triggers a run through Airflow's own REST API (POST /api/v2/dags/{dag_id}/dagRuns, with the
same session cookie), which checks that the user may create this DAG's runs: nothing here does.

/api/curves?run_id=... holds the training curves of a few runs (tpu_rl.ui.curves), read when
the page draws them; it needs what /api/runs needs.

/report/{run_id} is the run's report (run-report.md beside its verified export) as an HTML page
(tpu_rl.ui.report_page), read from GCS with the deployment's Google connection as the tasks
read (tpu_rl.storage): the note and the page link it. It needs what /api/runs needs.

/api/provenance?run_id=... is the provenance chain of the run's export, base model to registry
version (tpu_rl.ui.provenance), read from the run's XComs and the deployment's champion record
in GCS when a run's "provenance" button is pressed; it needs what /api/runs needs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
from airflow.api_fastapi.common.db.common import SessionDep
from airflow.api_fastapi.core_api.security import GetUserDep
from airflow.models.dag import DagModel
from fastapi import Depends, FastAPI, HTTPException, Query, Request, status
from fastapi.responses import FileResponse, HTMLResponse, PlainTextResponse, Response

from tpu_rl import deployment
from tpu_rl.names import DAG_ID, UI_PREFIX
from tpu_rl.storage import read_text
from tpu_rl.token_masking import redact_secrets
from tpu_rl.ui.curves import MAX_RUNS as CURVES_MAX_RUNS
from tpu_rl.ui.curves import fetch_curves
from tpu_rl.ui.estimate import settings_estimate
from tpu_rl.ui.provenance import run_provenance
from tpu_rl.ui.report_page import HEADERS, report_html
from tpu_rl.ui.runs import fetch_runs, report_uri

STATIC = Path(__file__).parent / "static"
MAX_RUNS = 2000


def may_read(entity: DagAccessEntity | None) -> Any:
    """A dependency that answers 403 unless the user may GET this DAG's `entity` (None: the DAG
    itself): the check of Airflow's requires_access_dag (airflow/api_fastapi/core_api/
    security.py), made here for the DAG this app serves: Airflow 3.3's requires_access_dag takes a
    fixed DAG id (`param_dag_id`), Airflow 3.1's reads it from the route's path or query only."""

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
can_read_dag = may_read(None)


def static_file(name: str) -> FileResponse:
    """One of the pages' static files, never cached (a new build of the plugin shows at once)."""
    return FileResponse(STATIC / name, headers={"Cache-Control": "no-cache"})


@app.get("/", include_in_schema=False)
def page() -> FileResponse:
    return static_file("index.html")


@app.get("/page.js", include_in_schema=False)
def script() -> FileResponse:
    return static_file("page.js")


@app.get("/evals.js", include_in_schema=False)
def evaluations_script() -> FileResponse:
    return static_file("evals.js")


@app.get("/provenance.js", include_in_schema=False)
def provenance_script() -> FileResponse:
    return static_file("provenance.js")


@app.get("/curves.js", include_in_schema=False)
def curves_script() -> FileResponse:
    return static_file("curves.js")


@app.get("/estimate", include_in_schema=False)
def estimate_page() -> FileResponse:
    return static_file("estimate.html")


@app.get("/estimate.js", include_in_schema=False)
def estimate_script() -> FileResponse:
    return static_file("estimate.js")


@app.post("/api/estimate", dependencies=[can_read_dag])
async def estimate(request: Request) -> dict[str, Any]:
    """The problems, all at once, and the estimate of the settings the body holds as JSON text
    (tpu_rl.ui.estimate): read as text, so that text which is not JSON gets its message too;
    and the DAG whose run the page triggers with them."""
    return {"dag_id": DAG_ID, **settings_estimate((await request.body()).decode(errors="replace"))}


@app.get("/api/runs", dependencies=[can_read_runs, can_read_xcoms])
def runs(
    session: SessionDep, limit: Annotated[int, Query(ge=1, le=MAX_RUNS)] = 500
) -> dict[str, Any]:
    """The newest runs of the DAG, newest first: metrics, verdict, chip-hours, host-hours, links."""
    return {"dag_id": DAG_ID, "runs": fetch_runs(session, limit)}


@app.get("/api/curves", dependencies=[can_read_runs, can_read_xcoms])
def run_curves(
    session: SessionDep, run_id: Annotated[list[str], Query(max_length=CURVES_MAX_RUNS)]
) -> dict[str, Any]:
    """The training curves of the runs named (at most CURVES_MAX_RUNS), by run id."""
    return {"dag_id": DAG_ID, "runs": fetch_curves(session, run_id)}


@app.get("/api/provenance", dependencies=[can_read_runs, can_read_xcoms])
def provenance(session: SessionDep, run_id: Annotated[str, Query()]) -> dict[str, Any]:
    """The provenance chain of the run's export and the champion's status; 404 for no run."""
    try:
        return {"dag_id": DAG_ID, **run_provenance(session, run_id)}
    except LookupError as why:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(why)) from None


@app.get("/report/{run_id:path}", dependencies=[can_read_runs, can_read_xcoms])
def report(run_id: str, session: SessionDep, request: Request) -> Response:
    """The run's report as a page; 404 with why when the run has none, 502 when GCS refused."""
    try:
        uri = report_uri(session, run_id)
    except LookupError as why:
        return PlainTextResponse(str(why), status.HTTP_404_NOT_FOUND)
    try:
        text = read_text(uri, deployment.gcp_conn_id())
    except Exception as err:  # GCS's refusal, no credentials, no connection: said in a line
        reason = redact_secrets(" ".join(f"{type(err).__name__}: {err}".split()))
        return PlainTextResponse(
            f"The report {uri} could not be read: {reason}", status.HTTP_502_BAD_GATEWAY
        )
    if text is None:
        return PlainTextResponse(f"The report {uri} is not there.", status.HTTP_404_NOT_FOUND)
    # Airflow's root: where the api-server mounts this app (Starlette's Mount adds its path)
    root = str(request.scope.get("root_path", "")).removesuffix(UI_PREFIX)
    return HTMLResponse(report_html(run_id, uri, text, root), headers=HEADERS)
