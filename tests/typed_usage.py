"""A stranger's script, strictly typed: `make typecheck` runs `mypy --strict` on it (with the
package), and tests/test_package.py runs it. Every public name of attention_book is used."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from attention_book import (
    BertConfig,
    BertSelfAttention,
    CausalSelfAttention,
    KVCache,
    LlamaDecoder,
    MultiHeadAttention,
    additive_mask,
    apply_rotary,
    causal_mask,
    extended_attention_mask,
    filter_logits,
    generate,
    mask_from_blocked,
    merge_heads,
    padding_mask,
    plot_attention,
    scaled_dot_product_attention,
    sinusoidal_positions,
    softmax,
    softmax_jacobian,
    split_heads,
    tiled_attention,
)


def attention(x: Tensor) -> tuple[Tensor, Tensor]:
    allowed = causal_mask(x.shape[1], device=x.device) & mask_from_blocked(torch.zeros(5, 5, dtype=torch.long))
    output, weights = scaled_dot_product_attention(x, x, x, allowed)
    tiled, no_weights = tiled_attention(x, x, x, is_causal=True)
    assert no_weights is None
    torch.testing.assert_close(tiled, output)
    torch.testing.assert_close(softmax(weights.log()), weights)
    jacobian: Tensor = softmax_jacobian(weights)
    assert jacobian.shape == (2, 5, 5, 5)
    return output, additive_mask(allowed, dtype=torch.float64)


def padded_heads(x: Tensor) -> Tensor:
    real = padding_mask(np.array([5, 3]))  # (N, T): a numpy array of lengths
    module = MultiHeadAttention(16, 4)
    output, weights = module.forward(x, attention_mask=real.long(), need_weights=True)
    assert weights is not None and weights.shape == (2, 4, 5, 5)
    assert torch.equal(merge_heads(split_heads(x, 4)), x)
    return output


def bert(x: Tensor) -> Tensor:
    layer = BertSelfAttention(BertConfig(hidden_size=16, num_attention_heads=4))
    mask = extended_attention_mask(padding_mask([5, 3]).long())
    context, probs = layer.forward(x, mask, output_attentions=True)
    assert layer.forward(x, mask, output_attentions=True)[1].shape == (2, 4, 5, 5)
    (alone,) = layer.forward(x)
    assert probs.shape == (2, 4, 5, 5) and alone.shape == context.shape
    return context


def decode(x: Tensor) -> Tensor:
    layer = CausalSelfAttention(16, 4, num_kv_heads=2)
    cache = KVCache()
    with torch.no_grad():
        steps = [layer.forward(x[:, [t]], cache=cache) for t in range(x.shape[1])]
        whole = layer.forward(x)
    torch.testing.assert_close(torch.cat(steps, dim=1), whole, atol=1e-5, rtol=0)
    book = CausalSelfAttention(16, 4, num_kv_heads=2, attention="book")
    book.load_state_dict(layer.state_dict())
    with torch.no_grad():
        output, weights = book.forward(x, output_attentions=True)  # (N, h, T, T) weights
    torch.testing.assert_close(output, whole, atol=1e-5, rtol=0)
    assert weights.shape == (2, 4, 5, 5) and book.attention == "book"
    keys: Tensor | None = cache.keys
    assert keys is not None and len(cache) == x.shape[1]
    local = CausalSelfAttention(16, 4, num_kv_heads=2, sliding_window=3)
    window: int | None = local.sliding_window
    recent = KVCache(window=3)
    with torch.no_grad():
        sliding = [local.forward(x[:, [t]], cache=recent) for t in range(x.shape[1])]
        torch.testing.assert_close(torch.cat(sliding, dim=1), local.forward(x), atol=1e-5, rtol=0)
    held: int | None = recent.window
    assert window == held == 3 and len(recent) == 2 and recent.next_position == x.shape[1]
    rotated = apply_rotary(split_heads(x, 4), base=10000.0)
    return rotated + sinusoidal_positions(5, 4)


def language_model() -> Tensor:
    model = LlamaDecoder(50, 16, 2, 4, 24, num_kv_heads=2, tie_embeddings=True).eval()
    prompts = torch.tensor([[0, 0, 7, 8], [5, 6, 7, 8]])  # (N, T): the first padded on the left
    real = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])     # as a tokenizer returns it
    with torch.no_grad():
        logits: Tensor = model.forward(prompts, attention_mask=real)
        again, attentions = model.forward(prompts, attention_mask=real, output_attentions=True)
        tiled = LlamaDecoder(50, 16, 2, 4, 24, num_kv_heads=2, attention="tiled").eval()
        unpadded: Tensor = tiled.forward(prompts[1:])
    torch.testing.assert_close(again, logits)
    assert len(attentions) == 2 and attentions[0].shape == (2, 4, 4, 4) and unpadded.shape == (1, 4, 50)
    kept = filter_logits(logits[:, -1], temperature=0.8, top_k=10, top_p=0.9, min_p=0.05)
    assert kept.shape == (2, 50)
    tokens = generate(model, prompts, attention_mask=real, max_new_tokens=3, eos_token_id=1,
                      do_sample=True, top_k=10, generator=torch.Generator().manual_seed(0))
    assert tokens.shape[0] == 2 and tokens.shape[1] <= 7
    return tokens


def main() -> None:
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(0))  # (N, T, d_model)
    attention(x)
    padded_heads(x)
    bert(x)
    decode(x)
    language_model()
    plot_attention(torch.full((2, 3), 1 / 3), ["a", "b"], ["x", "y", "z"], title="uniform")
    print("typed usage: every public name used")


if __name__ == "__main__":
    main()
