"""Tests of attention_book.softmax and attention_book.softmax_jacobian.

References: torch.softmax, torch.autograd.functional.jacobian of torch.softmax, finite
differences (gradcheck), all in float64 where the comparison is exact.
"""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.autograd.functional import jacobian

from attention_book import softmax, softmax_jacobian

SHAPES = [(7,), (3, 5), (2, 3, 4), (2, 1, 5, 3)]
FLOATS = [torch.float32, torch.float64]


def _torch_softmax_last(z):
    return torch.softmax(z, dim=-1)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
def test_softmax_equals_torch_along_every_dim(shape, dtype):
    generator = torch.Generator().manual_seed(0)
    x = 5 * torch.randn(shape, generator=generator).to(dtype)
    for dim in range(-x.dim(), x.dim()):
        y = softmax(x, dim=dim)
        assert y.dtype == dtype and y.shape == x.shape
        torch.testing.assert_close(y, torch.softmax(x, dim=dim))
        torch.testing.assert_close(y.sum(dim=dim), torch.ones_like(y.sum(dim=dim)))


def test_softmax_default_dim_is_last():
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(softmax(x), torch.softmax(x, dim=-1))
    assert not torch.allclose(softmax(x), torch.softmax(x, dim=0))


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_large_logits_do_not_overflow(dtype):
    generator = torch.Generator().manual_seed(2)
    signs = torch.randint(0, 2, (3, 8), generator=generator) * 2 - 1
    x = (1e4 * signs + torch.randn(3, 8, generator=generator)).to(dtype)  # entries near ±1e4
    naive = x.exp() / x.exp().sum(dim=-1, keepdim=True)
    assert naive.isnan().any()  # the naive formula does break on these logits
    y = softmax(x)
    assert y.isfinite().all()
    torch.testing.assert_close(y, torch.softmax(x, dim=-1))


@pytest.mark.parametrize("value", [1e4, -1e4, 1000.0, -1000.0])
def test_softmax_of_equal_large_logits_is_uniform(value):
    y = softmax(torch.full((2, 4), value))
    torch.testing.assert_close(y, torch.full((2, 4), 0.25))


def test_softmax_is_shift_invariant():
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    for c in (-1e4, -3.0, 0.5, 1e4):
        torch.testing.assert_close(softmax(x + c), softmax(x))


def test_softmax_partially_masked_row_equals_torch():
    x = torch.tensor([[0.0, float("-inf"), 2.0, float("-inf")], [1.0, 2.0, 3.0, 4.0]])
    y = softmax(x)
    torch.testing.assert_close(y, torch.softmax(x, dim=-1))
    assert (y[0, [1, 3]] == 0).all()


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_all_minus_inf_row_gives_zeros_not_nan(dtype):
    x = torch.tensor([[1.0, 2.0, 3.0], [float("-inf")] * 3], dtype=dtype, requires_grad=True)
    y = softmax(x)
    assert torch.softmax(x.detach(), dim=-1)[1].isnan().all()  # what torch does
    assert (y[1] == 0).all()
    torch.testing.assert_close(y[0], torch.softmax(x.detach()[0], dim=-1))
    y.sum().backward()
    assert x.grad.isfinite().all()


def test_softmax_all_minus_inf_along_dim_0():
    x = torch.tensor([[float("-inf"), 0.0], [float("-inf"), 1.0]])
    y = softmax(x, dim=0)
    assert (y[:, 0] == 0).all()
    torch.testing.assert_close(y[:, 1], torch.softmax(x[:, 1], dim=0))


def test_softmax_gradient_passes_gradcheck():
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    assert torch.autograd.gradcheck(softmax, (x.requires_grad_(),))
    assert torch.autograd.gradcheck(lambda t: softmax(t, dim=0), (x,))


def test_softmax_gradient_equals_torch():
    generator = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, 6, generator=generator, dtype=torch.float64)
    upstream = torch.randn(2, 3, 6, generator=generator, dtype=torch.float64)
    ours = torch.autograd.grad(softmax(x.requires_grad_()), x, upstream)[0]
    theirs = torch.autograd.grad(torch.softmax(x, dim=-1), x, upstream)[0]
    torch.testing.assert_close(ours, theirs)


@pytest.mark.parametrize("n", [1, 2, 5, 16])
def test_softmax_jacobian_equals_autograd(n):
    z = torch.randn(n, generator=torch.Generator().manual_seed(n), dtype=torch.float64)
    expected = jacobian(_torch_softmax_last, z)  # (n, n)
    J = softmax_jacobian(torch.softmax(z, dim=-1))
    assert J.shape == (n, n)
    torch.testing.assert_close(J, expected)


def test_softmax_jacobian_batched_equals_autograd_per_element():
    z = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    J = softmax_jacobian(torch.softmax(z, dim=-1))
    assert J.shape == (2, 3, 4, 4)
    for b in range(2):
        for t in range(3):
            torch.testing.assert_close(J[b, t], jacobian(_torch_softmax_last, z[b, t]))


def test_softmax_jacobian_entries_rows_and_symmetry():
    y = torch.softmax(torch.randn(3, 5, generator=torch.Generator().manual_seed(7)), dim=-1)
    J = softmax_jacobian(y)
    assert J.dtype == torch.float32
    torch.testing.assert_close(J.diagonal(dim1=-2, dim2=-1), y * (1 - y))
    off = ~torch.eye(5, dtype=torch.bool)
    torch.testing.assert_close(J[:, off], -(y[:, :, None] * y[:, None, :])[:, off])
    torch.testing.assert_close(J.sum(dim=-1), torch.zeros(3, 5))
    torch.testing.assert_close(J, J.transpose(-2, -1))


def test_softmax_jacobian_of_one_hot_is_zero():
    y = torch.tensor([0.0, 1.0, 0.0, 0.0])
    assert (softmax_jacobian(y) == 0).all()


def test_swapped_cases_of_the_notes_disagree_with_autograd():
    z = torch.randn(5, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    y = torch.softmax(z, dim=-1)
    eye = torch.eye(5, dtype=torch.bool)
    swapped = torch.where(eye, -y[:, None] * y[None, :], (y * (1 - y))[:, None].expand(-1, 5))
    assert (swapped - jacobian(_torch_softmax_last, z)).abs().max() > 0.1
    torch.testing.assert_close(softmax_jacobian(y), jacobian(_torch_softmax_last, z))


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=3),
    scale=st.sampled_from([1e-3, 1.0, 30.0, 1e4]),
    seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_softmax_property_against_torch_float64(shape, scale, seed, data):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1), label="dim")
    generator = torch.Generator().manual_seed(seed)
    x = scale * torch.randn(shape, generator=generator, dtype=torch.float64)
    y = softmax(x, dim=dim)
    torch.testing.assert_close(y, torch.softmax(x, dim=dim), rtol=1e-12, atol=1e-12)
    assert (y >= 0).all() and y.isfinite().all()


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 8), scale=st.sampled_from([0.1, 1.0, 10.0]), seed=st.integers(0, 2**16))
def test_softmax_jacobian_property_against_autograd(n, scale, seed):
    z = scale * torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    torch.testing.assert_close(
        softmax_jacobian(softmax(z)), jacobian(_torch_softmax_last, z), rtol=1e-10, atol=1e-12
    )


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize("function, name", [(softmax, "x"), (softmax_jacobian, "y")])
def test_non_tensor_is_a_type_error(function, name):
    with pytest.raises(TypeError, match=rf"^{name}\b.*list"):
        function([0.1, 0.9])


@pytest.mark.parametrize("function, name", [(softmax, "x"), (softmax_jacobian, "y")])
@pytest.mark.parametrize("dtype", [torch.int64, torch.bool])
def test_non_floating_tensor_is_a_type_error(function, name, dtype):
    with pytest.raises(TypeError, match=rf"^{name}\b.*{dtype}"):
        function(torch.zeros(3, dtype=dtype))


@pytest.mark.parametrize("function, name", [(softmax, "x"), (softmax_jacobian, "y")])
def test_zero_dimensional_tensor_is_a_value_error(function, name):
    with pytest.raises(ValueError, match=rf"^{name}\b.*\(\)"):
        function(torch.tensor(0.5))


@pytest.mark.parametrize("dim", [2, 5, -3])
def test_dim_out_of_range_is_a_value_error(dim):
    x = torch.zeros(2, 3)
    with pytest.raises(ValueError, match=rf"^dim\b.*{dim}"):
        softmax(x, dim=dim)


@pytest.mark.parametrize("dim", [1.0, "last", None, True])
def test_dim_not_an_int_is_a_type_error(dim):
    with pytest.raises(TypeError, match=rf"^dim\b.*{type(dim).__name__}"):
        softmax(torch.zeros(2, 3), dim=dim)


def test_softmax_jacobian_frobenius_norm_is_at_most_one_half():
    generator = torch.Generator().manual_seed(12)
    for n in (2, 3, 5, 16):
        scales = torch.logspace(-1, 2, 20_000, dtype=torch.float64)[:, None]  # (rows, 1)
        z = scales * torch.randn(20_000, n, generator=generator, dtype=torch.float64)
        norms = torch.linalg.matrix_norm(softmax_jacobian(softmax(z)))  # (rows,)
        assert norms.max().item() <= 0.5
        tie = torch.zeros(n, dtype=torch.float64)
        tie[:2] = 0.5  # the two-way tie reaches the bound
        torch.testing.assert_close(torch.linalg.norm(softmax_jacobian(tie)).item(), 0.5)


def test_unscaled_gradient_to_queries_concentrates_in_few_rows():
    generator = torch.Generator().manual_seed(14)
    medians, means = {}, {}
    for d_k in (4, 1024):
        for scaled in (False, True):
            q = torch.randn(1000, 1, d_k, generator=generator, dtype=torch.float64)
            k = torch.randn(1000, 16, d_k, generator=generator, dtype=torch.float64)
            v = torch.randn(1000, 16, 8, generator=generator, dtype=torch.float64)
            g = torch.randn(1000, 1, 8, generator=generator, dtype=torch.float64)
            q.requires_grad_()
            scale = d_k**-0.5 if scaled else 1.0
            y = softmax(q @ k.transpose(-2, -1) * scale)  # (rows, 1, 16)
            (g * (y @ v)).sum().backward()
            norms = q.grad.norm(dim=-1).flatten()  # (rows,)
            medians[d_k, scaled], means[d_k, scaled] = norms.median().item(), norms.mean().item()
    assert medians[4, False] / medians[1024, False] > 100
    assert means[1024, False] > means[4, False]
    for values in (medians, means):
        assert 0.8 < values[1024, True] / values[4, True] < 1.25


@pytest.mark.parametrize("shape, dim", [((3, 0), -1), ((0,), 0), ((2, 0, 4), 1)])
def test_softmax_over_an_empty_dimension_is_empty_like_torch(shape, dim):
    x = torch.randn(shape)
    y = softmax(x, dim=dim)
    assert y.shape == x.shape and y.dtype == x.dtype
    torch.testing.assert_close(y, torch.softmax(x, dim=dim))


@pytest.mark.parametrize("n, spread", [(2, 1.0), (6, 3.0), (9, 30.0)])
def test_jacobian_is_the_hessian_of_logsumexp_hence_symmetric_psd(n, spread):
    # Reference: autograd differentiating torch.logsumexp once (softmax) and twice (Hessian).
    from torch.autograd.functional import hessian

    generator = torch.Generator().manual_seed(n)
    z = spread * torch.randn(n, generator=generator, dtype=torch.float64)  # (n,)
    lse = lambda t: torch.logsumexp(t, dim=-1)  # noqa: E731
    torch.testing.assert_close(jacobian(lse, z), softmax(z), rtol=0, atol=1e-12)
    H = hessian(lse, z)  # (n, n)
    J = softmax_jacobian(softmax(z))
    torch.testing.assert_close(J, H, rtol=0, atol=1e-12)
    eigenvalues = torch.linalg.eigvalsh(J)  # (n,), increasing
    assert eigenvalues.min() > -1e-14  # positive semidefinite
    ones = torch.ones(n, dtype=torch.float64)
    torch.testing.assert_close(J @ ones, torch.zeros(n, dtype=torch.float64), rtol=0, atol=1e-14)
    v = torch.randn(n, generator=generator, dtype=torch.float64)  # v^T J v: a weighted variance
    y = softmax(z)
    torch.testing.assert_close(v @ J @ v, (y * (v - y @ v) ** 2).sum(), rtol=0, atol=1e-14)
