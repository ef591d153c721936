"""Tests of the models, their attention, costs and training."""

from collections.abc import Callable


def counting_backend(calls: list[int]) -> Callable:
    """A ``torch.compile`` backend that runs the captured graph as it is and appends to
    ``calls`` each time a compiled graph runs (Dynamo skipping a frame leaves it unchanged)."""

    def backend(graph, example_inputs):  # noqa: ANN001, ARG001 (torch.compile's backend signature)
        def run(*args):  # noqa: ANN002
            calls.append(1)
            return graph.forward(*args)

        return run

    return backend


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
