"""Chapter 2's claims about where Q, K and V come from: self- and cross-attention, the score as
a bilinear form (one shared projection makes it symmetric), and any scores through the package's
float mask with ``scale=0`` (the additive-attention exercise)."""

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
@given(seed=st.integers(0, 2**16), d_model=st.integers(1, 8), d_k=st.integers(1, 8))
def test_one_shared_projection_gives_symmetric_scores_that_cannot_make_a_cycle(seed, d_model, d_k):
    """s_ij = x_i W W^T x_j^T = s_ji; so s_01 - s_02 + s_12 - s_10 + s_20 - s_21 = 0, and not
    every token of a 3-cycle can prefer its successor to the other token."""
    x, W = randn(3, d_model, seed=seed), randn(d_model, d_k, seed=seed + 1)
    scores = (x @ W) @ (x @ W).T  # (3, 3)
    torch.testing.assert_close(scores, scores.T)
    successor, predecessor = torch.tensor([1, 2, 0]), torch.tensor([2, 0, 1])
    margins = scores[range(3), successor] - scores[range(3), predecessor]  # (3,)
    assert abs(margins.sum().item()) < 1e-9 * (1 + scores.abs().max().item())
    assert margins.min() <= 1e-9 * (1 + scores.abs().max().item())


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
