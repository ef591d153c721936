"""Does a sampler learn to avoid a region whose trials cannot train? Told (this product) against not told.

A synthetic search, so that hundreds of trials take seconds: a learning rate from 8
choices and a width from 1..8; the 3 largest learning rates diverge, the others score
by their distance from 1e-3. A diverged trial is told as the ledger tells a NaN loss
(``studies.engine.sampler.tell_infeasible``: COMPLETE with its constraint violated), or, not
told, left FAIL. The table gives, per sampler, the share of the second half's proposals
that fall in the diverging region (3/8 = 0.375 if the sampler learned nothing), for
each seed, told and not told.

    python -m benchmarks.infeasible                      # 80 trials, seeds 0..4
    python -m benchmarks.infeasible --trials 40 --seeds 2
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

import optuna
from optuna.trial import TrialState

from studies.engine.sampler import SAMPLER_MAKERS, tell_infeasible
from studies.run import integer_from

LEARNING_RATES = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 1e2, 1e3, 1e4)
DIVERGING_SHARE = sum(rate > 1 for rate in LEARNING_RATES) / len(LEARNING_RATES)
SAMPLERS: dict[str, tuple[int, Callable[[int], optuna.samplers.BaseSampler]]] = {  # name -> (objectives, sampler of seed)
    "TPE": (1, lambda seed: optuna.samplers.TPESampler(seed=seed)),
    "multi-objective TPE": (2, lambda seed: optuna.samplers.TPESampler(seed=seed)),
    "NSGA-II (population 8)": (2, lambda seed: optuna.samplers.NSGAIISampler(seed=seed, population_size=8)),
    "GPSampler (product's)": (2, lambda seed: SAMPLER_MAKERS["gp"](2, 8, seed)),  # a quick family's share: 8
}


def diverging_share(
    sampler: optuna.samplers.BaseSampler, objectives: int, trials: int, *, told: bool = True, storage: object = None
) -> tuple[optuna.Study, float]:
    """Ask and tell ``trials`` synthetic trials; diverged ones are told as infeasible when ``told``, else FAIL.

    Returns:
        The study, and the share of the second half's proposals in the diverging region.
    """
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(storage=storage, directions=["maximize", "minimize"][:objectives], sampler=sampler)
    late_diverged = 0
    for number in range(trials):
        trial = study.ask()
        learning_rate = trial.suggest_categorical("learning_rate", LEARNING_RATES)
        width = trial.suggest_int("width", 1, 8)
        if learning_rate > 1:
            if told:
                tell_infeasible(study, trial, "diverged")
            else:
                study.tell(trial, state=TrialState.FAIL)
            late_diverged += number >= trials // 2
        else:
            accuracy = 1 - abs(math.log10(learning_rate) + 3) / 3 + 0.01 * width
            study.tell(trial, [accuracy, width][:objectives])
    return study, late_diverged / (trials - trials // 2)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.infeasible", description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=integer_from(1), default=80, help="trials per search (default: 80)")
    parser.add_argument("--seeds", type=integer_from(1), default=5, help="seeds 0..N-1 per sampler (default: 5)")
    args = parser.parse_args(argv)
    print(f"share of the second half's proposals that diverge ({args.trials} trials; learned nothing = {DIVERGING_SHARE:.3f})")
    print(f"{'sampler':<24}{'told':>6}  {'per seed':<36}{'mean':>6}")
    for name, (objectives, make) in SAMPLERS.items():
        for told in (False, True):
            shares = [diverging_share(make(seed), objectives, args.trials, told=told)[1] for seed in range(args.seeds)]
            print(
                f"{name:<24}{'yes' if told else 'no':>6}  "
                f"{' '.join(f'{s:.3f}' for s in shares):<36}{sum(shares) / len(shares):>6.3f}"
            )


if __name__ == "__main__":
    main()
