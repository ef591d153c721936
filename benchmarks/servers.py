"""A throw-away PostgreSQL server on 127.0.0.1, for tests and benchmarks (Debian's postgresql, run as root)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path


def postgres_binaries() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin``, when PostgreSQL is installed and we may run it."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not found or os.geteuid() != 0 or shutil.which("runuser") is None:
        return None
    return found[-1].parent


@contextlib.contextmanager
def throwaway_postgres(bin_dir: Path, password: str | None = None) -> Iterator[str]:
    """Start a server in a fresh directory; yield its URL; stop it with ``pg_ctl stop`` and delete the directory.

    The server runs as user ``postgres`` on 127.0.0.1 only, with trust authentication, or (``password``)
    SCRAM authentication that asks user ``postgres`` for that password: the URL yielded holds none.
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

    def as_postgres(*command: str) -> None:
        given = {"PGPASSWORD": password} if password is not None else {}
        subprocess.run(
            ["runuser", "-u", "postgres", "--", *command], check=True, capture_output=True, timeout=60, env=os.environ | given
        )

    as_postgres(str(bin_dir / "initdb"), "-D", str(data / "db"), "-U", "postgres", *auth)
    # The server's output goes to a log file: a server holding our pipes would keep run() waiting.
    as_postgres(
        str(bin_dir / "pg_ctl"),
        "-D",
        str(data / "db"),
        "-l",
        str(data / "server.log"),
        "-o",
        f"-c listen_addresses=127.0.0.1 -p {port} -k {data} -c max_connections=200",
        "-w",
        "start",
    )
    try:
        as_postgres(str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "optuna")
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/optuna"
    finally:
        as_postgres(str(bin_dir / "pg_ctl"), "-D", str(data / "db"), "-m", "immediate", "stop")
        shutil.rmtree(data, ignore_errors=True)
