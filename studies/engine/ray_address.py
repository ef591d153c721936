"""The Ray a run joins or starts, settled before Ray is imported: an address checked (it answers, this driver
may join), and the variables Ray reads once, when imported. Nothing here imports Ray or torch: the command
line runs it first."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from studies.engine.errors import StudyOptionError

LOCAL_ADDRESS = "local"  # --address local (or RAY_ADDRESS=local): Ray starts here for this run, as with no address
# Ray reads this when imported. Off, a node takes the loopback address as its own, and the
# GCS, raylet, workers and agents it starts then listen on loopback alone (checked with
# Ray 2.60; `_node_ip_address="127.0.0.1"` is turned back into the machine's address).
LOCAL_ONLY_VARIABLE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def prepare_ray_environment(address: str | None) -> None:
    """Set what Ray reads once, when imported, for the Ray this run will join or start.

    A local run (no ``--address``, no ``RAY_ADDRESS``, or either ``local``) keeps its Ray on loopback; joining a
    cluster by ``host:port`` needs Ray's token mode when a token exists (``ray start --head``
    writes ``~/.ray/auth_token``). A variable the user set is left alone, and so is a cluster's
    binding: its operator configured it.

    Args:
        address: the ``--address`` option, if given.
    """
    if "ray" in sys.modules:  # too late for this process, and Ray processes it starts later would inherit a mismatch
        return
    address = address or os.environ.get("RAY_ADDRESS")
    if not address or address == LOCAL_ADDRESS:  # Ray starts here, for this run: on loopback
        os.environ.setdefault(LOCAL_ONLY_VARIABLE, "0")
    elif address != "auto" and "RAY_AUTH_MODE" not in os.environ and (Path.home() / ".ray" / "auth_token").is_file():
        os.environ["RAY_AUTH_MODE"] = "token"


def check_ray_address(address: str) -> None:
    """Fail fast, naming the address, when a Ray address is none (``host:port``, ``ray://host:port``)
    or does not answer; ``auto`` is the cluster this machine's last ``ray start`` recorded
    (``ray_current_cluster`` in Ray's temporary folder).

    Raises:
        StudyOptionError: not a Ray address, no cluster recorded for ``auto``, or nothing listens there
            (checked within 5 seconds).
    """
    shown = joined = address  # the probe joins as the run will: ray.init("auto") finds the cluster's token itself
    if address == "auto":
        recorded = _ray_temp_dir() / "ray_current_cluster"
        try:
            address = recorded.read_text().strip()
        except OSError:
            raise StudyOptionError(
                f"--address auto: no Ray cluster was started on this machine ({recorded} does not exist); start its head "
                "with `ray start --head`, give its host:port, or drop --address to run on a Ray of the run's own"
            ) from None
        shown = f"auto ({address}, recorded in {recorded})"
    scheme, _, rest = address.rpartition("://")
    host, separator, port = rest.rpartition(":")
    if scheme not in ("", "ray") or not separator or not host or not port.isdigit():
        raise StudyOptionError(
            f"--address {shown} is not a Ray address: give the head's host:port (e.g. 127.0.0.1:6379), "
            "ray://host:port (Ray Client), auto (this machine's last `ray start`) or local"
            + ("; an http:// address is a dashboard's, which `ray job submit` takes" if scheme.startswith("http") else "")
        )
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as error:
        raise StudyOptionError(
            f"cannot reach the Ray cluster at --address {shown} ({error.strerror or error}); start its head with "
            "`ray start --head`, or check --address / RAY_ADDRESS"
        ) from None
    check_ray_joins(joined, shown, loopback=host in ("localhost", "::1") or host.startswith("127."))


JOIN_CHECK_S = 30  # a driver joins a live cluster in seconds; Ray itself retries a refusing one for minutes

# Joined and left at once by a separate process: Ray's C++ client blocks this one while it retries, and a run
# must be refused before its store is written.
_JOIN = "import logging, sys, ray; ray.init(address=sys.argv[1], logging_level=logging.ERROR, log_to_driver=False)"


def check_ray_joins(address: str, shown: str, *, loopback: bool) -> None:
    """Fail fast when something answers at a Ray address but this driver cannot join it: the cluster refuses
    its token (or its lack of one), the port is another server's, Ray's versions differ, or the head listens
    where this driver does not look (Ray turns a loopback address into this machine's).

    Args:
        address: The address to join, as the run passes it to ``ray.init``.
        shown: The address as the message names it.
        loopback: ``address`` names this machine by a loopback name.

    Raises:
        StudyOptionError: the join failed or took more than ``JOIN_CHECK_S`` seconds; Ray's reason is named.
    """
    try:
        joined = subprocess.run(
            [sys.executable, "-c", _JOIN, address], capture_output=True, text=True, timeout=JOIN_CHECK_S, check=False
        )
    except subprocess.TimeoutExpired:
        hint = (
            f"; a head started with {LOCAL_ONLY_VARIABLE}=0 listens on loopback alone: start this driver with it too"
            if loopback and os.environ.get(LOCAL_ONLY_VARIABLE) != "0"
            else ""
        )
        raise StudyOptionError(
            f"something answers at --address {shown} but did not let this driver join within {JOIN_CHECK_S} s: give "
            f"a Ray head's address (the port of `ray start --head --port`){hint}"
        ) from None
    if joined.returncode == 0:
        return
    lines = [line.strip() for line in joined.stderr.splitlines() if line.strip()]
    if any("InvalidAuthToken" in line or "Unauthenticated" in line for line in lines):
        reason = (
            "it refused this driver's token (or its lack of one): set RAY_AUTH_MODE=token and give the cluster's token "
            "(copy the head's ~/.ray/auth_token here, or set RAY_AUTH_TOKEN)"
        )
    else:
        reason = (lines or ["Ray gave no reason"])[-1][:300]
    raise StudyOptionError(f"cannot join the Ray cluster at --address {shown}: {reason}")


def _ray_temp_dir() -> Path:
    """Ray's temporary folder, as Ray finds it: ``$RAY_TMPDIR/ray``, else ``$TMPDIR/ray`` (Linux), else ``/tmp/ray``."""
    base = os.environ.get("RAY_TMPDIR") or (os.environ.get("TMPDIR") if sys.platform.startswith("linux") else None) or "/tmp"
    return Path(base) / "ray"
