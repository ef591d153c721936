"""A throw-away PostgreSQL server on 127.0.0.1, for tests and benchmarks (Debian's postgresql, run as root)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


def postgres_binaries() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin``, when PostgreSQL is installed and we may run it."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not found or os.geteuid() != 0 or shutil.which("runuser") is None:
        return None
    return found[-1].parent


@dataclass(frozen=True)
class PostgresServer:
    """A throw-away server's handle: its URL, and the way to stop and start it again (same port, same data).

    Attributes:
        url: ``postgresql+psycopg://postgres@127.0.0.1:<port>/optuna`` (no password in it).
    """

    url: str
    bin_dir: Path
    data: Path
    port: int
    password: str | None

    def as_postgres(self, *command: str) -> None:
        """Run a command as user ``postgres`` (the server refuses root)."""
        given = {"PGPASSWORD": self.password} if self.password is not None else {}
        subprocess.run(
            ["runuser", "-u", "postgres", "--", *command], check=True, capture_output=True, timeout=60, env=os.environ | given
        )

    def start(self) -> None:
        """Start the server (its output goes to a log file: a server holding our pipes would keep run() waiting)."""
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.data} -c max_connections=200"
        pg_ctl = str(self.bin_dir / "pg_ctl")
        self.as_postgres(pg_ctl, "-D", str(self.data / "db"), "-l", str(self.data / "server.log"), "-o", options, "-w", "start")

    def stop(self, mode: str = "immediate") -> None:
        """Stop the server: ``immediate`` (no clean-up), ``fast`` (ends every session, as an administrator's shutdown)."""
        self.as_postgres(str(self.bin_dir / "pg_ctl"), "-D", str(self.data / "db"), "-m", mode, "stop")


@contextlib.contextmanager
def throwaway_postgres_server(bin_dir: Path, password: str | None = None) -> Iterator[PostgresServer]:
    """Start a server in a fresh directory; yield its handle; stop it and delete the directory.

    The server runs as user ``postgres`` on 127.0.0.1 only, with trust authentication, or (``password``)
    SCRAM authentication that asks user ``postgres`` for that password: the URL holds none.
    """
    data = Path(tempfile.mkdtemp(prefix="damcha-pg-", dir="/tmp"))
    shutil.chown(data, "postgres", "postgres")
    auth = ["--auth=trust"]
    if password is not None:
        secret = data / "password"
        secret.write_text(password + "\n")
        shutil.chown(secret, "postgres", "postgres")
        auth = ["--auth=scram-sha-256", f"--pwfile={secret}"]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = PostgresServer(f"postgresql+psycopg://postgres@127.0.0.1:{port}/optuna", bin_dir, data, port, password)
    server.as_postgres(str(bin_dir / "initdb"), "-D", str(data / "db"), "-U", "postgres", *auth)
    server.start()
    try:
        server.as_postgres(str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "optuna")
        yield server
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):  # a test may have stopped it
            server.stop()
        shutil.rmtree(data, ignore_errors=True)


@contextlib.contextmanager
def throwaway_postgres(bin_dir: Path, password: str | None = None) -> Iterator[str]:
    """``throwaway_postgres_server``'s URL alone."""
    with throwaway_postgres_server(bin_dir, password) as server:
        yield server.url
