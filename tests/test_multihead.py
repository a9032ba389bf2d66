"""Tests of attention_book.MultiHeadAttention against torch.nn.MultiheadAttention and float64."""

import math
import re

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attention_book import MultiHeadAttention, merge_heads, padding_mask, split_heads
from attention_book._measure import floor_forward


def copy_from_torch(ours: MultiHeadAttention, reference: nn.MultiheadAttention) -> None:
    """Load nn.MultiheadAttention's weights (in_proj stacks W_q, W_k, W_v) into ours."""
    weights = reference.in_proj_weight.chunk(3)
    biases = reference.in_proj_bias.chunk(3)
    with torch.no_grad():
        for layer, w, b in zip((ours.q_proj, ours.k_proj, ours.v_proj), weights, biases):
            layer.weight.copy_(w)
            layer.bias.copy_(b)
    ours.out_proj.load_state_dict(reference.out_proj.state_dict())


def pair(d_model, num_heads, dtype=torch.float32, seed=0):
    torch.manual_seed(seed)
    reference = nn.MultiheadAttention(d_model, num_heads, batch_first=True, dtype=dtype).eval()
    with torch.no_grad():  # nonzero biases, so that a lost bias would show
        reference.in_proj_bias.normal_()
        reference.out_proj.bias.normal_()
    ours = MultiHeadAttention(d_model, num_heads).to(dtype).eval()
    copy_from_torch(ours, reference)
    return ours, reference


def randn(*shape, seed, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def float64_reference(module, query, key, value, allowed=None):
    """Multi-head attention written out in float64 with an explicit loop over heads.

    ``allowed``: bool, broadcastable to (N, T_q, T_k), True = may attend; a query with no
    allowed key gets a zero context.
    """
    d = module.d_k
    q, k, v = (x.double() for x in (query, key, value))
    proj = lambda layer, x: x @ layer.weight.double().T + layer.bias.double()  # noqa: E731
    Q, K, V = proj(module.q_proj, q), proj(module.k_proj, k), proj(module.v_proj, v)
    heads = []
    for c in range(module.num_heads):
        cols = slice(c * d, (c + 1) * d)
        scores = Q[..., cols] @ K[..., cols].transpose(-2, -1) / math.sqrt(d)  # (N, T_q, T_k)
        if allowed is not None:
            scores = scores.masked_fill(~allowed, float("-inf"))
        weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # a row with no key: zeros
        heads.append(weights @ V[..., cols])  # (N, T_q, d_k)
    return proj(module.out_proj, torch.cat(heads, dim=-1))


SHAPES = [  # N, T_q, T_k, d_model, h
    (1, 1, 1, 8, 1),
    (2, 5, 5, 12, 3),
    (3, 4, 7, 16, 4),
    (2, 9, 3, 32, 8),
    (1, 6, 10, 24, 2),
]


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("N, T_q, T_k, d_model, h", SHAPES)
def test_equals_torch_multihead(N, T_q, T_k, d_model, h, need_weights):
    ours, reference = pair(d_model, h)
    query, memory = randn(N, T_q, d_model, seed=1), randn(N, T_k, d_model, seed=2)
    expected, expected_w = reference(query, memory, memory, average_attn_weights=False)
    got, got_w = ours(query, memory, need_weights=need_weights)
    torch.testing.assert_close(got, expected)
    if need_weights:
        torch.testing.assert_close(got_w, expected_w)
    else:
        assert got_w is None


@pytest.mark.parametrize("need_weights", [True, False])
def test_equals_torch_multihead_with_padding(need_weights):
    ours, reference = pair(16, 4)
    query, memory = randn(3, 5, 16, seed=3), randn(3, 7, 16, seed=4)
    keep = padding_mask([7, 4, 1], 7)  # (N, T_k)
    expected, expected_w = reference(
        query, memory, memory, key_padding_mask=~keep, average_attn_weights=False
    )
    got, got_w = ours(query, memory, mask=keep[:, None, None, :], need_weights=need_weights)
    torch.testing.assert_close(got, expected)
    if need_weights:
        torch.testing.assert_close(got_w, expected_w)
        assert torch.equal(got_w[1, :, :, 4:], torch.zeros(4, 5, 3))


def test_self_attention_equals_torch_fast_path():
    """Self-attention, query is key is value, under no_grad: nn.MultiheadAttention's fast path."""
    ours, reference = pair(32, 4)
    x = randn(2, 6, 32, seed=5)
    keep = padding_mask([6, 3], 6)
    with torch.no_grad(), torch.profiler.profile() as profile:
        expected, _ = reference(x, x, x, key_padding_mask=~keep, need_weights=False)
    assert any("_native_multi_head_attention" in event.key for event in profile.key_averages())
    with torch.no_grad():
        got, _ = ours(x, attention_mask=keep)
    torch.testing.assert_close(got, expected)  # every row, the padded queries' too


@pytest.mark.parametrize("need_weights", [True, False])
def test_float64_equals_reference_loop(need_weights):
    ours, reference = pair(24, 3, dtype=torch.float64)
    query = randn(2, 4, 24, seed=6, dtype=torch.float64)
    memory = randn(2, 5, 24, seed=7, dtype=torch.float64)
    keep = padding_mask([5, 2], 5)
    got, _ = ours(query, memory, mask=keep[:, None, None, :], need_weights=need_weights)
    expected = float64_reference(ours, query, memory, memory, keep[:, None, :])
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)
    expected_torch, _ = reference(query, memory, memory, key_padding_mask=~keep)
    torch.testing.assert_close(got, expected_torch, rtol=1e-12, atol=1e-12)


def test_float32_close_to_float64():
    ours, _ = pair(48, 6)
    query, memory = randn(2, 8, 48, seed=8), randn(2, 11, 48, seed=9)
    expected = float64_reference(ours, query, memory, memory)
    for need_weights in (True, False):
        got, _ = ours(query, memory, need_weights=need_weights)
        assert (got.double() - expected).abs().max() < 1e-5


def test_fused_and_teaching_paths_agree_with_causal_mask():
    torch.manual_seed(0)
    module = MultiHeadAttention(32, 4).eval()
    x = randn(3, 9, 32, seed=10)
    causal = torch.ones(9, 9, dtype=torch.bool).tril()  # (T_q, T_k) broadcasts
    fused, _ = module(x, mask=causal)
    teaching, weights = module(x, mask=causal, need_weights=True)
    torch.testing.assert_close(fused, teaching)
    assert torch.equal(weights.triu(1), torch.zeros_like(weights))
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 4, 9))


def test_key_and_value_defaults():
    torch.manual_seed(0)
    module = MultiHeadAttention(16, 2).eval()
    x, memory = randn(2, 4, 16, seed=11), randn(2, 6, 16, seed=12)
    torch.testing.assert_close(module(x)[0], module(x, x, x)[0])
    torch.testing.assert_close(module(x, memory)[0], module(x, memory, memory)[0])


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("need_weights", [True, False])
def test_fully_masked_query_gives_bias_not_nan(dtype, need_weights, device):
    torch.manual_seed(0)
    module = MultiHeadAttention(16, 4).to(device, dtype).eval()
    x = randn(2, 5, 16, seed=13).to(device, dtype)
    mask = torch.ones(5, 5, dtype=torch.bool, device=device)
    mask[2] = False  # query 2 may attend to nothing
    out, weights = module(x, mask=mask, need_weights=need_weights)
    assert not out.isnan().any()
    torch.testing.assert_close(out[:, 2], module.out_proj.bias.expand(2, 16))
    if need_weights:
        assert torch.equal(weights[:, :, 2], torch.zeros(2, 4, 5, dtype=dtype, device=device))


QUERY_2_SEES_NOTHING = torch.ones(5, 5, dtype=torch.bool).index_fill(0, torch.tensor([2]), 0)  # (T_q, T_k)
NO_KEY = {  # masks that leave some queries no key at all, and which outputs those are
    "query 2 of every sequence": (dict(mask=QUERY_2_SEES_NOTHING), (slice(None), 2)),
    # a sequence of padding only, as a 4-D mask (attention_mask refuses it: tests/test_conventions.py)
    "sequence 1 all padding": (dict(mask=padding_mask([5, 0], 5)[:, None, None, :]), (1, slice(None))),
}


@pytest.mark.parametrize("case", list(NO_KEY))
def test_fused_path_zeroes_a_query_with_no_key_whatever_the_kernel_returns(monkeypatch, case):
    """A kernel that returned NaN for a query with no key (as some CUDA kernels have) changes nothing."""
    import attention_book.multihead

    sdpa = F.scaled_dot_product_attention

    def nan_kernel(q, k, v, attn_mask=None, **kwargs):
        out = sdpa(q, k, v, attn_mask=attn_mask, **kwargs)  # (N, h, T_q, d_k)
        no_key = ~attn_mask.any(dim=-1, keepdim=True)       # broadcasts to (N, h, T_q, 1)
        return out.masked_fill(no_key, float("nan"))

    masks, no_key_rows = NO_KEY[case]
    torch.manual_seed(0)
    module = MultiHeadAttention(16, 4).eval()
    x = randn(2, 5, 16, seed=13)
    expected, _ = module(x, need_weights=True, **masks)  # the teaching path zeroes them itself
    monkeypatch.setattr(attention_book.multihead.F, "scaled_dot_product_attention", nan_kernel)
    got, _ = module(x, **masks)
    assert not got.isnan().any()
    torch.testing.assert_close(got, expected)
    bias = module.out_proj.bias.expand_as(got[no_key_rows])
    torch.testing.assert_close(got[no_key_rows], bias)


def test_fully_padded_sequence_does_not_nan():
    torch.manual_seed(0)
    module = MultiHeadAttention(16, 4).eval()
    x = randn(2, 5, 16, seed=14)
    keep = padding_mask([5, 0], 5)[:, None, None, :]  # sequence 1 is all padding
    for need_weights in (True, False):
        out, _ = module(x, mask=keep, need_weights=need_weights)
        torch.testing.assert_close(out[1], module.out_proj.bias.expand(5, 16))


def test_gradients_of_fused_path_match_teaching_path():
    torch.manual_seed(0)
    module = MultiHeadAttention(24, 3)
    query, memory = randn(2, 5, 24, seed=15), randn(2, 7, 24, seed=16)
    keep = padding_mask([7, 3], 7)[:, None, None, :]
    target = randn(2, 5, 24, seed=17)
    grads = []
    for need_weights in (False, True):
        module.zero_grad()
        q, m = query.clone().requires_grad_(), memory.clone().requires_grad_()
        out, _ = module(q, m, mask=keep, need_weights=need_weights)
        ((out - target) ** 2).sum().backward()
        grads.append([p.grad.clone() for p in module.parameters()] + [q.grad, m.grad])
    for fused, teaching in zip(*grads):
        assert fused.abs().sum() > 0  # every parameter and input receives a gradient
        torch.testing.assert_close(fused, teaching)


def test_gradients_match_torch_multihead():
    ours, reference = pair(16, 4)
    reference.train()  # dropout is 0: train mode only changes the code path
    x = randn(2, 6, 16, seed=18)
    out_ours, _ = ours(x)
    out_ref, _ = reference(x, x, x, need_weights=False)
    out_ours.square().sum().backward()
    out_ref.square().sum().backward()
    g_in = torch.cat([ours.q_proj.weight.grad, ours.k_proj.weight.grad, ours.v_proj.weight.grad])
    torch.testing.assert_close(g_in, reference.in_proj_weight.grad)
    torch.testing.assert_close(ours.out_proj.weight.grad, reference.out_proj.weight.grad)


@pytest.mark.parametrize("need_weights", [True, False])
def test_dropout_only_in_training(need_weights):
    torch.manual_seed(0)
    module = MultiHeadAttention(32, 4, dropout=0.5)
    x = randn(2, 8, 32, seed=19)
    module.eval()
    torch.manual_seed(1)
    eval_a, _ = module(x, need_weights=need_weights)
    torch.manual_seed(2)
    eval_b, _ = module(x, need_weights=need_weights)
    assert torch.equal(eval_a, eval_b)  # eval: deterministic, no dropout
    module.train()
    torch.manual_seed(1)
    train_a, _ = module(x, need_weights=need_weights)
    torch.manual_seed(2)
    train_b, _ = module(x, need_weights=need_weights)
    torch.manual_seed(1)
    train_a_again, _ = module(x, need_weights=need_weights)
    assert not torch.allclose(train_a, train_b)
    assert not torch.allclose(train_a, eval_a)
    torch.testing.assert_close(train_a, train_a_again)  # the same seed, the same mask


def test_dropout_on_weights_in_training():
    torch.manual_seed(0)
    module = MultiHeadAttention(32, 4, dropout=0.5).train()
    x = randn(1, 16, 32, seed=20)
    torch.manual_seed(3)
    out, weights = module(x, need_weights=True)
    dropped = (weights == 0).float().mean()
    assert 0.35 < dropped < 0.65  # about half of the weights are zeroed
    kept = weights[weights != 0]
    module.eval()
    _, clean = module(x, need_weights=True)
    torch.testing.assert_close(kept, 2 * clean[weights != 0])  # survivors scaled by 1/(1-p)
    v = split_heads(module.v_proj(x), 4)
    torch.testing.assert_close(out, module.out_proj(merge_heads(weights @ v)))


@pytest.mark.parametrize("need_weights", [True, False])
def test_zero_dropout_training_equals_eval(need_weights):
    torch.manual_seed(0)
    module = MultiHeadAttention(16, 2)
    x = randn(2, 5, 16, seed=21)
    train_out, _ = module.train()(x, need_weights=need_weights)
    eval_out, _ = module.eval()(x, need_weights=need_weights)
    assert torch.equal(train_out, eval_out)


def test_split_merge_heads():
    x = torch.arange(2 * 5 * 12.0).view(2, 5, 12)
    heads = split_heads(x, 3)
    assert heads.shape == (2, 3, 5, 4)
    assert torch.equal(heads[1, 2, 4], x[1, 4, 8:12])  # head 2 of token 4 of sequence 1
    assert torch.equal(merge_heads(heads), x)
    assert not torch.equal(heads, x.view(2, 3, 5, 4))  # the view-without-permute bug


def test_global_projection_equals_per_head_projections():
    torch.manual_seed(0)
    module = MultiHeadAttention(12, 3)
    x = randn(2, 5, 12, seed=22)
    q = split_heads(module.q_proj(x), 3)  # (N, h, T, d_k)
    for i in range(3):
        rows = slice(4 * i, 4 * (i + 1))
        expected = F.linear(x, module.q_proj.weight[rows], module.q_proj.bias[rows])
        torch.testing.assert_close(q[:, i], expected)


def test_submodules_and_bias_flag():
    module = MultiHeadAttention(16, 4, bias=False)
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        layer = getattr(module, name)
        assert isinstance(layer, nn.Linear)
        assert layer.weight.shape == (16, 16) and layer.bias is None
    assert MultiHeadAttention(16, 4).q_proj.bias.shape == (16,)


# --- bad input --------------------------------------------------------------------------


def test_d_model_not_divisible():
    with pytest.raises(ValueError, match=r"d_model=10.*num_heads=3"):
        MultiHeadAttention(10, 3)


@pytest.mark.parametrize("d_model, num_heads, name", [(0, 1, "d_model"), (-8, 2, "d_model"),
                                                      (8, 0, "num_heads"), (8, -2, "num_heads")])
def test_non_positive_sizes(d_model, num_heads, name):
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        MultiHeadAttention(d_model, num_heads)


def test_non_integer_sizes():
    with pytest.raises(TypeError, match=r"^d_model\b.*float"):
        MultiHeadAttention(8.0, 2)
    with pytest.raises(TypeError, match=r"^num_heads\b.*bool"):
        MultiHeadAttention(8, True)
    with pytest.raises(TypeError, match=r"^num_heads\b.*str"):
        MultiHeadAttention(8, "2")


def test_numpy_integer_sizes_accepted():
    import numpy as np

    module = MultiHeadAttention(np.int64(8), np.int32(2), dropout=np.float64(0.25))
    assert (module.d_model, module.num_heads, module.d_k, module.dropout) == (8, 2, 4, 0.25)
    assert type(module.d_model) is int and type(module.num_heads) is int
    assert type(module.dropout) is float
    heads = split_heads(torch.randn(2, 5, 8), np.int64(4))
    assert heads.shape == (2, 4, 5, 2)


@pytest.mark.parametrize("dropout", [None, "0.1", True, torch.tensor(0.1)])
def test_dropout_not_a_number(dropout):
    with pytest.raises(TypeError, match=r"^dropout\b"):
        MultiHeadAttention(8, 2, dropout=dropout)


def test_integer_dropout_zero_accepted():
    assert MultiHeadAttention(8, 2, dropout=0).dropout == 0.0


@pytest.mark.parametrize("dropout", [-0.1, 1.0, 1.5])
def test_bad_dropout(dropout):
    with pytest.raises(ValueError, match=r"^dropout\b"):
        MultiHeadAttention(8, 2, dropout=dropout)


@pytest.fixture
def module():
    torch.manual_seed(0)
    return MultiHeadAttention(8, 2)


@pytest.mark.parametrize("name", ["query", "key", "value"])
def test_wrong_last_dimension(module, name):
    inputs = {"query": torch.randn(2, 3, 8), "key": torch.randn(2, 4, 8), "value": torch.randn(2, 4, 8)}
    inputs[name] = torch.randn(2, inputs[name].shape[1], 6)
    with pytest.raises(ValueError, match=rf"^{name}\b.*\(2, \d, 6\)"):
        module(inputs["query"], inputs["key"], inputs["value"])


def test_wrong_number_of_dimensions(module):
    with pytest.raises(ValueError, match=r"^query\b.*\(3, 8\)"):
        module(torch.randn(3, 8))


def test_mismatched_batch_sizes(module):
    with pytest.raises(ValueError, match=r"batch size.*\(2, 3, 8\).*\(3, 4, 8\)"):
        module(torch.randn(2, 3, 8), torch.randn(3, 4, 8), torch.randn(3, 4, 8))


def test_key_value_length_mismatch(module):
    with pytest.raises(ValueError, match=r"T_k.*\(2, 4, 8\).*\(2, 5, 8\)"):
        module(torch.randn(2, 3, 8), torch.randn(2, 4, 8), torch.randn(2, 5, 8))


def test_non_tensor_and_non_floating_inputs(module):
    with pytest.raises(TypeError, match=r"^query\b.*list"):
        module([[1.0] * 8])
    with pytest.raises(TypeError, match=r"^key\b.*torch.int64"):
        module(torch.randn(2, 3, 8), torch.ones(2, 3, 8, dtype=torch.long))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.uint8])
def test_non_bool_mask(module, dtype):
    mask = torch.ones(2, 1, 1, 3, dtype=dtype)
    with pytest.raises(TypeError, match=rf"^mask\b.*{dtype}"):
        module(torch.randn(2, 3, 8), mask=mask)


MASK_FORMS = r"^mask\b.*\(4, 5\).*\(2, 2, 4, 5\).*"


@pytest.mark.parametrize(
    "shape",
    [(2, 5), (3, 1, 1, 5), (4, 4), (5, 4), (1, 3, 4, 5)],
    ids=["padding not reshaped", "wrong N", "wrong T_k", "swapped", "wrong h"],
)
def test_mask_that_does_not_broadcast(module, shape):
    mask = torch.ones(*shape, dtype=torch.bool)
    query, key = torch.randn(2, 4, 8), torch.randn(2, 5, 8)  # T_q = 4, T_k = 5
    with pytest.raises(ValueError, match=MASK_FORMS + re.escape(str(shape)) + r".*attention_mask"):
        module(query, key, mask=mask)


@pytest.mark.parametrize(
    "shape",
    [(5,), (2, 1, 5), (2, 4, 5), (1, 4, 5), (1, 2, 2, 4, 5), (1, 1, 1, 1, 5)],
    ids=["1-D", "3-D (N, 1, T_k)", "3-D (N, T_q, T_k)", "3-D (1, T_q, T_k)", "5-D", "5-D ones"],
)
def test_mask_of_other_rank_is_rejected(module, shape):
    """Only 2-D and 4-D masks: a 3-D mask broadcasts even when it should not (below)."""
    mask = torch.ones(*shape, dtype=torch.bool)
    query, key = torch.randn(2, 4, 8), torch.randn(2, 5, 8)  # N = h = 2, T_q = 4, T_k = 5
    with pytest.raises(ValueError, match=MASK_FORMS + re.escape(str(shape))):
        module(query, key, mask=mask)


def test_per_sequence_3d_mask_rejected_when_batch_equals_heads(module):
    """(N, T_q, T_k) with N == h would broadcast, giving head 1 of sequence 0 sequence 1's mask."""
    query = torch.randn(2, 4, 8)  # N = h = 2
    mask = torch.ones(2, 4, 4, dtype=torch.bool).tril()
    mask[1, :, 0] = False
    assert torch.broadcast_shapes(mask.shape, (2, 2, 4, 4)) == (2, 2, 4, 4)  # it would fit
    with pytest.raises(ValueError, match=r"got shape \(2, 4, 4\)"):
        module(query, mask=mask)
    out, weights = module(query, mask=mask[:, None], need_weights=True)  # the 4-D form works
    assert torch.equal(weights[0, 1, :, 0] > 0, torch.ones(4, dtype=torch.bool))
    assert torch.equal(weights[1, :, :, 0], torch.zeros(2, 4))


def test_2d_mask_is_read_as_queries_by_keys_when_batch_equals_length():
    """A padding mask (N, T_k) given as 2-D when N == T_q is read as (T_q, T_k): documented."""
    torch.manual_seed(0)
    module = MultiHeadAttention(8, 2).eval()
    x = randn(4, 4, 8, seed=23)  # N = T = 4
    keep = padding_mask([4, 3, 2, 1], 4)  # (N, T_k)
    _, as_2d = module(x, mask=keep, need_weights=True)  # query row i gets sequence i's mask
    _, as_4d = module(x, mask=keep[:, None, None, :], need_weights=True)
    for n in range(4):  # every sequence: query row i is masked like sequence i
        assert torch.equal(as_2d[n] == 0, (~keep).expand(2, 4, 4))
        assert torch.equal(as_4d[n] == 0, (~keep[n]).expand(2, 4, 4))  # the intended mask
    assert not torch.allclose(as_2d, as_4d)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("mask_shape", [(1, 5), (4, 1), (1, 1, 1, 5), (2, 1, 4, 5), (1, 2, 1, 1)])
def test_broadcastable_2d_and_4d_masks_accepted(module, mask_shape, need_weights):
    query, key = torch.randn(2, 4, 8), torch.randn(2, 5, 8)
    mask = torch.ones(*mask_shape, dtype=torch.bool)
    out, _ = module(query, key, mask=mask, need_weights=need_weights)
    torch.testing.assert_close(out, module(query, key, need_weights=need_weights)[0])


@pytest.mark.parametrize("name", ["key", "value"])
def test_input_dtype_mismatch_names_the_argument(module, name):
    inputs = {"query": torch.randn(2, 3, 8), "key": torch.randn(2, 4, 8), "value": torch.randn(2, 4, 8)}
    inputs[name] = inputs[name].double()
    with pytest.raises(TypeError, match=rf"^{name}\b.*torch.float64"):
        module(inputs["query"], inputs["key"], inputs["value"])


def test_input_dtype_differs_from_weights(module):
    x = torch.randn(2, 3, 8, dtype=torch.float64)
    with pytest.raises(TypeError, match=r"^query\b.*torch.float64.*torch.float32"):
        module(x)
    out, _ = module.double()(x)  # converting the module fixes it
    assert out.dtype == torch.float64
    with pytest.raises(TypeError, match=r"^key\b.*torch.float16"):
        module(x, x.half())


def test_split_heads_bad_input():
    with pytest.raises(ValueError, match=r"^x\b.*num_heads=3.*\(2, 5, 8\)"):
        split_heads(torch.randn(2, 5, 8), 3)
    with pytest.raises(ValueError, match=r"^num_heads\b.*0"):
        split_heads(torch.randn(2, 5, 8), 0)
    with pytest.raises(ValueError, match=r"^num_heads\b.*-2"):
        split_heads(torch.randn(2, 5, 8), -2)
    with pytest.raises(TypeError, match=r"^num_heads\b.*float"):
        split_heads(torch.randn(2, 5, 8), 2.0)
    with pytest.raises(TypeError, match=r"^num_heads\b.*bool"):
        split_heads(torch.randn(2, 5, 8), True)
    with pytest.raises(TypeError, match=r"^x\b.*list"):
        split_heads([[1.0, 2.0]], 2)
    with pytest.raises(ValueError, match=r"^x\b.*\(5, 8\)"):
        merge_heads(torch.randn(5, 8))


# --- extreme input: half precision, no keys -----------------------------------------------


def test_half_precision_teaching_path_stays_finite_like_the_fused_path():
    """Inputs of 10 through projections 10 I: q = k = 100, d_k = 64, scores 80000 > 65504."""
    module = MultiHeadAttention(64, 1).half().eval()
    with torch.no_grad():
        for layer in (module.q_proj, module.k_proj, module.v_proj, module.out_proj):
            layer.weight.copy_(10 * torch.eye(64))
            layer.bias.zero_()
    x = torch.full((2, 3, 64), 10.0, dtype=torch.float16)
    fused, _ = module(x)
    teaching, weights = module(x, need_weights=True)
    assert fused.isfinite().all() and teaching.isfinite().all() and weights.isfinite().all()
    torch.testing.assert_close(teaching, fused)
    torch.testing.assert_close(weights, torch.full((2, 1, 3, 3), 1 / 3, dtype=torch.float16))


@pytest.mark.parametrize("T_q, T_k", [(3, 0), (0, 4), (0, 0)])
def test_no_keys_or_no_queries_both_paths_agree_with_torch(T_q, T_k):
    ours, reference = pair(16, 4)
    query, memory = randn(2, T_q, 16, seed=24), randn(2, T_k, 16, seed=25)
    expected, _ = reference(query, memory, memory)
    for need_weights in (True, False):
        got, weights = ours(query, memory, need_weights=need_weights)
        assert got.shape == (2, T_q, 16)
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(got, ours.out_proj.bias.expand(2, T_q, 16))  # a zero context
        if need_weights:
            assert weights.shape == (2, 4, T_q, T_k)


# --- attention_mask (padding) ------------------------------------------------------------------------


@pytest.mark.parametrize("need_weights", [True, False])
def test_attention_mask_equals_torch_key_padding_mask_inverted(need_weights):
    ours, reference = pair(16, 4)
    query, memory = randn(3, 5, 16, seed=26), randn(3, 7, 16, seed=27)
    keep = padding_mask([7, 4, 1], 7)  # (N, T_k), True = real token
    expected, expected_w = reference(query, memory, memory, key_padding_mask=~keep,
                                     average_attn_weights=False)
    got, got_w = ours(query, memory, attention_mask=keep, need_weights=need_weights)
    torch.testing.assert_close(got, expected)
    if need_weights:
        torch.testing.assert_close(got_w, expected_w)


def test_attention_mask_is_not_misread_when_batch_equals_length():
    """N == T_q: a (N, T_k) mask given as `mask` is read as (T_q, T_k); attention_mask is not."""
    torch.manual_seed(0)
    module = MultiHeadAttention(8, 2).eval()
    x = randn(4, 4, 8, seed=28)  # N = T = 4
    keep = padding_mask([4, 3, 2, 1], 4)  # (N, T_k)
    _, named = module(x, attention_mask=keep, need_weights=True)
    _, as_4d = module(x, mask=keep[:, None, None, :], need_weights=True)
    _, as_2d = module(x, mask=keep, need_weights=True)
    torch.testing.assert_close(named, as_4d)
    assert not torch.allclose(named, as_2d)
    for n in range(4):
        assert torch.equal(named[n] > 0, keep[n].expand(2, 4, 4))


@pytest.mark.parametrize("need_weights", [True, False])
def test_attention_mask_combines_with_mask(need_weights):
    ours, _ = pair(16, 4)
    x = randn(2, 5, 16, seed=29)
    keep = padding_mask([5, 3], 5)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    got, _ = ours(x, mask=causal, attention_mask=keep, need_weights=need_weights)
    expected, _ = ours(x, mask=keep[:, None, None, :] & causal, need_weights=need_weights)
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("need_weights", [True, False])
def test_attention_mask_of_0_and_1_as_a_tokenizer_returns_it(need_weights):
    ours, _ = pair(16, 4)
    x = randn(3, 5, 16, seed=30)
    keep = padding_mask([5, 3, 1], 5)  # (N, T), True = real token
    expected, _ = ours(x, attention_mask=keep, need_weights=need_weights)
    for dtype in (torch.long, torch.int32, torch.uint8):
        got, _ = ours(x, attention_mask=keep.to(dtype), need_weights=need_weights)
        torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_pytorchs_key_padding_mask_is_refused_not_silently_inverted(module):
    """nn.MultiheadAttention's key_padding_mask means True = padding: the name is not taken."""
    query = torch.randn(2, 5, 8)
    is_padding = ~padding_mask([5, 3], 5)  # (N, T_k), True = padding, as PyTorch wants it
    with pytest.raises(TypeError, match="key_padding_mask"):
        module(query, key_padding_mask=is_padding)


def test_attention_mask_bad_input(module):
    query, key = torch.randn(2, 4, 8), torch.randn(2, 5, 8)
    for bad in (torch.ones(2, 5), torch.zeros(2, 5, dtype=torch.float16), [[True] * 5] * 2):
        with pytest.raises(TypeError, match=r"^attention_mask\b"):
            module(query, key, attention_mask=bad)
    for values in ([0, 1, 2, 1, 1], [1, 1, -1, 0, 0]):
        with pytest.raises(ValueError, match=r"^attention_mask\b.*0 and 1"):
            module(query, key, attention_mask=torch.tensor([values, values]))
    for shape in ((2, 4), (3, 5), (5,), (2, 1, 1, 5)):
        with pytest.raises(ValueError, match=r"^attention_mask\b"):
            module(query, key, attention_mask=torch.ones(shape, dtype=torch.bool))


# --- is_causal ---------------------------------------------------------------------------


@pytest.mark.parametrize("T_q, T_k", [(6, 6), (4, 7), (7, 4)])
@pytest.mark.parametrize("need_weights", [True, False])
def test_is_causal_equals_an_explicit_causal_mask_and_torch(T_q, T_k, need_weights):
    ours, reference = pair(16, 4)
    query, memory = randn(2, T_q, 16, seed=30), randn(2, T_k, 16, seed=31)
    causal = torch.ones(T_q, T_k, dtype=torch.bool).tril()  # top-left, as PyTorch's is_causal
    expected, _ = reference(query, memory, memory, attn_mask=~causal)
    got, weights = ours(query, memory, is_causal=True, need_weights=need_weights)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(got, ours(query, memory, mask=causal, need_weights=need_weights)[0])
    if need_weights:
        assert torch.equal(weights > 0, causal.expand(2, 4, T_q, T_k))


def test_is_causal_fused_path_builds_no_mask(monkeypatch):
    """The fused path hands is_causal=True to PyTorch's kernel and no (T, T) mask."""
    import attention_book.multihead

    calls = []
    sdpa = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(attention_book.multihead.F, "scaled_dot_product_attention", spy)
    torch.manual_seed(0)
    module = MultiHeadAttention(16, 4).eval()
    module(randn(2, 6, 16, seed=32), is_causal=True)
    assert len(calls) == 1
    assert calls[0].get("is_causal") is True and calls[0].get("attn_mask") is None


@pytest.mark.parametrize("need_weights", [True, False])
def test_is_causal_with_attention_mask(need_weights):
    ours, reference = pair(16, 4)
    x = randn(3, 5, 16, seed=33)
    keep = padding_mask([5, 3, 1], 5)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    expected, _ = reference(x, x, x, attn_mask=~causal, key_padding_mask=~keep)
    got, _ = ours(x, is_causal=True, attention_mask=keep, need_weights=need_weights)
    torch.testing.assert_close(got, expected)


# --- the floor of the timings (attention_book._measure.floor_forward) ------------------------


@pytest.mark.parametrize("is_causal", [False, True])
def test_floor_forward_equals_torch_with_the_same_weights(is_causal):
    ours, reference = pair(16, 4, dtype=torch.float64)
    x = randn(2, 7, 16, seed=35, dtype=torch.float64)
    every_key = torch.ones(7, 7, dtype=torch.bool)
    allowed = every_key.tril() if is_causal else every_key  # top-left, as PyTorch's is_causal
    expected, _ = reference(x, x, x, attn_mask=~allowed)
    torch.testing.assert_close(floor_forward(ours, x, is_causal=is_causal), expected, rtol=0, atol=1e-12)


def test_floor_forward_checks_its_arguments():
    ours, _ = pair(16, 4)
    x = randn(1, 3, 16, seed=36)
    with pytest.raises(TypeError, match="layer must have num_heads"):
        floor_forward(nn.Linear(16, 16), x)
    with pytest.raises(TypeError, match="is_causal"):
        floor_forward(ours, x, is_causal=1)
    with pytest.raises(ValueError, match=r"shape \(N, T, d_model\)"):
        floor_forward(ours, randn(3, 16, seed=37))  # no batch dimension

def test_is_causal_with_left_padding_gives_no_nan():
    """Left padding under a causal mask leaves the first queries no key: a zero context."""
    torch.manual_seed(0)
    module = MultiHeadAttention(16, 4).eval()
    x = randn(2, 5, 16, seed=34)
    keep = padding_mask([5, 3], 5).flip(-1)  # sequence 1: padding first
    for need_weights in (True, False):
        out, _ = module(x, is_causal=True, attention_mask=keep, need_weights=need_weights)
        assert not out.isnan().any()
        torch.testing.assert_close(out[1, :2], module.out_proj.bias.expand(2, 16))


def test_is_causal_with_mask_is_refused(module):
    x = torch.randn(2, 4, 8)
    with pytest.raises(ValueError, match=r"^mask\b.*is_causal"):
        module(x, mask=torch.ones(4, 4, dtype=torch.bool), is_causal=True)
    with pytest.raises(TypeError, match=r"^is_causal\b"):
        module(x, is_causal=1)


# --- what h heads cost, and what one head can only blend (chapter 6) --------------------------------


@pytest.mark.parametrize("N, T, d_model", [(2, 16, 48), (1, 7, 24)])
def test_h_heads_cost_the_flops_of_one_head_but_h_times_the_weights(N, T, d_model):
    """Matrix products: 8 N T d^2 (projections) + 4 N T^2 d (QK^T, AV) whatever h is."""
    from torch.utils.flop_counter import FlopCounterMode

    x = randn(N, T, d_model, seed=40)
    expected = 8 * N * T * d_model**2 + 4 * N * T**2 * d_model
    for h in (1, 2, 4, 12):
        module = MultiHeadAttention(d_model, h).eval()
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            _, weights = module(x, need_weights=True)
        assert counter.get_total_flops() == expected
        assert weights.shape == (N, h, T, T)


T_SENTENCE, POSITIONS, CONTENT = 6, 8, 8  # tokens; one-hot position features, then content
D_CONTENT = POSITIONS + CONTENT


def _with_content(content):
    """Token j's input: its one-hot position e_j, then its content u_j: (1, T, 16)."""
    return torch.cat([torch.eye(T_SENTENCE, POSITIONS), content], dim=-1)[None]


def _position_module(num_heads, beta, value_weight, out_weight):
    """Queries and keys read positions only: the previous token (rows 0-7), token 0 (rows 8-15).

    With one head, q_i . k_j = beta for j = i - 1 and for j = 0 (i >= 2); with two heads, head 0
    matches the previous token and head 1 token 0.
    """
    position = torch.eye(POSITIONS, D_CONTENT)  # x_j -> e_j
    previous = position.roll(1, dims=0)         # x_j -> e_{j+1}: q_i . k_j = 1 for j = i - 1
    every_to_first = torch.zeros(POSITIONS, D_CONTENT)
    every_to_first[0, :T_SENTENCE] = 1.0        # q_i = e_0 for every i
    first_only = torch.zeros(POSITIONS, D_CONTENT)
    first_only[0, 0] = 1.0                      # k_j = e_0 for j = 0 only
    module = MultiHeadAttention(D_CONTENT, num_heads, bias=False).requires_grad_(False)
    module.q_proj.weight.copy_(beta * torch.cat([position, every_to_first]))
    module.k_proj.weight.copy_(torch.cat([previous, first_only]))
    module.v_proj.weight.copy_(value_weight)
    module.out_proj.weight.copy_(out_weight)
    return module


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("beta", [1.0, 10.0, 100.0])
def test_one_position_head_passes_on_only_a_blend_of_the_two_contents(beta, seed):
    """Weights from positions only: the contents reach the output through sum_j w_ij u_j, so
    u_{i-1} += w_i0 delta, u_0 -= w_{i,i-1} delta leaves it unchanged, whatever W^V and W^O."""
    g = torch.Generator().manual_seed(seed)
    content = torch.randn(T_SENTENCE, CONTENT, generator=g)  # (T, 8)
    random_v, random_o = torch.randn(2, D_CONTENT, D_CONTENT, generator=g)
    one = _position_module(1, beta, random_v, random_o)
    out, weights = one(_with_content(content), need_weights=True)  # (1, T, 16), (1, 1, T, T)
    for i in range(2, T_SENTENCE):
        w_previous, w_first = weights[0, 0, i, i - 1], weights[0, 0, i, 0]
        assert w_previous == w_first and w_previous > 0.1  # equal scores, both keys attended
        delta = 3 * torch.randn(CONTENT, generator=g)
        changed = content.clone()
        changed[i - 1] += w_first * delta
        changed[0] -= w_previous * delta
        for need_weights in (True, False):
            changed_out, changed_weights = one(_with_content(changed), need_weights=need_weights)
            torch.testing.assert_close(changed_out[0, i], out[0, i], atol=1e-4, rtol=1e-5)
            assert changed_weights is None or torch.equal(changed_weights, weights)  # contents: no effect
        assert (one(_with_content(changed))[0][0, 1] - out[0, 1]).abs().max() > 1e-2  # other queries see it
    if beta == 100.0:
        half = torch.full((T_SENTENCE - 2,), 0.5)
        torch.testing.assert_close(weights[0, 0, 2:, 0], half, atol=1e-6, rtol=0)


def test_two_position_heads_deliver_both_contents_and_see_them_swapped():
    """The same q_proj and k_proj split into two heads: u_{i-1} and u_0, each in its own columns."""
    g = torch.Generator().manual_seed(3)
    content = torch.randn(T_SENTENCE, CONTENT, generator=g)  # (T, 8)
    read_content = torch.eye(CONTENT, D_CONTENT).roll(POSITIONS, dims=1)  # x_j -> u_j
    two = _position_module(2, 100.0, torch.cat([read_content, read_content]), torch.eye(D_CONTENT))
    one = _position_module(1, 100.0, *torch.randn(2, D_CONTENT, D_CONTENT, generator=g))
    rows = torch.arange(2, T_SENTENCE)
    out = two(_with_content(content))[0][0]  # (T, 16)
    torch.testing.assert_close(out[rows, :CONTENT], content[rows - 1], atol=1e-4, rtol=0)
    torch.testing.assert_close(out[rows, CONTENT:], content[[0]].expand(len(rows), -1), atol=1e-4, rtol=0)
    swapped = content.clone()
    swapped[[0, 2]] = content[[2, 0]]  # token 0 and token 2, the previous token of i = 3
    out_swapped = two(_with_content(swapped))[0][0]
    torch.testing.assert_close(out_swapped[3], torch.cat([content[0], content[2]]), atol=1e-4, rtol=0)
    torch.testing.assert_close(one(_with_content(swapped))[0][0, 3], one(_with_content(content))[0][0, 3],
                               atol=1e-4, rtol=1e-5)


# --- random shapes, dtypes and masks against float64 ---------------------------------------


TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 5e-2}


@settings(max_examples=40, deadline=None)
@given(N=st.integers(1, 3), T_q=st.integers(1, 6), T_k=st.integers(1, 6), h=st.sampled_from([1, 2, 4]),
       d_k=st.integers(1, 4), dtype=st.sampled_from(list(TOLERANCE)), need_weights=st.booleans(),
       causal=st.booleans(), seed=st.integers(0, 2**16))
def test_property_against_float64(N, T_q, T_k, h, d_k, dtype, need_weights, causal, seed):
    """attention_mask (which may leave a query no key), is_causal, cross-attention, any path."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    module = MultiHeadAttention(h * d_k, h).to(dtype).eval()
    query = torch.randn(N, T_q, h * d_k, generator=g).to(dtype)   # (N, T_q, d_model)
    memory = torch.randn(N, T_k, h * d_k, generator=g).to(dtype)  # (N, T_k, d_model)
    keep = torch.rand(N, T_k, generator=g) < 0.7                  # (N, T_k)
    keep[~keep.any(dim=-1), -1] = True  # a real token in every sequence (no real token is refused)
    allowed = keep[:, None, :] & (torch.ones(T_q, T_k, dtype=torch.bool).tril() if causal else True)
    got, _ = module(query, memory, attention_mask=keep, is_causal=causal, need_weights=need_weights)
    expected = float64_reference(module, query, memory, memory, allowed)  # (N, T_q, d_model)
    assert not got.isnan().any()
    torch.testing.assert_close(got.double(), expected, atol=TOLERANCE[dtype], rtol=TOLERANCE[dtype])