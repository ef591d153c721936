"""Head splitting, masks and the two attention paths every variant shares.

``fused_attention`` runs a fused kernel; ``explicit_attention`` materialises the scores and
is the test oracle. A batch without padding comes with no mask: SDPA takes FlashAttention,
or cuDNN attention on Hopper GPUs. A padded batch:

- in a model compiled by ``torch.compile`` on a GPU, FlashAttention's variable-length
  kernel (``varlen_attention``), which takes no mask. On an H200 (PyTorch 2.11) a compiled
  ``full``-preset trial trained 5.9x faster than with the boolean mask (1174 against 200
  examples/s, ``python -m benchmarks.first_trials``, one run each);
- otherwise SDPA with the boolean mask: cuDNN attention on Hopper, which ran 1.16-1.46x
  the variable-length kernel's speed in eager mode on length-bucketed batches there
  (``python -m benchmarks.padded_attention``), the memory-efficient kernel on older GPUs,
  the fused kernel on CPUs.
"""

from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F
from torch import Tensor

try:  # PyTorch >= 2.10
    from torch.nn.attention.varlen import varlen_attn
except ImportError:  # pragma: no cover - older PyTorch: padded batches keep the boolean mask
    varlen_attn = None

VARLEN_DTYPES = (torch.float16, torch.bfloat16)  # FlashAttention's
VARLEN_MAX_WIDTH = 256  # FlashAttention's largest head width
VARLEN_PARAMETERS = frozenset(inspect.signature(varlen_attn).parameters) if varlen_attn else frozenset()


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
        (B, H, T, e). Rows of padding positions hold finite values that depend on the kernel
        (nothing downstream reads them: later layers hide padding keys, pooling and losses
        skip padding).
    """
    q, k, v = kernel_inputs(q, k, v)
    if padding_mask is not None and torch.compiler.is_compiling() and varlen_eligible(q, k, v, dropout_p):
        return varlen_attention(q, k, v, padding_mask, causal=causal, scale=scale)
    mask = attention_mask(padding_mask, q.shape[-2], causal)
    is_causal = causal and mask is None
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale)


def kernel_inputs(q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Queries, keys and values in the one dtype the kernel runs in: under autocast, autocast's.

    A layer's three inputs can leave autocast in different dtypes (the row-sum mode's keys are
    the LayerNorm's output, which autocast keeps in fp32). SDPA would cast them itself, but the
    choice of kernel (``varlen_eligible``) reads them before: one dtype gives every family the
    same kernel path, and a compiled model one set of guards.

    Args:
        q, k, v: (B, H, T, e) each.

    Returns:
        The three, cast to autocast's dtype where autocast is on for their device; as given otherwise.
    """
    device = q.device.type
    if not torch.is_autocast_enabled(device):
        return q, k, v
    dtype = torch.get_autocast_dtype(device)
    return q.to(dtype), k.to(dtype), v.to(dtype)


def varlen_eligible(q: Tensor, k: Tensor, v: Tensor, dropout_p: float) -> bool:
    """Whether a padded batch can run on FlashAttention's variable-length kernel: CUDA with
    FlashAttention on, half precision, equal head widths that are a multiple of 8 and at
    most 256, and no attention dropout (the kernel has none)."""
    width = q.shape[-1]
    return (
        varlen_attn is not None
        and q.is_cuda
        and q.dtype in VARLEN_DTYPES
        and q.dtype == k.dtype == v.dtype
        and k.shape[-1] == v.shape[-1] == width
        and width % 8 == 0
        and width <= VARLEN_MAX_WIDTH
        and dropout_p == 0.0
        and _flash_attention_on(q.get_device())
    )


@torch.compiler.assume_constant_result
def _flash_attention_on(device_index: int) -> bool:
    """Whether FlashAttention is enabled and the GPU has it (Ampere on). A constant to ``torch.compile``:
    asking the device's capability in traced code broke the graph at every attention layer (an H200, PyTorch 2.11)."""
    return torch.backends.cuda.flash_sdp_enabled() and torch.cuda.get_device_capability(device_index) >= (8, 0)


def segment_offsets(padding_mask: Tensor) -> Tensor:
    """Cumulative offsets that cut a padded batch, flattened to (B·T) positions, into
    segments: each row's leading padding, its real tokens, its trailing padding.

    A row's real tokens must be contiguous (right padding, as batches are built, or left
    padding, as a time-reversed batch has). Computed on the device, without waiting for it.

    Args:
        padding_mask: (B, T) bool, True = real token.

    Returns:
        (3B + 1,) int32, starting at 0 and ending at B·T; empty segments repeat an offset.
    """
    length = padding_mask.shape[1]
    real = padding_mask.sum(dim=1, dtype=torch.int32)  # (B,)
    leading = padding_mask.int().argmax(dim=1).to(torch.int32)  # (B,): the first real position
    segments = torch.stack([leading, real, length - leading - real], dim=1).flatten()  # (3B,)
    return F.pad(segments.cumsum(0, dtype=torch.int32), (1, 0))  # (3B + 1,)


def varlen_attention(
    q: Tensor, k: Tensor, v: Tensor, padding_mask: Tensor, *, causal: bool, scale: float | None = None
) -> Tensor:
    """Attention of a padded batch on FlashAttention's variable-length kernel, without a mask.

    The batch is not packed: its (B·T) positions are cut into segments (``segment_offsets``)
    that attend only within themselves, so real tokens see exactly their own row's real
    tokens, and padding sees padding. No copy beyond SDPA's own layout, and no host sync.

    Args:
        q, k, v: (B, H, T, e), eligible (``varlen_eligible``).
        padding_mask: (B, T) bool, True = real token, each row's real tokens contiguous.
        causal: Causal masking inside each segment.
        scale: Score scale; None is 1/√e.

    Returns:
        (B, H, T, e).
    """
    batch, heads, length, width = q.shape
    offsets = segment_offsets(padding_mask)  # (3B + 1,)

    def flat(x: Tensor) -> Tensor:
        return x.transpose(1, 2).reshape(batch * length, heads, width)  # (B·T, H, e)

    query = flat(q)
    options = _varlen_options(causal, scale)
    if scale is not None and "scale" not in options:  # an older signature without a scale
        query = query * (scale * width**0.5)  # the kernel's 1/√e times this is ``scale``
    out = varlen_attn(query, flat(k), flat(v), offsets, offsets, length, length, **options)  # (B·T, H, e)
    return out.view(batch, length, heads, width).transpose(1, 2)  # (B, H, T, e)


def _varlen_options(causal: bool, scale: float | None) -> dict:
    """``varlen_attn``'s keyword arguments for causality and scale: PyTorch 2.10 and 2.11 take
    ``is_causal``, later releases ``window_size`` and ``scale``."""
    options: dict = {}
    if "window_size" in VARLEN_PARAMETERS:
        options["window_size"] = (-1, 0) if causal else (-1, -1)
    else:
        options["is_causal"] = causal
    if "scale" in VARLEN_PARAMETERS and scale is not None:
        options["scale"] = scale
    return options


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
