"""ListOps, generated as Long Range Arena's ``listops.py`` does, but seeded.

A tree node is an operator with probability 0.25 below ``max_depth`` (else a digit); an
operator takes 2..``max_args`` children. Operators: MIN, MAX, MED (integer median), SM
(sum mod 10). A tree's length counts operators, digits and closing brackets (not
parentheses); trees are kept when ``min_length < length < max_length``, duplicates are
dropped, and the first examples fill train, then validation, then test.

    python -m trainers.data.listops --out DIR --seed 0 --min-length 50 --max-length 250

writes ``basic_train.tsv``, ``basic_val.tsv`` and ``basic_test.tsv`` in the official
LRA format (header ``Source<TAB>Target``), read by the same loader as the release files.
"""

from __future__ import annotations

import argparse
import csv
import functools
import io
import random
import statistics
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from common.outputs import write_atomically

OPERATORS: tuple[str, ...] = ("[MIN", "[MAX", "[MED", "[SM")
END = "]"
OPERATOR_PROBABILITY = 0.25
SPLITS: tuple[str, ...] = ("train", "val", "test")
NUM_CLASSES = 10
# Draws in a row without a new example before generation gives up: bounds that trees
# (almost) never meet, or fewer distinct trees than asked, would otherwise loop forever.
MAX_MISSES = 1_000_000


@dataclass(frozen=True)
class ListOpsSpec:
    """Everything that determines a generated ListOps data set (LRA's defaults).

    Attributes:
        seed: Random seed; the same spec gives byte-identical splits on any machine.
        max_depth: Deepest level at which an operator may appear.
        max_args: Most children of an operator.
        min_length, max_length: Exclusive bounds on a tree's length.
        train_size, val_size, test_size: Examples per split.
    """

    seed: int = 0
    max_depth: int = 10
    max_args: int = 10
    min_length: int = 500
    max_length: int = 2000
    train_size: int = 96_000
    val_size: int = 2_000
    test_size: int = 2_000

    def __post_init__(self) -> None:
        if self.max_depth < 1 or self.max_args < 2:
            raise ValueError(f"max_depth={self.max_depth} must be >= 1 and max_args={self.max_args} >= 2")
        if not 0 <= self.min_length < self.max_length - 1:
            raise ValueError(f"need 0 <= min_length={self.min_length} < max_length - 1 = {self.max_length - 1}")
        for split in SPLITS:
            if getattr(self, f"{split}_size") < 0:
                raise ValueError(f"{split}_size={getattr(self, f'{split}_size')} must be >= 0")
        if (longest := self.longest_tree()) <= self.min_length:
            raise ValueError(
                f"no tree can be longer than min_length={self.min_length}: with max_depth={self.max_depth} and "
                f"max_args={self.max_args} the longest has {longest} tokens; raise max_depth or max_args, or lower min_length"
            )

    def longest_tree(self) -> int:
        """Tokens of the longest tree the depth and argument bounds allow (a digit at the
        deepest level; above it, an operator, its closing bracket and ``max_args`` children)."""
        longest = 1
        for _ in range(self.max_depth - 1):
            longest = 2 + self.max_args * longest
        return longest

    def sizes(self) -> dict[str, int]:
        """Examples per split."""
        return {split: getattr(self, f"{split}_size") for split in SPLITS}


class _TooLong(Exception):
    """A tree grew past the length bound: it would be rejected, so stop building it."""


def _evaluate(operator: str, values: list[int]) -> int:
    if operator == "[MIN":
        return min(values)
    if operator == "[MAX":
        return max(values)
    if operator == "[MED":
        return int(statistics.median(values))
    return sum(values) % 10


class _TreeBuilder:
    """Draws one tree, writing its LRA string and computing its value as it goes."""

    def __init__(self, rng: random.Random, spec: ListOpsSpec) -> None:
        self.rng = rng
        self.spec = spec
        self.parts: list[str] = []
        self.length = 0

    def node(self, depth: int) -> int:
        r = self.rng.random() if depth < self.spec.max_depth else 1.0
        if r > OPERATOR_PROBABILITY:
            value = self.rng.choice(range(10))
            self._count(1)
            self.parts.append(str(value))
            return value
        num_children = self.rng.randint(2, self.spec.max_args)
        self._count(2)  # the operator and its closing bracket
        # LRA nests left: ( ( ( OP v0 ) v1 ) ... ] ): one "(" per child plus one for "]".
        self.parts.append("( " * (num_children + 1))
        start = len(self.parts)
        self.parts.append("")  # the operator, drawn after the children as LRA does
        values = []
        for index in range(num_children):
            if index:
                self.parts.append(" ")
            values.append(self.node(depth + 1))
            self.parts.append(" )")
        operator = self.rng.choice(OPERATORS)
        self.parts[start] = operator + " "
        self.parts.append(f" {END} )")
        return _evaluate(operator, values)

    def _count(self, tokens: int) -> None:
        self.length += tokens
        if self.length >= self.spec.max_length:
            raise _TooLong


def generate(spec: ListOpsSpec) -> dict[str, list[tuple[str, int]]]:
    """Generate the splits.

    Args:
        spec: The data set's parameters and seed.

    Returns:
        ``{"train": [(source, label), ...], "val": [...], "test": [...]}``.
    """
    rng = random.Random(spec.seed)
    wanted = sum(spec.sizes().values())
    examples: dict[str, int] = {}  # source -> label, insertion-ordered: duplicates dropped
    misses = 0  # draws in a row that gave no new example
    while len(examples) < wanted:
        if misses == MAX_MISSES:
            raise ValueError(
                f"{MAX_MISSES:,} random trees in a row were outside the length bounds ({spec.min_length}, {spec.max_length}) "
                f"or repeats, with {len(examples):,} of {wanted:,} examples found: widen the bounds or ask fewer examples"
            )
        misses += 1
        builder = _TreeBuilder(rng, spec)
        try:
            label = builder.node(depth=1)
        except _TooLong:
            continue
        if builder.length > spec.min_length and (source := "".join(builder.parts)) not in examples:
            examples[source] = label
            misses = 0
    items = list(examples.items())
    splits, start = {}, 0
    for split, size in spec.sizes().items():
        splits[split] = items[start : start + size]
        start += size
    return splits


@functools.cache  # a plan asks it for every configuration it times
def mean_length(spec: ListOpsSpec, sample: int = 500) -> float:
    """The mean tokens of an example ``spec`` generates, from its first ``sample`` trees (brackets are not tokens).

    Args:
        spec: The data set's parameters and seed.
        sample: Trees to count (the first a generation draws: the same on every machine).

    Returns:
        Tokens per example, on average.
    """
    rows = generate(replace(spec, train_size=sample, val_size=0, test_size=0))["train"]
    return sum(sum(token not in ("(", ")") for token in source.split()) for source, _ in rows) / len(rows)


def write_tsv(path: Path, rows: list[tuple[str, int]]) -> None:
    """Write rows in the LRA ListOps format (header ``Source<TAB>Target``), atomically."""
    text = io.StringIO()
    writer = csv.writer(text, delimiter="\t", lineterminator="\n")
    writer.writerow(["Source", "Target"])
    writer.writerows(rows)
    write_atomically(path, text.getvalue())


def write_release(spec: ListOpsSpec, out: Path) -> dict[str, Path]:
    """Generate and write ``basic_{train,val,test}.tsv`` under ``out``.

    Returns:
        The path of each split's file.
    """
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for split, rows in generate(spec).items():
        paths[split] = out / f"basic_{split}.tsv"
        write_tsv(paths[split], rows)
    return paths


def add_spec_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one ``--option`` per ``ListOpsSpec`` field, with its default."""
    for name, value in asdict(ListOpsSpec()).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=value, help=f"(default: {value})")


def spec_from_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> ListOpsSpec:
    """The ``ListOpsSpec`` that parsed arguments describe; a bad one exits with code 2 and the reason."""
    try:
        return ListOpsSpec(**{name: getattr(args, name) for name in asdict(ListOpsSpec())})
    except ValueError as error:
        parser.error(str(error))


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="directory for the TSV files")
    add_spec_arguments(parser)
    args = parser.parse_args(argv)
    spec = spec_from_arguments(parser, args)
    out = args.out
    for split, path in write_release(spec, out).items():
        print(f"{split}: {path}")


if __name__ == "__main__":
    main()
