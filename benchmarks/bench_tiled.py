"""The three targets of the efficient-attention chapter, measured side by side in one run.

1. tiled_attention at T=8192 (N=1, h=1, d=64, float32, CPU): peak memory at most 1/8 of the
   naive softmax(q @ k^T / sqrt(d)) @ v.
2. MultiHeadAttention(d_model=768, h=12) called with is_causal=True at N=1, T=4096 (float32,
   eval, no grad, CPU): at most 1.10 x the time and 1.2 x the peak memory of the floor, four
   nn.Linear around F.scaled_dot_product_attention(is_causal=True) with the same weights.
3. tiled_attention's speed against F.scaled_dot_product_attention at T=8192 (N=1, h=1, d=64,
   float32, CPU, one thread) for block sizes 64 to 512: its default block size is not the
   slowest of them (its docstring quotes these ratios).

Peak memory: the growth of the peak resident memory during one call (on Linux the peak is reset
just before the call), each case in a fresh process forked after the imports
(attention_book._measure.peak_memory): the call's peak above everything the process held when
it started, its inputs included. Time: the
median CPU time of one thread over several rounds, the implementations interleaved round by
round in one process (attention_book._measure.median_times): with one thread, CPU time is the
work done, little disturbed by other processes on a shared machine. The book's appendix "How
this book measures" (book/appendix_measuring.md) explains both.

Prints a table and exits with status 1 when a target is missed.

    python benchmarks/bench_tiled.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from attention_book import MultiHeadAttention, tiled_attention
from attention_book._measure import floor_forward, median_times, peak_memory
from _targets import report  # benchmarks/_targets.py

TILED_T, HEAD_DIM = 8192, 64
MHA_T, D_MODEL, HEADS = 4096, 768, 12
BLOCK_SIZES = (64, 128, 256, 512)
DEFAULT_BLOCK = inspect.signature(tiled_attention).parameters["block_size"].default


def make_module_and_input() -> tuple[MultiHeadAttention, torch.Tensor]:
    torch.manual_seed(0)
    module = MultiHeadAttention(D_MODEL, HEADS).eval()
    x = torch.randn(1, MHA_T, D_MODEL, generator=torch.Generator().manual_seed(1))  # (N, T, d_model)
    return module, x


ATTENTION_CASE = """
import torch
from attention_book import tiled_attention
g = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(1, 1, {T}, {d}, generator=g) for _ in range(3))
small = tuple(x[..., :64, :] for x in (q, k, v))
{call}(*small)
def run():
    return {call}(q, k, v)
"""
NAIVE = "(lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) / {d} ** 0.5, dim=-1) @ v)"

MHA_CASE = """
import sys
import torch
sys.path.insert(0, {folder!r})
from attention_book._measure import floor_forward
from bench_tiled import make_module_and_input
torch.set_grad_enabled(False)
module, x = make_module_and_input()
call = {call}
call(x[:, :16])
def run():
    return call(x)
"""
MHA_CALLS = {
    "floor": "lambda x: floor_forward(module, x, is_causal=True)",
    "MultiHeadAttention(is_causal=True)": "lambda x: module(x, is_causal=True)[0]",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    folder = str(Path(__file__).resolve().parent)

    cases = {
        "naive": ATTENTION_CASE.format(T=TILED_T, d=HEAD_DIM, call=NAIVE.format(d=HEAD_DIM)),
        "tiled_attention": ATTENTION_CASE.format(T=TILED_T, d=HEAD_DIM, call="tiled_attention"),
    }
    cases |= {name: MHA_CASE.format(folder=folder, call=call) for name, call in MHA_CALLS.items()}
    peaks = peak_memory(cases, threads=1)

    module, x = make_module_and_input()
    with torch.no_grad():
        seconds = median_times({
            "floor": lambda: floor_forward(module, x, is_causal=True),
            "MultiHeadAttention(is_causal=True)": lambda: module(x, is_causal=True),
        }, rounds=args.rounds)
        torch.testing.assert_close(module(x, is_causal=True)[0], floor_forward(module, x, is_causal=True))
        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(1, 1, TILED_T, HEAD_DIM, generator=g) for _ in range(3))
        by_block = median_times(
            {"F.scaled_dot_product_attention": lambda: F.scaled_dot_product_attention(q, k, v)}
            | {size: (lambda size=size: tiled_attention(q, k, v, block_size=size)) for size in BLOCK_SIZES},
            rounds=3,
        )

    print(f"torch {torch.__version__}, CPU, one thread, float32, no grad; peak = growth of the "
          f"peak resident memory during one call, fresh process each; time = median CPU time of "
          f"{args.rounds} interleaved rounds")
    print(f"\n1. attention of one head, T={TILED_T}, d={HEAD_DIM}")
    print(f"   {'implementation':<36} {'peak (MiB)':>11} {'CPU time of that call (s)':>26}")
    for name in ("naive", "tiled_attention"):
        print(f"   {name:<36} {peaks[name][0]:>11.1f} {peaks[name][1]:>26.3f}")
    print(f"\n2. causal multi-head attention, N=1, T={MHA_T}, d_model={D_MODEL}, h={HEADS}")
    print(f"   {'implementation':<36} {'peak (MiB)':>11} {'median CPU time (s)':>26}")
    for name in MHA_CALLS:
        print(f"   {name:<36} {peaks[name][0]:>11.1f} {seconds[name]:>26.3f}")

    fused = by_block.pop("F.scaled_dot_product_attention")
    print(f"\n3. tiled_attention against F.scaled_dot_product_attention ({1e3 * fused:.0f} ms), "
          f"T={TILED_T}, d={HEAD_DIM}")
    print(f"   {'block_size':<36} {'median CPU time (s)':>20} {'x PyTorch':>10}")
    for size, value in by_block.items():
        mark = " (default)" if size == DEFAULT_BLOCK else ""
        print(f"   {str(size) + mark:<36} {value:>20.3f} {value / fused:>10.1f}")

    mha, base = "MultiHeadAttention(is_causal=True)", "floor"
    memory_ratio = peaks[mha][0] / max(peaks[base][0], 1.0)
    checks = [
        (f"tiled peak <= 1/8 naive peak (ratio {peaks['tiled_attention'][0] / peaks['naive'][0]:.3f})",
         peaks["tiled_attention"][0] <= peaks["naive"][0] / 8),
        (f"causal MHA time <= 1.10 x floor (ratio {seconds[mha] / seconds[base]:.2f})",
         seconds[mha] <= 1.10 * seconds[base]),
        (f"causal MHA peak <= 1.2 x floor (ratio {memory_ratio:.2f})", memory_ratio <= 1.2),
        (f"default block_size {DEFAULT_BLOCK} is not the slowest of {BLOCK_SIZES}",
         by_block[DEFAULT_BLOCK] < max(by_block.values())),
    ]
    return report(checks)


if __name__ == "__main__":
    sys.exit(main())
