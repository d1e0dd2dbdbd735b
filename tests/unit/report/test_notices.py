"""tpu_rl.report.notices: every channel tried at once, a failed or silent one once more, and
what still failed named with its reason."""

from __future__ import annotations

import logging
import threading

from tpu_rl.report import notices
from tpu_rl.report.notices import NOTICE_TRIES, send_notices

LOG = logging.getLogger("test.notices")


class Channel:
    """A notifier whose first `failures` tries raise."""

    def __init__(self, failures: int = 0) -> None:
        self.failures, self.tries = failures, 0

    def notify(self, context: object) -> None:
        self.tries += 1
        if self.tries <= self.failures:
            raise ConnectionError(f"refused\ntry {self.tries}")


class Silent:
    """A notifier that never answers until released."""

    def __init__(self) -> None:
        self.released = threading.Event()

    def notify(self, context: object) -> None:
        self.released.wait()


def test_a_channel_that_answers_is_tried_once_and_a_failed_one_once_more():
    fine, flaky = Channel(), Channel(failures=1)
    assert send_notices([fine, flaky], {}, LOG) == []
    assert (fine.tries, flaky.tries) == (1, 2)


def test_a_channel_that_keeps_failing_is_named_with_the_first_line_of_its_error(caplog):
    broken = Channel(failures=NOTICE_TRIES)
    assert send_notices([broken], {}, LOG) == ["Channel: refused"]
    assert broken.tries == NOTICE_TRIES
    assert "via Channel: refused" in caplog.text


def test_a_channel_that_does_not_answer_is_named_and_does_not_hold_the_others(monkeypatch):
    monkeypatch.setattr(notices, "NOTICE_TIMEOUT_SECONDS", 0.01)
    silent, fine = Silent(), Channel()
    try:
        assert send_notices([silent, fine], {}, LOG) == ["Silent: no answer within 0.01 s"]
    finally:
        silent.released.set()
    assert fine.tries == 1
