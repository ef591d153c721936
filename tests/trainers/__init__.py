"""Tests of the models, their attention, costs and training."""


def authors_knobs(widths: tuple[int, int]) -> dict:
    """The DAMCHA authors' layer as knobs, at a test's size: full-rank rowsum, one generator for
    the stack with two hidden layers of ``widths``, post-LayerNorm blocks."""
    return dict(
        attention="damcha",
        metric_mode="rowsum",
        metric_rank="full",
        generator_depth=2,
        generator_width=widths,
        sharing="stack",
        norm="post",
    )
