"""What a run relies on in Ray Tune's internals (``studies.engine.tune_internals``), checked against the
installed Ray: when a release renames or changes it, these tests fail, rather than a failed trial's
error reaching the store without its exception."""

from __future__ import annotations

import inspect
from pathlib import Path
from types import SimpleNamespace

from ray import cloudpickle
from ray.tune.experiment import Trial

from studies.engine.tune_internals import trial_exception


def test_a_trial_still_names_its_local_pickled_error_file() -> None:
    assert isinstance(inspect.getattr_static(Trial, "pickled_error_file"), property)
    assert callable(inspect.getattr_static(Trial, "get_pickled_error"))  # the fallback


def test_the_exception_is_read_from_the_local_file_then_from_the_storage_copy(tmp_path: Path) -> None:
    error_file = tmp_path / "error.pkl"
    error_file.write_bytes(cloudpickle.dumps(MemoryError("out of memory in trial 3")))

    def storage_copy() -> BaseException:
        return ValueError("the storage's copy")

    local = SimpleNamespace(pickled_error_file=str(error_file), get_pickled_error=storage_copy)
    assert str(trial_exception(local)) == "out of memory in trial 3"
    written_later = SimpleNamespace(pickled_error_file=str(tmp_path / "not yet"), get_pickled_error=storage_copy)
    assert str(trial_exception(written_later)) == "the storage's copy"
    assert trial_exception(SimpleNamespace(pickled_error_file=None, get_pickled_error=None)) is None
