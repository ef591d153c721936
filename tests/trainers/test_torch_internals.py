"""What training relies on in torch's internals (``trainers.torch_internals``), checked against the installed
torch: when a release moves or changes one, these tests fail, rather than peak memory reading 0 or compile
workers taking a trial's neighbours' cores."""

from __future__ import annotations

import torch

from trainers.torch_internals import TorchDispatchMode, set_compile_threads, tree_leaves


class _Outputs(TorchDispatchMode):
    """Records the shape of every tensor an operator returns while active."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[tuple[int, ...]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        out = func(*args, **(kwargs or {}))
        self.shapes += [tuple(leaf.shape) for leaf in tree_leaves(out) if isinstance(leaf, torch.Tensor)]
        return out


def test_a_dispatch_mode_sees_every_tensor_an_operator_creates() -> None:
    x = torch.ones(3, 4)
    with _Outputs() as seen:
        values, indices = torch.ones(2, 5).topk(2)  # one operator, two outputs
        (x @ x.T).sum()
    assert seen.shapes.count((2, 2)) == 2 and (3, 3) in seen.shapes and () in seen.shapes
    assert values.shape == indices.shape == (2, 2)


def test_tree_leaves_flattens_nested_outputs_in_order() -> None:
    a, b, c = torch.zeros(1), torch.zeros(2), torch.zeros(3)
    leaves = [leaf for leaf in tree_leaves((a, [b, {"c": c}], 7)) if isinstance(leaf, torch.Tensor)]
    assert [leaf.numel() for leaf in leaves] == [1, 2, 3]


def test_compile_threads_are_set_in_inductor_s_own_config() -> None:
    import torch._inductor.config as inductor_config

    before = inductor_config.compile_threads
    try:
        set_compile_threads(before + 1)
        assert inductor_config.compile_threads == before + 1
    finally:
        inductor_config.compile_threads = before


def test_dynamo_counts_the_graphs_it_compiles_and_can_fail_at_the_recompile_limit() -> None:
    import torch._dynamo.config as dynamo_config

    from trainers.torch_internals import compiled_graphs, fail_at_recompile_limit, recompile_limit_hit

    before = compiled_graphs()
    double = torch.compile(lambda x: x * 2, backend="eager")
    double(torch.ones(3))
    assert compiled_graphs() == before + 1
    double(torch.ones(3))  # the same graph serves
    assert compiled_graphs() == before + 1
    assert issubclass(recompile_limit_hit(), Exception)
    with dynamo_config.patch(fail_on_recompile_limit_hit=False):
        fail_at_recompile_limit()
        assert dynamo_config.fail_on_recompile_limit_hit is True
