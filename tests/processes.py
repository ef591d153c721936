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


def descendants(root: int) -> list[tuple[int, str]]:
    """``(pid, command line)`` of every process below ``root``."""
    parents, commands = {}, {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                commands[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
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
