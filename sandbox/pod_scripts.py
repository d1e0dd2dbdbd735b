"""A pod's script in the sandbox: the steps a simulated container runs (log, sleep, exit, run
forever, call a side effect, attach a real process), the pod it runs as, and how a side effect
ends the container. The controller runs them; the workloads and fault models write them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class PodInfo:
    """What a script may depend on: which pod of which Job, and which attempt."""

    namespace: str
    pod: str
    job: str
    index: int | None
    attempt: int
    labels: dict[str, str]


@dataclass(frozen=True)
class Step:
    """One scripted action of a container; build them with log/sleep/exit/run_forever/call."""

    action: str
    text: str | Callable[[], str] = ""
    seconds: float = 0.0
    code: int = 0
    fn: Callable[[PodInfo], None] | None = None
    start: Callable[[PodInfo], AttachedProcess] | None = None


def log(text: str | Callable[[], str]) -> Step:
    """Print text (stdout and stderr merged, as in the pod log); no newline is added.

    A callable is rendered when the step runs (for lines that carry their own clock time).
    """
    return Step("log", text=text)


def sleep(seconds: float) -> Step:
    return Step("sleep", seconds=seconds)


def exit(code: int = 0) -> Step:
    return Step("exit", code=code)


def run_forever(check: Callable[[PodInfo], None] | None = None, every_s: float = 10.0) -> Step:
    """Keep running until deleted (a server); `check` runs every `every_s` and may raise
    ContainerExit (e.g. a Pathways worker that lost a peer host)."""
    return Step("forever", seconds=every_s, fn=check)


def call(fn: Callable[[PodInfo], None]) -> Step:
    """Run a side effect, e.g. write checkpoint objects to the GCS emulator.

    The side effect may raise ContainerExit to end the container (e.g. a 403 from GCS).
    """
    return Step("call", fn=fn)


class AttachedProcess(Protocol):
    """A real process a container runs (sandbox.real_trainer.process): the controller pumps it
    each pass and kills it when the pod goes."""

    def pump(self) -> tuple[str, int | None]:
        """The output since the last pump, and the exit code once the process ended and all
        its output (and side effects) were delivered; may raise ContainerExit."""
        ...

    def kill(self) -> None:
        """SIGKILL the process (stopped or not) and reap it; idempotent."""
        ...


def attach(start: Callable[[PodInfo], AttachedProcess]) -> Step:
    """Run a real process as the container's next steps: `start` launches it (and may raise
    ContainerExit), its output goes to the pod log as it comes; exit code 0 goes on with the
    script, another ends the container with that code. A deleted pod kills it."""
    return Step("attach", start=start)


class ContainerExit(Exception):
    """Raised by a `call` step (or an attached process's start or pump): the container prints
    `output` and exits with `code`."""

    def __init__(self, code: int, output: str) -> None:
        super().__init__(output)
        self.code, self.output = code, output


@dataclass(frozen=True)
class PodScript:
    """Steps for one container (default: the pod's first); a script without exit ends 0."""

    steps: tuple[Step, ...] | list[Step]
    container: str | None = None


ScriptSource = PodScript | Callable[[PodInfo], PodScript]
