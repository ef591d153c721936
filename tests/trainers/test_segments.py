"""The compiled models' alternative to the boolean mask: a padded batch as
segments of one flat sequence, the layout FlashAttention's variable-length kernel takes on
GPUs (``tests/gpu`` runs the kernel itself)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from trainers.attention.sdpa import attention_mask, segment_offsets, varlen_eligible


def _mask(lengths: list[int], length: int, *, left: bool = False) -> torch.Tensor:
    mask = torch.arange(length)[None, :] < torch.tensor(lengths)[:, None]  # (B, T), right padding
    return mask.flip(-1) if left else mask


def test_offsets_cut_each_row_into_leading_padding_real_tokens_and_trailing_padding() -> None:
    assert segment_offsets(_mask([5, 3, 1], 5)).tolist() == [0, 0, 5, 5, 5, 8, 10, 10, 11, 15]
    assert segment_offsets(_mask([5, 3, 1], 5, left=True)).tolist() == [0, 0, 5, 5, 7, 10, 10, 14, 15, 15]


def _segment_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, causal: bool) -> torch.Tensor:
    """The segments' semantics, written out: (B, H, T, e) flattened to one sequence of B·T
    positions, where a position sees the positions of its own segment only."""
    batch, heads, length, width = q.shape
    offsets = segment_offsets(mask)
    segment = torch.bucketize(torch.arange(batch * length), offsets[1:], right=True)  # (B·T,): each position's segment
    allowed = segment[:, None] == segment[None, :]  # (B·T, B·T)
    if causal:
        allowed &= torch.ones_like(allowed).tril()

    def flat(x: torch.Tensor) -> torch.Tensor:
        return x.transpose(1, 2).reshape(1, batch * length, heads, width).transpose(1, 2)  # (1, H, B·T, e)

    out = F.scaled_dot_product_attention(flat(q), flat(k), flat(v), attn_mask=allowed)  # (1, H, B·T, e)
    return out.transpose(1, 2).reshape(batch, length, heads, width).transpose(1, 2)


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
@pytest.mark.parametrize("left", [False, True], ids=["right-padded", "left-padded"])
def test_segments_give_real_tokens_the_attention_of_the_padding_mask(causal: bool, left: bool) -> None:
    """Real tokens attend to exactly their own row's real tokens, as with the boolean mask."""
    q, k, v = torch.randn(3, 4, 2, 7, 8).unbind(0)  # (B=4, H=2, T=7, e=8) each
    mask = _mask([7, 4, 1, 6], 7, left=left)  # one full row: its padding segments are empty
    segments = _segment_attention(q, k, v, mask, causal)
    masked = F.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask(mask, 7, causal))
    real = mask[:, None, :, None].expand_as(masked)  # (B, H, T, e)
    torch.testing.assert_close(segments[real], masked[real], atol=1e-6, rtol=1e-5)
    assert torch.isfinite(segments).all()  # padding sees padding: no empty rows


def test_cpu_tensors_keep_the_boolean_mask() -> None:
    q = torch.randn(2, 2, 5, 8, dtype=torch.bfloat16)
    assert not varlen_eligible(q, q, q, 0.0)  # the CPU kernel takes the mask; varlen is CUDA's
