"""The benchmarks run end to end at tiny sizes (their figures are not checked here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_attention_benchmark_prints_a_row_per_variant() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.attention", "--lengths", "32", "--d-model", "64", "--heads", "4",
         "--reps", "1", "--tokens", "64"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
    )
    lines = result.stdout.splitlines()
    table = lines[lines.index("T=32, batch 2") + 2 :]
    assert [line.split()[0] for line in table][:2] == ["mha", "damcha"]
    assert len(table) == 11
    assert table[0].split()[2] == "1.00"  # MHA against itself
    assert "flash_attention_for_cpu" in table[1] and table[-1].endswith("explicit")
