"""Ray for a run: join the cluster the user named, or start a quiet local one; what one trial asks of it."""

from __future__ import annotations

import logging
import os

import ray

from studies.engine.errors import StudyOptionError
from studies.engine.options import TrialResources
from studies.engine.ray_address import LOCAL_ADDRESS
from studies.engine.signals import stop_on_signals
from trainers.memory import GIB


def start_ray(address: str | None) -> bool:
    """Join ``address`` (or ``RAY_ADDRESS``) or start a quiet local Ray; True when this call started it."""
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS")
    common = {"logging_level": logging.ERROR, "log_to_driver": False, "configure_logging": True}
    if address and address != LOCAL_ADDRESS:
        ray.init(address=address, **common)  # host:port needs RAY_AUTH_MODE=token: see studies.run.prepare_ray_environment
    else:
        ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False, **common)  # never a stale cluster
    stop_on_signals()  # ray.init replaced the run's SIGTERM handler with one that exits at once
    return True


def trial_request(resources: TrialResources) -> tuple[dict[str, float], int]:
    """One trial's Ray resources, and how many trials the cluster fits at once.

    Raises:
        StudyOptionError: no node of the cluster has the memory one trial asks.
    """
    total = ray.cluster_resources()
    request = {"cpu": resources.cpus, "gpu": resources.gpus}
    for name, asked in (("CPU", resources.cpus), ("GPU", resources.gpus)):
        largest = max((node["Resources"].get(name, 0) for node in ray.nodes() if node["Alive"]), default=0)
        if asked > largest:
            raise StudyOptionError(
                f"--{name.lower()}s-per-trial {asked:g} is more than any Ray node offers ({largest:g}); "
                "no trial could start: ask less or add a bigger node"
            )
    fits = [int(total.get("CPU", 1) // resources.cpus)]
    if resources.gpus:
        fits.append(int(total.get("GPU", 0) // resources.gpus))
    if resources.memory is not None:  # Ray then starts only as many trials at once as their budgets fit
        largest = max((node["Resources"].get("memory", 0) for node in ray.nodes() if node["Alive"]), default=0)
        if resources.memory > largest:
            raise StudyOptionError(
                f"--trial-memory {resources.memory / GIB:.3g} GiB is more than any Ray node offers "
                f"({largest / GIB:.3g} GiB); lower it or add a bigger node"
            )
        request["memory"] = resources.memory
        fits.append(int(total.get("memory", 0) // resources.memory))
    return request, max(1, min(fits))
