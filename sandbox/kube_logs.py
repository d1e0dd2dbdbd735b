"""Container logs as the kubelet keeps and slices them (CRI records, RFC3339Nano timestamps)."""

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

_PIECES = re.compile(r"[^\n]*\n|[^\n]+")


def rfc3339nano(at: datetime) -> str:
    """Go's time.RFC3339Nano in UTC: fraction with trailing zeros trimmed, `Z` suffix."""
    at = at.astimezone(UTC)
    fraction = f"{at.microsecond * 1000:09d}".rstrip("0")
    return at.strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}" if fraction else "") + "Z"


def parse_since_time(value: str) -> datetime:
    """Parse `sinceTime` the way it reaches the kubelet: RFC3339, truncated to whole seconds.

    The API server re-encodes metav1.Time with second precision when it forwards the
    request, so a fractional sinceTime selects from the start of that second.
    """
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError(f"sinceTime without a zone: {value!r}")
    return parsed.astimezone(UTC).replace(microsecond=0)


@dataclass(frozen=True)
class LogRecord:
    """One CRI log record: a whole line ending in a newline, or a partial line."""

    at: datetime
    text: str


@dataclass
class ContainerLog:
    """The log of one container instance (a restart starts a new one)."""

    records: list[LogRecord] = field(default_factory=list)

    def append(self, text: str, at: datetime) -> None:
        for piece in _PIECES.findall(text):  # only "\n" ends a record; "\r" is content
            self.records.append(LogRecord(at, piece))

    def _starts_line(self, index: int) -> bool:
        return index == 0 or self.records[index - 1].text.endswith("\n")

    def select(self, since: datetime | None = None, tail_lines: int | None = None) -> list[int]:
        """Indexes of records to send: the last `tail_lines` lines, then those at/after since."""
        indexes = list(range(len(self.records)))
        if tail_lines is not None:
            starts = [i for i in indexes if self._starts_line(i)]
            first = starts[-tail_lines] if 0 < tail_lines <= len(starts) else 0
            indexes = indexes[first:] if tail_lines > 0 else []
        if since is not None:
            indexes = [i for i in indexes if self.records[i].at >= since]
        return indexes

    def render(self, indexes: list[int], timestamps: bool) -> bytes:
        """The bytes for those records; a timestamp prefixes only records that start a line."""
        out = []
        for i in indexes:
            record = self.records[i]
            if timestamps and self._starts_line(i):
                out.append(rfc3339nano(record.at) + " ")
            out.append(record.text)
        return "".join(out).encode()
