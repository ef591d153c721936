"""A failure of what a run writes, met inside Ray Tune: its store filling up or going away, a full disk
under Ray Tune's own folder.

Raised into Tune, such an error is logged with its traceback and the run goes on (a callback's error
fails a trial, a failed save of Tune's experiment folder is logged and skipped) until the next call
meets it again. Kept here instead, it ends the run at Tune's next step (``FaultStopper``), Tune's own
logs of it are not shown, and ``run_on_tune`` raises it once Tune has stopped: ``studies.run`` says it
in one sentence.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from ray import tune

from storage import store_or_disk_failed

T = TypeVar("T")


class RunFault:
    """The first store or disk failure a run met in the driver's Ray Tune callbacks, or None."""

    def __init__(self) -> None:
        self.error: BaseException | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles its searcher and stopper into its experiment folder: an exception may not pickle."""
        return {"error": None}

    def guarded(self, call: Callable[..., T], *args: Any, default: T) -> T:
        """``call(*args)``, or ``default`` when the run met a failure already or meets one now (kept).

        Raises:
            Exception: any error that is not a store's or a disk's (a bug shows as one).
        """
        if self.error is not None:
            return default
        try:
            return call(*args)
        except Exception as error:
            if not store_or_disk_failed(error):
                raise
            self.error = error
            return default

    @contextlib.contextmanager
    def ray_logs_watched(self) -> Iterator[None]:
        """Within the block, a record Ray logs with a store or disk failure (Tune's save of its folder on
        a full disk) is kept as the fault and not shown."""
        handlers = logging.getLogger("ray").handlers  # Ray's one handler: every ray.* logger's records reach it
        for handler in handlers:
            handler.addFilter(self._keep_failure)
        try:
            yield
        finally:
            for handler in handlers:
                handler.removeFilter(self._keep_failure)

    def _keep_failure(self, record: logging.LogRecord) -> bool:
        """A logging filter: False (not shown) for a record whose exception is a store or disk failure."""
        error = record.exc_info[1] if record.exc_info else None
        if error is None or not store_or_disk_failed(error):
            return True
        self.error = self.error or error
        return False


class FaultStopper(tune.Stopper):
    """Ends the whole run once it met a failure (``RunFault``); no trial is stopped for itself."""

    def __init__(self, fault: RunFault) -> None:
        self.fault = fault

    def __call__(self, trial_id: str, result: dict) -> bool:
        return False

    def stop_all(self) -> bool:
        return self.fault.error is not None
