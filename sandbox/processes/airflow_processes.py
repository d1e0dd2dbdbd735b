"""Airflow as it runs in production: api-server, scheduler (LocalExecutor), dag-processor and
triggerer as separate OS processes, each logging to its own file.

Every process (and whatever it forks or spawns, e.g. task processes in their own process groups,
gcluster in its own session) carries HARNESS_MARK in its environment, so `stop_all` finds and
kills them all, orphans included, even when a test failed half-way.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psutil

HARNESS_MARK = "TPU_RL_PROCESS_HARNESS"
COMMANDS = {
    "api-server": ["api-server"],
    "scheduler": ["scheduler"],
    "dag-processor": ["dag-processor"],
    "triggerer": ["triggerer"],
}


@dataclass
class AirflowProcesses:
    """The four processes of one deployment, started and restarted by name; `own_env` holds what
    one process's environment has in place of `env`'s (kept across its restarts)."""

    env: dict[str, str]
    log_dir: Path
    mark: str = field(default_factory=lambda: uuid.uuid4().hex)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    starts: dict[str, int] = field(default_factory=dict)
    own_env: dict[str, dict[str, str]] = field(default_factory=dict)

    def airflow(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        """A one-off `airflow` CLI call (e.g. db migrate) in this deployment's environment."""
        done = subprocess.run(
            ["airflow", *args],
            env={**self.env, HARNESS_MARK: self.mark},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        (self.log_dir / f"airflow-{args[0]}.log").write_text(done.stdout + done.stderr)
        if done.returncode:
            raise RuntimeError(f"airflow {' '.join(args)} failed:\n{done.stderr[-3000:]}")
        return done

    def start(self, name: str) -> None:
        self.starts[name] = self.starts.get(name, 0) + 1
        log = (self.log_dir / f"{name}.{self.starts[name]}.log").open("ab")
        self.procs[name] = subprocess.Popen(
            ["airflow", *COMMANDS[name]],
            env={**self.env, **self.own_env.get(name, {}), HARNESS_MARK: self.mark},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()

    def kill(self, name: str, sig: signal.Signals = signal.SIGKILL) -> None:
        """Signal the process's whole group (a SIGKILL leaves its task processes orphaned)."""
        proc = self.procs[name]
        os.killpg(proc.pid, sig)
        proc.wait(60)

    def stop(self, *names: str, grace_s: float = 20) -> None:
        """SIGTERM to the processes as a service manager sends it, then SIGKILL to their groups
        (together: their grace periods overlap)."""
        for name in names:
            if self.procs[name].poll() is None:
                self.procs[name].send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for name in names:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.procs[name].wait(max(0.1, deadline - time.monotonic()))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.procs[name].pid, signal.SIGKILL)
            self.procs[name].wait(10)

    def restart(self, *names: str) -> None:
        self.stop(*names)
        for name in names:
            self.start(name)

    def alive(self, name: str) -> bool:
        return self.procs[name].poll() is None

    def dead(self) -> list[str]:
        """The started processes that exited."""
        return [name for name in self.procs if not self.alive(name)]

    def marked(self) -> list[psutil.Process]:
        """Every live process started by this deployment, however deep or orphaned."""
        found = []
        for proc in psutil.process_iter():
            try:
                if proc.environ().get(HARNESS_MARK) == self.mark:
                    found.append(proc)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        return found

    def stop_all(self) -> None:
        """SIGTERM every process group at once, then SIGKILL whatever of ours is still alive."""
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while any(p.poll() is None for p in self.procs.values()) and time.monotonic() < deadline:
            time.sleep(0.2)
        for _ in range(5):
            left = self.marked()
            if not left:
                return
            for proc in left:
                with contextlib.suppress(psutil.NoSuchProcess):
                    proc.kill()
            psutil.wait_procs(left, timeout=2)
        for proc in self.procs.values():
            proc.poll()
