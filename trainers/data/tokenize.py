"""ListOps tokenisation as LRA's input pipeline does it: parentheses dropped, ']' a token."""

from __future__ import annotations

from trainers.data.listops import END, OPERATORS

PAD_ID = 0
CLS_ID = 1
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
