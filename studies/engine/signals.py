"""SIGTERM and SIGHUP stop a run as Ctrl-C does.

``timeout``, systemd, Slurm and Kubernetes stop a process with SIGTERM, and a closed terminal
sends SIGHUP. Each raises ``KeyboardInterrupt`` in the driver's main thread, so that it takes
Ctrl-C's path: the running trials are failed and queued for the next run, the report is left
as it was, and the command exits ``exit_code()``: ``128 + signal`` (143 for SIGTERM, 129 for
SIGHUP), 130 for Ctrl-C. The signal is remembered here, not carried by the exception: raised
inside a Ray call, it comes back out of Ray's core worker as a plain ``KeyboardInterrupt``.
Ray's ``ray.init`` installs its own SIGTERM handler, which exits at once; ``stop_on_signals``
is called again after it. Ray Tune takes SIGUSR1 for itself (its run ends early); a run that Tune
ended before its trials did is stopped the same way (``stopped_by``, exit 138).
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_received: list[signal.Signals] = []  # the stopping signal this process received, if any


def _stop(signum: int, frame: FrameType | None) -> None:  # noqa: ARG001 (a signal handler's signature)
    """Raise ``KeyboardInterrupt`` once; a second signal during the clean-up is ignored (SIGKILL still ends it)."""
    for each in SIGNALS:
        signal.signal(each, signal.SIG_IGN)
    _received.append(signal.Signals(signum))
    raise KeyboardInterrupt(signal.Signals(signum).name)


def stop_on_signals() -> None:
    """Make SIGTERM and SIGHUP raise ``KeyboardInterrupt`` in the main thread (elsewhere, nothing changes)."""
    if threading.current_thread() is threading.main_thread() and not _received:
        for each in SIGNALS:
            signal.signal(each, _stop)


def stopped_by(signum: signal.Signals) -> None:
    """Remember a stopping signal that another handler took (Ray Tune's, for SIGUSR1): the run exits as for ours."""
    if not _received:
        _received.append(signal.Signals(signum))


def stop_cause() -> str:
    """What stopped the run: ``SIGTERM``, ``SIGHUP``, ``SIGUSR1``, or ``Ctrl-C``."""
    return _received[0].name if _received else "Ctrl-C"


def exit_code() -> int:
    """The exit code of a run that was stopped: ``128 + signal`` as shells report it (130: Ctrl-C's SIGINT)."""
    return 128 + (_received[0] if _received else signal.SIGINT)
