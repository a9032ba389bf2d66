"""Chapter 2's claims about where Q, K and V come from: self- and cross-attention, the score as
a bilinear form (one shared projection makes it symmetric and positive semidefinite, which bounds
what it can learn), and any scores through the package's float mask with ``scale=0`` (the
additive-attention exercise)."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_book import scaled_dot_product_attention
from references import attention_float64 as reference


def randn(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def attend(x, y, W_Q, W_K, W_V):
    """Queries from x, keys and values from y."""
    return scaled_dot_product_attention(x @ W_Q, y @ W_K, y @ W_V)[0]


def test_a_changed_token_changes_every_row_of_self_attention_and_one_row_of_cross_attention():
    W_Q, W_K, W_V = randn(3, 6, 4, seed=0)  # (d_model, d_k) each
    x, y = randn(5, 6, seed=1), randn(7, 6, seed=2)  # (T_q, d_model), (T_k, d_model)
    x_new = x.clone()
    x_new[2] = randn(6, seed=3)  # token 2 replaced
    self_change = (attend(x_new, x_new, W_Q, W_K, W_V) - attend(x, x, W_Q, W_K, W_V)).abs().amax(-1)
    cross_change = (attend(x_new, y, W_Q, W_K, W_V) - attend(x, y, W_Q, W_K, W_V)).abs().amax(-1)
    assert (self_change > 1e-3).all()
    assert cross_change[2] > 1e-3
    assert torch.cat([cross_change[:2], cross_change[3:]]).max() < 1e-12


@settings(max_examples=50, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    d_model=st.integers(1, 8),
    d_k=st.integers(1, 8),
    spread=st.sampled_from([0.1, 1.0, 10.0]),
)
def test_one_shared_projection_gives_successors_a_third_at_most(seed, d_model, d_k, spread):
    """With K = Q = xW the scores are symmetric and positive semidefinite, so the weights that 3
    tokens give their successors in a cycle have a product of at most 1/27 (AM-GM, chapter 2)."""
    x, W = randn(3, d_model, seed=seed), spread * randn(d_model, d_k, seed=seed + 1)
    _, weights = scaled_dot_product_attention(x @ W, x @ W, x)  # (3, 3)
    assert weights[range(3), [1, 2, 0]].prod() <= 1 / 27 + 1e-12


def test_the_bound_of_one_third_needs_more_than_symmetry_and_is_reached():
    """Symmetric but indefinite scores (10 off the diagonal, -20 on it) give every successor 1/2;
    one shared projection W = 0 (equal scores) reaches the bound 1/27 exactly."""
    symmetric = torch.full((3, 3), 10.0, dtype=torch.float64).fill_diagonal_(-20.0)
    torch.testing.assert_close(torch.softmax(symmetric, dim=-1)[range(3), [1, 2, 0]],
                               torch.full((3,), 0.5, dtype=torch.float64))
    assert torch.linalg.eigvalsh(symmetric).min() < 0  # not positive semidefinite
    x, W = randn(3, 6, seed=4), torch.zeros(6, 4, dtype=torch.float64)
    _, weights = scaled_dot_product_attention(x @ W, x @ W, x)  # (3, 3): uniform
    torch.testing.assert_close(weights[range(3), [1, 2, 0]].prod().item(), 1 / 27)


def test_two_projections_make_every_token_attend_to_the_next():
    """B = W^Q (W^K)^T = 20 P, P the cyclic shift: every row's weight sits on its successor."""
    tokens = torch.eye(3, dtype=torch.float64)  # (3, d_model): one-hot tokens
    shift = tokens.roll(1, dims=1)              # (3, 3): shift[i, i + 1] = 1
    W_Q, W_K = 20 * tokens, shift.T             # (d_model, d_k) each; W_Q W_K^T = 20 shift
    _, weights = scaled_dot_product_attention(tokens @ W_Q, tokens @ W_K, tokens)  # (3, 3)
    assert (weights[range(3), [1, 2, 0]] > 0.99).all()
    scores = (tokens @ W_Q) @ (tokens @ W_K).T
    assert not torch.allclose(scores, scores.T)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**16), t_q=st.integers(1, 5), t_k=st.integers(1, 6))
def test_scale_zero_and_a_float_mask_give_softmax_of_the_mask(seed, t_q, t_k):
    """With scale=0 the dot products vanish, so any scores can be passed as the additive mask."""
    q, k, v = randn(2, t_q, 4, seed=seed), randn(2, t_k, 4, seed=seed + 1), randn(2, t_k, 3, seed=seed + 2)
    scores = 3 * randn(2, t_q, t_k, seed=seed + 3)  # e.g. additive attention's scores
    out, weights = scaled_dot_product_attention(q, k, v, scores, scale=0.0)
    expected_weights = torch.softmax(scores, dim=-1)
    torch.testing.assert_close(weights, expected_weights)
    torch.testing.assert_close(out, expected_weights @ v)
    ref_out, _ = reference(torch.zeros_like(q), k, v, scores)  # zero queries: the same scores
    torch.testing.assert_close(out, ref_out)
