"""Time and peak memory of multi-head attention on CPU, side by side.

Four implementations of the same function, at N=1, d_model=768, h=12 (BERT-base), float32,
evaluation mode, no gradients, for several sequence lengths T:

- floor:    four nn.Linear around F.scaled_dot_product_attention, nothing else (the
            projections of a MultiHeadAttention, attention_book._measure.floor_forward);
- fused:    attention_book.MultiHeadAttention, need_weights=False (the default);
- teaching: attention_book.MultiHeadAttention, need_weights=True (returns the weights);
- torch:    torch.nn.MultiheadAttention(batch_first=True), need_weights=False, self-attention
            under no_grad in eval, which is the condition for its native fast path.

Time: median of several rounds after a warm-up (attention_book._measure.median_times), the
process's CPU time and, in as many further rounds, wall-clock time (with one thread, CPU time is
the work done, less disturbed by other processes on a shared machine than wall time). The four
implementations are interleaved round by round in one process, in an order rotated every round,
so that a change in the machine's load hits all of them alike.
Peak memory: each (implementation, T) runs once in a process forked after the imports
(attention_book._measure.peak_memory), after its inputs and module are allocated and a tiny
warm-up call has run: the growth of the peak resident memory during one forward call (on Linux
the peak is reset just before the call), that is the call's peak above everything the process
held when it started.

    python benchmarks/bench_multihead.py [--lengths 256 1024 4096] [--rounds 7] [--threads 1]

The targets, measured at the longest T, are printed as "met" or "MISSED"; the exit status is 1
when any is missed, so that `make bench` fails.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from torch import nn

from attention_book import MultiHeadAttention
from attention_book._measure import floor_forward, median_times, peak_memory
from _targets import report  # benchmarks/_targets.py

N, D_MODEL, HEADS = 1, 768, 12
IMPLEMENTATIONS = {
    "floor": "floor: 4 x Linear + F.sdpa",
    "fused": "ours, need_weights=False",
    "teaching": "ours, need_weights=True",
    "torch": "nn.MultiheadAttention",
}
CLOCKS = {"CPU": time.process_time, "wall": time.perf_counter}

# One forward call of one implementation, run by peak_memory in a process of its own.
MEMORY_CASE = """
import sys
import torch
sys.path.insert(0, {folder!r})
from bench_multihead import make_runner, make_input
torch.set_grad_enabled(False)
call, x = make_runner({name!r}), make_input({length})
call(x[:, :16].clone())  # one-off initialisation (kernels, thread pool) before the call
def run():
    return call(x)
"""


def make_runner(name: str):
    """A module in eval mode and a function x -> output for one implementation."""
    torch.manual_seed(0)
    if name == "torch":
        module = nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True).eval()
        return lambda x: module(x, x, x, need_weights=False)[0]
    module = MultiHeadAttention(D_MODEL, HEADS).eval()
    if name == "floor":
        return lambda x: floor_forward(module, x)
    if name == "floor, causal":
        return lambda x: floor_forward(module, x, is_causal=True)
    if name == "fused, causal":
        return lambda x: module(x, is_causal=True)
    need_weights = name == "teaching"
    return lambda x: module(x, need_weights=need_weights)


def make_input(length: int) -> torch.Tensor:
    return torch.randn(N, length, D_MODEL, generator=torch.Generator().manual_seed(1))  # (N, T, d_model)


def uses_native_fast_path(run, x: torch.Tensor) -> bool:
    """Whether nn.MultiheadAttention really took its native fast path on this input."""
    native, calls = torch._native_multi_head_attention, []

    def spy(*args, **kwargs):  # the fast path's kernel, counted
        calls.append(1)
        return native(*args, **kwargs)

    torch._native_multi_head_attention = spy
    try:
        with torch.no_grad():
            run(x)
    finally:
        torch._native_multi_head_attention = native
    return bool(calls)


def median_seconds(length: int, rounds: int) -> dict[str, dict[str, float]]:
    """{clock: {implementation: median seconds per forward call}}, implementations interleaved."""
    x = make_input(length)
    calls = {name: (lambda run=make_runner(name): run(x)) for name in IMPLEMENTATIONS}
    with torch.no_grad():
        return {clock: median_times(calls, rounds, clock=read) for clock, read in CLOCKS.items()}


def peak_mib(length: int, threads: int, names=tuple(IMPLEMENTATIONS)) -> dict[str, float]:
    """{implementation: peak memory growth (MiB) of one forward call}, each in its own process."""
    folder = str(Path(__file__).resolve().parent)
    cases = {name: MEMORY_CASE.format(folder=folder, name=name, length=length) for name in names}
    return {name: mib for name, (mib, _) in peak_memory(cases, threads=threads).items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 4096])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"multi-head attention, CPU, float32, eval, no grad: N={N}, d_model={D_MODEL}, h={HEADS}")
    print(f"torch {torch.__version__}, torch.set_num_threads({args.threads}) in every process; "
          f"time = median of {args.rounds} rounds after a warm-up (interleaved), CPU then wall; "
          "peak = resident-set growth during one call, fresh process each")
    if not uses_native_fast_path(make_runner("torch"), make_input(16)):
        print("(nn.MultiheadAttention did NOT take its native fast path)")
    header = (f"{'T':>5}  {'implementation':<28} {'wall (s)':>9} {'x floor':>8} "
              f"{'CPU (s)':>9} {'x floor':>8} {'peak (MiB)':>11} {'x floor':>8}")
    print(header)
    print("-" * len(header))
    results = {}
    for length in args.lengths:
        seconds, memory = median_seconds(length, args.rounds), peak_mib(length, args.threads)
        wall, cpu = seconds["wall"], seconds["CPU"]
        for name, label in IMPLEMENTATIONS.items():
            memory_ratio = memory[name] / max(memory["floor"], 1.0)
            print(f"{length:>5}  {label:<28} {wall[name]:>9.4f} {wall[name] / wall['floor']:>8.2f} "
                  f"{cpu[name]:>9.4f} {cpu[name] / cpu['floor']:>8.2f} "
                  f"{memory[name]:>11.1f} {memory_ratio:>8.2f}")
        results[length] = (seconds, memory)
        sys.stdout.flush()

    longest = max(args.lengths)
    seconds, memory = results[longest]
    checks = [
        (f"fused {clock} time <= 1.10 x floor", times["fused"] <= 1.10 * times["floor"])
        for clock, times in seconds.items()
    ] + [
        (f"fused {clock} time <= nn.MultiheadAttention", times["fused"] <= times["torch"])
        for clock, times in seconds.items()
    ] + [
        ("fused peak memory <= 1.5 x floor", memory["fused"] <= 1.5 * max(memory["floor"], 1.0)),
    ]
    # is_causal=True against the causal floor (four nn.Linear around the causal fused kernel)
    causal = peak_mib(longest, args.threads, ("floor, causal", "fused, causal"))
    causal_ratio = causal["fused, causal"] / max(causal["floor, causal"], 1.0)
    print(f"T={longest}, is_causal=True: peak {causal['fused, causal']:.1f} MiB, causal floor "
          f"{causal['floor, causal']:.1f} MiB: {causal_ratio:.2f} x")
    checks.append(("is_causal=True peak memory <= 1.2 x causal floor", causal_ratio <= 1.2))
    report(checks, heading=f"targets at T={longest}", width=40)
    teaching_bytes = N * HEADS * longest * longest * 4
    print(f"the teaching path's (N, h, T, T) float32 weights alone: {teaching_bytes / 2**20:.0f} MiB")
    missed = [label for label, ok in checks if not ok]
    if missed:
        print(f"bench_multihead: {len(missed)} target(s) missed: {'; '.join(missed)}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
