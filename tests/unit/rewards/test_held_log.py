"""What the reward trigger says of the lines it read, held until their position is saved
(tpu_rl.rewards.held_log)."""

from __future__ import annotations

from typing import Any

from tpu_rl.rewards.held_log import HeldLog


class Said:
    """A logger recording each message as said."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def debug(self, message: str, *args: Any) -> None:
        self.lines.append(("debug", message % args))

    def info(self, message: str, *args: Any) -> None:
        self.lines.append(("info", message % args))

    def warning(self, message: str, *args: Any) -> None:
        self.lines.append(("warning", message % args))


def test_without_holding_each_message_is_said_at_once():
    said = Said()
    log = HeldLog(said, hold=False)
    log.info("step %d", 3)
    log.warning("slow")
    assert said.lines == [("info", "step 3"), ("warning", "slow")] and log.mark() == 0


def test_held_messages_are_said_in_order_once_told():
    said = Said()
    log = HeldLog(said, hold=True)
    log.debug("a")
    log.info("b %s", "x")
    assert said.lines == [] and log.mark() == 2
    log.tell()
    assert said.lines == [("debug", "a"), ("info", "b x")]
    log.tell()
    assert len(said.lines) == 2  # said once


def test_telling_up_to_a_mark_keeps_the_later_messages():
    said = Said()
    log = HeldLog(said, hold=True)
    log.info("saved")
    mark = log.mark()
    log.warning("read after the save")
    log.tell(mark)
    assert said.lines == [("info", "saved")] and log.mark() == 1
    log.tell()
    assert said.lines[-1] == ("warning", "read after the save")
