"""Why attention scales by 1/sqrt(d_k): the variance claims, checked without the notebook.

Exact checks enumerate every pair (q, k) of a two-point distribution; Monte Carlo checks run
in float64 with tolerances of 5 standard errors of the sample variance.
"""

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from attention_book import scaled_dot_product_attention

N_DRAWS = 20_000


def _all_vectors(values: list[float], d_k: int) -> torch.Tensor:
    """Every vector of length d_k with entries from `values`: (len(values)**d_k, d_k)."""
    return torch.tensor(list(itertools.product(values, repeat=d_k)), dtype=torch.float64)


def _variance_and_se(scores: torch.Tensor) -> tuple[float, float]:
    """Sample variance of scores (n,) and its standard error sqrt((m4 - var^2) / n)."""
    centred = scores - scores.mean()
    var, m4 = centred.pow(2).mean(), centred.pow(4).mean()
    return var.item(), math.sqrt((m4 - var**2).item() / len(scores))


def _scores(d_k: int, seed: int, mean: float = 0.0, std: float = 1.0) -> torch.Tensor:
    """N_DRAWS dot products of independent q, k with iid N(mean, std^2) components: (n,)."""
    generator = torch.Generator().manual_seed(seed)
    q = mean + std * torch.randn(N_DRAWS, d_k, generator=generator, dtype=torch.float64)
    k = mean + std * torch.randn(N_DRAWS, d_k, generator=generator, dtype=torch.float64)
    return (q * k).sum(dim=-1)


@pytest.mark.parametrize("d_k", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("mean, std", [(0.0, 1.0), (1.0, 1.0), (0.5, 2.0), (-1.5, 0.5)])
def test_exact_variance_over_all_pairs(d_k, mean, std):
    # Components take mean ± std with probability 1/2: mean `mean`, variance std².
    # Every (q, k) pair is equally likely, so the population moments are exact.
    vectors = _all_vectors([mean - std, mean + std], d_k)  # (2**d_k, d_k)
    scores = (vectors @ vectors.T).flatten()  # (4**d_k,): q·k for every pair
    expected_var = d_k * (std**4 + 2 * mean**2 * std**2)
    assert scores.var(correction=0).item() == pytest.approx(expected_var, rel=1e-12)
    assert scores.mean().item() == pytest.approx(d_k * mean**2, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("d_k", [1, 2, 3, 4, 5])
def test_exact_scaled_variance_is_one_for_standardised_components(d_k):
    vectors = _all_vectors([-1.0, 1.0], d_k)  # (2**d_k, d_k), mean 0 and variance 1
    scaled = (vectors @ vectors.T).flatten() / math.sqrt(d_k)  # (4**d_k,)
    assert scaled.var(correction=0).item() == pytest.approx(1.0, rel=1e-12)
    assert scaled.mean().item() == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("d_k", [1, 8, 64, 256])
def test_monte_carlo_variance_is_d_k_and_scaled_variance_is_one(d_k):
    scores = _scores(d_k, seed=d_k)  # (n,)
    # For N(0, 1) components E[S^4] = 3 d_k^2 + 6 d_k, so SE(var) = sqrt((2 d_k^2 + 6 d_k) / n).
    se = math.sqrt((2 * d_k**2 + 6 * d_k) / N_DRAWS)
    assert abs(scores.var().item() - d_k) < 5 * se
    scaled = scores / math.sqrt(d_k)  # (n,)
    assert abs(scaled.var().item() - 1) < 5 * se / d_k
    assert abs(scaled.mean().item()) < 5 / math.sqrt(N_DRAWS)


@pytest.mark.parametrize(
    "mean, std, factor",
    [(1.0, 1.0, 3.0), (0.0, 2.0, 16.0), (2.0, 0.5, 1.0 / 16 + 2 * 4 * 0.25)],
)
def test_monte_carlo_general_formula_and_it_differs_from_d_k(mean, std, factor):
    d_k = 32
    var, se = _variance_and_se(_scores(d_k, seed=7, mean=mean, std=std))
    assert factor == pytest.approx(std**4 + 2 * mean**2 * std**2)
    assert abs(var - d_k * factor) < 5 * se
    assert abs(var - d_k) > 5 * se  # the standard answer d_k is rejected


def test_monte_carlo_dependent_components_break_the_result():
    d_k = 32
    generator = torch.Generator().manual_seed(11)
    q = torch.randn(N_DRAWS, d_k, generator=generator, dtype=torch.float64)  # (n, d_k)
    var_self, se_self = _variance_and_se((q * q).sum(-1))  # k = q: Var = 2 d_k
    assert abs(var_self - 2 * d_k) < 5 * se_self
    z = torch.randn(N_DRAWS, 2, generator=generator, dtype=torch.float64)  # shared components
    var_shared, se_shared = _variance_and_se(d_k * z[:, 0] * z[:, 1])  # Var = d_k^2
    assert abs(var_shared - d_k**2) < 5 * se_shared


def test_default_scale_is_one_over_sqrt_d_k_in_float64():
    generator = torch.Generator().manual_seed(3)
    d_k = 16
    q = torch.randn(2, 3, 5, d_k, generator=generator, dtype=torch.float64)  # (N, h, T_q, d_k)
    k = torch.randn(2, 3, 7, d_k, generator=generator, dtype=torch.float64)  # (N, h, T_k, d_k)
    v = torch.randn(2, 3, 7, 4, generator=generator, dtype=torch.float64)    # (N, h, T_k, d_v)
    raw = q @ k.transpose(-2, -1)  # (N, h, T_q, T_k)
    expected_w = torch.softmax(raw / math.sqrt(d_k), dim=-1)

    out, w = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(w, expected_w, rtol=0, atol=1e-12)
    torch.testing.assert_close(out, expected_w @ v, rtol=0, atol=1e-12)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), rtol=0, atol=1e-12)

    out_1, w_1 = scaled_dot_product_attention(q, k, v, scale=1.0)
    torch.testing.assert_close(w_1, torch.softmax(raw, dim=-1), rtol=0, atol=1e-12)
    assert (w_1 - w).abs().max().item() > 0.1
    assert (out_1 - out).abs().max().item() > 0.1


def test_unscaled_softmax_rows_collapse_and_scaled_rows_do_not():
    generator = torch.Generator().manual_seed(5)
    rows, T = 2000, 16
    # Independent reference: rows of T iid N(0, 1) scores.
    reference = torch.softmax(torch.randn(50_000, T, generator=generator), dim=-1)
    reference_max = reference.amax(dim=-1).mean().item()
    for d_k in (16, 1024):
        q = torch.randn(rows, 1, d_k, generator=generator)  # (rows, T_q=1, d_k)
        k = torch.randn(rows, T, d_k, generator=generator)  # (rows, T, d_k)
        _, scaled = scaled_dot_product_attention(q, k, k)  # (rows, 1, T)
        _, raw = scaled_dot_product_attention(q, k, k, scale=1.0)  # (rows, 1, T)
        assert abs(scaled.amax(dim=-1).mean().item() - reference_max) < 0.02
        if d_k == 1024:
            assert raw.amax(dim=-1).mean().item() > 0.9
            assert (raw.amax(dim=-1) > 0.99).float().mean().item() > 0.5


def test_scaled_rows_are_not_normalised_one_by_one():
    # Over many rows the scaled scores have variance 1, but each row's own mean has standard
    # deviation 1/sqrt(T) and its own variance scatters widely around 1.
    generator = torch.Generator().manual_seed(7)
    rows, T, d_k = 20_000, 8, 64
    q = torch.randn(rows, 1, d_k, generator=generator, dtype=torch.float64)  # (rows, 1, d_k)
    k = torch.randn(rows, T, d_k, generator=generator, dtype=torch.float64)  # (rows, T, d_k)
    scaled = (q @ k.transpose(-2, -1)).squeeze(-2) / math.sqrt(d_k)  # (rows, T)
    row_mean, row_var = scaled.mean(dim=-1), scaled.var(dim=-1)  # (rows,) each
    assert abs(row_mean.std().item() - 1 / math.sqrt(T)) < 0.01
    assert abs(row_var.mean().item() - 1) < 0.03
    # Given q, the T scores are iid N(0, |q|^2 / d_k): Var(row variance) has a closed form.
    predicted_std = math.sqrt((1 + 2 / d_k) * 2 / (T - 1) + 2 / d_k)
    assert abs(row_var.std().item() - predicted_std) < 0.03
    near = (row_mean.abs() < 0.05) & ((row_var - 1).abs() < 0.1)  # (rows,)
    assert near.double().mean().item() < 0.05
