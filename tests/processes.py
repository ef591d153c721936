"""The processes a command started, and the sockets they listen on, read from Linux's ``/proc``."""

from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

LISTEN = "0A"  # the TCP state in /proc/net/tcp*


def _command_line(process: Path) -> str:
    """A process's command line (``/proc/<pid>``), its arguments joined by spaces.

    Raises:
        OSError: the process is gone.
    """
    return (process / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")


def still_runs(pid: int, command: str) -> bool:
    """Whether ``pid`` still runs ``command`` (not a new process that took its number, nor a zombie)."""
    try:
        return _command_line(Path(f"/proc/{pid}")) == command
    except OSError:
        return False


def descendants(root: int) -> list[tuple[int, str]]:
    """``(pid, command line)`` of every process below ``root``."""
    parents, commands = {}, {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                commands[int(entry.name)] = _command_line(entry)
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent:
                found.append((pid, commands.get(pid, "")))
                frontier.append(pid)
    return found


def wait_for_training_worker(driver: subprocess.Popen, timeout: float = 120) -> int:
    """The pid of the first trial's Ray worker below ``driver``, once one trains."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        workers = [pid for pid, command in descendants(driver.pid) if command.startswith("ray::ImplicitFunc.train")]
        if workers:
            return workers[0]
        assert driver.poll() is None, driver.stdout.read()
        time.sleep(0.2)
    raise AssertionError("no trial worker appeared")


def kill_tree(driver: subprocess.Popen) -> None:
    """SIGKILL the driver and every process it started (its local Ray), by their pids."""
    pids = [pid for pid, _ in descendants(driver.pid)]
    for pid in [driver.pid, *pids]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    driver.wait(timeout=30)


@dataclass(frozen=True)
class Listener:
    """A TCP socket a process listens on."""

    command: str
    address: ipaddress.IPv4Address | ipaddress.IPv6Address
    port: int

    @property
    def on_loopback(self) -> bool:
        """True when only this machine can connect (127.0.0.0/8, ::1, or IPv4-mapped loopback)."""
        mapped = getattr(self.address, "ipv4_mapped", None)
        return self.address.is_loopback or bool(mapped and mapped.is_loopback)


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address as /proc/net/tcp* writes it: 32-bit words in host (little-endian) order."""
    raw = bytes.fromhex(hex_address)
    in_network_order = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(in_network_order)


def listeners(pids: list[tuple[int, str]]) -> list[Listener]:
    """Every TCP socket that the processes ``(pid, command line)`` listen on."""
    owner = {}  # socket inode -> command line
    for pid, command in pids:
        try:
            links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
        except OSError:  # gone, or not ours
            continue
        owner.update({link[len("socket:[") : -1]: command for link in links if link.startswith("socket:[")})
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == LISTEN and inode in owner:
                hex_address, hex_port = local.split(":")
                found.append(Listener(owner[inode], _address(hex_address), int(hex_port, 16)))
    return found


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports nothing listens on now."""
    import contextlib
    import socket

    with contextlib.ExitStack() as probes:
        sockets = [probes.enter_context(socket.socket()) for _ in range(count)]
        for probe in sockets:
            probe.bind(("", 0))
        return [probe.getsockname()[1] for probe in sockets]


def start_ray_node(
    folder: str,
    log: Path,
    *,
    head: str | None = None,
    cpus: int = 2,
    jobs: bool = False,
    environment: dict[str, str] | None = None,
) -> dict[str, str]:
    """A Ray node started by ``ray start`` in a temporary folder of its own (``RAY_TMPDIR``: its session,
    sockets and logs, and a head's address file), on free ports, so that its processes are the ones naming
    ``folder`` (``stop_ray_node``): never found through ``/tmp/ray``, never stopped by ``ray stop``.

    Args:
        folder: The node's own temporary folder (short: Ray's socket paths must fit 107 bytes).
        log: Where ``ray start`` writes (a file, not a pipe: the daemons it starts keep writing).
        head: The head's address for a worker node; None starts a head.
        cpus: The node's CPUs.
        jobs: Give the caller a head's job server URL (the dashboard, on a free port, runs on every head).
        environment: Variables the node's processes get besides the caller's (its jobs' drivers inherit them).

    Returns:
        ``address`` (the head's ``HOST:PORT``), ``jobs`` (its job server's URL, for a head with jobs) and
        ``marker``: a text only this node's raylet has on its command line (its metrics port). A worker
        node on the head's machine shares the head's session folder, so its processes name ``folder``
        only when it is the head's; ``node_processes(marker)`` finds them.
    """
    import re
    import sys

    port, jobs_port, agent, agent_grpc, runtime_env, metrics, client = free_ports(7)
    ray = str(Path(sys.executable).with_name("ray"))
    where = ["--head", f"--port={port}"] if head is None else [f"--address={head}"]
    # A head's own servers on free ports too: the dashboard (the job server) and Ray Client's (10001 by default).
    dashboard = [] if head is not None else ["--dashboard-host=127.0.0.1", f"--dashboard-port={jobs_port}"]
    dashboard += [] if head is not None else [f"--ray-client-server-port={client}"]
    with log.open("w") as output:
        subprocess.run(
            [
                ray,
                "start",
                *where,
                f"--num-cpus={cpus}",
                *dashboard,
                f"--dashboard-agent-listen-port={agent}",
                f"--dashboard-agent-grpc-port={agent_grpc}",
                f"--runtime-env-agent-port={runtime_env}",
                f"--metrics-export-port={metrics}",
                "--disable-usage-stats",
            ],
            stdout=output,
            stderr=subprocess.STDOUT,
            timeout=120,
            check=True,
            env=os.environ | (environment or {}) | {"RAY_TMPDIR": folder} | ({} if head is None else {"RAY_AUTH_MODE": "token"}),
        )
    found = re.search(r"--address='([^']+)'", log.read_text()) if head is None else None
    return {
        "address": found.group(1) if found else head or "",
        "jobs": f"http://127.0.0.1:{jobs_port}" if jobs else "",
        "marker": f"--metrics_export_port={metrics}",
    }


def processes_naming(text: str) -> set[int]:
    """Processes whose command lines hold ``text`` (a Ray head's own temporary folder, which its daemons' arguments
    name; a node's ``marker``), and every process below them (workers, which rename themselves ``ray::...``)."""
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    pids.add(int(entry.name))
            except OSError:
                continue
    return pids | {pid for root in pids for pid, _ in descendants(root)}


def head_address_marker(folder: str) -> str | None:
    """What the command line of a head's Ray Client server holds (``--address=`` the head's address, read from the
    address file in the head's folder), or None where ``folder`` holds no head."""
    recorded = Path(folder) / "ray" / "ray_current_cluster"
    return f"--address={recorded.read_text().strip()}" if recorded.is_file() else None


def stop_ray_node(text: str, *, at_once: bool = False) -> None:
    """Stop the processes of ``start_ray_node``'s nodes by their pids (SIGTERM, then SIGKILL; ``at_once``: SIGKILL
    alone, as when a machine is lost): a head's folder names all its cluster's processes on this machine but its
    Ray Client server, which names the head's address instead (``head_address_marker``); a worker node's
    ``marker`` names its own."""
    texts = [text, *filter(None, [head_address_marker(text)])]
    for sig in (signal.SIGKILL,) if at_once else (signal.SIGTERM, signal.SIGKILL):
        for pid in set().union(*map(processes_naming, texts)) - {os.getpid()}:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        time.sleep(2)
