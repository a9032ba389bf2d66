"""attention_book.tiled_attention against PyTorch's attention and a float64 reference, and the
book's measuring tools (attention_book._measure and its child program, attention_book._fork_cases)."""

import json
import math
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_book import causal_mask, scaled_dot_product_attention, tiled_attention
from attention_book import _fork_cases
from attention_book._measure import CountMatmuls, median_times, peak_memory
from references import attention_float64 as reference
from references import qkv as seeded_qkv


def qkv(shape_q, shape_k, d_v, dtype=torch.float64, seed=0):
    return seeded_qkv(shape_q, shape_k, d_v, dtype, seed)  # float64 unless told


def top_left_causal(t_q, t_k):
    """PyTorch's is_causal, written out: query i may attend to keys j <= i."""
    return torch.ones(t_q, t_k, dtype=torch.bool).tril()


SHAPES = [
    # (query shape, key shape, d_v, block_size): unbatched, batched, multi-head, deeper batch;
    # lengths that are and are not multiples of the block, T_q < T_k and T_q > T_k, a block
    # larger than both lengths, a block of one row
    ((16, 8), (16, 8), 8, 4),
    ((3, 37, 16), (3, 50, 16), 16, 16),
    ((2, 4, 50, 8), (2, 4, 37, 8), 5, 16),
    ((2, 3, 1, 7, 4), (2, 3, 1, 9, 4), 3, 128),
    ((2, 5, 4), (2, 6, 4), 2, 1),
]


@pytest.mark.parametrize("shape_q, shape_k, d_v, block_size", SHAPES)
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("dtype, atol", [(torch.float64, 1e-10), (torch.float32, 2e-5)])
def test_equals_pytorch(shape_q, shape_k, d_v, block_size, is_causal, dtype, atol):
    q, k, v = qkv(shape_q, shape_k, d_v, dtype)
    out, _ = tiled_attention(q, k, v, is_causal=is_causal, block_size=block_size)
    assert out.shape == shape_q[:-1] + (d_v,) and out.dtype == dtype
    theirs = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    torch.testing.assert_close(out, theirs, rtol=0, atol=atol)


@settings(max_examples=60, deadline=None)
@given(
    t_q=st.integers(1, 40),
    t_k=st.integers(1, 40),
    d_k=st.integers(1, 8),
    d_v=st.integers(1, 8),
    block_size=st.integers(1, 48),
    is_causal=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_property_matches_float64_reference(t_q, t_k, d_k, d_v, block_size, is_causal, seed):
    q, k, v = qkv((2, t_q, d_k), (2, t_k, d_k), d_v, torch.float64, seed)
    mask = top_left_causal(t_q, t_k) if is_causal else None
    expected, _ = reference(q, k, v, mask)
    out, _ = tiled_attention(q, k, v, is_causal=is_causal, block_size=block_size)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)


def test_returns_the_pair_that_scaled_dot_product_attention_returns_without_weights():
    # A batch of 2: were the output returned alone, `output, weights = ...` would unpack the
    # batch without an error.
    q, k, v = qkv((2, 5, 4), (2, 6, 4), 3)
    output, weights = tiled_attention(q, k, v, block_size=2)
    assert output.shape == (2, 5, 3) and weights is None  # the weights are never formed
    torch.testing.assert_close(output, scaled_dot_product_attention(q, k, v)[0], rtol=0, atol=1e-12)


def test_custom_scale_matches_pytorch():
    q, k, v = qkv((2, 5, 8), (2, 9, 8), 4, torch.float32)
    out, _ = tiled_attention(q, k, v, scale=0.3, block_size=4)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, scale=0.3))
    assert not torch.allclose(out, tiled_attention(q, k, v, block_size=4)[0])


def test_no_keys_give_zeros_and_no_queries_an_empty_output():
    q, k, v = qkv((2, 3, 4), (2, 0, 4), 5)
    for is_causal in (False, True):
        out, _ = tiled_attention(q, k, v, is_causal=is_causal)
        assert torch.equal(out, torch.zeros(2, 3, 5, dtype=torch.float64))
        assert torch.equal(out, F.scaled_dot_product_attention(q, k, v, is_causal=is_causal))
    q, k, v = qkv((2, 0, 4), (2, 6, 4), 5)
    assert tiled_attention(q, k, v)[0].shape == (2, 0, 5)


BLOCK_SIZES = [1, 2, 3, 128]


def overflowing_first_keys(t_q=4, t_k=7, d_k=4, d_v=3, overflowing=3):
    """float32 inputs, all finite, whose scores with the first `overflowing` keys overflow to -inf.

    Every query has 1e20 in component 0 and those keys -1e20: q·k = -1e40, beyond float32. The
    other keys have 0 there, so their scores are ordinary numbers."""
    q, k, v = qkv((t_q, d_k), (t_k, d_k), d_v, torch.float32, seed=4)
    q[:, 0] = 1e20
    k[:, 0] = 0.0
    k[:overflowing, 0] = -1e20
    return q, k, v


@pytest.mark.parametrize("block_size", BLOCK_SIZES)
@pytest.mark.parametrize("is_causal", [False, True])
def test_a_first_tile_whose_scores_are_all_minus_infinity(block_size, is_causal):
    # The running maximum stays -inf through the first tile(s): exp(-inf - (-inf)) must not
    # turn into NaN (FlashAttention guards this case too).
    q, k, v = overflowing_first_keys()
    scores = q @ k.T / 2                                       # (T_q, T_k)
    assert torch.isinf(scores[:, :3]).all() and scores[:, 3:].isfinite().all()
    mask = causal_mask(4, 7) if is_causal else None
    expected, _ = scaled_dot_product_attention(q, k, v, mask)  # (T_q, d_v)
    out, _ = tiled_attention(q, k, v, is_causal=is_causal, block_size=block_size)
    assert not out.isnan().any()
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-6)
    # In float64 the same products are finite, and only rows that keep a finite key agree:
    rows = slice(3, None) if is_causal else slice(None)   # causal rows 0-2 see overflowed keys only
    torch.testing.assert_close(out[rows].double(), reference(q, k, v, mask)[0][rows], rtol=0, atol=1e-6)


@pytest.mark.parametrize("block_size", BLOCK_SIZES)
def test_a_row_whose_scores_all_overflow_gives_zeros(block_size):
    q, k, v = overflowing_first_keys(overflowing=7)
    out, _ = tiled_attention(q, k, v, block_size=block_size)
    assert torch.equal(out, scaled_dot_product_attention(q, k, v)[0])
    assert torch.equal(out, torch.zeros(4, 3))


@pytest.mark.parametrize("block_size", BLOCK_SIZES)
def test_the_running_maximum_is_kept_across_tiles(block_size):
    # The first key's scaled score is 100 above every later key's: a sum kept relative to each
    # tile's own maximum would be multiplied by e^100, beyond float32 (e^88.7), and overflow.
    q, k, v = qkv((3, 4), (9, 4), 2, torch.float32, seed=5)
    q[:, 0], k[:, 0] = 20.0, 0.0
    k[0, 0] = 10.0                                          # score of key 0: 200 / 2 + O(1)
    scores = q @ k.T / 2                                    # (T_q, T_k)
    assert (scores[:, :1] - scores[:, 1:].amax(-1, keepdim=True) > 88).all()
    for is_causal in (False, True):
        out, _ = tiled_attention(q, k, v, is_causal=is_causal, block_size=block_size)
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
        torch.testing.assert_close(out, expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("shape_q, shape_k", [((2, 3, 4), (2, 0, 4)), ((2, 0, 4), (2, 6, 4))])
@pytest.mark.parametrize("block_size", BLOCK_SIZES)
def test_no_keys_or_no_queries_keep_the_autograd_graph(shape_q, shape_k, block_size):
    # PyTorch's attention keeps the graph and returns zero gradients; so must the tiled one.
    ours = [t.requires_grad_() for t in qkv(shape_q, shape_k, 5)]
    theirs = [t.detach().clone().requires_grad_() for t in ours]
    out, _ = tiled_attention(*ours, block_size=block_size)
    assert out.requires_grad and out.grad_fn is not None
    upstream = torch.ones_like(out)
    grads = torch.autograd.grad(out, ours, upstream)
    expected = torch.autograd.grad(F.scaled_dot_product_attention(*theirs), theirs, upstream)
    for got, want in zip(grads, expected):
        assert got.shape == want.shape
        assert torch.equal(got, want) and torch.equal(got, torch.zeros_like(got))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_is_computed_in_float32(dtype):
    q, k, v = qkv((2, 3, 40, 16), (2, 3, 50, 16), 8, dtype)
    out, _ = tiled_attention(q, k, v, block_size=16)
    assert out.dtype == dtype
    # Only the final rounding to the input dtype separates the two: bit for bit.
    assert torch.equal(out, tiled_attention(q.float(), k.float(), v.float(), block_size=16)[0].to(dtype))
    in_float32 = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    torch.testing.assert_close(out, in_float32.to(dtype), rtol=0, atol=2 * torch.finfo(dtype).eps)


def test_float16_scores_beyond_65504_with_spread_weights_equal_float32_rounded():
    # Every query and key shares a large component (scores ~ 80 000); the keys' noise is
    # orthogonal to it, so the scores of a row differ by O(1) and the weights stay spread.
    g = torch.Generator().manual_seed(3)
    shared = torch.ones(64) / 8  # a unit vector
    q_noise, k_noise, v = (torch.randn(1, 2, 96, 64, generator=g) for _ in range(3))
    k_noise = k_noise - (k_noise @ shared)[..., None] * shared
    q, k, v = (800 * shared + q_noise).half(), (800 * shared + k_noise).half(), v.half()
    scores = q.float() @ k.float().transpose(-2, -1) / 8  # (1, 2, 96, 96), in float32
    assert scores.abs().min() > 65504
    assert torch.softmax(scores, dim=-1).amax(dim=-1).median() < 0.5  # not one-hot rows
    assert (torch.softmax(q @ k.transpose(-2, -1) / 8, dim=-1) @ v).isnan().any()  # naive float16
    out, _ = tiled_attention(q, k, v, block_size=32)
    assert torch.equal(out, tiled_attention(q.float(), k.float(), v.float(), block_size=32)[0].half())
    in_float32 = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    torch.testing.assert_close(out, in_float32.half(), rtol=0, atol=torch.finfo(torch.float16).eps)


@pytest.mark.parametrize("is_causal", [False, True])
def test_gradients_equal_pytorch_in_float64(is_causal):
    q, k, v = qkv((2, 3, 37, 8), (2, 3, 50, 8), 5)
    upstream = torch.randn(2, 3, 37, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    ours = [t.clone().requires_grad_() for t in (q, k, v)]
    theirs = [t.clone().requires_grad_() for t in (q, k, v)]
    grads = torch.autograd.grad(tiled_attention(*ours, is_causal=is_causal, block_size=16)[0], ours, upstream)
    expected = torch.autograd.grad(F.scaled_dot_product_attention(*theirs, is_causal=is_causal), theirs, upstream)
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-10)


def test_gradient_through_a_single_key_and_a_dominant_score():
    # ell is exactly 1 in both cases (only the maximum contributes): the gradient still flows.
    for shape_k, factor in [((1, 1, 4), 1.0), ((1, 6, 4), 100.0)]:
        q, k, v = qkv((1, 3, 4), shape_k, 2)
        ours = [(factor * q).requires_grad_(), k.clone().requires_grad_(), v.clone().requires_grad_()]
        theirs = [t.detach().clone().requires_grad_() for t in ours]
        grads = torch.autograd.grad(tiled_attention(*ours, block_size=2)[0].sum(), ours)
        expected = torch.autograd.grad(F.scaled_dot_product_attention(*theirs).sum(), theirs)
        for got, want in zip(grads, expected):
            torch.testing.assert_close(got, want, rtol=0, atol=1e-10)


@pytest.mark.parametrize("t_q, t_k, block_size", [(1000, 1000, 128), (64, 100, 16), (100, 40, 16)])
def test_causal_skips_the_tiles_above_the_diagonal(t_q, t_k, block_size):
    q, k, v = qkv((1, t_q, 4), (1, t_k, 4), 4, torch.float32)
    # query block [r, r + B) needs the key blocks that start before min(T_k, r + B)
    needed = sum(math.ceil(min(t_k, r + block_size) / block_size) for r in range(0, t_q, block_size))
    everything = math.ceil(t_q / block_size) * math.ceil(t_k / block_size)
    for is_causal, tiles in [(False, everything), (True, needed)]:
        with CountMatmuls() as counter:
            tiled_attention(q, k, v, is_causal=is_causal, block_size=block_size)
        assert counter.count == 2 * tiles  # per tile: Q_I K_J^T, then its weights times V_J
    assert needed < everything


def test_tiled_peak_memory_is_far_below_naive():
    setup = """
import torch
from attention_book import causal_mask, scaled_dot_product_attention, tiled_attention
q, k, v = (torch.randn(1, 1, 4096, 64) for _ in range(3))
tiled_attention(q[..., :64, :], k[..., :64, :], v[..., :64, :])
"""
    peaks = peak_memory({
        "naive": setup + "def run(): return torch.softmax(q @ k.transpose(-2, -1) / 8, -1) @ v",
        "tiled": setup + "def run(): return tiled_attention(q, k, v)",
    })
    scores_mib = 4096 * 4096 * 4 / 2**20  # one (T, T) float32 matrix: 64 MiB
    assert peaks["naive"][0] > 1.9 * scores_mib  # the scores and the weights
    assert peaks["tiled"][0] < peaks["naive"][0] / 8


# --- the measuring tools -------------------------------------------------------------------


def test_peak_memory_sees_each_allocation_in_its_own_process_and_keeps_labels():
    allocate = "import torch\ndef run(): return torch.ones(64, 2**20 // 4).sum()"  # 64 MiB
    results = peak_memory({("big", 2): allocate, 1: "def run(): return None", "again": allocate})
    assert list(results) == [("big", 2), 1, "again"]
    assert 63 < results["big", 2][0] < 80 and results[1][0] < 4
    # In one process, the first case's 64 MiB would have hidden the third's.
    assert 63 < results["again"][0] < 80
    assert all(seconds >= 0 for _, seconds in results.values())


def test_peak_memory_is_not_hidden_by_a_larger_setup():
    # The setup's 256 MiB, freed, would hide the call's 128 MiB from a high-water mark that is
    # not reset before the call.
    calls = "def run(): return torch.ones(2**25).sum()"  # 128 MiB
    results = peak_memory({
        "after a larger setup": "import torch\nx = torch.ones(2**26)\ndel x\n" + calls,
        "alone": "import torch\n" + calls,
    })
    for mib, _ in results.values():
        assert 127 < mib < 145


def test_peak_memory_counts_memory_the_allocator_kept_from_the_setup():
    # malloc keeps 32 MiB that the setup freed (the thresholds below make it so), and a call
    # could reuse them without growing the process; peak_memory hands them back first.
    setup = """
import ctypes, re, torch
libc = ctypes.CDLL(None)
libc.mallopt(-3, 2**26)  # M_MMAP_THRESHOLD: blocks up to 64 MiB come from malloc's heap
libc.mallopt(-1, 2**30)  # M_TRIM_THRESHOLD: malloc keeps what is freed there
def resident_mib():
    return int(re.search(r"VmRSS:\\s+(\\d+)", open("/proc/self/status").read()).group(1)) / 1024
blocks = [torch.ones(2**21) for _ in range(4)]  # 32 MiB
del blocks  # freed, but kept by malloc: still resident
kept = resident_mib()
def run():
    assert resident_mib() < kept - 30, "the memory that malloc kept is still resident"
    return torch.ones(2**21).sum()  # 8 MiB
"""
    (mib, _), = peak_memory({"reuse": setup}).values()
    assert 7.9 < mib < 20


def run_fork_cases(job):
    """The child program as peak_memory runs it: python -m attention_book._fork_cases."""
    return subprocess.run([sys.executable, "-m", "attention_book._fork_cases"],
                          input=json.dumps(job), capture_output=True, text=True)


def test_fork_cases_reports_one_line_per_case_in_order():
    allocate = "import torch\ndef run(): return torch.ones(2**24).sum()"  # 64 MiB
    done = run_fork_cases({"preload": ["torch"], "threads": 1,
                           "cases": [allocate, "def run(): return None"]})
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line.removeprefix("@case ")) for line in done.stdout.splitlines()
             if line.startswith("@case ")]
    assert [index for index, _, _ in lines] == [0, 1]
    (_, big, seconds), (_, nothing, _) = lines
    assert 63 < big < 80 and nothing < 4 and seconds >= 0


def test_fork_cases_stops_at_a_failing_case_and_names_it():
    done = run_fork_cases({"preload": [], "threads": 1,
                           "cases": ["def run(): return None", "def run(): return 1 / 0",
                                     "def run(): return None"]})
    assert done.returncode == 1
    assert "ZeroDivisionError" in done.stderr and "case number 1 failed" in done.stderr
    assert done.stdout.count("@case ") == 1  # the third case never ran


def test_fork_cases_reads_the_peak_of_this_process():
    # Linux: the peak can be reset, and it is at least the memory held now.
    resettable = _fork_cases.reset_peak()
    assert resettable == sys.platform.startswith("linux")
    held = torch.ones(2**22)  # 16 MiB, touched
    assert _fork_cases.peak_kib(resettable) > 16 * 1024
    del held


def test_peak_memory_reports_a_failing_case():
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        peak_memory({"bad": "def run(): return 1 / 0"})


def test_peak_memory_needs_fork_and_checks_threads(monkeypatch):
    with pytest.raises(ValueError, match="threads"):
        peak_memory({"none": "def run(): return None"}, threads=0)
    with pytest.raises(TypeError, match="threads"):
        peak_memory({"none": "def run(): return None"}, threads=1.5)
    monkeypatch.delattr("os.fork")
    with pytest.raises(RuntimeError, match="os.fork"):
        peak_memory({"none": "def run(): return None"})


def test_median_times_takes_the_median_with_a_warm_up_and_rotates_the_order():
    ticks, calls = [0.0], []

    def clock():
        return ticks[0]

    def work(name, cost):
        def run():
            calls.append(name)
            ticks[0] += cost.pop(0)
        return run

    functions = {"a": work("a", [100.0, 1.0, 5.0, 3.0]), "b": work("b", [100.0, 2.0, 2.0, 9.0])}
    medians = median_times(functions, rounds=3, clock=clock)
    assert medians == {"a": 3.0, "b": 2.0}  # the warm-up (100) is not counted
    assert calls == ["a", "b", "a", "b", "b", "a", "a", "b"]


def test_median_times_checks_rounds_and_accepts_no_function():
    with pytest.raises(ValueError, match="rounds"):
        median_times({"a": lambda: None}, rounds=0)
    with pytest.raises(TypeError, match="rounds"):
        median_times({"a": lambda: None}, rounds=2.0)
    assert median_times({}) == {}


# --- bad input: a TypeError or ValueError naming the argument --------------------------------


def test_bad_tensors_name_the_argument():
    q, k, v = qkv((4, 8), (5, 8), 3, torch.float32)
    with pytest.raises(TypeError, match="key"):
        tiled_attention(q, [[1.0] * 8], v)
    with pytest.raises(TypeError, match="value"):
        tiled_attention(q, k, v.to(torch.int64))
    with pytest.raises(ValueError, match="query"):
        tiled_attention(torch.randn(8), k, v)
    with pytest.raises(TypeError, match="dtype"):
        tiled_attention(q, k.double(), v)


@pytest.mark.parametrize("shapes, words", [
    (((4, 8), (5, 6), (5, 3)), "d_k"),
    (((4, 8), (5, 8), (6, 3)), "T_k"),
    (((2, 4, 8), (1, 5, 8), (1, 5, 3)), "leading"),
])
def test_mismatched_shapes(shapes, words):
    tensors = [torch.randn(shape) for shape in shapes]
    with pytest.raises(ValueError, match=words):
        tiled_attention(*tensors)


@pytest.mark.parametrize("kwargs, error", [
    ({"block_size": 0}, ValueError), ({"block_size": -3}, ValueError),
    ({"block_size": 2.0}, TypeError), ({"block_size": True}, TypeError),
    ({"is_causal": 1}, TypeError), ({"is_causal": None}, TypeError),
    ({"scale": float("nan")}, ValueError), ({"scale": "0.5"}, TypeError),
])
def test_bad_options_name_the_argument(kwargs, error):
    q, k, v = qkv((4, 8), (5, 8), 3, torch.float32)
    (name,) = kwargs
    with pytest.raises(error, match=name):
        tiled_attention(q, k, v, **kwargs)
