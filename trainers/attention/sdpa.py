"""Head splitting, masks and the two attention paths every variant shares.

``fused_attention`` calls ``F.scaled_dot_product_attention`` (FlashAttention or the
memory-efficient kernel on GPUs, the fused CPU kernel here); ``explicit_attention``
materialises the scores and is the test oracle.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def check_heads(d_model: int, num_heads: int) -> None:
    """Check that ``num_heads`` splits ``d_model`` into equal heads.

    Raises:
        ValueError: naming both and the head counts that would divide ``d_model``.
    """
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1 or d_model % num_heads:
        divisors = [h for h in range(1, d_model + 1) if d_model % h == 0]
        raise ValueError(f"num_heads={num_heads!r} must divide d_model={d_model}; allowed: {divisors}")


def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """(B, T, D) -> (B, H, T, D/H)."""
    batch, length, width = x.shape
    return x.view(batch, length, num_heads, width // num_heads).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    """(B, H, T, d) -> (B, T, H*d)."""
    batch, heads, length, head_width = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * head_width)


def attention_mask(padding_mask: Tensor | None, length: int, causal: bool) -> Tensor | None:
    """Boolean mask of allowed (query, key) pairs, broadcastable to (B, H, T, T).

    Args:
        padding_mask: (B, T) bool, True = real token, or None.
        length: Sequence length T.
        causal: Whether a query may only see keys at or before its position.

    Returns:
        (B, 1, T, T) bool (True = may attend), or None when every pair is allowed or
        causality alone applies (then the kernel's own causal path is used).
    """
    if padding_mask is None:
        return None
    allowed = padding_mask[:, None, None, :]  # (B, 1, 1, T): padding keys are hidden
    if causal:
        lower = torch.ones(length, length, dtype=torch.bool, device=padding_mask.device).tril()
        # A padding query keeps its own position so that no row is empty (no NaN).
        diagonal = torch.eye(length, dtype=torch.bool, device=padding_mask.device)
        allowed = lower & (allowed | diagonal)  # (B, 1, T, T)
    return allowed


def fused_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    padding_mask: Tensor | None,
    *,
    causal: bool,
    dropout_p: float = 0.0,
    scale: float | None = None,
) -> Tensor:
    """Scaled dot-product attention through the fused SDPA kernel.

    Args:
        q, k: (B, H, T, e); v: (B, H, T, e) too (the CPU and FlashAttention kernels
            need equal query and value widths).
        padding_mask: (B, T) bool, True = real token, or None.
        causal: Causal masking.
        dropout_p: Attention dropout (pass 0.0 in eval mode).
        scale: Score scale; None is 1/√e.

    Returns:
        (B, H, T, e).
    """
    mask = attention_mask(padding_mask, q.shape[-2], causal)
    is_causal = causal and mask is None
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale)


def masked_softmax(scores: Tensor, padding_mask: Tensor | None, *, causal: bool) -> Tensor:
    """Attention weights from materialised, already scaled scores.

    Args:
        scores: (B, H, T, T) scaled logits.
        padding_mask: (B, T) bool, True = real token, or None.
        causal: Causal masking.

    Returns:
        (B, H, T, T), each row summing to 1 over the keys it may see.
    """
    length = scores.shape[-1]
    mask = attention_mask(padding_mask, length, causal)
    if mask is None and causal:
        mask = torch.ones(length, length, dtype=torch.bool, device=scores.device).tril()
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(dim=-1)


def explicit_attention(scores: Tensor, v: Tensor, padding_mask: Tensor | None, *, causal: bool) -> Tensor:
    """Softmax attention on materialised, already scaled scores.

    Args:
        scores: (B, H, T, T) scaled logits.
        v: (B, H, T, d).
        padding_mask: (B, T) bool, True = real token, or None.
        causal: Causal masking.

    Returns:
        (B, H, T, d).
    """
    return masked_softmax(scores, padding_mask, causal=causal) @ v  # (B, H, T, d)
