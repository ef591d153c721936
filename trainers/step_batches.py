"""The batches a training run steps through and evaluates on: a pass's or an endless sequence's, in the fixed
shapes of a compiled or GPU run, built ahead by loader processes on a GPU, and moved to the device."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor

from trainers.config import ModelConfig
from trainers.data.batches import FixedShape, iterate_batches, iterate_pair_batches, rows_vary_in_length

# A GPU trial's batches are built ahead by this many loader processes: at LRA lengths one took
# 7.5-12.6 ms a batch, about as long as a step of a small model on an H200.
LOADER_WORKERS = 2


def batches_of(
    split,
    config: ModelConfig,
    batch_size: int,
    *,
    seed: int,
    shuffle: bool,
    shape: FixedShape | None = None,
    share: tuple[int, int] = (0, 1),
) -> Iterator[dict[str, Tensor]]:
    """A pass's batches (``trainers.data.batches``), in the fixed shape where one is given."""
    iterate = iterate_pair_batches if config.architecture == "pair" else iterate_batches
    batches = iterate(split, batch_size, seed=seed, shuffle=shuffle, share=share)
    return batches if shape is None else map(shape.fit, batches)


def endless_batches(
    split, config: ModelConfig, batch_size: int, seed: int, shape: FixedShape | None = None, share: tuple[int, int] = (0, 1)
) -> Iterator[dict[str, Tensor]]:
    """Training batches, epoch after epoch, each epoch in its own seeded order.

    Args:
        share: ``(k, n)``: batches k, k + n ... of the endless sequence (the k-th of n loader workers),
            counted across epochs, so that n workers taken in turn give the one worker's order.
    """
    worker, workers = share
    per_epoch = -(-split.num_rows // batch_size)  # every sorting window but the last holds whole batches
    epoch = 0
    while True:
        first = (worker - epoch * per_epoch) % workers
        yield from batches_of(
            split, config, batch_size, seed=seed * 100_003 + epoch, shuffle=True, shape=shape, share=(first, workers)
        )
        epoch += 1


def on_device(batch: dict[str, Tensor], device: torch.device, *, keep_masks: bool = False) -> dict[str, Tensor | None]:
    """The batch on ``device``. A padding mask without padding becomes None (unless ``keep_masks``),
    so that attention runs without a mask (FlashAttention takes none); it is read on the host, so
    no GPU work waits for it."""
    return {
        name: None
        if not keep_masks and name.startswith("padding_mask") and bool(tensor.all())
        else tensor.to(device, non_blocking=True)
        for name, tensor in batch.items()
    }


class TrainBatches(torch.utils.data.IterableDataset):
    """The endless, seeded training batches, for a ``DataLoader`` that builds them in its workers,
    each worker its share of them (``endless_batches``)."""

    def __init__(self, split, config: ModelConfig, batch_size: int, seed: int, shape: FixedShape | None) -> None:
        super().__init__()
        self.split, self.config, self.batch_size, self.seed, self.shape = split, config, batch_size, seed, shape

    def __iter__(self) -> Iterator[dict[str, Tensor]]:
        worker = torch.utils.data.get_worker_info()
        share = (0, 1) if worker is None else (worker.id, worker.num_workers)
        return endless_batches(self.split, self.config, self.batch_size, self.seed, self.shape, share)


def training_batches(
    split,
    config: ModelConfig,
    batch_size: int,
    seed: int,
    device: torch.device,
    shape: FixedShape | None = None,
    *,
    workers: int = LOADER_WORKERS,
) -> Iterator[dict[str, Tensor]]:
    """The training batches, in the fixed shape where one is given. On a GPU ``workers`` processes
    build them ahead of the step, in pinned memory, so that the GPU does not wait for the CPU (the
    order is one process's); on a CPU they are built in line (a worker would take a core from the trial)."""
    batches = TrainBatches(split, config, batch_size, seed, shape)
    if device.type != "cuda":
        return iter(batches)
    loader = torch.utils.data.DataLoader(batches, batch_size=None, num_workers=workers, pin_memory=True, prefetch_factor=8)
    return iter(loader)


def fixed_shapes(model_config: ModelConfig, batch_size: int, compiling: bool, splits) -> tuple[FixedShape, FixedShape]:
    """The fixed shapes of the training and evaluation batches of a compiled run or a run on a GPU.

    On a GPU eager runs take them too: cuDNN attention plans each new shape, and the padding costs about
    3% (a ``full`` MHA trial on an H200: 676 examples/s with them; docs/benchmarks.md). Masks that mask
    nothing are kept for a compiled model only (one graph); eager kernels run faster without one. CPU
    runs without compile keep their batches as built (the committed truth tables were trained so).
    """
    keep_masks = compiling and rows_vary_in_length(splits["train"])
    return (
        FixedShape(rows=batch_size, max_length=model_config.max_length, keep_masks=keep_masks),
        FixedShape(rows=2 * batch_size, max_length=model_config.max_length, keep_masks=keep_masks),
    )
