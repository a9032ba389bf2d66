"""Time and peak memory of multi-head attention on CPU, side by side.

Four implementations of the same function, at N=1, d_model=768, h=12 (BERT-base), float32,
evaluation mode, no gradients, for several sequence lengths T:

- floor:    four nn.Linear around F.scaled_dot_product_attention, nothing else;
- fused:    attention_book.MultiHeadAttention, need_weights=False (the default);
- teaching: attention_book.MultiHeadAttention, need_weights=True (returns the weights);
- torch:    torch.nn.MultiheadAttention(batch_first=True), need_weights=False, self-attention
            under no_grad in eval, which is the condition for its native fast path.

Time: median of several rounds after a warm-up, both wall-clock and the process's CPU time
(with one thread, CPU time is the work done, less disturbed by other processes on a shared
machine than wall time). The four implementations are interleaved round by round in one
process, in an order rotated every round, so that a change in the machine's load hits all of
them alike.
Peak memory: each (implementation, T) runs once in a fresh subprocess. After the inputs and
the module are allocated and a tiny warm-up call has run, the process's resident-set
high-water mark is reset (writing 5 to /proc/self/clear_refs, Linux >= 4.0) and the current
resident set is taken as the baseline; the peak is the high-water mark (VmHWM) after one
forward call minus that baseline. The subprocess runs with MALLOC_MMAP_THRESHOLD_=131072, so
that every tensor larger than 128 KiB is its own mapping, returned to the system when freed:
resident memory then follows the live tensors instead of glibc's reuse of freed heap. Where
clear_refs cannot be written, the growth of ru_maxrss over the same baseline is used (a
fresh process, because ru_maxrss only ever grows); it under-reports peaks that stay below
the high-water mark of the set-up.

    python benchmarks/bench_multihead.py [--lengths 256 1024 4096] [--rounds 7] [--threads 1]

The targets, measured at the longest T, are printed as "met" or "MISSED"; the exit status is 1
when any is missed, so that `make bench` fails.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

from attention_book import MultiHeadAttention

N, D_MODEL, HEADS = 1, 768, 12
IMPLEMENTATIONS = {
    "floor": "floor: 4 x Linear + F.sdpa",
    "fused": "ours, need_weights=False",
    "teaching": "ours, need_weights=True",
    "torch": "nn.MultiheadAttention",
}


class Floor(nn.Module):
    """The least any implementation must do: four projections around the fused kernel."""

    def __init__(self, d_model: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (
            nn.Linear(d_model, d_model) for _ in range(4)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, t, d = x.shape
        h = self.num_heads
        q, k, v = (
            p(x).view(n, t, h, d // h).transpose(1, 2)  # (N, h, T, d_k)
            for p in (self.q_proj, self.k_proj, self.v_proj)
        )
        heads = F.scaled_dot_product_attention(q, k, v)  # (N, h, T, d_k)
        return self.out_proj(heads.transpose(1, 2).reshape(n, t, d))  # (N, T, d_model)


def make_runner(name: str):
    """A module in eval mode and a function x -> output for one implementation."""
    torch.manual_seed(0)
    if name == "floor":
        module = Floor(D_MODEL, HEADS).eval()
        return lambda x: module(x)
    if name == "torch":
        module = nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True).eval()
        return lambda x: module(x, x, x, need_weights=False)[0]
    module = MultiHeadAttention(D_MODEL, HEADS).eval()
    need_weights = name == "teaching"
    return lambda x: module(x, need_weights=need_weights)


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024  # kB
    raise KeyError(field)


def reset_peak() -> str:
    """Reset the resident-set high-water mark; returns the method used to read the peak."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
        return "VmHWM"
    except OSError:
        return "ru_maxrss"


def peak_mib(method: str) -> float:
    if method == "VmHWM":
        return _status_mib("VmHWM")
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def uses_native_fast_path(run, x: torch.Tensor) -> bool:
    """Whether nn.MultiheadAttention really took its native fast path on this input."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        run(x)
    return any("_native_multi_head_attention" in event.key for event in prof.key_averages())


def measure_memory(name: str, length: int, threads: int) -> dict:
    """Run in a fresh process: peak memory growth (MiB) of one forward call."""
    torch.set_num_threads(threads)
    run = make_runner(name)
    x = torch.randn(N, length, D_MODEL, generator=torch.Generator().manual_seed(1))
    result = {}
    with torch.no_grad():
        tiny = x[:, :16].clone()
        run(tiny)  # one-off initialisation (kernels, thread pool) before the baseline
        if name == "torch":
            result["fast_path"] = uses_native_fast_path(run, tiny)
        method = reset_peak()
        baseline = _status_mib("VmRSS")
        run(x)
        result["peak_mib"] = peak_mib(method) - baseline
        result["method"] = method
    return result


def memory_in_subprocess(name: str, length: int, threads: int) -> dict:
    command = [sys.executable, __file__, "--memory-of", name, str(length), "--threads", str(threads)]
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def median_times(length: int, rounds: int) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) seconds per forward call, implementations interleaved by round."""
    runners = {name: make_runner(name) for name in IMPLEMENTATIONS}
    x = torch.randn(N, length, D_MODEL, generator=torch.Generator().manual_seed(1))
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in IMPLEMENTATIONS}
    with torch.no_grad():
        for run in runners.values():
            run(x)  # warm-up
        names = list(runners)
        for round_index in range(rounds):
            shift = round_index % len(names)  # rotate the order: no one always runs first
            for name in names[shift:] + names[:shift]:
                wall, cpu = time.perf_counter(), time.process_time()
                runners[name](x)
                times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    return {
        name: tuple(statistics.median(column) for column in zip(*values))
        for name, values in times.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 4096])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--memory-of", nargs=2, metavar=("IMPLEMENTATION", "T"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_of:
        name, length = args.memory_of
        print(json.dumps(measure_memory(name, int(length), args.threads)))
        return 0

    torch.set_num_threads(args.threads)
    print(f"multi-head attention, CPU, float32, eval, no grad: N={N}, d_model={D_MODEL}, h={HEADS}")
    print(f"torch {torch.__version__}, torch.set_num_threads({args.threads}) in every process; "
          f"time = median of {args.rounds} rounds after a warm-up (interleaved); "
          "peak = resident-set growth during one call, fresh process each")
    header = (f"{'T':>5}  {'implementation':<28} {'wall (s)':>9} {'x floor':>8} "
              f"{'CPU (s)':>9} {'x floor':>8} {'peak (MiB)':>11} {'x floor':>8}")
    print(header)
    print("-" * len(header))
    results = {}
    for length in args.lengths:
        times = median_times(length, args.rounds)
        memory = {name: memory_in_subprocess(name, length, args.threads) for name in IMPLEMENTATIONS}
        for name, label in IMPLEMENTATIONS.items():
            (wall, cpu), (floor_wall, floor_cpu) = times[name], times["floor"]
            peak = memory[name]["peak_mib"]
            memory_ratio = peak / max(memory["floor"]["peak_mib"], 1.0)
            print(f"{length:>5}  {label:<28} {wall:>9.4f} {wall / floor_wall:>8.2f} "
                  f"{cpu:>9.4f} {cpu / floor_cpu:>8.2f} {peak:>11.1f} {memory_ratio:>8.2f}")
        if not memory["torch"]["fast_path"]:
            print(f"      (nn.MultiheadAttention did NOT take its native fast path at T={length})")
        methods = {m["method"] for m in memory.values()}
        if methods != {"VmHWM"}:
            print(f"      (peak memory read from {sorted(methods)}: may under-report small peaks)")
        results[length] = (times, memory)
        sys.stdout.flush()

    longest = max(args.lengths)
    times, memory = results[longest]
    checks = [
        (f"fused {kind} time <= 1.10 x floor", times["fused"][i] <= 1.10 * times["floor"][i])
        for i, kind in enumerate(("wall", "CPU"))
    ] + [
        (f"fused {kind} time <= nn.MultiheadAttention", times["fused"][i] <= times["torch"][i])
        for i, kind in enumerate(("wall", "CPU"))
    ] + [
        ("fused peak memory <= 1.5 x floor",
         memory["fused"]["peak_mib"] <= 1.5 * max(memory["floor"]["peak_mib"], 1.0)),
    ]
    print(f"\ntargets at T={longest}:")
    for label, ok in checks:
        print(f"  {label:<40} {'met' if ok else 'MISSED'}")
    teaching_bytes = N * HEADS * longest * longest * 4
    print(f"the teaching path's (N, h, T, T) float32 weights alone: {teaching_bytes / 2**20:.0f} MiB")
    missed = [label for label, ok in checks if not ok]
    if missed:
        print(f"bench_multihead: {len(missed)} target(s) missed: {'; '.join(missed)}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
