"""A run's optimizer: AdamW with weight decay on linear maps' matrices only, and its learning-rate schedule."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from trainers.train import TrainConfig


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """The model's trainable parameters, with weight decay on the matrices of linear maps only.

    Biases, LayerNorm gains and embeddings (token, position, CLS; the decoder's output layer
    shares the token embedding) are not decayed: shrinking them towards zero is no
    regularisation (nanoGPT's ``configure_optimizers``).

    Args:
        model: The model.
        weight_decay: AdamW's decay for the decayed group.

    Returns:
        Two AdamW parameter groups: decayed, then not decayed.
    """
    embeddings = {id(p) for module in model.modules() if isinstance(module, nn.Embedding) for p in module.parameters()}
    decayed, kept = [], []
    for parameter in model.parameters():
        if parameter.requires_grad:
            (decayed if parameter.dim() >= 2 and id(parameter) not in embeddings else kept).append(parameter)
    return [{"params": decayed, "weight_decay": weight_decay}, {"params": kept, "weight_decay": 0.0}]


def adamw(model: nn.Module, config: TrainConfig, device: torch.device) -> torch.optim.Optimizer:
    """AdamW over ``parameter_groups``, with the fused kernel where this PyTorch has one for the device."""
    groups = parameter_groups(model, config.weight_decay)
    try:
        return torch.optim.AdamW(groups, lr=config.learning_rate, fused=device.type in ("cuda", "cpu"))
    except (RuntimeError, ValueError):  # no fused kernel for this device or dtype
        return torch.optim.AdamW(groups, lr=config.learning_rate)


def learning_rate_factor(step: int, config: TrainConfig) -> float:
    """The schedule's factor at ``step``: linear warm-up, then cosine decay to 10% of the peak."""
    if step < config.warmup_steps:
        return (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(config.steps - config.warmup_steps, 1)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
