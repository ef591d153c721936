"""A model's costs on paper: parameter counts and analytic FLOPs (measured costs: ``trainers.measure``).

FLOPs count matrix products only (2 per multiply-add), as
``torch.utils.flop_counter.FlopCounterMode`` does; layer norms, softmax, GELU and
other element-wise work are left out. Fused attention is counted over the full T×T
score matrix even when causal (the counter's convention; FlashAttention skips the
masked half, so causal models do about ``2·T²·D`` fewer FLOPs per layer than stated).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop, sdpa_flop

from trainers.attention import MetricGenerator
from trainers.attention.metric import chunk_count
from trainers.config import ModelConfig

# The fused attention's backward recomputes the scores: the counter charges 2.5× its forward.
ATTENTION_CORE_BACKWARD_FACTOR = 2.5


@dataclass(frozen=True)
class ParameterCounts:
    """Parameter counts of a model.

    Attributes:
        total: All parameters.
        attention: Parameters of attention layers, their generators included.
        generator: Parameters of DAMCHA metric generators.
    """

    total: int
    attention: int
    generator: int


def count_parameters(model: nn.Module) -> ParameterCounts:
    """Count a model's parameters by role.

    Args:
        model: A model built by ``trainers.models.build_model`` (or any module).

    Returns:
        The counts.
    """

    def size(modules: list[nn.Module]) -> int:
        return sum(p.numel() for m in modules for p in m.parameters())

    attention = [m for name, m in model.named_modules() if name.endswith(".attention")]
    generators = [m for m in model.modules() if isinstance(m, MetricGenerator)]
    return ParameterCounts(total=size([model]), attention=size(attention), generator=size(generators))


@dataclass(frozen=True)
class Flops:
    """Forward FLOPs of one example, split by how their backward is counted.

    Attributes:
        dense: Every matrix product except the attention core (projections, MLPs,
            metric generation and application, output heads).
        attention_core: The fused ``softmax(Q Kᵀ) V`` products.
    """

    dense: int
    attention_core: int

    @property
    def forward(self) -> int:
        """Forward FLOPs per example."""
        return self.dense + self.attention_core

    def training_step(self, batch_size: int) -> int:
        """FLOPs of one training step (forward + backward) on ``batch_size`` examples.

        Backward is 2× forward for matrix products and 2.5× for the fused attention
        core, whose backward recomputes the scores.
        """
        per_example = 3 * self.dense + (1 + ATTENTION_CORE_BACKWARD_FACTOR) * self.attention_core
        return int(batch_size * per_example)


def _generator_flops(config: ModelConfig, contexts: int) -> int:
    """One generator's FLOPs for ``contexts`` context vectors."""
    widths = config.attention_knobs().hidden_widths()
    if not widths:
        return 0
    d = config.d_model
    if config.metric_rank == "full":  # the rowsum mode emits only the row sums of W's head blocks: H·d² = D·d
        out = d * (d // config.num_heads) if config.metric_mode == "rowsum" else d * d
    else:
        out = 2 * d * config.metric_rank
    fan_ins, fan_outs = (d, *widths), (*widths, out)
    per_context = sum(fan_in * fan_out for fan_in, fan_out in zip(fan_ins, fan_outs, strict=True))
    return 2 * contexts * per_context


def encoder_stack_flops(config: ModelConfig, length: int) -> Flops:
    """Forward FLOPs of the Transformer stack on one sequence of ``length`` positions: each layer's
    attention (its family's ``layer_flops``) and MLP, and DAMCHA's generators, one per group of layers."""
    d, layers = config.d_model, config.num_layers
    mlp = 4 * length * d * config.mlp_width
    attention, core = config.attention_knobs().layer_flops(length=length, d_model=d, num_heads=config.num_heads)
    generators = 0
    if config.is_damcha:
        chunked = config.causal and config.generator_depth > 0
        contexts = chunk_count(length, config.metric_chunk) if chunked else 1
        generators = math.ceil(layers / config.layers_per_generator) * _generator_flops(config, contexts)
    return Flops(dense=layers * (attention + mlp) + generators, attention_core=layers * core)


def model_flops(config: ModelConfig, length: int) -> Flops:
    """Analytic forward FLOPs per example for the model ``config`` describes.

    Args:
        config: The model configuration.
        length: Tokens per input sequence (each of the two, for ``pair``).

    Returns:
        The FLOPs, split into dense work and the attention core.
    """
    d = config.d_model
    positions = length + (1 if config.pooling == "cls" and config.architecture != "decoder" else 0)
    stack = encoder_stack_flops(config, positions)
    if config.architecture == "encoder":
        head = 2 * d * config.num_classes
        return Flops(stack.dense + head, stack.attention_core)
    if config.architecture == "pair":
        head = 2 * 4 * d * config.mlp_width + 2 * config.mlp_width * config.num_classes
        return Flops(2 * stack.dense + head, 2 * stack.attention_core)
    head = 2 * length * d * config.vocab_size
    return Flops(stack.dense + head, stack.attention_core)


def _counter_mapping() -> dict:
    """FLOP formulas for the CPU's fused attention, which the counter does not know."""
    aten = torch.ops.aten
    return {
        aten._scaled_dot_product_flash_attention_for_cpu: sdpa_flop.__wrapped__,
        aten._scaled_dot_product_flash_attention_for_cpu_backward: sdpa_backward_flop.__wrapped__,
    }


def counted_flops(fn: Callable[[], object]) -> int:
    """Run ``fn`` under ``FlopCounterMode`` (CPU fused attention included) and return its FLOPs."""
    with FlopCounterMode(display=False, custom_mapping=_counter_mapping()) as counter:
        fn()
    return counter.get_total_flops()
