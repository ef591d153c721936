"""Token ids of the LRA tasks: ListOps as LRA's input pipeline (parentheses dropped, ']' a token);
bytes and pixels offset past <pad> and <cls>."""

from __future__ import annotations

import numpy as np

from trainers.data.listops import END, OPERATORS

PAD_ID = 0
LISTOPS_VOCABULARY: tuple[str, ...] = ("<pad>", "<cls>", *OPERATORS, END, *(str(d) for d in range(10)))
_LISTOPS_IDS = {token: index for index, token in enumerate(LISTOPS_VOCABULARY)}


def tokenize_listops(source: str) -> list[int]:
    """Token ids of a ListOps expression.

    Args:
        source: An LRA ``Source`` string, e.g. ``"( ( [MAX 2 ) 9 ] )"``.

    Returns:
        Ids in ``LISTOPS_VOCABULARY`` (no padding, no CLS).

    Raises:
        ValueError: a token that ListOps does not have (named).
    """
    ids = []
    for token in source.split():
        if token in ("(", ")"):
            continue
        try:
            ids.append(_LISTOPS_IDS[token])
        except KeyError:
            raise ValueError(f"unknown ListOps token {token!r}; allowed: {' '.join(LISTOPS_VOCABULARY[2:])}, ( )") from None
    return ids


# Bytes and pixels share one layout: value v (0..255) is id v + 2, after <pad> and <cls>.
VALUE_OFFSET = 2
BYTE_VOCAB_SIZE = PIXEL_VOCAB_SIZE = 256 + VALUE_OFFSET


def tokenize_bytes(text: bytes, max_length: int) -> list[int]:
    """Byte-level ids (LRA Text and Retrieval), truncated to ``max_length`` as LRA does."""
    return [byte + VALUE_OFFSET for byte in text[:max_length]]


def tokenize_pixels(pixels: np.ndarray) -> list[int]:
    """Row-major pixel ids of a (H, W) uint8 image: a sequence of H*W tokens."""
    return (pixels.reshape(-1).astype(np.int16) + VALUE_OFFSET).tolist()
