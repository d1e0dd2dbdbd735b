"""What the reward trigger says about the log lines it read, held until the position past
those lines is saved on the Job: a triggerer killed before that save has said nothing of
them, and the trigger rebuilt in its place, which reads them again, says it once."""

from __future__ import annotations

from typing import Any, Protocol


class Log(Protocol):
    """What the wait says lines with: a `logging.Logger`, Airflow's task or trigger logger
    (structlog's, airflow.sdk's `Logger`), or a HeldLog."""

    def debug(self, message: str, /, *args: Any) -> Any: ...

    def info(self, message: str, /, *args: Any) -> Any: ...

    def warning(self, message: str, /, *args: Any) -> Any: ...


class HeldLog:
    """A logger's `debug`, `info` and `warning`, kept until `tell` (`hold=False`: said at once)."""

    def __init__(self, target: Log, *, hold: bool) -> None:
        self.target = target
        self.hold = hold
        self._held: list[tuple[str, str, tuple[Any, ...]]] = []

    def debug(self, message: str, *args: Any) -> None:
        self._say("debug", message, args)

    def info(self, message: str, *args: Any) -> None:
        self._say("info", message, args)

    def warning(self, message: str, *args: Any) -> None:
        self._say("warning", message, args)

    def mark(self) -> int:
        """How many messages are held now: `tell(mark)` says these and keeps later ones."""
        return len(self._held)

    def tell(self, upto: int | None = None) -> None:
        """Say the first `upto` held messages (all by default), in order."""
        upto = len(self._held) if upto is None else upto
        told, self._held = self._held[:upto], self._held[upto:]
        for level, message, args in told:
            getattr(self.target, level)(message, *args)

    def _say(self, level: str, message: str, args: tuple[Any, ...]) -> None:
        if self.hold:
            self._held.append((level, message, args))
        else:
            getattr(self.target, level)(message, *args)
