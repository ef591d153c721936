"""Declarative search spaces: knobs with domains, conditions and forbidden combinations.

A knob has one flat name everywhere: the model or training config field, the Optuna
parameter and the report column. A ``SearchSpace`` samples define-by-run through an
``optuna.Trial`` (so conditional knobs are simply not suggested) and checks any
configuration before training starts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import optuna

from common.naming import unknown_name_message

Value = str | int | float
_TRUE, _FALSE = {"true", "yes", "on", "1"}, {"false", "no", "off", "0"}  # how a command line spells a boolean


class SearchSpaceError(ValueError):
    """A configuration the space does not allow; the message names the knob and the fix."""


@dataclass(frozen=True)
class Choice:
    """One of a fixed set of values."""

    values: tuple[Value, ...]

    def contains(self, value: Any) -> bool:
        return any(value == allowed and type(value) is type(allowed) for allowed in self.values)

    def describe(self) -> str:
        return "one of " + ", ".join(repr(v) for v in self.values)

    def meant(self, value: Value) -> Value:
        """The allowed value that ``value``, as a command line spells it, means: ``True`` for ``"true"``,
        ``"True"``, ``"yes"``, ``"on"`` or ``1`` (``False`` likewise), 4 for 4.0; else ``value`` itself."""
        if self.contains(value):
            return value
        for allowed in self.values:
            if isinstance(allowed, bool):
                words = _TRUE if allowed else _FALSE
                if str(value).strip().lower() in words:
                    return allowed
            elif isinstance(allowed, int | float) and isinstance(value, int | float) and not isinstance(value, bool):
                if value == allowed:
                    return allowed
        return value

    def suggest(self, trial: optuna.Trial, name: str) -> Value:
        return trial.suggest_categorical(name, self.values)


@dataclass(frozen=True)
class Range:
    """A number in ``low..high`` (an integer when ``integer``), sampled on a log scale when ``log``."""

    low: float
    high: float
    log: bool = False
    integer: bool = False

    def contains(self, value: Any) -> bool:
        numeric = isinstance(value, int) if self.integer else isinstance(value, int | float)
        return numeric and not isinstance(value, bool) and self.low <= value <= self.high

    def meant(self, value: Value) -> Value:
        """``value`` as this range's type: 4 for 4.0 in an integer range; else ``value`` itself."""
        if self.integer and isinstance(value, float) and value.is_integer():
            return int(value)
        return value

    def describe(self) -> str:
        kind = "an integer" if self.integer else "a number"
        return f"{kind} in {self.low}..{self.high}" + (" (log scale)" if self.log else "")

    def suggest(self, trial: optuna.Trial, name: str) -> Value:
        if self.integer:
            return trial.suggest_int(name, int(self.low), int(self.high), log=self.log)
        return trial.suggest_float(name, self.low, self.high, log=self.log)


Domain = Choice | Range


@dataclass(frozen=True)
class Knob:
    """A searchable setting.

    Attributes:
        name: The flat name (config field, Optuna parameter, report column).
        domain: The values it may take.
        default: Its value when a study does not search it.
        when: Conditions for the knob to exist: ``{other knob: allowed values}``.
        help: One line for people.
    """

    name: str
    domain: Domain
    default: Value
    when: Mapping[str, tuple[Value, ...]] = field(default_factory=dict)
    help: str = ""

    def active(self, values: Mapping[str, Value]) -> bool:
        """Whether the knob exists given the other knobs' values."""
        return all(values.get(other) in allowed for other, allowed in self.when.items())


@dataclass(frozen=True)
class Rule:
    """Which combinations of knob values are forbidden.

    Attributes:
        check: Called with every active knob's value; raises ``ValueError`` naming the
            forbidden combination and what to do instead.
    """

    check: Callable[[Mapping[str, Value]], None]


@dataclass(frozen=True)
class SearchSpace:
    """Knobs searched by a study, the values of the others, and the rules over all.

    Attributes:
        knobs: Every knob the product knows, by name.
        searched: The names sampled by the study, in sampling order.
        rules: Forbidden combinations.
    """

    knobs: Mapping[str, Knob]
    searched: tuple[str, ...]
    rules: tuple[Rule, ...] = ()

    def __post_init__(self) -> None:
        for name in self.searched:
            self.knob(name)

    def knob(self, name: str) -> Knob:
        """The knob called ``name``.

        Raises:
            SearchSpaceError: an unknown name ("did you mean ...").
        """
        try:
            return self.knobs[name]
        except KeyError:
            raise SearchSpaceError(unknown_name_message("knob", name, list(self.knobs))) from None

    def narrowed(self, domains: Mapping[str, Domain]) -> SearchSpace:
        """The same space with some searched knobs' domains replaced (a preset's budget).

        Raises:
            SearchSpaceError: a knob that is not searched, or a value outside its full domain.
        """
        knobs = dict(self.knobs)
        for name, domain in domains.items():
            knob = self.knob(name)
            if name not in self.searched:
                raise SearchSpaceError(f"knob {name!r} is not searched by this study; searched: {', '.join(self.searched)}")
            if isinstance(domain, Choice):
                for value in domain.values:
                    self._check_domain(knob, value)
            knobs[name] = replace(knob, domain=domain)
        return replace(self, knobs=knobs)

    def suggest(self, trial: optuna.Trial, given: Mapping[str, Value] | None = None) -> dict[str, Value]:
        """Sample the searched knobs define-by-run; knobs whose condition fails are skipped.

        Args:
            trial: The trial to sample.
            given: Values that are not sampled (a named point's): they count for the conditions.

        Returns:
            The sampled values of the active searched knobs.
        """
        given = dict(given or {})
        values: dict[str, Value] = {}
        for name in self.searched:
            knob = self.knobs[name]
            if name not in given and knob.active(self.defaults() | given | values):
                values[name] = knob.domain.suggest(trial, name)
        return values

    def configurations(self, given: Mapping[str, Value] | None = None) -> list[dict[str, Value]]:
        """Every configuration ``suggest`` can return, in a fixed order: each searched knob's
        values in its domain's order, the knobs in sampling order, conditions applied as
        ``suggest`` applies them. Combinations the rules forbid are left out.

        Args:
            given: Values that are not enumerated (a family's, a named point's); they count
                for the conditions and the rules, and are part of each configuration.

        Returns:
            The configurations, ``given`` values included.

        Raises:
            SearchSpaceError: an active searched knob with a range domain (it has no finite grid).
        """
        given = dict(given or {})
        partial: list[dict[str, Value]] = [{}]
        for name in self.searched:
            knob, grown = self.knobs[name], []
            for values in partial:
                if name in given or not knob.active(self.defaults() | given | values):
                    grown.append(values)
                elif isinstance(knob.domain, Choice):
                    grown.extend(values | {name: value} for value in knob.domain.values)
                else:
                    raise SearchSpaceError(f"knob {name!r} ranges over {knob.domain.describe()}: it has no finite grid")
            partial = grown
        allowed = []
        for values in partial:
            try:
                self.resolve(values, beyond_domains=given)
            except SearchSpaceError:
                continue
            allowed.append(given | values)
        return allowed

    def defaults(self) -> dict[str, Value]:
        """Every knob's default value."""
        return {name: knob.default for name, knob in self.knobs.items()}

    def resolve(self, values: Mapping[str, Value], beyond_domains: Mapping[str, Value] | None = None) -> dict[str, Value]:
        """Check a configuration and complete it with defaults.

        Args:
            values: Values of some knobs (sampled, fixed by the user, or a baseline).
            beyond_domains: Values of knobs that may lie outside the (narrowed) domains: a
                named point's, which the model configuration checks instead. Conditions and
                rules still apply.

        Returns:
            Every active knob's value (given, else default); inactive knobs are dropped.

        Raises:
            SearchSpaceError: an unknown knob, a value outside its domain, a value for a
                knob whose condition does not hold, or a forbidden combination.
        """
        for name, value in values.items():
            self._check_domain(self.knob(name), value)
        for name in beyond_domains or {}:
            self.knob(name)  # an unknown name raises
        values = dict(values) | dict(beyond_domains or {})
        full = self.defaults() | values
        resolved = {}
        for name, knob in self.knobs.items():
            if knob.active(full):
                resolved[name] = full[name]
            elif name in values and values[name] != knob.default:
                conditions = " and ".join(f"{other} in {allowed}" for other, allowed in knob.when.items())
                raise SearchSpaceError(f"knob {name}={values[name]!r} applies only when {conditions}")
        for rule in self.rules:
            try:
                rule.check(resolved)
            except ValueError as error:
                raise SearchSpaceError(f"forbidden combination: {error}") from None
        return resolved

    @staticmethod
    def _check_domain(knob: Knob, value: Value) -> None:
        if not knob.domain.contains(value):
            raise SearchSpaceError(f"knob {knob.name}={value!r} is outside its domain: {knob.domain.describe()}")
