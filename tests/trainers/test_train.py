"""The training loop reports on schedule, is reproducible, and trains every architecture."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from storage import record
from tests.trainers import counting_backend
from trainers.config import ModelConfig
from trainers.data.listops import ListOpsSpec
from trainers.data.loaders import listops_generated, recall
from trainers.data.recall import RecallSpec
from trainers.data.tokenize import LISTOPS_VOCABULARY
from trainers.train import VAL_ACCURACY, TrainConfig, train

ROOT = Path(__file__).resolve().parents[2]
SPEC = ListOpsSpec(seed=0, min_length=5, max_length=30, train_size=128, val_size=32, test_size=32)


def listops_model(attention: str) -> ModelConfig:
    return ModelConfig(
        vocab_size=len(LISTOPS_VOCABULARY),
        num_classes=10,
        max_length=30,
        d_model=32,
        num_heads=2,
        mlp_width=32,
        attention=attention,
        metric_rank=4,
    )


@pytest.mark.parametrize("attention", ["mha", "damcha"])
def test_reports_every_evaluation_and_marks_the_last(tmp_path: Path, attention: str) -> None:
    splits = listops_generated(SPEC, cache_dir=tmp_path)
    reports = []
    result = train(
        listops_model(attention),
        TrainConfig(steps=10, batch_size=8, eval_every=4, device="cpu"),
        splits,
        report=lambda step, metrics: reports.append((step, metrics)),
    )
    assert [step for step, _ in reports] == [4, 8, 10]
    assert [metrics["final"] for _, metrics in reports] == [False, False, True]
    assert result.metrics == reports[-1][1]
    last = result.metrics
    assert 0.0 <= last["val_accuracy"] <= 1.0 and last["val_count"] == SPEC.val_size
    assert 0.0 < last["val_loss"] < 10.0  # mean cross-entropy per example, nats
    assert last["flops_per_example"] > 0 and last["parameters"] > last["attention_parameters"] > 0
    assert last["examples_per_s"] > 0 and last["peak_memory_bytes"] > 0
    assert last["device"].startswith("cpu")
    # The engine stores a report's metrics by the names storage.record lists: a new or renamed one would be lost.
    assert set(last) - {"step", "final", VAL_ACCURACY} <= set(record.REPORTED)
    assert record.ACCURACY == VAL_ACCURACY  # the store's field is the loop's key (storage imports no trainer)


def test_same_seed_same_run_other_seed_other_run(tmp_path: Path) -> None:
    splits = listops_generated(SPEC, cache_dir=tmp_path)

    def run(seed: int) -> tuple[float, float]:
        metrics = train(
            listops_model("damcha"), TrainConfig(steps=6, batch_size=8, eval_every=6, seed=seed, device="cpu"), splits
        ).metrics
        return metrics["train_loss"], metrics["val_accuracy"]

    assert run(1) == run(1)
    assert run(1) != run(2)


def test_decoder_trains_on_recall_positions(tmp_path: Path) -> None:
    spec = RecallSpec(seed=0, num_examples=64, seq_len=32, num_pairs=4, vocab_size=32)
    splits = recall(spec, val_examples=16, cache_dir=tmp_path)
    config = ModelConfig(
        vocab_size=32, num_classes=2, max_length=32, architecture="decoder", d_model=32, num_heads=2, mlp_width=32
    )
    metrics = train(config, TrainConfig(steps=4, batch_size=8, eval_every=4, device="cpu"), splits).metrics
    assert 0.0 <= metrics["val_accuracy"] <= 1.0 and metrics["final"]
    assert metrics["val_count"] == 16 * spec.num_pairs  # every queried key of every validation example


def test_train_config_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="steps=0 must be >= 1"):
        TrainConfig(steps=0)
    assert TrainConfig(steps=10, eval_every=4).report_steps() == [4, 8, 10]


def test_bf16_autocast_trains_with_the_fused_optimizer(tmp_path: Path) -> None:
    splits = listops_generated(SPEC, cache_dir=tmp_path)
    metrics = train(
        listops_model("damcha"), TrainConfig(steps=4, batch_size=8, eval_every=4, device="cpu", precision="bf16"), splits
    ).metrics
    assert metrics["final"] and 0 < metrics["train_loss"] < 10
    assert "model_flops_utilisation" not in metrics  # no known peak for a CPU
    with pytest.raises(ValueError, match="precision='fp16' is not allowed; allowed: fp32, bf16"):
        TrainConfig(precision="fp16")


def test_a_diverging_loss_stops_the_run_naming_the_step(tmp_path: Path) -> None:
    from trainers.train import NonFiniteLossError

    splits = listops_generated(SPEC, cache_dir=tmp_path)
    with pytest.raises(NonFiniteLossError, match=r"training loss is (nan|inf) at step \d+ of 50"):
        train(
            listops_model("mha"),
            TrainConfig(steps=50, batch_size=8, eval_every=50, warmup_steps=1, learning_rate=1e30, device="cpu"),
            splits,
        )


def test_compiled_graphs_keep_running_after_the_first_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing wraps the compiled model in a dispatch mode (which would make Dynamo skip it for good)."""
    import torch

    calls: list[int] = []
    backend = counting_backend(calls)
    monkeypatch.setattr("trainers.train.compiled", lambda model: torch.compile(model, backend=backend, dynamic=True))
    splits = listops_generated(SPEC, cache_dir=tmp_path)
    seen = []
    train(
        listops_model("damcha"),
        TrainConfig(steps=9, batch_size=8, eval_every=3, device="cpu", compile=True),
        splits,
        report=lambda step, metrics: seen.append(len(calls)),
    )
    assert seen[0] > 0 and seen[0] < seen[1] < seen[2]  # compiled graphs run in every stretch of training, after step 2 too


@pytest.mark.drill  # make drills: two fresh processes compile, the first from an empty cache (about 110 s on 2 cores)
def test_compile_seconds_are_recorded_and_left_out_of_the_throughput(tmp_path: Path) -> None:
    splits = listops_generated(SPEC, cache_dir=tmp_path)
    eager = train(listops_model("mha"), TrainConfig(steps=6, batch_size=8, eval_every=6, device="cpu"), splits).metrics
    assert eager["compile_seconds"] == 0.0

    script = (
        "import json, sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]);"
        "from tests.trainers.test_train import SPEC, listops_model; from trainers.data.loaders import listops_generated;"
        "from trainers.train import TrainConfig, train;"
        "m = train(listops_model('mha'), TrainConfig(steps=6, batch_size=8, eval_every=6, device='cpu', compile=True),"
        " listops_generated(SPEC, cache_dir=Path(sys.argv[2]))).metrics; print(json.dumps(m))"
    )
    environment = os.environ | {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "compile-cache")}
    runs = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", script, str(ROOT), str(tmp_path)],
                env=environment,
                check=True,
                capture_output=True,
                text=True,
                timeout=600,
            ).stdout.splitlines()[-1]
        )
        for _ in range(2)
    ]
    cold, warm = runs
    assert cold["compile_seconds"] > 0 and warm["compile_seconds"] < 0.7 * cold["compile_seconds"]  # the kept cache is reused
    assert any((tmp_path / "compile-cache").iterdir())
    for metrics in runs:  # 5 timed steps of 8 examples: the compile time is not in their rate
        assert metrics["examples_per_s"] >= 5 * 8 / (metrics["wall_seconds"] - metrics["compile_seconds"])


def test_peak_memory_is_the_peak_over_the_run(tmp_path: Path) -> None:
    """Length-bucketed batches vary in length: the peak is taken over the run, not one step."""
    import itertools

    from trainers.step_batches import endless_batches

    splits = listops_generated(SPEC, cache_dir=tmp_path)
    config = TrainConfig(steps=8, batch_size=8, eval_every=1, device="cpu", seed=2)
    lengths = [b["tokens"].shape[1] for b in itertools.islice(endless_batches(splits["train"], listops_model("mha"), 8, 2), 8)]
    longest = lengths.index(max(lengths))
    assert longest > 1 and lengths[longest] > max(lengths[:longest])  # the set-up: the longest batch comes after step 2
    peaks = [metrics["peak_memory_bytes"] for metrics in _reports(train, listops_model("mha"), config, splits)]
    assert peaks == sorted(peaks) and peaks[0] > 0  # never falls: a running maximum over the steps so far
    assert peaks[longest] > peaks[longest - 1]  # and it rises with the longest batch


def _reports(run, *args) -> list[dict]:
    reports: list[dict] = []
    run(*args, report=lambda step, metrics: reports.append(metrics))
    return reports


def test_a_batch_without_padding_reaches_attention_without_a_mask(monkeypatch: pytest.MonkeyPatch) -> None:
    """FlashAttention takes no mask: a batch with no padding must not carry one."""
    import torch

    from trainers.step_batches import on_device

    batch = {
        "tokens": torch.ones(2, 4, dtype=torch.long),
        "padding_mask": torch.ones(2, 4, dtype=torch.bool),
        "labels": torch.zeros(2),
    }
    assert on_device(batch, torch.device("cpu"))["padding_mask"] is None
    batch["padding_mask"][1, 3] = False
    assert torch.equal(on_device(batch, torch.device("cpu"))["padding_mask"], batch["padding_mask"])


def test_weight_decay_shrinks_linear_weights_only(tmp_path: Path) -> None:
    """One AdamW step with zero gradients: only decayed weights move, by exactly lr x decay."""
    import torch

    from trainers.models import build_model
    from trainers.optimizer import adamw

    config = ModelConfig(
        vocab_size=32, num_classes=2, max_length=16, attention="damcha", d_model=16, num_heads=2, mlp_width=32, metric_rank=4
    )
    model = build_model(config)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    optimizer = adamw(model, TrainConfig(learning_rate=0.1, weight_decay=0.5), torch.device("cpu"))
    for parameter in model.parameters():
        parameter.grad = torch.zeros_like(parameter)
    optimizer.step()
    decayed = {name for name, p in model.named_parameters() if not torch.equal(p, before[name])}
    for name, parameter in model.named_parameters():
        if name in decayed:
            torch.testing.assert_close(parameter, before[name] * (1 - 0.1 * 0.5))
    linear_weights = {f"{name}.weight" for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)}
    assert decayed == linear_weights  # not biases, norms, the CLS or position/token embeddings


@pytest.mark.parametrize(
    ("chosen", "expected"), [(None, "runs/torch-compile-cache"), ("", "runs/torch-compile-cache"), ("mine", "mine")]
)
def test_the_compile_cache_is_the_one_a_run_says_it_uses(tmp_path: Path, chosen: str | None, expected: str) -> None:
    """The driver resolves the cache as the command a user types does (``python -m studies.run`` imports torch,
    whose ``torch._dynamo`` sets ``TORCHINDUCTOR_CACHE_DIR`` to its own default when unset): the user's
    folder, else ``runs/torch-compile-cache``, never torch's default."""
    environment = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    if chosen is not None:
        environment["TORCHINDUCTOR_CACHE_DIR"] = chosen and str(tmp_path / chosen)
    code = "import studies.run, torch._dynamo; from trainers.compilation import compile_cache_dir; print(compile_cache_dir())"
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=environment | {"PYTHONPATH": str(root)}, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == str(tmp_path / expected)
