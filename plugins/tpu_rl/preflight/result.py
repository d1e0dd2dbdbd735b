"""One preflight check's outcome: its name, whether it passed, what was read, and the fix."""

from __future__ import annotations

from collections.abc import Callable, Iterable


class CheckResult:
    """A check's verdict; `fix` (the command or console step) matters only when it failed.

    A plain class: preflight modules are imported where a task runs, but the DAG's operator
    module names none of them (tests/dags/test_parse_imports.py)."""

    __slots__ = ("evidence", "fix", "name", "passed", "skipped", "transient")

    def __init__(
        self,
        name: str,
        passed: bool,
        evidence: str,
        fix: str = "",
        transient: bool = False,
        skipped: bool = False,
    ) -> None:
        self.name, self.passed, self.evidence, self.fix = name, passed, evidence, fix
        self.transient = transient  # a read that may succeed when tried again (5xx, network)
        self.skipped = skipped  # not run: what it needs failed (evidence says which); no fix

    @property
    def failed(self) -> bool:
        return not self.passed and not self.skipped

    def line(self) -> str:
        """`PASS name: evidence`, `SKIPPED name: why`, or `FAIL name: evidence -> fix: ...`."""
        word = "PASS" if self.passed else "SKIPPED" if self.skipped else "FAIL"
        head = f"{word} {self.name}: {self.evidence}"
        return f"{head} -> fix: {self.fix}" if self.failed else head

    def to_dict(self) -> dict[str, object]:
        fields = ("name", "passed", "evidence", "fix")
        return {field: getattr(self, field) for field in fields}


def passed(name: str, evidence: str) -> CheckResult:
    return CheckResult(name, True, evidence)


def failed(name: str, evidence: str, fix: str) -> CheckResult:
    return CheckResult(name, False, evidence, fix)


def skipped(name: str, why: str) -> CheckResult:
    return CheckResult(name, False, why, skipped=True)


def is_transient(err: BaseException) -> bool:
    """An error that trying again may clear: no HTTP answer, 429 or 5xx (Google's clients say
    `code` or `status`, the Kubernetes client `status`, ours ApiRefusal.status)."""
    status = getattr(err, "status", None) or getattr(err, "code", None)
    if not isinstance(status, int):
        return isinstance(err, (ConnectionError, TimeoutError, OSError)) or type(
            err
        ).__module__.startswith(("requests", "urllib3"))
    return status == 429 or status >= 500


def guarded(name: str, fix: str, check: Callable[[], Iterable[CheckResult]]) -> list[CheckResult]:
    """The check's results, or one failure carrying the error a read raised (a refusal of the
    API, a network error): one broken read never hides the other checks."""
    try:
        return list(check())
    except Exception as err:  # every API refusal is a finding, not a crash
        return [CheckResult(name, False, f"the read failed: {err}", fix, is_transient(err))]


def report_lines(results: Iterable[CheckResult], notes: Iterable[str] = ()) -> list[str]:
    """One line per check, then `notes` (lines other parts add: the cost estimate's), then the
    count."""
    results = list(results)
    passes = sum(r.passed for r in results)
    failures = sum(r.failed for r in results)
    tail = f"{passes} of {len(results)} checks passed"
    if failures or passes < len(results):
        tail += f", {failures} failed, {len(results) - passes - failures} skipped"
    return [r.line() for r in results] + list(notes) + [tail]
