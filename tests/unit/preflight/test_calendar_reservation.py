"""tpu_rl.preflight.calendar_reservation: a calendar reservation's window and the reservation
it delivers (under its `namePrefix` too), and why one cannot serve the run."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from tpu_rl.preflight import calendar_reservation
from tpu_rl.preflight.calendar_reservation import read_window
from tpu_rl.settings.run_settings import load_settings


def test_an_undelivered_prefix_reservation_stops_the_deploy(tutorial_conf, monkeypatch):
    """The pool consumes the delivered reservation; none delivered yet: refused, before
    gcluster runs."""
    s = load_settings({**tutorial_conf, "capacity": "calendar", "reservation": "v6e-calendar"})
    window = calendar_reservation.Window("v6e-calendar", 0.0, 1e12, None, "v6e-cal")
    monkeypatch.setattr(calendar_reservation, "calendar_window", lambda s, conn: window)
    with pytest.raises(
        calendar_reservation.CalendarError, match="has delivered no reservation yet"
    ):
        calendar_reservation.delivered_settings(s, "gcp")
    delivered = calendar_reservation.Window(
        "v6e-calendar", 0.0, 1e12, "v6e-cal-20261204-0001", "v6e-cal"
    )
    monkeypatch.setattr(calendar_reservation, "calendar_window", lambda s, conn: delivered)
    assert calendar_reservation.delivered_settings(s, "gcp").reservation == "v6e-cal-20261204-0001"


def future_reservation(**fields: Any) -> SimpleNamespace:
    """futureReservations.get's answer: an approved calendar one, its window a day long."""
    status = fields.pop("status", {})
    window = fields.pop("window", {})
    return SimpleNamespace(
        reservation_mode=fields.pop("reservation_mode", "CALENDAR"),
        reservation_name=fields.pop("reservation_name", ""),
        name_prefix=fields.pop("name_prefix", ""),
        status=SimpleNamespace(
            procurement_status=status.get("procurement_status", "APPROVED"),
            auto_created_reservations=status.get("auto_created_reservations", []),
        ),
        time_window=SimpleNamespace(
            start_time=window.get("start_time", "2026-12-01T00:00:00Z"),
            end_time=window.get("end_time", "2026-12-02T00:00:00Z"),
            duration=SimpleNamespace(seconds=window.get("duration", 0)),
        ),
    )


class Compute:
    """GoogleApi's typed client for futureReservations.get: `found`, or 404 when None; the
    requests it was given."""

    def __init__(self, found: Any) -> None:
        self.found, self.requests = found, []

    def client(self, client_class: type, host: str) -> Any:
        return self

    def get(self, request: Any, **_: Any) -> Any:
        self.requests.append(request)
        if self.found is None:
            from google.api_core.exceptions import NotFound

            raise NotFound("gone")
        return self.found


@pytest.fixture(autouse=True)
def compute_v1(monkeypatch: pytest.MonkeyPatch) -> None:
    """The two names read_window takes from google.cloud.compute_v1, without importing it (its
    import takes seconds): the request as its fields, the client class as a name."""
    import google.cloud

    fake = SimpleNamespace(
        GetFutureReservationRequest=lambda **fields: SimpleNamespace(**fields),
        FutureReservationsClient=type("FutureReservationsClient", (), {}),
    )
    monkeypatch.setitem(sys.modules, "google.cloud.compute_v1", fake)
    monkeypatch.setattr(google.cloud, "compute_v1", fake, raising=False)


@pytest.fixture
def calendar(tutorial_conf) -> Any:
    return load_settings({**tutorial_conf, "capacity": "calendar", "reservation": "v6e-cal"})


def test_the_window_is_the_reservations_start_to_its_end_or_its_duration(calendar):
    start = datetime(2026, 12, 1, tzinfo=UTC).timestamp()
    compute = Compute(future_reservation(reservation_name="r-1"))
    window = read_window(compute, calendar)
    [asked] = compute.requests
    assert (asked.project, asked.zone, asked.future_reservation) == (
        calendar.project,
        calendar.zone,
        "v6e-cal",
    )
    assert (window.start, window.end, window.reservation) == (start, start + 86_400, "r-1")
    timed = future_reservation(window={"end_time": "", "duration": 3600})
    assert read_window(Compute(timed), calendar).end == start + 3600


def test_the_reservation_made_under_the_prefix_is_the_one_delivered(calendar):
    made = ["https://compute/v1/projects/p/zones/z/reservations/cal-20261201-0001"]
    found = future_reservation(name_prefix="cal", status={"auto_created_reservations": made})
    assert read_window(Compute(found), calendar).reservation == "cal-20261201-0001"
    two = [*made, "https://compute/v1/projects/p/zones/z/reservations/cal-20261201-0002"]
    found = future_reservation(name_prefix="cal", status={"auto_created_reservations": two})
    with pytest.raises(calendar_reservation.CalendarError, match="delivered 2 reservations"):
        read_window(Compute(found), calendar)


@pytest.mark.parametrize(
    ("found", "says"),
    [
        (None, "no future reservation 'v6e-cal' in"),
        (future_reservation(reservation_mode="DEFAULT"), "is not in calendar mode"),
        (
            future_reservation(status={"procurement_status": "PENDING_APPROVAL"}),
            "is PENDING_APPROVAL: Google has not approved it",
        ),
        (
            future_reservation(status={"procurement_status": "DECLINED"}),
            "is DECLINED: it delivers no capacity",
        ),
        (future_reservation(window={"start_time": ""}), "has no timeWindow.startTime"),
    ],
)
def test_a_reservation_that_cannot_serve_the_run_says_why(calendar, found, says):
    with pytest.raises(calendar_reservation.CalendarError, match=says):
        read_window(Compute(found), calendar)


def test_a_window_that_ended_or_is_too_short_to_save_once_is_a_problem(calendar):
    needed = calendar_reservation.first_save_seconds(calendar)
    window = calendar_reservation.Window("v6e-cal", 1000.0, 1000.0 + 2 * needed)
    assert calendar_reservation.window_problem(window, calendar, 0.0) is None
    assert calendar_reservation.window_problem(window, calendar, window.end).endswith("has ended")
    late = calendar_reservation.window_problem(window, calendar, window.end - needed / 2)
    assert late is not None and "less than the" in late and "to the first save" in late


def test_other_capacity_keeps_its_settings(tutorial_conf):
    s = load_settings(tutorial_conf)
    assert calendar_reservation.calendar_window(s, "gcp") is None
    assert calendar_reservation.delivered_settings(s, "gcp") is s
