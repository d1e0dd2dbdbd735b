"""Sending the run's notices without letting a channel hold the run: every try of every channel
runs in a daemon thread with a deadline, a channel that failed or did not answer is tried once
more, and what still failed is logged with its reason.

Why threads: the SMTP hook takes its timeout and retries from the connection's extras (30 s x 6
tries by default: SmtpHook.timeout, smtp_retry_limit), which SmtpNotifier cannot override.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from tpu_rl.report.failures import NOTICE_TIMEOUT_SECONDS, first_line

NOTICE_TRIES = 2


class _Try(threading.Thread):
    """One try of one channel; `error` says why it failed, if it did."""

    def __init__(self, channel: Any, context: Any) -> None:
        super().__init__(name=f"notice-{type(channel).__name__}", daemon=True)
        self.channel, self.context = channel, context
        self.error: str | None = None

    def run(self) -> None:
        try:
            # notify(), not __call__: the message is plain text, never a Jinja template
            self.channel.notify(self.context)
        except Exception as err:  # any failure of a channel is reported, never raised
            self.error = first_line(err)


def send_notices(channels: Sequence[Any], context: Any, log: Any) -> list[str]:
    """Sends to every channel at once; returns (and logs) why each channel that failed did."""
    pending, why = list(channels), {}
    for _ in range(NOTICE_TRIES):
        tries = [_Try(channel, context) for channel in pending]
        for attempt in tries:
            attempt.start()
        for attempt in tries:
            attempt.join(NOTICE_TIMEOUT_SECONDS)
        pending = []
        for attempt in tries:
            if attempt.is_alive() or attempt.error:
                pending.append(attempt.channel)
                why[id(attempt.channel)] = attempt.error or (
                    f"no answer within {NOTICE_TIMEOUT_SECONDS} s"
                )
        if not pending:
            break
    failed = [f"{type(c).__name__}: {why[id(c)]}" for c in pending]
    for reason in failed:
        log.warning("Could not send the notification (tried %d times) via %s", NOTICE_TRIES, reason)
    return failed
