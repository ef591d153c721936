"""A compiled trial owns a known, small number of graphs: fixed batch shapes, its graphs compiled before it
is timed, none after, several trials in one process alike, and the recompile limit a clear failure.

The graphs are compiled by the ``aot_eager`` backend: the same Dynamo graphs and guards as inductor's, in a
fraction of the time (what a GPU adds, its alignment guards, is held off by the lengths' one class modulo 8).
"""

from __future__ import annotations

import itertools

import pytest
import torch

from storage import record
from tests.trainers import authors_knobs
from tests.trainers.test_train import listops_model
from trainers.compilation import RecompileLimitError
from trainers.config import ModelConfig
from trainers.data.batches import LENGTH_MULTIPLE, FixedShape
from trainers.data.listops import ListOpsSpec
from trainers.data.loaders import listops_generated
from trainers.data.recall import IGNORE
from trainers.step_batches import TrainBatches, endless_batches
from trainers.train import TrainConfig, evaluate, train

# Lengths 5-150 make padded lengths 64, 128 and 150 (the model's longest); 124 examples in batches of 8
# end each epoch with a short batch of 4.
SPEC = ListOpsSpec(seed=0, min_length=5, max_length=150, train_size=124, val_size=36, test_size=20)
GRAPHS_PER_TRIAL = 2  # one for training, one for evaluation (no gradients, evaluation mode)


@pytest.fixture(scope="module")
def splits(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return listops_generated(SPEC, cache_dir=tmp_path_factory.mktemp("listops"))


@pytest.fixture
def aot_eager(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("trainers.compilation.COMPILE_BACKEND", "aot_eager")


def _model(**knobs) -> ModelConfig:
    return ModelConfig(**(vars(listops_model("mha")) | {"max_length": SPEC.max_length} | knobs))


def _compiled_run(splits: dict, model: ModelConfig, steps: int = 40) -> list[dict]:
    reports: list[dict] = []
    config = TrainConfig(steps=steps, batch_size=8, eval_every=10, device="cpu", compile=True, precision="bf16")
    train(model, config, splits, report=lambda step, metrics: reports.append(metrics))
    return reports


def test_a_fixed_shape_pads_rows_and_lengths_that_count_nowhere() -> None:
    shape = FixedShape(rows=4, max_length=150, keep_masks=True)
    assert [shape.length(n) for n in (1, 64, 65, 128, 140, 150)] == [64, 64, 128, 128, 150, 150]
    assert {shape.length(n) % 8 for n in range(1, 129)} == {0}  # one class for the kernels' alignment guards
    tokens = torch.tensor([[5, 6, 7], [8, 9, 0]])
    batch = {"tokens": tokens, "padding_mask": tokens != 0, "labels": torch.tensor([1, 2])}
    fitted = shape.fit(batch)
    assert fitted["tokens"].shape == fitted["padding_mask"].shape == (4, LENGTH_MULTIPLE)
    assert torch.equal(fitted["tokens"][:2, :3], tokens) and not fitted["padding_mask"][:, 3:].any()
    assert torch.equal(fitted["tokens"][2], fitted["tokens"][0])  # added rows copy a real one
    assert torch.equal(fitted["padding_mask"][3], fitted["padding_mask"][0])
    assert fitted["labels"].tolist() == [1, 2, IGNORE, IGNORE]
    sequence_labels = shape.fit(batch | {"labels": torch.tensor([[1, 2, 3], [4, 5, IGNORE]])})["labels"]
    assert sequence_labels.shape == (4, LENGTH_MULTIPLE) and set(sequence_labels[:, 3:].unique().tolist()) == {IGNORE}
    with pytest.raises(ValueError, match="a batch of 5 rows does not fit a fixed shape of 4 rows"):
        shape.fit({name: torch.cat([t, t, t[:1]]) for name, t in batch.items()})


@pytest.mark.parametrize("knobs", [{}, dict(attention="damcha", metric_rank=4)], ids=["mha", "damcha"])
def test_evaluation_in_fixed_shapes_scores_what_it_scores_without(splits: dict, knobs: dict) -> None:
    """The added rows and positions change no prediction that counts."""
    from trainers.models import build_model

    torch.manual_seed(0)
    config = _model(**knobs)
    model = build_model(config)
    plain = evaluate(model, config, splits["val"], batch_size=16, device=torch.device("cpu"))
    fixed = evaluate(
        model, config, splits["val"], batch_size=16, device=torch.device("cpu"), shape=FixedShape(16, SPEC.max_length, True)
    )
    assert fixed.count == plain.count == SPEC.val_size  # 36 in batches of 16: the last filled with 12 ignored rows
    assert fixed.accuracy == plain.accuracy
    assert fixed.loss == pytest.approx(plain.loss, rel=1e-5)


def test_loader_workers_taking_turns_give_the_one_process_order(splits: dict) -> None:
    """Each of n workers builds every n-th batch, counted across epochs (16 batches an epoch here, 2 workers)."""
    config = listops_model("mha")
    alone = list(itertools.islice(endless_batches(splits["train"], config, 8, 3), 40))
    loader = torch.utils.data.DataLoader(TrainBatches(splits["train"], config, 8, 3, None), batch_size=None, num_workers=2)
    together = list(itertools.islice(iter(loader), 40))
    assert [b["labels"].tolist() for b in together] == [b["labels"].tolist() for b in alone]
    assert all(torch.equal(a["tokens"], b["tokens"]) for a, b in zip(alone, together, strict=True))


@pytest.mark.usefixtures("aot_eager")
def test_a_compiled_trial_compiles_its_graphs_before_it_is_timed_and_none_after(splits: dict) -> None:
    """40 steps over two and a half epochs (short batches, three padded lengths), four evaluations and the test."""
    reports = _compiled_run(splits, _model(attention="damcha", metric_rank=4))
    assert [r["compiled_graphs"] for r in reports] == [GRAPHS_PER_TRIAL] * 4
    assert [r["recompiles"] for r in reports] == [0] * 4
    last = reports[-1]
    assert set(last) - {"step", "final", "val_accuracy"} <= set(record.REPORTED)  # the engine stores what a trial reports
    assert last["compile_seconds"] > 0
    # 39 timed steps of 8 examples (the short batches' 4 real rows aside): the compile time is not in their rate.
    assert last["examples_per_s"] >= 39 * 4 / (last["wall_seconds"] - last["compile_seconds"])


@pytest.mark.usefixtures("aot_eager")
def test_several_trials_in_one_process_each_own_their_graphs(splits: dict) -> None:
    """As a reused Ray worker runs them: every family's trial compiles the same few graphs, and none
    reaches the recompile limit (before, the graphs of a worker's earlier trials piled up)."""
    families = [
        {},
        dict(attention="damcha", metric_rank=4),
        authors_knobs((16, 24)),
        dict(attention="tha"),
    ]
    for knobs in families:
        last = _compiled_run(splits, _model(**knobs), steps=12)[-1]
        assert (last["compiled_graphs"], last["recompiles"]) == (GRAPHS_PER_TRIAL, 0), knobs


@pytest.mark.usefixtures("aot_eager")
def test_the_recompile_limit_fails_the_trial_instead_of_training_uncompiled(splits: dict) -> None:
    import torch._dynamo.config as dynamo_config

    with dynamo_config.patch(recompile_limit=1), pytest.raises(RecompileLimitError, match="recompile limit.*--no-compile"):
        _compiled_run(splits, _model(), steps=12)  # the evaluation graph is a second one: over a limit of 1
