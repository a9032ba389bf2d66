"""attention_book.scaled_dot_product_attention against PyTorch and a float64 reference."""

import math
import re

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_book import scaled_dot_product_attention
from references import attention_float64 as reference
from references import qkv

FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


SHAPES = [
    # (query shape, key shape, d_v): unbatched, batched, multi-head, T_q != T_k, d_k != d_v
    ((4, 8), (4, 8), 8),
    ((3, 5, 16), (3, 5, 16), 16),
    ((2, 4, 6, 8), (2, 4, 9, 8), 5),
    ((2, 3, 1, 7, 4), (2, 3, 1, 2, 4), 3),
]


@pytest.mark.parametrize("shape_q, shape_k, d_v", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_equals_pytorch_without_mask(shape_q, shape_k, d_v, dtype):
    q, k, v = qkv(shape_q, shape_k, d_v, dtype)
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.shape == shape_q[:-1] + (d_v,) and out.dtype == dtype
    assert weights.shape == shape_q[:-1] + (shape_k[-2],)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))
    ref_out, ref_weights = reference(q, k, v)
    torch.testing.assert_close(out.double(), ref_out, rtol=0, atol=1e-5 if dtype == torch.float32 else 1e-12)
    torch.testing.assert_close(weights.double(), ref_weights, rtol=0, atol=1e-5 if dtype == torch.float32 else 1e-12)


@pytest.mark.parametrize("shape_q, shape_k, d_v", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_equals_pytorch_with_bool_and_float_masks(shape_q, shape_k, d_v, dtype):
    q, k, v = qkv(shape_q, shape_k, d_v, dtype, seed=1)
    g = torch.Generator().manual_seed(2)
    scores_shape = shape_q[:-1] + (shape_k[-2],)
    allowed = torch.rand(scores_shape, generator=g) > 0.4
    allowed[..., 0] = True  # PyTorch's fused kernels and ours agree on empty rows too; see below
    additive = torch.randn(scores_shape, generator=g, dtype=torch.float64).to(dtype)
    for mask in (allowed, additive, allowed[..., :1, :]):  # the last one broadcasts over T_q
        out, _ = scaled_dot_product_attention(q, k, v, mask)
        torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
        atol = 1e-5 if dtype == torch.float32 else 1e-12
        torch.testing.assert_close(out.double(), reference(q, k, v, mask)[0], rtol=0, atol=atol)


def test_custom_scale_matches_pytorch():
    q, k, v = qkv((2, 5, 8), (2, 6, 8), 4)
    out, _ = scaled_dot_product_attention(q, k, v, scale=0.3)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, scale=0.3))
    assert not torch.allclose(out, scaled_dot_product_attention(q, k, v)[0])


def test_masked_weights_are_exactly_zero_and_rows_sum_to_one():
    q, k, v = qkv((2, 6, 4), (2, 6, 4), 4)
    allowed = torch.ones(6, 6, dtype=torch.bool).tril()  # (T_q, T_k)
    _, weights = scaled_dot_product_attention(q, k, v, allowed)
    assert (weights[..., ~allowed] == 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 6))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("kind", ["bool", "-inf"])
def test_fully_masked_row_gives_zeros_never_nan(dtype, kind):
    q, k, v = qkv((2, 3, 4, 8), (2, 3, 5, 8), 6, dtype)
    allowed = torch.ones(4, 5, dtype=torch.bool)
    allowed[2] = False  # query 2 may attend to nothing
    mask = allowed if kind == "bool" else torch.zeros(4, 5, dtype=dtype).masked_fill(~allowed, -math.inf)
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert not out.isnan().any() and not weights.isnan().any()
    assert (weights[..., 2, :] == 0).all() and (out[..., 2, :] == 0).all()
    ref_out, _ = reference(q, k, v, allowed)
    tolerance = {torch.float16: 5e-3, torch.bfloat16: 3e-2}.get(dtype, 1e-5)
    torch.testing.assert_close(out.double(), ref_out, rtol=0, atol=tolerance)
    # PyTorch's SDPA gives zeros for such rows as well
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), rtol=0, atol=tolerance)


def test_float16_scores_do_not_overflow_before_scaling():
    g = torch.Generator().manual_seed(2)
    q = (60 * torch.randn(2, 4, 256, generator=g)).half()  # q @ k^T exceeds float16's 65504
    k = (60 * torch.randn(2, 4, 256, generator=g)).half()
    v = torch.randn(2, 4, 8, generator=g).half()
    assert (q @ k.transpose(-2, -1)).isinf().any()
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.isfinite().all() and weights.isfinite().all()
    ref_out, _ = reference(q, k, v)
    torch.testing.assert_close(out.double(), ref_out, rtol=0, atol=1e-2)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), rtol=0, atol=1e-2)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_float32_mask_is_added_in_float32_like_pytorch(dtype):
    """A float32 -1e9 mask with half inputs: a partly masked row gets exact 0s; a fully masked
    row is not -inf (the mask is not rounded to float16), so it gets uniform weights, as in
    PyTorch."""
    q, k, _ = qkv((3, 4), (3, 4), 2, dtype)
    identity = torch.eye(3, dtype=dtype)  # values e_j: the output is the weights
    mask = torch.tensor([[0.0, -1e9, 0.0], [-1e9, -1e9, -1e9], [0.0, 0.0, 0.0]])  # float32
    out, weights = scaled_dot_product_attention(q, k, identity, mask)
    assert weights.dtype == dtype and not weights.isnan().any()
    assert weights[0, 1] == 0
    torch.testing.assert_close(weights[1], torch.full((3,), 1 / 3, dtype=dtype))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, identity, attn_mask=mask))


def test_float32_bias_is_not_rounded_to_half():
    """An ALiBi-style float32 bias at distances 300..304 keeps its differences of 0.5 with
    bfloat16 inputs (rounded to bfloat16 it would be -150, -150, -151, -152, -152)."""
    bias = -0.5 * torch.arange(300.0, 305.0)[None]  # (T_q, T_k) = (1, 5), float32
    q, k = torch.zeros(1, 4, dtype=torch.bfloat16), torch.zeros(5, 4, dtype=torch.bfloat16)
    identity = torch.eye(5, dtype=torch.bfloat16)   # values e_j: the output is the weights
    _, weights = scaled_dot_product_attention(q, k, identity, bias)
    exact = torch.softmax(bias.double(), dim=-1)    # (1, 5): 0.4287, 0.2600, 0.1577, ...
    torch.testing.assert_close(weights.double(), exact, atol=4e-3, rtol=0)
    torch.testing.assert_close(weights, F.scaled_dot_product_attention(q, k, identity, attn_mask=bias))
    rounded = torch.softmax(bias.to(torch.bfloat16).double(), dim=-1)  # the bias rounded first
    assert (rounded - exact).abs().max() > 0.04  # what rounding the mask would have cost


def test_float16_large_float32_bias_keeps_its_differences():
    """A float32 bias of 1000 + (0, 0.3, ..., 1.2) with float16 inputs: float16 would round the
    steps of 0.3 to multiples of 0.5."""
    bias = (1000 + 0.3 * torch.arange(5.0))[None]  # (1, 5), float32
    q, k = torch.zeros(1, 4, dtype=torch.float16), torch.zeros(5, 4, dtype=torch.float16)
    identity = torch.eye(5, dtype=torch.float16)
    _, weights = scaled_dot_product_attention(q, k, identity, bias)
    exact = torch.softmax(bias.double(), dim=-1)
    torch.testing.assert_close(weights.double(), exact, atol=1e-3, rtol=0)
    torch.testing.assert_close(weights, F.scaled_dot_product_attention(q, k, identity, attn_mask=bias))


def test_gradients_match_pytorch():
    q, k, v = qkv((2, 3, 5, 4), (2, 3, 6, 4), 3, torch.float64)
    allowed = torch.rand(2, 1, 5, 6, generator=torch.Generator().manual_seed(3)) > 0.3
    allowed[..., 0] = True
    ours = [t.clone().requires_grad_() for t in (q, k, v)]
    theirs = [t.clone().requires_grad_() for t in (q, k, v)]
    scaled_dot_product_attention(*ours, allowed)[0].square().sum().backward()
    F.scaled_dot_product_attention(*theirs, attn_mask=allowed).square().sum().backward()
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a.grad, b.grad)
    assert torch.autograd.gradcheck(
        lambda q, k, v: scaled_dot_product_attention(q, k, v, allowed)[0], ours
    )


@settings(max_examples=60, deadline=None)
@given(
    batch=st.lists(st.integers(1, 3), min_size=0, max_size=2),
    t_q=st.integers(1, 6),
    t_k=st.integers(1, 6),
    d_k=st.integers(1, 8),
    d_v=st.integers(1, 8),
    mask_kind=st.sampled_from(["none", "bool", "float"]),
    seed=st.integers(0, 2**16),
)
def test_property_matches_float64_reference(batch, t_q, t_k, d_k, d_v, mask_kind, seed):
    batch = tuple(batch)
    q, k, v = qkv(batch + (t_q, d_k), batch + (t_k, d_k), d_v, torch.float64, seed)
    g = torch.Generator().manual_seed(seed + 1)
    mask = {
        "none": None,
        "bool": torch.rand(batch + (t_q, t_k), generator=g) > 0.5,  # may leave rows empty
        "float": torch.randn(batch + (t_q, t_k), generator=g, dtype=torch.float64),
    }[mask_kind]
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    ref_out, ref_weights = reference(q, k, v, mask)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(weights, ref_weights)


# --- bad input: each a TypeError or ValueError naming the argument and the shapes or dtypes ---


def test_mismatched_d_k():
    q, k, v = torch.randn(4, 8), torch.randn(5, 6), torch.randn(5, 3)
    with pytest.raises(ValueError, match=r"d_k.*\(4, 8\).*\(5, 6\)"):
        scaled_dot_product_attention(q, k, v)


def test_mismatched_t_k():
    q, k, v = torch.randn(4, 8), torch.randn(5, 8), torch.randn(6, 3)
    with pytest.raises(ValueError, match=r"T_k.*\(5, 8\).*\(6, 3\)"):
        scaled_dot_product_attention(q, k, v)


def test_mismatched_leading_dimensions_are_not_broadcast():
    q, k, v = torch.randn(2, 4, 8), torch.randn(1, 5, 8), torch.randn(1, 5, 3)
    with pytest.raises(ValueError, match=r"leading.*\(2, 4, 8\).*\(1, 5, 8\).*\(1, 5, 3\)"):
        scaled_dot_product_attention(q, k, v)


@pytest.mark.parametrize("name", ["query", "key", "value"])
def test_integer_tensors(name):
    tensors = {"query": torch.randn(4, 8), "key": torch.randn(5, 8), "value": torch.randn(5, 3)}
    tensors[name] = tensors[name].to(torch.int64)
    with pytest.raises(TypeError, match=rf"^{name}\b.*torch.int64"):
        scaled_dot_product_attention(**tensors)


def test_mixed_dtypes():
    with pytest.raises(TypeError, match=r"dtype.*torch.float64"):
        scaled_dot_product_attention(torch.randn(4, 8), torch.randn(5, 8).double(), torch.randn(5, 3))


def test_not_a_tensor():
    with pytest.raises(TypeError, match=r"^key\b.*list"):
        scaled_dot_product_attention(torch.randn(4, 8), [[1.0] * 8], torch.randn(5, 3))


def test_integer_mask():
    q, k, v = torch.randn(4, 8), torch.randn(5, 8), torch.randn(5, 3)
    with pytest.raises(TypeError, match=r"^mask\b.*torch.int64"):
        scaled_dot_product_attention(q, k, v, torch.ones(4, 5, dtype=torch.int64))


@pytest.mark.parametrize("mask_shape", [(5, 4), (4, 6), (3, 4, 5), (2, 1, 4, 5)])
def test_mask_that_does_not_broadcast(mask_shape):
    q, k, v = torch.randn(2, 4, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 3)
    mask = torch.ones(mask_shape, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"^mask\b.*" + re.escape(str(mask_shape)) + r".*\(2, 4, 5\)"):
        scaled_dot_product_attention(q, k, v, mask)


@pytest.mark.parametrize("name", ["query", "key", "value"])
def test_fewer_than_two_dimensions(name):
    tensors = {"query": torch.randn(4, 8), "key": torch.randn(4, 8), "value": torch.randn(4, 8)}
    tensors[name] = torch.randn(8)
    with pytest.raises(ValueError, match=rf"^{name}\b.*\(8,\)"):
        scaled_dot_product_attention(**tensors)


# --- extreme input: half precision, no keys, the scale ----------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_scores_beyond_float16_range_stay_finite(dtype):
    """q = k = v = 100, d_k = 64: the scaled score is 80000, beyond float16's 65504."""
    q = torch.full((2, 3, 64), 100.0, dtype=dtype)
    out, weights = scaled_dot_product_attention(q, q, q)
    assert out.dtype == dtype and weights.dtype == dtype
    assert out.isfinite().all() and weights.isfinite().all()
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, q, q), rtol=0, atol=0)
    torch.testing.assert_close(weights, torch.full((2, 3, 3), 1 / 3, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_is_computed_in_float32(dtype):
    g = torch.Generator().manual_seed(4)
    q = 100 * torch.randn(2, 5, 64, generator=g, dtype=torch.float64)  # (N, T_q, d_k)
    k = torch.cat([q, 100 * torch.randn(2, 1, 64, generator=g, dtype=torch.float64)], dim=1)
    k = k + torch.randn(2, 6, 64, generator=g, dtype=torch.float64)  # q_i . k_i / 8 ~ 80000
    v = torch.randn(2, 6, 8, generator=g, dtype=torch.float64)
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    out, weights = scaled_dot_product_attention(q, k, v)
    ref_out, ref_weights = reference(q, k, v)  # float64, from the rounded half inputs
    # one rounding to the half dtype at the end, as PyTorch's math path and FlashAttention do
    atol = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}[dtype]
    torch.testing.assert_close(out.double(), ref_out, rtol=0, atol=atol)
    torch.testing.assert_close(weights.double(), ref_weights, rtol=0, atol=atol)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), rtol=0, atol=atol)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("seed", range(3))
def test_half_precision_output_is_rounded_once(dtype, seed):
    """Scores, softmax and weighted sum in float32, one rounding at the end: within half a unit
    in the last place of the float64 result (weights rounded to the half dtype first miss it)."""
    g = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(4, 8, 16, generator=g).to(dtype) for _ in range(2))  # spread weights
    v = (100 * torch.randn(4, 8, 1, generator=g)).to(dtype)  # (N, T_k, d_v): large values
    out, _ = scaled_dot_product_attention(q, k, v)
    ref, _ = reference(q, k, v)  # float64, from the rounded half inputs
    significand_bits = {torch.float16: 10, torch.bfloat16: 7}[dtype]
    ulp = 2.0 ** (torch.floor(torch.log2(ref.abs())) - significand_bits)  # of ref, in the half dtype
    assert ((out.double() - ref).abs() <= 0.5 * ulp + 1e-4).all()
    twice = (reference(q, k, v)[1].to(dtype).double() @ v.double()).to(dtype)  # weights rounded first
    assert ((twice.double() - ref).abs() > 0.5 * ulp + 1e-4).any()  # the test can tell them apart


@pytest.mark.parametrize("shape_q, d_v", [((3, 4), 5), ((2, 3, 4), 5), ((2, 2, 3, 4), 1)])
def test_no_keys_gives_zeros_like_pytorch(shape_q, d_v):
    q = torch.randn(shape_q, generator=torch.Generator().manual_seed(5))
    k = torch.randn(shape_q[:-2] + (0, shape_q[-1]))  # T_k = 0
    v = torch.randn(shape_q[:-2] + (0, d_v))
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.shape == shape_q[:-1] + (d_v,) and weights.shape == shape_q[:-1] + (0,)
    assert (out == 0).all()
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))
    mask = torch.ones(shape_q[-2], 0, dtype=torch.bool)
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v, mask)[0], out)


def test_empty_sequence_gives_an_empty_output():
    x = torch.randn(2, 0, 4)  # T = 0: self-attention over nothing
    out, weights = scaled_dot_product_attention(x, x, x)
    assert out.shape == (2, 0, 4) and weights.shape == (2, 0, 0)
    assert F.scaled_dot_product_attention(x, x, x).shape == out.shape


@pytest.mark.parametrize("scale", [float("nan"), float("inf"), -float("inf")])
def test_scale_must_be_finite(scale):
    q, k, v = qkv((4, 8), (5, 8), 3)
    with pytest.raises(ValueError, match="scale"):
        scaled_dot_product_attention(q, k, v, scale=scale)


@pytest.mark.parametrize("scale", ["0.5", torch.tensor(0.5), torch.ones(8), True, 1j])
def test_scale_must_be_a_real_number(scale):
    q, k, v = qkv((4, 8), (5, 8), 3)
    with pytest.raises(TypeError, match="scale"):
        scaled_dot_product_attention(q, k, v, scale=scale)


def test_scale_accepts_any_real_number():
    import numpy as np

    q, k, v = qkv((4, 8), (5, 8), 3, torch.float64)
    expected = F.scaled_dot_product_attention(q, k, v, scale=0.25)
    for scale in (0.25, np.float32(0.25), np.float64(0.25)):
        torch.testing.assert_close(scaled_dot_product_attention(q, k, v, scale=scale)[0], expected)
    uniform = scaled_dot_product_attention(q, k, v, scale=0)[1]  # scale 0: every score 0
    torch.testing.assert_close(uniform, torch.full((4, 5), 0.2, dtype=torch.float64))


def test_zero_d_k_names_the_shapes():
    q, k, v = torch.randn(4, 0), torch.randn(5, 0), torch.randn(5, 3)
    with pytest.raises(ValueError, match=r"d_k.*\(4, 0\).*\(5, 0\)"):
        scaled_dot_product_attention(q, k, v)


def test_scaling_the_query_first_saves_the_product_but_not_a_scaled_score_past_65504():
    """Chapter 5: (q / sqrt(d_k)) . k fits where q . k overflows float16, but a scaled score of
    80000 (q = k = 100, d_k = 64) is inf in either order; the package stays finite."""
    g = torch.Generator().manual_seed(2)
    q = (60 * torch.randn(1, 4, 256, generator=g)).half()  # (N, T, d_k)
    k = (60 * torch.randn(1, 4, 256, generator=g)).half()
    assert ((q @ k.transpose(-2, -1)) / 16).isinf().any()
    assert ((q / 16) @ k.transpose(-2, -1)).isfinite().all()
    hundreds = torch.full((1, 4, 64), 100.0, dtype=torch.float16)
    assert ((hundreds @ hundreds.transpose(-2, -1)) / 8).isinf().all()
    assert ((hundreds / 8) @ hundreds.transpose(-2, -1)).isinf().all()
    out, _ = scaled_dot_product_attention(hundreds, hundreds, hundreds)
    assert (out == 100).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_beyond_float16_range_equals_pytorchs_math_kernel(dtype):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    g = torch.Generator().manual_seed(6)
    q = (100 + torch.randn(2, 3, 64, generator=g)).to(dtype)  # scaled scores ~ 80000
    v = torch.randn(2, 3, 5, generator=g).to(dtype)
    out, _ = scaled_dot_product_attention(q, q, v)
    with sdpa_kernel(SDPBackend.MATH):
        theirs = F.scaled_dot_product_attention(q, q, v)
    assert out.isfinite().all()
    atol = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}[dtype]
    torch.testing.assert_close(out, theirs, rtol=0, atol=atol)
