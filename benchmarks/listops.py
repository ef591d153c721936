"""Time generating LRA-size ListOps on one core, then a cached reload.

python -m benchmarks.listops                 # 100,000 examples, lengths 500-2000
python -m benchmarks.listops --train-size 9600 --val-size 200 --test-size 200
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from trainers.data.listops import add_spec_arguments, generate, spec_from_arguments
from trainers.data.loaders import listops_generated


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.listops", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_spec_arguments(parser)
    spec = spec_from_arguments(parser, parser.parse_args(argv))
    total = sum(spec.sizes().values())

    start = time.perf_counter()
    generate(spec)
    generation = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as cache:
        start = time.perf_counter()
        listops_generated(spec, cache_dir=Path(cache))
        build = time.perf_counter() - start
        start = time.perf_counter()
        splits = listops_generated(spec, cache_dir=Path(cache))
        reload = time.perf_counter() - start
    tokens = sum(sum(split["length"]) for split in splits.values())
    print(f"{total} examples, {tokens} tokens, lengths {spec.min_length}-{spec.max_length}, seed {spec.seed}")
    print(f"generate (one core):        {generation:8.1f} s")
    print(f"generate + tokenise + save: {build:8.1f} s")
    print(f"cached reload (verified):   {reload:8.2f} s")


if __name__ == "__main__":
    main()
