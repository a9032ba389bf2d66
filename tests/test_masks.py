"""attention_book.masks, and masked attention, against PyTorch and a float64 reference."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.attention.bias import causal_lower_right

from attention_book import (
    additive_mask,
    causal_mask,
    mask_from_blocked,
    padding_mask,
    scaled_dot_product_attention,
)
from references import attention_float64 as reference

FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def randn(*shape, seed=0, dtype=torch.float32):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype)


# --- causal_mask ---------------------------------------------------------------------------


@pytest.mark.parametrize("T_q, T_k", [(1, 1), (4, 4), (3, 5), (5, 3), (1, 6)])
def test_causal_mask_is_j_le_i(T_q, T_k):
    mask = causal_mask(T_q, T_k)
    assert mask.dtype == torch.bool and mask.shape == (T_q, T_k)
    expected = [[j <= i for j in range(T_k)] for i in range(T_q)]
    assert mask.tolist() == expected


def test_causal_mask_defaults_to_square_and_takes_device():
    mask = causal_mask(4, device="cpu")
    assert mask.shape == (4, 4) and mask.device.type == "cpu"
    assert torch.equal(mask, causal_mask(4, 4))


def test_causal_mask_matches_pytorch_square_subsequent_mask():
    square = torch.nn.Transformer.generate_square_subsequent_mask(6)  # 0 / -inf
    assert torch.equal(square == 0, causal_mask(6))


@pytest.mark.parametrize("T_q, T_k", [(4, 4), (3, 6), (6, 3)])
def test_causal_mask_is_top_left_like_is_causal(T_q, T_k):
    q, k = randn(2, 3, T_q, 8, seed=1), randn(2, 3, T_k, 8, seed=2)
    identity = torch.eye(T_k).expand(2, 3, T_k, T_k)  # values e_j: output = weights
    theirs = F.scaled_dot_product_attention(q, k, identity, is_causal=True)
    _, ours = scaled_dot_product_attention(q, k, identity, causal_mask(T_q, T_k))
    torch.testing.assert_close(ours, theirs)
    if T_q < T_k:  # the other alignment really is different
        lower_right = F.scaled_dot_product_attention(
            q, k, identity, attn_mask=causal_lower_right(T_q, T_k)
        )
        assert (lower_right - theirs).abs().max() > 0.1


@pytest.mark.parametrize("args", [(-1,), (-2,), (3, -1), (0, -1)])
def test_causal_mask_rejects_negative_sizes(args):
    name = "T_q" if args[0] < 0 else "T_k"
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        causal_mask(*args)


@pytest.mark.parametrize("args", [(3.0,), (True,), ("3",), (3, 2.0), (3, torch.tensor(2))])
def test_causal_mask_rejects_non_int_sizes(args):
    name = "T_k" if len(args) == 2 else "T_q"
    with pytest.raises(TypeError, match=rf"^{name}\b"):
        causal_mask(*args)


@pytest.mark.parametrize("T_q, T_k", [(0, 0), (0, 3), (3, 0)])
def test_causal_mask_of_an_empty_sequence_is_empty(T_q, T_k):
    """As torch.tril of an empty matrix: PyTorch's attention takes empty sequences too."""
    mask = causal_mask(T_q, T_k)
    assert mask.shape == (T_q, T_k) and mask.dtype == torch.bool


# --- padding_mask --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "lengths",
    [[3, 1, 2], (3, 1, 2), torch.tensor([3, 1, 2]), torch.tensor([3, 1, 2], dtype=torch.int32),
     [np.int64(3), 1, 2], np.array([3, 1, 2]), np.array([3, 1, 2], dtype=np.uint8)],
)
def test_padding_mask_marks_real_tokens(lengths):
    mask = padding_mask(lengths)
    assert mask.dtype == torch.bool and mask.shape == (3, 3)
    assert mask.tolist() == [[True, True, True], [True, False, False], [True, True, False]]


def test_padding_mask_with_max_len_and_zero_length():
    mask = padding_mask([2, 0], max_len=4)
    assert mask.tolist() == [[True, True, False, False], [False] * 4]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=1, max_size=6), st.integers(0, 3))
def test_padding_mask_rows_are_prefixes_of_the_right_length(lengths, extra):
    max_len = max(max(lengths), 1) + extra
    mask = padding_mask(torch.tensor(lengths), max_len)
    assert mask.shape == (len(lengths), max_len)
    assert mask.sum(dim=1).tolist() == lengths
    assert torch.equal(mask, mask.cummin(dim=1).values)  # True then False, never back


@pytest.mark.parametrize(
    "lengths, max_len, name",
    [
        ([2, -1], None, "lengths"),
        (torch.tensor([2, -1]), 3, "lengths"),
        ([2, 5], 4, "lengths"),
        (torch.tensor([[1, 2]]), None, "lengths"),
        (np.array([[1, 2]]), None, "lengths"),
        (np.array([2, -1]), 3, "lengths"),
        ([], None, "lengths"),
        ([0, 0], None, "lengths"),
        ([1, 2], 0, "max_len"),
    ],
)
def test_padding_mask_rejects_bad_values(lengths, max_len, name):
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        padding_mask(lengths, max_len)


@pytest.mark.parametrize(
    "lengths, max_len, name",
    [
        (torch.tensor([2.0, 1.0]), None, "lengths"),
        (torch.tensor([True, False]), None, "lengths"),
        ([2, 1.5], None, "lengths"),
        ([2.0, 1.0], None, "lengths"),
        ([True, 2], None, "lengths"),
        (3, None, "lengths"),
        (np.array([2.0, 1.0]), None, "lengths"),
        (np.array([True, False]), None, "lengths"),
        ([1, 2], 3.0, "max_len"),
    ],
)
def test_padding_mask_rejects_bad_types(lengths, max_len, name):
    with pytest.raises(TypeError, match=rf"^{name}\b"):
        padding_mask(lengths, max_len)


# --- mask_from_blocked and additive_mask ---------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool])
def test_mask_from_blocked_inverts_the_notes_form(dtype):
    blocked = torch.ones(5, 5).triu(diagonal=1).to(dtype)  # the notes' causal matrix
    assert torch.equal(mask_from_blocked(blocked), causal_mask(5))


def test_mask_from_blocked_rejects_bad_input():
    with pytest.raises(TypeError, match=r"^blocked\b.*torch.float32"):
        mask_from_blocked(torch.zeros(2, 2))
    with pytest.raises(TypeError, match=r"^blocked\b.*list"):
        mask_from_blocked([[0, 1], [0, 0]])
    with pytest.raises(ValueError, match=r"^blocked\b.*\[0, 1, 2\]"):
        mask_from_blocked(torch.tensor([[0, 1], [2, 0]]))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_additive_mask_is_zero_or_minus_inf(dtype):
    allowed = causal_mask(3, 4)
    mask = additive_mask(allowed, dtype=dtype)
    assert mask.dtype == dtype and mask.shape == (3, 4)
    assert (mask[allowed] == 0).all() and (mask[~allowed] == -math.inf).all()


def test_additive_mask_gives_the_same_attention_as_the_bool_mask():
    q, k, v = randn(2, 2, 5, 4, seed=3), randn(2, 2, 6, 4, seed=4), randn(2, 2, 6, 3, seed=5)
    allowed = padding_mask([6, 2])[:, None, None, :] & causal_mask(5, 6)  # (N, 1, T_q, T_k)
    out_bool, w_bool = scaled_dot_product_attention(q, k, v, allowed)
    out_float, w_float = scaled_dot_product_attention(q, k, v, additive_mask(allowed))
    torch.testing.assert_close(out_float, out_bool)
    torch.testing.assert_close(w_float, w_bool)


def test_additive_mask_rejects_non_bool():
    with pytest.raises(TypeError, match=r"^allowed\b.*torch.int64"):
        additive_mask(torch.ones(2, 2, dtype=torch.int64))
    with pytest.raises(TypeError, match=r"^allowed\b.*torch.float32"):
        additive_mask(torch.zeros(2, 2))
    with pytest.raises(TypeError, match=r"^dtype\b.*torch.int32"):
        additive_mask(causal_mask(2), dtype=torch.int32)


# --- masked attention ----------------------------------------------------------------------


def test_equals_multihead_attention_with_its_inverted_convention():
    N, h, T, d_k = 2, 2, 5, 3
    q, k, v = (randn(N, h, T, d_k, seed=s) for s in (6, 7, 8))
    lengths = [5, 3]
    mha = torch.nn.MultiheadAttention(h * d_k, h, bias=False, batch_first=True).eval()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(h * d_k).repeat(3, 1))
        merged = [x.transpose(1, 2).reshape(N, T, h * d_k) for x in (q, k, v)]
        _, theirs = mha(*merged, attn_mask=~causal_mask(T), key_padding_mask=~padding_mask(lengths),
                        average_attn_weights=False)
    _, ours = scaled_dot_product_attention(q, k, v, padding_mask(lengths)[:, None, None, :] & causal_mask(T))
    torch.testing.assert_close(ours, theirs)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("side", ["right", "left"])
def test_padding_and_causal_never_give_nan(dtype, side):
    """Left padding with a causal mask leaves padded queries with no key at all."""
    N, h, T, d_k = 3, 2, 5, 4
    q, k, v = (randn(N, h, T, d_k, seed=s, dtype=dtype) for s in (9, 10, 11))
    pad = padding_mask([5, 2, 0], max_len=T)  # (N, T), the last sequence is all padding
    pad = pad if side == "right" else pad.flip(-1)
    allowed = pad[:, None, None, :] & causal_mask(T)  # (N, 1, T, T)
    out, weights = scaled_dot_product_attention(q, k, v, allowed)
    assert not out.isnan().any() and not weights.isnan().any()
    ref_out, ref_weights = reference(q, k, v, allowed)
    empty = ~allowed.any(dim=-1)  # (N, 1, T): queries with no key
    assert empty.any()
    assert (weights[empty.expand(N, h, T)] == 0).all() and (out[empty.expand(N, h, T)] == 0).all()
    tolerance = {torch.float16: 2e-3, torch.bfloat16: 1.5e-2, torch.float32: 1e-5, torch.float64: 1e-12}[dtype]
    torch.testing.assert_close(weights.double(), ref_weights, atol=tolerance, rtol=0)
    torch.testing.assert_close(out.double(), ref_out, atol=tolerance, rtol=0)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_minus_1e9_is_minus_inf_in_float16_only(dtype):
    converted = torch.tensor(-1e9).to(dtype)
    assert converted.isinf().item() == (dtype == torch.float16)


# What a fully masked row gets from a float mask filled with -1e9, -inf or finfo.min, made in
# the inputs' dtype or in float32: the mask is added in float32 for half inputs, so only -inf
# (exact in every dtype) finds the row empty; a finite fill either swamps the scores (uniform)
# or, where the spacing of the sum is fine enough, keeps them (the unmasked softmax).
FILL_OUTCOMES = {  # (inputs' dtype, mask's dtype or "own", fill) -> fully masked row
    (torch.float64, "own", "-1e9"): "unmasked",  # -1e9 + s keeps s to ~1e-7
    (torch.float32, "own", "-1e9"): "uniform",   # float32 spacing near 1e9 is 64
    (torch.float16, "own", "-1e9"): "zeros",     # -1e9 is -inf in float16
    (torch.bfloat16, "own", "-1e9"): "uniform",  # -9.98e8 in bfloat16, swamps in float32
    (torch.float64, "own", "finfo.min"): "uniform",
    (torch.float32, "own", "finfo.min"): "uniform",
    (torch.float16, "own", "finfo.min"): "unmasked",  # -65504 in float32: spacing 2^-8
    (torch.bfloat16, "own", "finfo.min"): "uniform",
    (torch.float64, torch.float32, "-1e9"): "unmasked",
    (torch.float32, torch.float32, "-1e9"): "uniform",
    (torch.float16, torch.float32, "-1e9"): "uniform",  # finite in float32, where it is added
    (torch.bfloat16, torch.float32, "-1e9"): "uniform",
    (torch.float64, torch.float32, "finfo.min"): "uniform",
    (torch.float32, torch.float32, "finfo.min"): "uniform",
    (torch.float16, torch.float32, "finfo.min"): "uniform",  # not rounded to float16's -inf
    (torch.bfloat16, torch.float32, "finfo.min"): "uniform",
} | {(dtype, mask_dtype, "-inf"): "zeros" for dtype in FLOAT_DTYPES for mask_dtype in ("own", torch.float32)}


@pytest.mark.parametrize(
    "dtype, mask_dtype, fill", list(FILL_OUTCOMES),
    ids=[f"{str(d)[6:]}-mask_{str(m).removeprefix('torch.')}-{f}" for d, m, f in FILL_OUTCOMES],
)
def test_fill_values_on_a_fully_masked_row_match_pytorch(dtype, mask_dtype, fill):
    q = randn(2, 3, 4, seed=15, dtype=dtype)  # (N, T_q, d_k)
    k = randn(2, 5, 4, seed=16, dtype=dtype)  # (N, T_k, d_k)
    identity = torch.eye(5, dtype=dtype).expand(2, 5, 5)  # (N, T_k, T_k): values e_j, output = weights
    mask_dtype = dtype if mask_dtype == "own" else mask_dtype
    value = {"-1e9": -1e9, "-inf": -math.inf, "finfo.min": torch.finfo(mask_dtype).min}[fill]
    allowed = torch.ones(3, 5, dtype=torch.bool)
    allowed[1] = False          # query 1: fully masked
    allowed[0, 2:] = False      # query 0: partly masked
    mask = torch.zeros(3, 5, dtype=torch.float64).masked_fill(~allowed, value).to(mask_dtype)  # (T_q, T_k)
    _, weights = scaled_dot_product_attention(q, k, identity, mask)  # (N, T_q, T_k)
    theirs = F.scaled_dot_product_attention(q, k, identity, attn_mask=mask)
    atol = {torch.float16: 2e-3, torch.bfloat16: 8e-3}.get(dtype, 1e-6)
    torch.testing.assert_close(weights, theirs, atol=atol, rtol=0)
    assert not weights.isnan().any()
    assert (weights[:, 0, 2:] == 0).all()  # a partly masked row: its masked keys get exactly 0
    full = weights[:, 1].double()          # (N, T_k): the fully masked row
    expected = FILL_OUTCOMES[dtype, "own" if mask_dtype == dtype else mask_dtype, fill]
    if expected == "zeros":
        assert (full == 0).all()
    elif expected == "uniform":
        torch.testing.assert_close(full, torch.full_like(full, 0.2), atol=atol, rtol=0)
    else:  # the softmax of the scores, as if there were no mask
        unmasked = reference(q, k, identity)[1][:, 1]   # (N, T_k), float64
        torch.testing.assert_close(full, unmasked, atol=4e-3 if dtype == torch.float16 else 1e-6, rtol=0)
        assert (unmasked - 0.2).abs().max() > 0.05  # not uniform: the two outcomes differ


def test_no_output_depends_on_a_later_token():
    T, d = 7, 6
    x = randn(T, d, seed=12)
    w_q, w_k, w_v = randn(3, d, d, seed=13)
    generator = torch.Generator().manual_seed(14)

    def attend(inputs):
        return scaled_dot_product_attention(inputs @ w_q, inputs @ w_k, inputs @ w_v, causal_mask(T))[0]

    for t in range(T - 1):
        changed = x.clone()
        changed[t + 1:] = torch.randn(T - t - 1, d, generator=generator)
        assert torch.equal(attend(changed)[: t + 1], attend(x)[: t + 1])  # exactly: weights of 0
        assert (attend(changed)[t + 1:] - attend(x)[t + 1:]).abs().max() > 1e-3


# --- property tests ------------------------------------------------------------------------

sizes = st.integers(1, 4)


@st.composite
def masked_problems(draw):
    """Random (N, h, T_q, T_k, d_k, d_v), inputs and a bool mask of a broadcastable shape."""
    N, h, T_q, T_k, d_k, d_v = (draw(sizes) for _ in range(6))
    seed = draw(st.integers(0, 2**16))
    q, k, v = randn(N, h, T_q, d_k, seed=seed), randn(N, h, T_k, d_k, seed=seed + 1), randn(N, h, T_k, d_v, seed=seed + 2)
    shape = draw(st.sampled_from([(N, h, T_q, T_k), (N, 1, T_q, T_k), (N, 1, 1, T_k), (T_q, T_k)]))
    bits = draw(st.lists(st.booleans(), min_size=math.prod(shape), max_size=math.prod(shape)))
    return q, k, v, torch.tensor(bits, dtype=torch.bool).reshape(shape)


@settings(max_examples=50, deadline=None)
@given(masked_problems())
def test_random_bool_masks_against_float64_and_pytorch(problem):
    q, k, v, allowed = problem
    out, weights = scaled_dot_product_attention(q, k, v, allowed)
    ref_out, ref_weights = reference(q, k, v, allowed)
    torch.testing.assert_close(weights.double(), ref_weights, atol=1e-5, rtol=0)
    torch.testing.assert_close(out.double(), ref_out, atol=1e-5, rtol=0)
    assert (weights[~allowed.expand_as(weights)] == 0).all()
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=allowed))


@settings(max_examples=50, deadline=None)
@given(masked_problems())
def test_random_causal_masks_against_float64_and_pytorch(problem):
    q, k, v, _ = problem
    T_q, T_k = q.shape[-2], k.shape[-2]
    out, weights = scaled_dot_product_attention(q, k, v, causal_mask(T_q, T_k))
    ref_out, ref_weights = reference(q, k, v, torch.ones(T_q, T_k, dtype=torch.bool).tril())
    torch.testing.assert_close(weights.double(), ref_weights, atol=1e-5, rtol=0)
    torch.testing.assert_close(out.double(), ref_out, atol=1e-5, rtol=0)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))


def test_minus_1e9_added_in_float64_leaves_the_unmasked_softmax():
    """Chapter 5: added to a fully masked row, -1e9 swamps the scores in float32 (uniform) but
    not in float64, where the differences survive (the unmasked softmax)."""
    scores = torch.tensor([1.0, 2.0, 3.0])
    in_float32 = torch.softmax(scores + torch.tensor(-1e9), dim=-1)
    in_float64 = torch.softmax(scores.double() + -1e9, dim=-1)
    torch.testing.assert_close(in_float32, torch.full((3,), 1 / 3))
    torch.testing.assert_close(in_float64, torch.softmax(scores.double(), dim=-1))


@settings(max_examples=40, deadline=None)
@given(T=st.integers(1, 8), window=st.integers(1, 9), seed=st.integers(0, 2**16))
def test_sliding_window_mask_equals_attention_over_the_window_alone(T, window, seed):
    """Chapter 5's exercise: query i sees keys i - window < j <= i; the masked attention equals
    attention of q_i over those keys alone, and PyTorch's with the same mask."""
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    mask = (j <= i) & (j > i - window)  # (T, T), written from the definition
    q, k, v = randn(3, T, 4, seed=seed, dtype=torch.float64)
    out, _ = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    for row in range(T):
        seen = slice(max(0, row - window + 1), row + 1)
        alone, _ = scaled_dot_product_attention(q[row:row + 1], k[seen], v[seen])
        torch.testing.assert_close(out[row:row + 1], alone)
    if window >= T:
        assert torch.equal(mask, causal_mask(T))
