"""The one place where a run relies on Ray Tune's internals, for want of a public call, said here and
checked by ``tests/studies/test_tune_internals.py``, which fails when a Ray release changes it:

- ``Trial.pickled_error_file``: the trial's exception, pickled in the trial's local folder, which Tune
  writes before it calls the callbacks' ``on_trial_error``. The public ``Trial.get_pickled_error``
  reads the experiment storage's copy, which Tune writes after the callbacks, so a callback finds
  nothing there yet: it is the fallback only.
"""

from __future__ import annotations

import contextlib

from ray import cloudpickle


def trial_exception(trial) -> BaseException | None:  # noqa: ANN001 (ray.tune.experiment.Trial)
    """The exception Tune kept for ``trial`` (``RayTaskError`` around the trainable's, or ``RayActorError``),
    read from the trial's local error file, else from the experiment's storage; None if neither reads."""
    with contextlib.suppress(Exception):  # unpickling a Ray error can fail in many ways
        with open(trial.pickled_error_file, "rb") as file:
            return cloudpickle.load(file)
    with contextlib.suppress(Exception):
        return trial.get_pickled_error()
    return None
