"""Transformer models with a pluggable attention variant and DAMCHA generator sharing.

Builders turn a ``ModelConfig`` into modules; modules take flat keyword arguments.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from trainers.attention import DAMCHA, Metric, build_attention
from trainers.config import ModelConfig


def _attention_arguments(config: ModelConfig, *, own_generator: bool) -> dict:
    """Keyword arguments of the config's attention layer: its family's layer knobs, causality, dropout."""
    arguments: dict = {"causal": config.causal, "dropout": config.dropout} | config.attention_knobs().layer_arguments()
    if config.is_damcha:
        arguments["own_generator"] = own_generator
    return arguments


class Block(nn.Module):
    """Transformer block, pre- or post-LayerNorm.

    Args:
        attention: The attention layer.
        d_model: Model width.
        mlp_width: Hidden width of the MLP.
        dropout: Dropout on both residual branches.
        norm: ``pre``: ``x + f(norm(x))``; ``post``: ``norm(x + f(x))``, for both sublayers.
    """

    def __init__(self, attention: nn.Module, *, d_model: int, mlp_width: int, dropout: float, norm: str = "pre") -> None:
        super().__init__()
        self.post_norm = norm == "post"
        self.norm1 = nn.LayerNorm(d_model)
        self.attention = attention
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, mlp_width), nn.GELU(), nn.Linear(mlp_width, d_model))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, padding_mask: Tensor | None, metric: Metric | None = None) -> tuple[Tensor, Metric | None]:
        """Apply the block.

        Args:
            x: (B, T, D).
            padding_mask: (B, T) bool, True = real token.
            metric: The shared DAMCHA metric from an earlier layer of this group.

        Returns:
            The new (B, T, D) and the metric this block used (None for MHA), which the
            next layers of its group reuse.
        """
        h = x if self.post_norm else self.norm1(x)  # (B, T, D): the attention's (and generator's) input
        if isinstance(self.attention, DAMCHA):
            if self.attention.generator is not None:  # first layer of its group: generate
                metric = self.attention.generate_metric(h, padding_mask)
            attended = self.attention(h, padding_mask, metric)
        else:
            attended = self.attention(h, padding_mask)
        if self.post_norm:
            x = self.norm1(x + self.dropout(attended))  # (B, T, D)
            return self.norm2(x + self.dropout(self.mlp(x))), metric
        x = x + self.dropout(attended)
        x = x + self.dropout(self.mlp(self.norm2(x)))
        return x, metric


class TransformerStack(nn.Module):
    """Token + learned position embeddings, blocks, and a final LayerNorm after pre-LayerNorm blocks.

    With DAMCHA, the first layer of every group of ``config.layers_per_generator``
    consecutive layers owns a generator; it runs once on that layer's input and its
    metric is reused by the rest of the group (``stack``: one generator for all).

    Args:
        config: The model configuration.
        positions: Position embeddings to allocate (``max_length`` plus any prefix).
    """

    def __init__(self, config: ModelConfig, *, positions: int) -> None:
        super().__init__()
        self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.position_embedding = nn.Embedding(positions, config.d_model)
        if config.embedding_std is not None:
            for embedding in (self.token_embedding, self.position_embedding):
                nn.init.normal_(embedding.weight, std=config.embedding_std)
        group = config.layers_per_generator if config.is_damcha else 1
        self.blocks = nn.ModuleList(
            Block(
                build_attention(
                    config.attention,
                    config.d_model,
                    config.num_heads,
                    **_attention_arguments(config, own_generator=i % group == 0),
                ),
                d_model=config.d_model,
                mlp_width=config.mlp_width,
                dropout=config.dropout,
                norm=config.norm,
            )
            for i in range(config.num_layers)
        )
        # Post-LayerNorm blocks end normalised already.
        self.final_norm = nn.Identity() if config.norm == "post" else nn.LayerNorm(config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, tokens: Tensor, padding_mask: Tensor | None, prefix: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """Encode.

        Args:
            tokens: (B, T) token ids.
            padding_mask: (B, T) bool, True = real token, or None.
            prefix: (D,) embedding placed before the tokens (a CLS token), or None.

        Returns:
            Hidden states (B, T', D) with T' = T (+1 with a prefix), and the padding mask
            over those positions (None if none was given).
        """
        x = self.token_embedding(tokens)  # (B, T, D)
        if prefix is not None:
            x = torch.cat([prefix.expand(x.shape[0], 1, -1), x], dim=1)  # (B, T+1, D)
            if padding_mask is not None:
                padding_mask = torch.cat([padding_mask.new_ones(x.shape[0], 1), padding_mask], dim=1)
        positions = torch.arange(x.shape[1], device=x.device)
        x = self.dropout(x + self.position_embedding(positions))
        metric = None
        for block in self.blocks:
            x, metric = block(x, padding_mask, metric)
        return self.final_norm(x), padding_mask


def _pool(hidden: Tensor, padding_mask: Tensor | None, pooling: str) -> Tensor:
    """(B, T, D) -> (B, D): the CLS position, or the masked mean."""
    if pooling == "cls":
        return hidden[:, 0]
    if padding_mask is None:
        return hidden.mean(dim=1)
    weights = padding_mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)


class _PooledEncoder(nn.Module):
    """A stack whose output is pooled to one vector per sequence."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.pooling = config.pooling
        cls = config.pooling == "cls"
        self.stack = TransformerStack(config, positions=config.max_length + int(cls))
        self.cls_embedding = nn.Parameter(torch.randn(config.d_model) * 0.02) if cls else None

    def encode(self, tokens: Tensor, padding_mask: Tensor | None) -> Tensor:
        """(B, T) -> (B, D)."""
        hidden, mask = self.stack(tokens, padding_mask, prefix=self.cls_embedding)
        return _pool(hidden, mask, self.pooling)


class EncoderClassifier(_PooledEncoder):
    """Sequence classifier for LRA single-sequence tasks.

    Args:
        config: The model configuration (``architecture="encoder"``).
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config)
        self.head = nn.Linear(config.d_model, config.num_classes)

    def forward(self, tokens: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        """(B, T) tokens, (B, T) mask -> (B, C) logits."""
        return self.head(self.encode(tokens, padding_mask))


class PairClassifier(_PooledEncoder):
    """Two-tower classifier for LRA Retrieval: one shared encoder, [u, v, u*v, u-v] head.

    Args:
        config: The model configuration (``architecture="pair"``).
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config)
        self.head = nn.Sequential(
            nn.Linear(4 * config.d_model, config.mlp_width), nn.GELU(), nn.Linear(config.mlp_width, config.num_classes)
        )

    def forward(
        self, tokens: Tensor, padding_mask: Tensor | None, other_tokens: Tensor, other_padding_mask: Tensor | None
    ) -> Tensor:
        """Two (B, T) token batches with their masks -> (B, C) logits."""
        u = self.encode(tokens, padding_mask)  # (B, D)
        v = self.encode(other_tokens, other_padding_mask)  # (B, D)
        return self.head(torch.cat([u, v, u * v, u - v], dim=-1))


class DecoderLM(nn.Module):
    """Causal language model; the output layer shares the token embedding's weights.

    Args:
        config: The model configuration (``architecture="decoder"``).
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.stack = TransformerStack(config, positions=config.max_length)

    def forward(self, tokens: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        """(B, T) tokens -> (B, T, V) next-token logits."""
        hidden, _ = self.stack(tokens, padding_mask)
        return hidden @ self.stack.token_embedding.weight.T  # (B, T, V)


MODELS: dict[str, type[nn.Module]] = {"encoder": EncoderClassifier, "pair": PairClassifier, "decoder": DecoderLM}


def build_model(config: ModelConfig) -> nn.Module:
    """Build the model that ``config.architecture`` names."""
    return MODELS[config.architecture](config)
