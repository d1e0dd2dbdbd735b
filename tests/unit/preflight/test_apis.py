"""tpu_rl.preflight.apis: the Google APIs a run calls are enabled in its project (one batchGet)."""

from __future__ import annotations

from typing import Any

from tpu_rl.preflight.apis import CLOUD_QUOTAS, NEEDED_APIS, SERVICE_USAGE, check_apis, needed_apis
from tpu_rl.settings.run_settings import load_settings


class ServiceUsage:
    """services.batchGet answering each named service with its state in `states`."""

    def __init__(self, **states: str) -> None:
        self.states = states
        self.asked: list[tuple[str, str, Any]] = []

    def get(self, host: str, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.asked.append((host, path, params))
        names = (params or {})["names"]
        return {
            "services": [
                {"name": name, "state": self.states.get(name.rsplit("/", 1)[-1], "DISABLED")}
                for name in names
            ]
        }


def enabled(*services: str) -> ServiceUsage:
    return ServiceUsage(**dict.fromkeys(services, "ENABLED"))


def test_a_reservation_run_needs_no_quota_api_and_a_spot_rung_does(tutorial_conf):
    assert needed_apis(load_settings(tutorial_conf)) == NEEDED_APIS
    spot = load_settings({**tutorial_conf, "capacity": "spot", "reservation": ""})
    assert needed_apis(spot) == (*NEEDED_APIS, CLOUD_QUOTAS)


def test_every_needed_api_enabled_passes_in_one_read(tutorial_conf):
    s = load_settings(tutorial_conf)
    api = enabled(*NEEDED_APIS)
    [result] = check_apis(api, s)
    assert result.passed and result.evidence.endswith(f"enabled in {s.project}")
    [(host, path, params)] = api.asked
    assert (host, path) == (SERVICE_USAGE, f"/v1/projects/{s.project}/services:batchGet")
    assert params == {"names": [f"projects/{s.project}/services/{a}" for a in NEEDED_APIS]}


def test_the_apis_not_enabled_are_named_with_the_command_that_enables_them(tutorial_conf):
    s = load_settings(tutorial_conf)
    [result] = check_apis(enabled(*NEEDED_APIS[2:]), s)
    first, second = NEEDED_APIS[:2]
    assert not result.passed
    assert result.evidence == f"not enabled in {s.project}: {first}, {second}"
    assert result.fix == f"gcloud services enable {first} {second} --project={s.project}"
