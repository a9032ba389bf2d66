"""The target of the generating-text chapter, measured side by side in one run.

After a prompt of 512 tokens, 64 decoding steps of CausalSelfAttention(d_model=256, num_heads=8,
num_kv_heads=2) (float32, eval, no grad, CPU, one sequence) with a KVCache must run at least 10x
faster than 64 steps that each run the layer on the whole text so far and keep its last row.

That baseline computes every row, as a layer inside a model must, since the next layer needs the
output of every position. A lone layer could recompute only the keys and values and one row of
attention; the generating-text chapter times that leaner baseline too, and against it the cache
wins by a smaller factor (a few times at these sizes).

Both start from the prompt already read: the cached version copies a cache prefilled with the
prompt's 512 positions at the start of each run (the copy is timed with it), so every run decodes
the same 64 positions. Time: the median CPU time of one thread over several rounds, the two
interleaved round by round in one process (attention_book._measure.median_times). For the record
it also prints the whole generation, prefill included, which the target does not cover. The
book's appendix "How this book measures" (book/appendix_measuring.md) explains the timing.

Prints a table and exits with status 1 when the target is missed.

    python benchmarks/bench_decoding.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import copy
import sys

import torch

from attention_book import CausalSelfAttention, KVCache
from attention_book._measure import median_times
from _targets import report  # benchmarks/_targets.py

D_MODEL, HEADS, KV_HEADS = 256, 8, 2
PROMPT, STEPS = 512, 64
TARGET = 10.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    layer = CausalSelfAttention(D_MODEL, HEADS, num_kv_heads=KV_HEADS).eval()
    text = torch.randn(1, PROMPT + STEPS, D_MODEL, generator=torch.Generator().manual_seed(1))  # (N, T, d_model)
    new_positions = range(PROMPT, PROMPT + STEPS)

    with torch.no_grad():
        prefilled = KVCache()
        layer(text[:, :PROMPT], cache=prefilled)

        def decode_with_cache():
            cache = copy.deepcopy(prefilled)  # the prompt's 512 positions
            return torch.cat([layer(text[:, t:t + 1], cache=cache) for t in new_positions], dim=1)

        def decode_recomputing():
            return torch.cat([layer(text[:, :t + 1])[:, -1:] for t in new_positions], dim=1)

        def generate_with_cache():  # the prefill, then 63 steps: 64 new tokens
            cache = KVCache()
            first = layer(text[:, :PROMPT], cache=cache)[:, -1:]
            rest = [layer(text[:, t:t + 1], cache=cache) for t in range(PROMPT, PROMPT + STEPS - 1)]
            return torch.cat([first, *rest], dim=1)

        torch.testing.assert_close(decode_with_cache(), decode_recomputing(), atol=1e-5, rtol=0)
        seconds = median_times({
            "64 steps with the cache": decode_with_cache,
            "64 steps recomputing": decode_recomputing,
            "prefill + 63 steps with the cache": generate_with_cache,
        }, rounds=args.rounds)

    print(f"torch {torch.__version__}, CPU, one thread, float32, no grad; CausalSelfAttention("
          f"{D_MODEL}, {HEADS}, num_kv_heads={KV_HEADS}); N=1, prompt {PROMPT} tokens, {STEPS} new; "
          f"median CPU time of {args.rounds} interleaved rounds")
    print(f"\n   {'implementation':<36} {'time (ms)':>10} {'per step (ms)':>14}")
    for name, value in seconds.items():
        print(f"   {name:<36} {1e3 * value:>10.2f} {1e3 * value / STEPS:>14.3f}")

    speedup = seconds["64 steps recomputing"] / seconds["64 steps with the cache"]
    with_prefill = seconds["64 steps recomputing"] / seconds["prefill + 63 steps with the cache"]
    met = speedup >= TARGET
    print(f"\n   (for the record: generating the 64 tokens from the prompt, prefill included, "
          f"{with_prefill:.1f} x faster with the cache)")
    return report([(f"64 steps with the cache >= {TARGET:.0f} x faster (ratio {speedup:.1f})", met)])


if __name__ == "__main__":
    sys.exit(main())
