"""How sure a preset's answer is: what its truth table's replays measured (``Reliability``), or why nothing was.
A run prints the line beside its verdict (``studies.engine.optuna_study.reliability_line``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reliability:
    """How often a study of a preset answers as its truth table does, and how much of that its search earns,
    measured by replays of the table (``benchmarks.truth.compare``): what a run prints beside its verdict
    (docs/truth.md).

    Attributes:
        trials: The search budget the replays ran (a run with another ``--trials`` is not covered).
        replays: How many studies were replayed.
        right: The share that is right (``benchmarks.truth.skill``: every comparison the cross-fitted truth
            decides decided alike, none it leaves open answered wrongly), with its 95% Wilson interval.
        no_search: The same share for a study that searches nothing, on the same study seeds.
        skill: The skill over no search, ``(right - no_search) / (1 - no_search)``, with its 95% paired
            bootstrap interval.
        cannot_tell: What the replays cannot establish (a comparison the truth leaves open, with its
            out-of-sample gap).
        how: When and how it was measured.
    """

    trials: int
    replays: int
    right: tuple[float, float, float]
    no_search: float
    skill: tuple[float, float, float]
    cannot_tell: str
    how: str

    def sentence(self, trials: int) -> str:
        """The line a run of ``trials`` search trials prints beside its verdict."""
        share = "{:.0%} [{:.0%}, {:.0%}]".format
        said = (
            f"How sure: replayed {self.replays} times on the truth table (docs/truth.md), a study of this preset at "
            f"{self.trials} trials is right (it decides as the cross-fitted truth decides and answers nothing it "
            f"leaves open wrongly) in {share(*self.right)} of studies (95% Wilson interval); one that searches nothing "
            f"(a random configuration per family in the cost band) in {self.no_search:.0%}: skill over no search "
            "{:+.2f} [{:+.2f}, {:+.2f}]; always abstaining is right in none. ".format(*self.skill)
            + f"It cannot tell {self.cannot_tell}. Measured {self.how}."
        )
        if trials != self.trials:
            said += f" This run searches {trials} trials, a budget those replays did not measure."
        return said


NOT_MEASURED = "How sure: not measured: no truth table covers this study's space and preset (docs/truth.md)."
PLUMBING_PRESET = "smoke"  # every study's: a whole study in about a minute, what the tests run
PLUMBING_CHECK = (
    "How sure: not at all: the smoke preset is a plumbing check (a few short trials of small models on a small "
    "task): its figures test the code, never the methods; run the quick preset for an answer."
)
