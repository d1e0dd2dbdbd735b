"""A calendar-mode reservation's window (capacity=calendar), read from Compute Engine.

futureReservations.get (https://cloud.google.com/compute/docs/reference/rest/v1/
futureReservations/get): `timeWindow` holds `startTime` and `endTime` (RFC3339) or a `duration`;
`reservationMode` CALENDAR means "The delivered reservations will [be] delivered at specified
start time and terminated at specified end time along with terminating the VMs running on it"
(Compute v1 FutureReservation.ReservationMode). Compute Engine creates the reservation the TPU
pool consumes at the start (Cloud TPU, "Request a future reservation in calendar mode"); this
product asks that it carry the future reservation's name (`reservationName` unset or equal).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from tpu_rl.preflight.google_api import GoogleApi
from tpu_rl.report.estimate import ASSUMED_STEP_SECONDS
from tpu_rl.rewards.capacity_end import epoch
from tpu_rl.settings.run_settings import RunSettings

COMPUTE = "compute.googleapis.com"
CALENDAR_MODE = "CALENDAR"


class CalendarError(ValueError):
    """The run's future reservation cannot serve it: missing, not calendar mode, no window."""


@dataclass(frozen=True)
class Window:
    """A calendar reservation's VMs exist from `start` to `end` (epoch seconds)."""

    name: str
    start: float
    end: float

    def describe(self) -> str:
        start, end = (datetime.fromtimestamp(t, UTC).isoformat() for t in (self.start, self.end))
        return f"calendar reservation {self.name}: {start} to {end}"


def read_window(api: GoogleApi, s: RunSettings) -> Window:
    """The window of the future reservation `s.reservation` in `s.zone`, or CalendarError."""
    path = f"/compute/v1/projects/{s.project}/zones/{s.zone}/futureReservations/{s.reservation}"
    found = api.get_or_none(COMPUTE, path)
    if found is None:
        raise CalendarError(
            f"no future reservation {s.reservation!r} in {s.zone} of {s.project} (gcloud "
            f"compute future-reservations list --project={s.project})"
        )
    if found.get("reservationMode") != CALENDAR_MODE:
        raise CalendarError(
            f"future reservation {s.reservation} is not in calendar mode "
            f"(reservationMode {found.get('reservationMode')!r}): use capacity=reservation"
        )
    if found.get("reservationName") not in (None, "", s.reservation):
        raise CalendarError(
            f"future reservation {s.reservation} delivers reservation "
            f"{found['reservationName']!r}: name that one's future reservation the same"
        )
    window = found.get("timeWindow") or {}
    if not window.get("startTime"):
        raise CalendarError(f"future reservation {s.reservation} has no timeWindow.startTime")
    start = epoch(window["startTime"])
    if window.get("endTime"):
        end = epoch(window["endTime"])
    else:
        end = start + float(str((window.get("duration") or {}).get("seconds") or 0))
    return Window(s.reservation, start, end)


def first_save_seconds(s: RunSettings) -> float:
    """Assumed training time to the first save: `checkpoint_period` steps at the assumed step
    time (tpu_rl.report.estimate; a lower bound: loading the model and the backend come first)."""
    return s.checkpoint_period * ASSUMED_STEP_SECONDS


def window_problem(window: Window, s: RunSettings, now: float) -> str | None:
    """Why the window cannot serve the run: over, or too short to save even once; None: fine."""
    if window.end <= now:
        return f"{window.describe()} has ended"
    usable = window.end - max(now, window.start)
    needed = first_save_seconds(s)
    if usable < needed:
        return (
            f"{window.describe()} leaves {usable / 60:.0f} min, less than the "
            f"{needed / 60:.0f} min to the first save (checkpoint_period="
            f"{s.checkpoint_period} steps at an assumed {ASSUMED_STEP_SECONDS:g} s each): lower "
            "checkpoint_period or use a longer reservation"
        )
    return None


def calendar_window(s: RunSettings, gcp_conn_id: str | None) -> Window | None:
    """The window of the run's calendar reservation (its VMs exist from its start to its end),
    read with `gcp_conn_id` (None: the deployment's connection); None on other capacity."""
    from tpu_rl import deployment
    from tpu_rl.settings.choices import Capacity

    if s.capacity != Capacity.CALENDAR:
        return None
    return read_window(GoogleApi(gcp_conn_id or deployment.check_gcp_connection()), s)


def window_closed(s: RunSettings, step: int) -> str:
    """The failure once training stopped at the last save a calendar window allowed."""
    return (
        f"the calendar reservation {s.reservation} ends before another save could finish: "
        f"training stopped right after the save of step {step} (committed, nothing lost) and "
        "its TPUs are released. No capacity is left to resume on: add a rung after the "
        "calendar one to capacity_ladder, or request a longer window"
    )
