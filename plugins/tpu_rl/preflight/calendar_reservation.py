"""A calendar-mode reservation's window (capacity=calendar), read from Compute Engine through
google.cloud.compute_v1's typed FutureReservationsClient (tpu_rl.preflight.google_api).

futureReservations.get (https://cloud.google.com/compute/docs/reference/rest/v1/
futureReservations/get): `timeWindow` holds `startTime` and `endTime` (RFC3339) or a `duration`;
`reservationMode` CALENDAR means "The delivered reservations will [be] delivered at specified
start time and terminated at specified end time along with terminating the VMs running on it"
(Compute v1 FutureReservation.ReservationMode). Compute Engine creates the reservation the TPU
pool consumes at the start (Cloud TPU, "Request a future reservation in calendar mode").

Which reservation the pool consumes (compute.v1 discovery document revision 20261106, as
google-api-python-client ships it, schemas.FutureReservation): `reservationName` "Name of
reservations where the capacity is provisioned at the time of delivery ... Either provide the
reservation_name or a name_prefix"; with `namePrefix` the "Automatically created reservations
name format will be <namePrefix>-date-####", listed once made in
`status.autoCreatedReservations` ("Fully qualified urls of the automatically created
reservations at start_time"). Whether Google accepted the request is
`status.procurementStatus` (FutureReservationStatus.procurementStatus: PENDING_APPROVAL,
DECLINED, ... APPROVED, PROCURING, PROVISIONING, FULFILLED).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tpu_rl.preflight.google_api import GoogleApi, read_or_none
from tpu_rl.report.estimate import run_step_seconds
from tpu_rl.settings.capacity_modes import CapacityEnd, capacity_mode
from tpu_rl.settings.fields import RunSettings
from tpu_rl.watch.capacity_end import epoch

COMPUTE = "compute.googleapis.com"
CALENDAR_MODE = "CALENDAR"
# procurementStatus values (FutureReservationStatus, compute.v1 discovery document) under which
# Compute Engine delivers, or has delivered, the capacity; PENDING_AMENDMENT_APPROVAL keeps the
# approved request ("If the Amendment is declined, the Future Reservation will be restored to
# the last known good state"). COMMITTED: "committed by the customer", after approval.
DELIVERING = (
    "APPROVED",
    "COMMITTED",
    "PROCURING",
    "PROVISIONING",
    "FULFILLED",
    "PENDING_AMENDMENT_APPROVAL",
)
AWAITING = ("DRAFTING", "PENDING_APPROVAL")  # not yet answered: the request may still pass


class CalendarError(ValueError):
    """The run's future reservation cannot serve it: missing, not calendar mode, no window."""


@dataclass(frozen=True)
class Window:
    """A calendar reservation's VMs exist from `start` to `end` (epoch seconds)."""

    name: str
    start: float
    end: float
    # the reservation it delivers, which the TPU pool consumes; None: a `namePrefix` one
    # Compute Engine has not made yet (it makes `<namePrefix>-date-####` at the start)
    reservation: str | None = None
    name_prefix: str = ""

    def describe(self) -> str:
        start, end = (datetime.fromtimestamp(t, UTC).isoformat() for t in (self.start, self.end))
        return f"calendar reservation {self.name}: {start} to {end}"


def read_window(api: GoogleApi, s: RunSettings) -> Window:
    """The window of the future reservation `s.reservation` in `s.zone`, or CalendarError."""
    from google.cloud import compute_v1

    request = compute_v1.GetFutureReservationRequest(
        project=s.project, zone=s.zone, future_reservation=s.reservation
    )
    client = api.client(compute_v1.FutureReservationsClient, COMPUTE)
    found = read_or_none(client.get, request)
    if found is None:
        raise CalendarError(
            f"no future reservation {s.reservation!r} in {s.zone} of {s.project} (gcloud "
            f"compute future-reservations list --project={s.project})"
        )
    if found.reservation_mode != CALENDAR_MODE:
        raise CalendarError(
            f"future reservation {s.reservation} is not in calendar mode "
            f"(reservationMode {found.reservation_mode or None!r}): use capacity=reservation"
        )
    _check_procurement(s, found.status)
    window = found.time_window
    if not window.start_time:
        raise CalendarError(f"future reservation {s.reservation} has no timeWindow.startTime")
    start = epoch(window.start_time)
    end = epoch(window.end_time) if window.end_time else start + float(window.duration.seconds)
    return Window(s.reservation, start, end, _delivered(s, found), found.name_prefix)


def _check_procurement(s: RunSettings, status: Any) -> None:
    """CalendarError unless Google approved the request (status.procurementStatus)."""
    state = status.procurement_status or "PROCUREMENT_STATUS_UNSPECIFIED"
    if state in DELIVERING:
        return
    if state in AWAITING:
        raise CalendarError(
            f"future reservation {s.reservation} is {state}: Google has not approved it, and "
            "an unapproved request delivers no capacity; run preflight again once approved"
        )
    raise CalendarError(
        f"future reservation {s.reservation} is {state}: it delivers no capacity (gcloud "
        f"compute future-reservations describe {s.reservation} --zone={s.zone})"
    )


def _delivered(s: RunSettings, found: Any) -> str | None:
    """The name of the reservation the future reservation delivers: its `reservationName`,
    else the auto-created one (status.autoCreatedReservations, URLs ending in the name)
    starting with its `namePrefix`; None while Compute Engine has made none."""
    if name := found.reservation_name:
        return str(name)
    prefix = found.name_prefix
    made = [url.rstrip("/").rsplit("/", 1)[-1] for url in found.status.auto_created_reservations]
    made = [name for name in made if name.startswith(f"{prefix}-")] if prefix else made
    if len(made) > 1:
        raise CalendarError(
            f"future reservation {s.reservation} delivered {len(made)} reservations "
            f"({', '.join(made)}): one TPU pool consumes one; use capacity=reservation and "
            "name the one to use"
        )
    return made[0] if made else None


def delivered_settings(s: RunSettings, gcp_conn_id: str | None) -> RunSettings:
    """The run's settings with `reservation` the one its calendar reservation delivered (the
    TPU pool's SPECIFIC_RESERVATION), read when the window has opened; as they are on other
    capacity. CalendarError when Compute Engine has delivered none yet (before the
    deploy: nothing is spent)."""
    window = calendar_window(s, gcp_conn_id)
    if window is None:
        return s
    if window.reservation is None:
        raise CalendarError(
            f"future reservation {s.reservation} has delivered no reservation yet (its "
            f"`namePrefix` {window.name_prefix!r} names the one Compute Engine makes at the "
            f"start, <prefix>-date-####): re-run create_cluster once gcloud compute "
            f"reservations list --filter=name~^{window.name_prefix}- --project={s.project} "
            "lists it"
        )
    return dataclasses.replace(s, reservation=window.reservation)


def first_save_seconds(s: RunSettings) -> float:
    """Assumed training time to the first save: `checkpoint_period` steps at the assumed step
    time (tpu_rl.report.estimate; a lower bound: loading the model and the backend come first)."""
    return s.checkpoint_period * run_step_seconds(s)


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
            f"{s.checkpoint_period} steps at an assumed {run_step_seconds(s):.0f} s each): lower "
            "checkpoint_period or use a longer reservation"
        )
    return None


def calendar_window(s: RunSettings, gcp_conn_id: str | None) -> Window | None:
    """The window of the run's calendar reservation (its VMs exist from its start to its end),
    read with `gcp_conn_id` (None: the deployment's connection); None on other capacity."""
    from tpu_rl import deployment

    if capacity_mode(s.capacity).ends is not CapacityEnd.WINDOW_END:
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
