"""How a study searches its space: the sampler, which configurations it may propose, and the early stopping of
its trials (``Search``), as data a preset holds."""

from __future__ import annotations

from dataclasses import dataclass

SAMPLERS = ("nsga2", "random", "tpe", "gp")  # Search.sampler
STOPPING_RULES = ("none", "median", "dominated")  # Search.stopping_rule


@dataclass(frozen=True)
class Search:
    """How a study searches its space (``studies.engine.sampler.study_sampler`` makes its sampler;
    ``benchmarks.truth.compare`` measures the choices on a truth table). The default is the strategy
    that replays on lra_sharing's truth table measured best (docs/truth.md).

    Attributes:
        sampler: Optuna's NSGA-II (``nsga2``; TPE for a study of one objective), random search
            (``random``), TPE, multivariate and grouped (``tpe``), or GPSampler (``gp``).
        per_family: Each family its own sampler, which sees only its family's trials; False: one
            sampler sees every family's (``studies.engine.family_sampler.FamilySampler``).
        untried: A trial never takes a configuration its family already tried while one is left:
            a family whose space is no larger than its budget is searched whole.
        stopping_rule: Whether and how early stopping judges a searched trial at a rung, among its
            family's trials there (``studies.engine.ledger.Ledger.stops``): ``none``, every trial
            trains to the end; ``median``, ASHA's rule on the first objective (worse than the median
            stops); ``dominated``, on the first objective and FLOPs together (dominated by at least
            half of them stops: the cheapest never does). ``Preset.grace_steps`` at the last step
            turns a rule off too.
        in_band: A family other than the baseline draws its trials among its configurations whose
            analytic FLOPs lie within the verdict's cost band (``studies.results.matching.COST_BAND``)
            of the best baseline configuration its sampler's view holds, while one there is untried:
            the search spends its trials where the matched-cost comparison selects. Needs ``untried``.
        matchable: A family other than the baseline draws its trials, before and after the band above, among
            its configurations within the cost band of some configuration of the baseline's (while one is
            untried): a configuration no baseline can match in cost is never searched, so a family's best is
            never left "not matched in cost" by the space's design. Needs ``in_band``.

    Raises:
        ValueError: an unknown sampler or rule; NSGA-II per family; TPE with early stopping;
            ``in_band`` without ``untried``.
    """

    sampler: str = "random"
    per_family: bool = False
    untried: bool = True
    stopping_rule: str = "median"
    in_band: bool = True
    matchable: bool = False

    def __post_init__(self) -> None:
        """Only the samplers and rules this product knows, in combinations that run."""
        if self.sampler not in SAMPLERS:
            raise ValueError(f"search: sampler {self.sampler!r} is not one of {SAMPLERS}")
        if self.stopping_rule not in STOPPING_RULES:
            raise ValueError(f"search: stopping rule {self.stopping_rule!r} is not one of {STOPPING_RULES}")
        if self.sampler == "nsga2" and self.per_family:  # its generations live in study-wide attributes, shared
            raise ValueError("search: NSGA-II cannot run per family (two instances would share one study's generations)")
        if self.sampler == "tpe" and self.stopping_rule != "none":  # it asks a study of two objectives for one direction
            raise ValueError("search: multi-objective TPE cannot read trials stopped early (optuna#5260): use rule 'none'")
        if self.in_band and not self.untried:  # the band is drawn from the family's configurations, which untried lists
            raise ValueError("search: in_band draws among a family's untried configurations: set untried=True too")
        if self.matchable and not self.in_band:  # it needs the configurations' FLOPs, which in_band has the sampler given
            raise ValueError("search: matchable draws by the configurations' FLOPs as in_band does: set in_band=True too")

    def stops_early(self, grace_steps: int, steps: int) -> bool:
        """Whether a searched trial may stop before ``steps``: a rule, and a grace period that ends first."""
        return self.stopping_rule != "none" and grace_steps < steps

    def describe(self, grace_steps: int, steps: int) -> str:
        """In words, for the plan and the store: the sampler, its switches and early stopping."""
        sampler = {"nsga2": "NSGA-II", "random": "random search", "tpe": "TPE", "gp": "GPSampler"}[self.sampler]
        words = [f"{sampler} {'per family' if self.per_family else 'shared by the families'}"]
        if self.untried:
            words.append("no configuration twice while one is left")
        if self.in_band:
            words.append("the other families within the best baseline's cost band")
        if self.matchable:
            words.append("only configurations some baseline configuration matches in cost")
        if not self.stops_early(grace_steps, steps):
            words.append("none stopped early")
        else:
            rule = "ASHA's rule (below the median)" if self.stopping_rule == "median" else "dominance in accuracy and FLOPs"
            words.append(f"a trial may stop early after {grace_steps} steps by {rule} within its family")
        return "; ".join(words)


# What every study searched by before its strategies were measured on a truth table (docs/truth.md):
# lra_sharing's smoke preset keeps it, so that the minute-long runs the tests make stop trials early too.
NSGA2_WITH_ASHA = Search("nsga2", per_family=False, untried=False, stopping_rule="median", in_band=False)
