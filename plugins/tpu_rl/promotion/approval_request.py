"""What the approval request says: its subject, text and the run's note, from the run and the
comparison (tpu_rl.promotion.approval_text); tpu_rl.promotion.approval_notice sends it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tpu_rl.promotion.approval_text import ApprovalCase


@dataclass(frozen=True)
class ApprovalRequest:
    """A notice asking for a decision on a run's export."""

    dag_id: str
    run_id: str
    url: str
    case: ApprovalCase | None = None

    @property
    def subject(self) -> str:
        return f"[{self.dag_id}] approval needed to promote: {self.run_id}"

    @property
    def summary(self) -> list[str]:
        """The comparison in short (tpu_rl.promotion.approval_text.approval_summary)."""
        from tpu_rl.promotion.approval_text import approval_summary

        return approval_summary(self.case) if self.case else []

    @property
    def text(self) -> str:
        export = f"export: {self.case.export.export_uri}" if self.case else "export: n/a"
        return "\n".join([self.subject, export, *self.summary, "approve or reject: " + self.url])

    @property
    def note(self) -> str:
        """The run's note while the approval waits (Markdown): the link first, then the
        comparison in short, within the note's limit (approval_text.summary_within: the
        verdicts, the cost and what no answer does whole, the metrics that fit)."""
        from tpu_rl.promotion.approval_text import summary_within
        from tpu_rl.report.run_note import NOTE_LIMIT

        first = f"**Awaiting approval**: [Approve or reject]({self.url})"
        room = NOTE_LIMIT - len(first) - 2
        lines = [first, *(summary_within(self.case, room) if self.case else [])]
        return "\n\n".join(lines)[:NOTE_LIMIT]
