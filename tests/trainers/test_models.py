"""Models: shapes, padding, causality, generator sharing and config validation."""

from __future__ import annotations

import math

import pytest
import torch

from tests.trainers import authors_knobs
from trainers.attention import MetricGenerator
from trainers.config import ModelConfig
from trainers.models import DecoderLM, EncoderClassifier, PairClassifier, build_model

VOCAB, CLASSES, LENGTH = 20, 10, 16


def _config(**knobs) -> ModelConfig:
    base = dict(vocab_size=VOCAB, num_classes=CLASSES, max_length=LENGTH, d_model=32, num_heads=4, num_layers=4)
    return ModelConfig(**(base | knobs))


def _batch(batch: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    tokens = torch.randint(1, VOCAB, (batch, LENGTH))
    mask = torch.ones(batch, LENGTH, dtype=torch.bool)
    mask[0, 9:] = False
    tokens[~mask] = 0
    return tokens, mask


@pytest.mark.parametrize("attention", ["mha", "damcha"])
@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_classifier_shape_and_padding_invariance(attention: str, pooling: str) -> None:
    model = build_model(_config(attention=attention, pooling=pooling)).eval()
    assert isinstance(model, EncoderClassifier)
    tokens, mask = _batch()
    logits = model(tokens, mask)
    assert logits.shape == (3, CLASSES)
    other = tokens.clone()
    other[~mask] = 7  # what sits under the padding must not matter
    torch.testing.assert_close(model(other, mask), logits)


def test_pair_classifier_shape_and_order_matters() -> None:
    model = build_model(_config(architecture="pair", attention="damcha"))
    assert isinstance(model, PairClassifier)
    first, first_mask = _batch()
    second, second_mask = _batch()
    logits = model(first, first_mask, second, second_mask)
    assert logits.shape == (3, CLASSES)
    assert not torch.allclose(logits, model(second, second_mask, first, first_mask))


@pytest.mark.parametrize("attention", ["mha", "damcha"])
def test_decoder_is_causal(attention: str) -> None:
    model = build_model(_config(architecture="decoder", attention=attention, sharing="stack"))
    assert isinstance(model, DecoderLM)
    tokens, _ = _batch()
    logits = model(tokens)
    assert logits.shape == (3, LENGTH, VOCAB)
    changed = tokens.clone()
    changed[:, 8:] = (changed[:, 8:] + 1) % VOCAB
    torch.testing.assert_close(model(changed)[:, :8], logits[:, :8])


@pytest.mark.parametrize("knobs", [dict(attention="mha"), dict(attention="damcha", metric_mode="cross"), authors_knobs((16, 24))])
def test_a_causal_classifier_s_positions_see_only_the_past_and_it_pools_the_real_tokens(knobs: dict) -> None:
    model = build_model(_config(classifier_causal=True, pooling="mean", **knobs)).eval()
    tokens, mask = _batch()
    hidden, _ = model.stack(tokens, mask)  # (B, T, D)
    changed = tokens.clone()
    changed[:, 6:] = (changed[:, 6:] % (VOCAB - 1)) + 1  # other real tokens from position 6 on
    changed_hidden, _ = model.stack(changed, mask)  # (B, T, D)
    torch.testing.assert_close(changed_hidden[:, :6], hidden[:, :6])
    assert not torch.allclose(changed_hidden[:, 6:], hidden[:, 6:])
    padded = tokens.clone()
    padded[~mask] = 7  # what sits under the padding must not matter
    torch.testing.assert_close(model(padded, mask), model(tokens, mask))
    bidirectional = build_model(_config(pooling="mean", **knobs)).eval()
    bidirectional.load_state_dict(model.state_dict())
    assert not torch.allclose(bidirectional.stack(tokens, mask)[0][:, :6], hidden[:, :6])  # the same weights, the future seen


@pytest.mark.parametrize(("sharing", "generators"), [("layer", 4), ("group:2", 2), ("group:3", 2), ("stack", 1)])
def test_generators_run_once_per_group(sharing: str, generators: int) -> None:
    model = build_model(_config(attention="damcha", sharing=sharing))
    calls: list[int] = []
    modules = [m for m in model.modules() if isinstance(m, MetricGenerator)]
    for module in modules:
        module.register_forward_hook(lambda *_: calls.append(1))
    model(*_batch())
    assert len(modules) == generators
    assert len(calls) == generators


def test_stack_sharing_reuses_one_metric_in_every_layer() -> None:
    """Perturbing the single generator must change every layer's attention."""
    model = build_model(_config(attention="damcha", sharing="stack", generator_depth=0)).eval()
    tokens, mask = _batch()
    generator = next(m for m in model.modules() if isinstance(m, MetricGenerator))
    seen = []
    for block in model.stack.blocks:
        block.attention.register_forward_hook(lambda module, args, out: seen.append(args[2]))
    model(tokens, mask)
    assert len(seen) == 4 and all(metric is seen[0] for metric in seen)
    assert seen[0].u.data_ptr() == generator.static.data_ptr()


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        (dict(num_heads=5), "num_heads=5 must divide d_model=32"),
        (dict(attention="damcha", metric_rank=33), "metric_rank=33 must be an integer in 1..d_model=32"),
        (dict(attention="damcha", sharing="group:5"), r"sharing='group:5' is not allowed.*num_layers=4"),
        (dict(attention="damcha", sharing="group:0"), r"sharing='group:0' is not allowed"),
        (dict(attention="damcha", sharing="block"), r"sharing='block' is not allowed"),
        (dict(attention="flash"), r"attention='flash' is not allowed; allowed: mha, damcha"),
        (dict(architecture="seq2seq"), r"architecture='seq2seq' is not allowed"),
        (dict(pooling="max"), r"pooling='max' is not allowed"),
        (dict(classifier_causal=True), r"classifier_causal=True needs pooling='mean'"),
        (dict(dropout=1.5), r"dropout=1.5 must be in \[0, 1\)"),
        (dict(num_classes=1), "num_classes=1 must be >= 2"),
    ],
)
def test_invalid_config_names_field_value_and_allowed(knobs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _config(**knobs)


def test_from_dict_rejects_unknown_knobs() -> None:
    config = ModelConfig.from_dict(dict(vocab_size=VOCAB, num_classes=2, max_length=8, attention="damcha", sharing="stack"))
    assert config.layers_per_generator == config.num_layers
    with pytest.raises(ValueError, match=r"unknown model knob\(s\) \['metric_rnak'\]"):
        ModelConfig.from_dict(dict(vocab_size=VOCAB, num_classes=2, max_length=8, metric_rnak=4))


@pytest.mark.parametrize("sharing", ["layer", "stack"])
def test_explicit_damcha_model_computes_what_the_fused_one_does(sharing: str) -> None:
    knobs = dict(
        vocab_size=20,
        num_classes=3,
        max_length=12,
        d_model=16,
        num_heads=4,
        mlp_width=16,
        num_layers=2,
        metric_rank=4,
        generator_depth=1,
        generator_width=8,
        sharing=sharing,
    )
    torch.manual_seed(0)
    fused = build_model(ModelConfig(attention="damcha", **knobs))
    torch.manual_seed(0)
    explicit = build_model(ModelConfig(attention="damcha_explicit", **knobs))
    explicit.load_state_dict(fused.state_dict())
    with torch.no_grad():  # a generator that starts at zero would make the check trivial
        for name, parameter in explicit.named_parameters():
            if "generator" in name:
                parameter.add_(0.1 * torch.randn_like(parameter))
    fused.load_state_dict(explicit.state_dict())
    tokens = torch.randint(2, 20, (3, 12))
    mask = torch.arange(12)[None, :] < torch.tensor([12, 7, 3])[:, None]
    torch.testing.assert_close(explicit(tokens, mask), fused(tokens, mask), atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("attention", ["mha", "damcha"])
def test_post_layernorm_blocks_normalise_each_residual_sum(attention: str) -> None:
    post = build_model(_config(attention=attention, norm="post", sharing="stack")).eval()
    pre = build_model(_config(attention=attention, sharing="stack")).eval()
    pre.load_state_dict(post.state_dict(), strict=False)  # the same weights (pre has a final norm more)
    tokens, mask = _batch()
    hidden, _ = post.stack(tokens, mask)  # (B, T, D)
    # Each block ends with LayerNorm (weight 1, bias 0 at initialisation): zero mean, unit variance.
    torch.testing.assert_close(hidden.mean(-1), torch.zeros(hidden.shape[:2]), atol=1e-5, rtol=0)
    torch.testing.assert_close(hidden.var(-1, unbiased=False), torch.ones(hidden.shape[:2]), atol=1e-3, rtol=0)
    assert isinstance(post.stack.final_norm, torch.nn.Identity)
    assert not torch.allclose(post(tokens, mask), pre(tokens, mask))
    other = tokens.clone()
    other[~mask] = 7
    torch.testing.assert_close(post(other, mask), post(tokens, mask))  # padding still does not matter


def test_an_unknown_norm_is_refused_with_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match=r"norm='mid' is not allowed; allowed: pre, post"):
        _config(norm="mid")


def test_with_post_layernorm_a_stack_generator_reads_the_embeddings_plus_positions() -> None:
    """The authors' arrangement: one generator for the stack, run once on token + position embeddings."""
    model = build_model(_config(**authors_knobs((8, 16)))).eval()
    tokens, mask = _batch()
    stack, first = model.stack, model.stack.blocks[0]
    assert all(block.attention.generator is None for block in stack.blocks[1:])  # one generator for the stack
    embedded = stack.token_embedding(tokens) + stack.position_embedding(torch.arange(LENGTH))  # (B, T, D)
    _, used = first(embedded, mask)
    torch.testing.assert_close(used.row_sums, first.attention.generate_metric(embedded, mask).row_sums)
    assert not torch.allclose(used.row_sums, first.attention.generate_metric(first.norm1(embedded), mask).row_sums)


def test_a_small_embedding_std_starts_a_decoder_near_uniform_guessing() -> None:
    """The output layer shares the token embedding: PyTorch's N(0, 1) makes the first logits
    spread by √d_model, far from log V; ``embedding_std`` 0.02 (GPT-2's) starts near it."""
    vocab, width = 258, 64
    inputs, targets = torch.randint(2, vocab, (2, 4, LENGTH))  # (B, T) each

    @torch.no_grad()
    def first_loss(embedding_std: float | None) -> float:
        torch.manual_seed(0)
        config = _config(vocab_size=vocab, architecture="decoder", d_model=width, embedding_std=embedding_std)
        logits = build_model(config)(inputs)  # (B, T, V)
        return float(torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1)))

    uniform = math.log(vocab)
    assert abs(first_loss(0.02) - uniform) < 0.1
    assert first_loss(None) > 2 * uniform
    with pytest.raises(ValueError, match="embedding_std=0 must be > 0"):
        _config(embedding_std=0)


# Every family and metric mode, as a study builds them (the authors' layer is row-sum, full rank, post-LayerNorm).
FAMILIES = {
    "mha": dict(attention="mha"),
    "damcha-cross": dict(attention="damcha", metric_mode="cross"),
    "damcha-mahalanobis": dict(attention="damcha", metric_form="mahalanobis"),
    "damcha-rowsum": dict(attention="damcha", metric_mode="rowsum", metric_rank=4),
    "damcha-authors": authors_knobs((16, 24)),
    "tha": dict(attention="tha"),
    "dcmha": dict(attention="dcmha", router_rank=2),
    "colmha": dict(attention="colmha"),
    "mma": dict(attention="mma", local_window=2),
    "moa": dict(attention="moa", expert_factor=2),
}


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
@pytest.mark.parametrize("family", FAMILIES)
def test_under_bf16_autocast_every_family_reaches_the_kernel_with_one_dtype(
    family: str, causal: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """q, k and v reach the attention kernel in autocast's dtype, so every family takes the same
    kernel path (row-sum keys are the LayerNorm's fp32 output, which once chose another)."""
    seen: list[tuple[torch.dtype, ...]] = []
    kernel = torch.nn.functional.scaled_dot_product_attention

    def recording(q, k, v, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003 (SDPA's own signature)
        seen.append((q.dtype, k.dtype, v.dtype))
        return kernel(q, k, v, *args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recording)
    knobs = FAMILIES[family] | ({"classifier_causal": True, "pooling": "mean"} if causal else {})
    model = build_model(_config(**knobs))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        model(*_batch()).float().sum().backward()
    assert seen and set(seen) == {(torch.bfloat16,) * 3}
