"""One preflight check's outcome: its name, whether it passed, what was read, and the fix."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tpu_rl.token_masking import mask_credentials

# What a request an HTTP library refused to send needs: no try clears it.
UNSENT_FIX = (
    "correct the value the request was made of (a connection's password or token, "
    "TPU_RL_API_ENDPOINTS, a setting naming a repository or image), then run preflight again"
)


@dataclass(frozen=True, slots=True)
class CheckResult:
    """A check's verdict; `fix` (the command or console step) matters only when it failed.
    The evidence is kept with every credential in it masked (tpu_rl.token_masking): it quotes
    errors and answers, and is printed, logged and returned."""

    name: str
    passed: bool
    evidence: str
    fix: str = ""
    transient: bool = False  # a read that may succeed when tried again (5xx, network)
    skipped: bool = False  # not run: what it needs failed (evidence says which); no fix

    def __post_init__(self) -> None:
        # frozen: the masked evidence is set the way dataclasses' own __init__ sets fields
        object.__setattr__(self, "evidence", mask_credentials(self.evidence))

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
    `code` or `status`, the Kubernetes client `status`, ours ApiRefusal.status); never a
    request the HTTP library refused to send (is_unsent)."""
    status = getattr(err, "status", None) or getattr(err, "code", None)
    if not isinstance(status, int):
        return not is_unsent(err) and (
            isinstance(err, (ConnectionError, TimeoutError, OSError))
            or type(err).__module__.startswith(("requests", "urllib3"))
        )
    return status == 429 or status >= 500


def is_unsent(err: BaseException) -> bool:
    """A request an HTTP library refused to make from a value of ours (a header value holding
    a newline, a URL without a scheme or host, a body it cannot encode): a configuration error.
    requests raises these as IOErrors, like its network errors (requests/exceptions.py, 2.34:
    RequestException(IOError); InvalidHeader, InvalidURL, MissingSchema, InvalidSchema,
    URLRequired, InvalidJSONError, StreamConsumedError, UnrewindableBodyError, where
    JSONDecodeError, an InvalidJSONError, is an answer's body instead); urllib3 as
    LocationValueError (urllib3/exceptions.py)."""
    from requests import exceptions as rq
    from urllib3.exceptions import LocationValueError

    local = (
        rq.InvalidHeader,
        rq.InvalidURL,
        rq.MissingSchema,
        rq.InvalidSchema,
        rq.URLRequired,
        rq.InvalidJSONError,
        rq.StreamConsumedError,
        rq.UnrewindableBodyError,
        LocationValueError,
    )
    return isinstance(err, local) and not isinstance(err, rq.JSONDecodeError)


def guarded(name: str, fix: str, check: Callable[[], Iterable[CheckResult]]) -> list[CheckResult]:
    """The check's results, or one failure carrying the error a read raised (a refusal of the
    API, a network error; its text masked by CheckResult): one broken read never hides the
    other checks. A request never sent (is_unsent) gets UNSENT_FIX, not `fix`."""
    try:
        return list(check())
    except Exception as err:  # every API refusal is a finding, not a crash
        unsent = is_unsent(err)
        return [
            CheckResult(
                name,
                False,
                f"the read failed: {type(err).__name__ + ': ' if unsent else ''}{err}",
                UNSENT_FIX if unsent else fix,
                is_transient(err),
            )
        ]


def report_lines(results: Iterable[CheckResult], notes: Iterable[str] = ()) -> list[str]:
    """The verdict (the count) first, then one line per check, then `notes` (lines other parts
    add: the cost estimate's, whose price lists would bury a verdict after them)."""
    results = list(results)
    passes = sum(r.passed for r in results)
    failures = sum(r.failed for r in results)
    verdict = f"{passes} of {len(results)} checks passed"
    if passes < len(results):
        verdict += f", {failures} failed, {len(results) - passes - failures} skipped"
    return [verdict, *(r.line() for r in results), *notes]
