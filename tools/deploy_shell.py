"""How `make deploy-composer` runs commands: each printed first as `+ argv` (quoted as a shell
would need), none in a dry run, and a failure turned into one line of what failed."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# How gcloud says an object is missing: NOT_FOUND (Artifact Registry), "matched no objects"
# (gcloud storage).
MISSING = re.compile(r"NOT_FOUND|matched no objects", re.IGNORECASE)


class DeployError(Exception):
    """Stops the deploy before the next step, with what to do."""


class Shell:
    """Runs commands in order, each printed first as `+ argv`; in a dry run it runs none."""

    def __init__(self, dry_run: bool):
        self.dry_run = dry_run

    def show(self, argv: list[str], note: str = "") -> None:
        line = "+ " + " ".join(quoted(word) for word in argv)
        print(line + (f"   # {note}" if note else ""), flush=True)

    def run(self, argv: list[str], *, env: dict[str, str] | None = None, note: str = "") -> None:
        self.show(argv, note)
        if self.dry_run:
            return
        try:
            done = subprocess.run(argv, cwd=ROOT, env={**os.environ, **(env or {})}, check=False)
        except FileNotFoundError:
            raise DeployError(f"{argv[0]} is not on PATH") from None
        if done.returncode != 0:
            raise DeployError(f"{argv[0]} {argv[1]} failed (exit {done.returncode}); see above")

    def read(self, argv: list[str], placeholder: str) -> str:
        """The command's output (the placeholder in a dry run); gcloud is checked on PATH by the
        first of these, the environment's describe."""
        self.show(argv)
        if self.dry_run:
            return placeholder
        try:
            done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
        except FileNotFoundError:
            raise DeployError(f"{argv[0]} is not on PATH") from None
        if done.returncode != 0:
            raise DeployError(f"{' '.join(argv[:4])} failed: {done.stderr.strip()}")
        return done.stdout

    def exists(self, argv: list[str]) -> str | None:
        """The output of a command that fails when its object is missing (None then, and
        always in a dry run: a first deploy); any other failure stops the deploy, so that no
        error (a permission, say) is taken for "missing" and overwrites what is there."""
        self.show(argv)
        if self.dry_run:
            return None
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
        if done.returncode == 0:
            return done.stdout
        if MISSING.search(done.stderr):
            return None
        raise DeployError(f"{' '.join(argv[:4])} failed: {done.stderr.strip()}")


def quoted(word: str) -> str:
    safe = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:=@%+,-")
    return word if word and set(word) <= safe else "'" + word.replace("'", "'\\''") + "'"
