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


@pytest.mark.parametrize("d_k", [1, 2])
def test_small_d_k_scaled_rows_share_one_random_spread(d_k):
    # Given q, the scaled scores of a row are iid N(0, ‖q‖^2 / d_k): drawing that spread first
    # and then T independent normals gives the same mean largest weight, below the reference
    # of T iid N(0, 1) scores.
    generator = torch.Generator().manual_seed(30 + d_k)
    rows, T = 20_000, 16
    q = torch.randn(rows, 1, d_k, generator=generator, dtype=torch.float64)  # (rows, 1, d_k)
    k = torch.randn(rows, T, d_k, generator=generator, dtype=torch.float64)  # (rows, T, d_k)
    _, scaled = scaled_dot_product_attention(q, k, k)  # (rows, 1, T)
    spread = torch.randn(rows, d_k, generator=generator, dtype=torch.float64).norm(
        dim=-1, keepdim=True) / math.sqrt(d_k)  # (rows, 1)
    modelled = torch.softmax(spread * torch.randn(rows, T, generator=generator,
                                                  dtype=torch.float64), dim=-1)
    reference = torch.softmax(torch.randn(rows, T, generator=generator, dtype=torch.float64),
                              dim=-1)
    measured = scaled.amax(dim=-1).mean().item()
    assert abs(measured - modelled.amax(dim=-1).mean().item()) < 0.01
    assert measured < reference.amax(dim=-1).mean().item() - 0.015


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
    # Given q, the T scores are iid N(0, ‖q‖^2 / d_k): Var(row variance) has a closed form.
    predicted_std = math.sqrt((1 + 2 / d_k) * 2 / (T - 1) + 2 / d_k)
    assert abs(row_var.std().item() - predicted_std) < 0.03
    near = (row_mean.abs() < 0.05) & ((row_var - 1).abs() < 0.1)  # (rows,)
    assert near.double().mean().item() < 0.05


def test_independent_projections_give_the_d_k_law_given_the_input():
    # One input x attending to itself, many independent draws of W^Q and W^K with N(0, 1/d)
    # entries: given x, q_r and k_r are independent with mean 0 and variance ‖x‖^2 / d, so
    # Var(q.k) = d_k ‖x‖^4 / d^2; with one shared matrix (k = q) it doubles.
    generator = torch.Generator().manual_seed(12)
    d_model, d_k, draws = 8, 32, 6000
    x = torch.randn(d_model, generator=generator, dtype=torch.float64)
    W_q, W_k = (torch.randn(draws, d_model, d_k, generator=generator, dtype=torch.float64)
                / math.sqrt(d_model) for _ in range(2))
    q, k = x @ W_q, x @ W_k  # (draws, d_k) each
    unit = (x @ x).item() / d_model
    var, se = _variance_and_se((q * k).sum(-1))
    assert abs(var - d_k * unit**2) < 5 * se
    assert abs((q * k).sum(-1).mean().item()) < 5 * math.sqrt(var / draws)
    var_shared, se_shared = _variance_and_se((q * q).sum(-1))
    assert abs(var_shared - 2 * d_k * unit**2) < 5 * se_shared
    # ...and q . q = ‖q‖^2 >= 0 has mean d_k ‖x‖^2 / d, not 0.
    assert abs((q * q).sum(-1).mean().item() - d_k * unit) < 5 * math.sqrt(var_shared / draws)


def test_fixed_network_mean_score_of_a_token_with_itself_is_the_trace():
    # For fixed W^Q, W^K and inputs x ~ N(0, I): E_x[(x W^Q) . (x W^K)] = tr(W^Q W^K^T).
    # Over initialisations with N(0, 1/d_model) entries the trace has mean 0 and standard
    # deviation sqrt(d_k / d_model).
    generator = torch.Generator().manual_seed(40)
    d_model, d_k, inputs = 16, 64, 200_000
    for _ in range(3):
        W_q, W_k = (torch.randn(d_model, d_k, generator=generator, dtype=torch.float64)
                    / math.sqrt(d_model) for _ in range(2))
        x = torch.randn(inputs, d_model, generator=generator, dtype=torch.float64)
        scores = ((x @ W_q) * (x @ W_k)).sum(-1)  # (inputs,)
        se = scores.std().item() / math.sqrt(inputs)
        assert abs(scores.mean().item() - torch.trace(W_q @ W_k.T).item()) < 5 * se
    inits = 4000
    W_q, W_k = (torch.randn(inits, d_model, d_k, generator=generator, dtype=torch.float64)
                / math.sqrt(d_model) for _ in range(2))
    traces = (W_q * W_k).sum(dim=(-2, -1))  # (inits,): tr(W^Q W^K^T) of each initialisation
    var, se = _variance_and_se(traces)
    assert abs(var - d_k / d_model) < 5 * se
    assert abs(traces.mean().item()) < 5 * math.sqrt(var / inits)


def _retrieval_projections(generator, d_model=32, d_k=256):
    """W^Q and W^K with N(0, 1/d_model) entries, requiring grad."""
    return [torch.randn(d_model, d_k, generator=generator).div(math.sqrt(d_model))
            .requires_grad_() for _ in range(2)]


def _retrieval_step(W_q, W_k, scale, generator, N=32, T=32, d_v=8):
    """Squared error and weights (N, 1, T) on N fresh problems: the query repeats key j*."""
    x = torch.randn(N, T, W_q.shape[0], generator=generator)
    u = torch.randn(N, T, d_v, generator=generator)
    target = torch.randint(T, (N,), generator=generator)
    rows = torch.arange(N)
    q = (x[rows, target] @ W_q).unsqueeze(-2)  # (N, 1, d_k)
    output, weights = scaled_dot_product_attention(q, x @ W_k, u, scale=scale)
    return (output.squeeze(-2) - u[rows, target]).pow(2).mean(), weights


def _retrieval_losses(scale, steps, seed, lr=2e-3):
    """The loss of every step of Adam on W^Q and W^K."""
    generator = torch.Generator().manual_seed(seed)
    W_q, W_k = _retrieval_projections(generator)
    optimiser = torch.optim.Adam([W_q, W_k], lr=lr)
    losses = []
    for _ in range(steps):
        loss, _ = _retrieval_step(W_q, W_k, scale, generator)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    return torch.tensor(losses)


def test_retrieval_loss_at_initialisation_is_set_by_the_spread_of_the_weights():
    # E|sum_j w_j u_j - u_j*|^2 = 1 - 2/T + E[sum_j w_j^2] when E[w_j*] = 1/T.
    generator = torch.Generator().manual_seed(21)
    W_q, W_k = _retrieval_projections(generator)
    for scale, low, high in ((None, 1 / 32, 0.15), (1.0, 0.75, 1.0)):
        loss, weights = _retrieval_step(W_q, W_k, scale, torch.Generator().manual_seed(22), N=4000)
        concentration = weights.pow(2).sum(-1).mean().item()
        assert low <= concentration < high
        assert abs(loss.item() - (1 - 2 / 32 + concentration)) < 0.05


@pytest.mark.parametrize("seed", [1, 2])
def test_unscaled_attention_trains_from_a_plateau(seed):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread is faster than two
    try:
        scaled = _retrieval_losses(None, steps=100, seed=seed)
        unscaled = _retrieval_losses(1.0, steps=100, seed=seed)
    finally:
        torch.set_num_threads(threads)
    # Uniform weights miss by 1 - 1/T = 0.97, one-hot weights on a random key by 2 - 2/T.
    assert scaled[50:].mean() < 0.1 < 1.4 < unscaled[:50].mean()
    assert unscaled[50:].mean() > 3 * scaled[50:].mean()


@pytest.mark.parametrize("d_k", [16, 64, 256])
def test_folding_the_scale_into_w_q_multiplies_adams_step_by_sqrt_d_k(d_k):
    generator = torch.Generator().manual_seed(d_k)
    d_model, T = 16, 8
    W_q = torch.randn(d_model, d_k, generator=generator) / math.sqrt(d_model)
    W_k = torch.randn(d_model, d_k, generator=generator) / math.sqrt(d_model)
    x_q = torch.randn(4, 1, d_model, generator=generator)
    x = torch.randn(4, T, d_model, generator=generator)
    u = torch.randn(4, T, 3, generator=generator)
    target = torch.randn(4, 1, 3, generator=generator)

    def step(W, scale):  # W^Q after one Adam step on the squared error
        W = W.clone().requires_grad_()
        optimiser = torch.optim.Adam([W], lr=1e-3)
        output, _ = scaled_dot_product_attention(x_q @ W, x @ W_k, u, scale=scale)
        (output - target).pow(2).sum().backward()
        optimiser.step()
        return W.detach()

    folded = W_q / math.sqrt(d_k)  # the same function with scale 1
    out_explicit, _ = scaled_dot_product_attention(x_q @ W_q, x @ W_k, u)
    out_folded, _ = scaled_dot_product_attention(x_q @ folded, x @ W_k, u, scale=1.0)
    torch.testing.assert_close(out_folded, out_explicit)
    moved_explicit = step(W_q, None) / math.sqrt(d_k) - folded  # in the folded units
    moved_folded = step(folded, 1.0) - folded
    ratio = (moved_folded.norm() / moved_explicit.norm()).item()
    assert ratio == pytest.approx(math.sqrt(d_k), rel=0.01)
