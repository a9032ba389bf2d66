"""attention_book.decoding against transformers' Llama (its attention, its DynamicCache, its greedy
generate) and an independent float64 computation."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from transformers import GptOssConfig, LlamaConfig, LlamaForCausalLM, MistralConfig
from transformers.cache_utils import DynamicCache, DynamicSlidingWindowLayer
from transformers.masking_utils import create_causal_mask, create_sliding_window_causal_mask
from transformers.models.gpt_oss.modeling_gpt_oss import GptOssAttention, GptOssRotaryEmbedding
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding
from transformers.models.mistral.modeling_mistral import MistralAttention, MistralRotaryEmbedding

from attention_book import CausalSelfAttention, KVCache, decoding
from references import attention_float64
from test_positions import rope_float64


def randn(*shape, seed=0, dtype=torch.float32):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype)


def llama_and_ours(d_model=64, heads=8, kv_heads=2, *, bias=False, base=10000.0, seed=0):
    """transformers' LlamaAttention (eager) and the book's module, with the same weights."""
    config = LlamaConfig(hidden_size=d_model, num_attention_heads=heads, num_key_value_heads=kv_heads,
                         head_dim=d_model // heads, attention_bias=bias, rope_theta=base,
                         attn_implementation="eager")
    torch.manual_seed(seed)
    theirs = LlamaAttention(config, layer_idx=0).eval()
    ours = CausalSelfAttention(d_model, heads, num_kv_heads=kv_heads, bias=bias, rope_base=base).eval()
    ours.load_state_dict(theirs.state_dict())
    return config, theirs, ours


def causal_additive(T_q, T_k):
    """The causal mask LlamaAttention adds, aligned bottom right: (1, 1, T_q, T_k), 0 / -inf."""
    return torch.full((T_q, T_k), -math.inf).triu(T_k - T_q + 1)[None, None]


def llama(config, theirs, x, start=0, mask=None, cache=None):
    """LlamaAttention on x (N, T, d_model) at positions start .. start + T - 1."""
    N, T, _ = x.shape
    positions = torch.arange(start, start + T).expand(N, T)
    embeddings = LlamaRotaryEmbedding(config)(x, positions)
    mask = causal_additive(T, start + T) if mask is None else mask
    return theirs(x, embeddings, mask, cache=cache)[0]


# --- the whole text -------------------------------------------------------------------------


@pytest.mark.parametrize("kv_heads", [1, 2, 4, 8])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_full_pass_equals_llama_attention(kv_heads, bias, base):
    config, theirs, ours = llama_and_ours(kv_heads=kv_heads, bias=bias, base=base, seed=kv_heads)
    x = randn(3, 11, 64, seed=1)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), llama(config, theirs, x), atol=1e-5, rtol=0)


def test_state_dict_has_llamas_keys_and_shapes():
    _, theirs, ours = llama_and_ours(kv_heads=2, bias=True)
    assert {k: v.shape for k, v in ours.state_dict().items()} == {
        k: v.shape for k, v in theirs.state_dict().items()
    }
    assert ours.k_proj.weight.shape == (16, 64) and ours.o_proj.weight.shape == (64, 64)


def test_gradients_equal_llama_attention():
    config, theirs, ours = llama_and_ours(kv_heads=2, seed=3)
    x = randn(2, 7, 64, seed=3)
    upstream = randn(2, 7, 64, seed=4)
    (llama(config, theirs, x) * upstream).sum().backward()
    (ours(x) * upstream).sum().backward()
    for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
        torch.testing.assert_close(getattr(ours, name).weight.grad, getattr(theirs, name).weight.grad,
                                   atol=1e-5, rtol=0)


def _float64_heads(ours, x):
    """Queries, keys and values of ``ours`` on ``x`` by hand, rotated in float64 (base 500), each
    query head given its group's key/value head: (N, h, T, d_k) each."""
    N, T, _ = x.shape
    heads, kv_heads, d_k = ours.num_heads, ours.num_kv_heads, ours.d_k

    def project(layer, count):  # (N, T, count * d_k) -> (N, count, T, d_k)
        return (x @ layer.weight.T).view(N, T, count, d_k).transpose(1, 2)

    positions = torch.arange(T)
    q = rope_float64(project(ours.q_proj, heads), positions, base=500.0)     # (N, h, T, d_k)
    k = rope_float64(project(ours.k_proj, kv_heads), positions, base=500.0)  # (N, h_kv, T, d_k)
    v = project(ours.v_proj, kv_heads)                                       # (N, h_kv, T, d_k)
    group = [c * kv_heads // heads for c in range(heads)]  # the key/value head of each query head
    return q, k[:, group], v[:, group]


def _assert_float64_under(ours, x, allowed):
    """``ours`` on ``x`` (float64) gives the output and weights of attention under ``allowed``
    ``(T, T)``, computed by hand, to 1e-12: with and without ``output_attentions``."""
    N, T, d_model = x.shape
    q, k, v = _float64_heads(ours, x)  # (N, h, T, d_k) each
    heads_out, expected_weights = attention_float64(q, k, v, allowed)
    expected = heads_out.transpose(1, 2).reshape(N, T, d_model) @ ours.o_proj.weight.T
    with torch.no_grad():
        output, weights = ours(x, output_attentions=True)
        torch.testing.assert_close(ours(x), expected, atol=1e-12, rtol=0)
    torch.testing.assert_close(output, expected, atol=1e-12, rtol=0)
    torch.testing.assert_close(weights, expected_weights, atol=1e-12, rtol=0)


@pytest.mark.parametrize("kv_heads", [1, 3, 6])
def test_float64_equals_an_independent_computation(kv_heads):
    """Projections, RoPE as complex multiplication, each query head on its group's key/value head."""
    torch.manual_seed(kv_heads)
    heads, d_model, T = 6, 48, 9
    ours = CausalSelfAttention(d_model, heads, num_kv_heads=kv_heads, rope_base=500.0).double()
    x = randn(2, T, d_model, seed=5, dtype=torch.float64)
    q, k, v = _float64_heads(ours, x)  # (N, h, T, d_k) each
    allowed = torch.ones(T, T, dtype=torch.bool).tril()
    heads_out, _ = attention_float64(q, k, v, allowed)  # (N, h, T, d_k)
    expected = heads_out.transpose(1, 2).reshape(2, T, d_model) @ ours.o_proj.weight.T
    with torch.no_grad():
        torch.testing.assert_close(ours(x), expected, atol=1e-12, rtol=0)


# --- step by step ---------------------------------------------------------------------------


@pytest.mark.parametrize("kv_heads", [1, 2, 8])
def test_step_by_step_equals_transformers_dynamic_cache(kv_heads):
    config, theirs, ours = llama_and_ours(kv_heads=kv_heads, seed=6)
    x = randn(2, 12, 64, seed=6)
    their_cache, our_cache = DynamicCache(config=config), KVCache()
    with torch.no_grad():
        for start, end in [(0, 5), (5, 6), (6, 9), (9, 10), (10, 11), (11, 12)]:
            piece = x[:, start:end]
            expected = llama(config, theirs, piece, start, cache=their_cache)
            torch.testing.assert_close(ours(piece, cache=our_cache), expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(our_cache.keys, their_cache.layers[0].keys, atol=1e-6, rtol=0)
    torch.testing.assert_close(our_cache.values, their_cache.layers[0].values, atol=1e-6, rtol=0)


@settings(max_examples=25, deadline=None)
@given(
    heads_and_kv=st.sampled_from([(4, 1), (4, 2), (4, 4), (6, 3), (8, 2)]),
    cuts=st.lists(st.integers(1, 29), max_size=6, unique=True),
    seed=st.integers(0, 2**16),
)
def test_decoding_in_any_pieces_equals_the_full_pass(heads_and_kv, cuts, seed):
    heads, kv_heads = heads_and_kv
    T, d_k = 30, 4
    torch.manual_seed(seed)
    layer = CausalSelfAttention(heads * d_k, heads, num_kv_heads=kv_heads).eval()
    x = randn(2, T, heads * d_k, seed=seed)
    bounds = [0, *sorted(cuts), T]
    cache = KVCache()
    with torch.no_grad():
        full = layer(x)
        for start, end in zip(bounds, bounds[1:]):
            torch.testing.assert_close(layer(x[:, start:end], cache=cache), full[:, start:end],
                                       atol=1e-5, rtol=0)
            assert len(cache) == cache.next_position == end
            assert cache.keys.shape == cache.values.shape == (2, kv_heads, end, d_k)
            assert cache.keys.numel() + cache.values.numel() == 2 * 2 * kv_heads * end * d_k
            assert end <= cache.capacity <= 2 * end


def test_the_cache_writes_in_place_and_doubles_when_full():
    cache = KVCache()
    assert len(cache) == cache.next_position == cache.capacity == 0
    assert cache.keys is None and cache.values is None
    keys, values = randn(1, 2, 3, 4, seed=7), randn(1, 2, 3, 5, seed=8)  # d_v may differ from d_k
    cache.append(keys, values)
    assert cache.capacity == 3
    pointers = []
    for t in range(3, 20):
        new_keys, new_values = randn(1, 2, 1, 4, seed=t), randn(1, 2, 1, 5, seed=100 + t)
        all_keys, all_values = cache.append(new_keys, new_values)
        keys, values = torch.cat([keys, new_keys], dim=2), torch.cat([values, new_values], dim=2)
        assert torch.equal(all_keys, keys) and torch.equal(all_values, values)
        pointers.append((cache.capacity, all_keys.data_ptr()))
    assert [capacity for capacity, _ in pointers] == [6] * 3 + [12] * 6 + [24] * 8
    for (capacity, pointer), (next_capacity, next_pointer) in zip(pointers, pointers[1:]):
        assert (next_pointer != pointer) == (next_capacity != capacity)  # a new buffer only to grow


@settings(max_examples=30, deadline=None)
@given(prompt=st.integers(1, 40), steps=st.integers(0, 300))
def test_the_doublings_copy_fewer_than_2T_positions(prompt, steps):
    """Positions moved to a new buffer, counted by its address, while T = prompt + steps fill it."""
    cache, copied = KVCache(), 0
    cache.append(torch.zeros(1, 1, prompt, 2), torch.zeros(1, 1, prompt, 2))
    for _ in range(steps):
        address, held = cache.keys.data_ptr(), len(cache)
        cache.append(torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 1, 2))
        copied += held if cache.keys.data_ptr() != address else 0
    T = prompt + steps
    assert copied == cache.capacity - prompt < 2 * T


class _NewStorage(TorchDispatchMode):
    """Bytes of the new storages the aten ops create (views and in-place writes create none)."""

    def __init__(self):
        super().__init__()
        self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        seen = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in seen:
                seen.add(t.untyped_storage().data_ptr())
                self.bytes += t.untyped_storage().nbytes()
        return out


def test_the_storage_counter_sees_copies_and_not_views():
    x = torch.zeros(1000)
    with _NewStorage() as views:
        x[:10].view(2, 5).transpose(0, 1)
        x[:10] = 1.0
    with _NewStorage() as copies:
        x.repeat_interleave(2)
    assert views.bytes == 0 and copies.bytes >= 8000


@pytest.mark.parametrize("T_new", [1, 2])
def test_a_step_does_not_copy_the_cache(T_new):
    """On the CPU: one token (no mask) or a chunk (a bottom-right mask) after 4097 cached positions."""
    torch.manual_seed(0)
    layer = CausalSelfAttention(64, 8, num_kv_heads=2).eval()
    x = randn(1, 4100, 64)
    with torch.no_grad():
        cache = KVCache()
        layer(x[:, :4096], cache=cache)
        layer(x[:, 4096:4097], cache=cache)  # the buffer doubles here, not in the measured step
        cache_bytes = 2 * cache.keys.numel() * cache.keys.element_size()
        with _NewStorage() as new:
            layer(x[:, 4097:4097 + T_new], cache=cache)
        with _NewStorage() as repeated:  # what a copy of the cache's heads would cost
            cache.keys.repeat_interleave(4, dim=1)
            cache.values.repeat_interleave(4, dim=1)
    assert new.bytes < cache_bytes / 4 < repeated.bytes


def test_in_place_writes_break_a_backward_so_the_cache_refuses_gradients():
    buffer = torch.zeros(1, 1, 4, 2)
    first = randn(1, 1, 3, 2).requires_grad_()
    buffer[:, :, :3] = first
    out = torch.nn.functional.scaled_dot_product_attention(randn(1, 1, 1, 2), buffer[:, :, :3], buffer[:, :, :3])
    buffer[:, :, 3:] = randn(1, 1, 1, 2)  # the next step's write
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()
    layer = CausalSelfAttention(16, 4, num_kv_heads=2)
    cache = KVCache()
    with pytest.raises(RuntimeError, match=r"^keys and values\b.*no_grad"):
        layer(randn(1, 3, 16), cache=cache)
    with pytest.raises(RuntimeError, match=r"^keys and values\b.*no_grad"):
        cache.append(randn(1, 2, 3, 4), randn(1, 2, 3, 4).requires_grad_())
    assert len(cache) == 0
    with torch.no_grad():
        layer(randn(1, 3, 16), cache=cache)
    cache.append(randn(1, 2, 1, 4), randn(1, 2, 1, 4))  # nothing requires gradients: accepted
    assert len(cache) == 4


@torch.no_grad()
def test_an_empty_input_appends_nothing():
    layer = CausalSelfAttention(16, 4, num_kv_heads=2)
    cache = KVCache()
    assert layer(torch.zeros(2, 0, 16), cache=cache).shape == (2, 0, 16) and len(cache) == 0
    layer(randn(2, 3, 16), cache=cache)
    assert layer(torch.zeros(2, 0, 16), cache=cache).shape == (2, 0, 16) and len(cache) == 3


def test_sizes_accept_numpy_integers():
    layer = CausalSelfAttention(np.int64(32), np.int64(4), num_kv_heads=np.int32(2))
    assert (layer.num_heads, layer.num_kv_heads, layer.d_k) == (4, 2, 8)
    assert type(layer.num_kv_heads) is int


# --- the weights, and the three kernels -----------------------------------------------------


def llama_with_weights(config, theirs, x, start=0, mask=None, cache=None):
    """LlamaAttention (eager) on x: its output and its weights (N, h, T, start + T)."""
    N, T, _ = x.shape
    positions = torch.arange(start, start + T).expand(N, T)
    embeddings = LlamaRotaryEmbedding(config)(x, positions)
    mask = causal_additive(T, start + T) if mask is None else mask
    return theirs(x, embeddings, mask, cache=cache)


@pytest.mark.parametrize("kv_heads", [1, 2, 8])
def test_output_attentions_equal_llama_eager_weights_step_by_step(kv_heads):
    config, theirs, ours = llama_and_ours(kv_heads=kv_heads, seed=10 + kv_heads)
    x = randn(2, 9, 64, seed=10)
    their_cache, our_cache = DynamicCache(config=config), KVCache()
    with torch.no_grad():
        for start, end in [(0, 4), (4, 5), (5, 8), (8, 9)]:
            piece = x[:, start:end]
            expected, expected_weights = llama_with_weights(config, theirs, piece, start, cache=their_cache)
            output, weights = ours(piece, cache=our_cache, output_attentions=True)
            assert weights.shape == (2, 8, end - start, end)  # (N, h, T, T_k): cached keys too
            torch.testing.assert_close(weights, expected_weights, atol=1e-5, rtol=0)
            torch.testing.assert_close(output, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("kv_heads", [1, 3, 6])
def test_output_attentions_equal_an_independent_float64_computation(kv_heads):
    torch.manual_seed(kv_heads)
    heads, d_model, T = 6, 48, 7
    d_k = d_model // heads
    ours = CausalSelfAttention(d_model, heads, num_kv_heads=kv_heads).double()
    x = randn(2, T, d_model, seed=11, dtype=torch.float64)
    real = torch.tensor([[0, 0, 1, 1, 1, 1, 1], [1] * 7], dtype=torch.bool)  # the first padded

    def project(layer, count):  # (N, T, count * d_k) -> (N, count, T, d_k)
        return (x @ layer.weight.T).view(2, T, count, d_k).transpose(1, 2)

    positions = (real.cumsum(-1) - 1).clamp(min=0)  # (N, T): real tokens counted, pads at 0
    q = torch.stack([rope_float64(project(ours.q_proj, heads)[n], positions[n]) for n in range(2)])
    k = torch.stack([rope_float64(project(ours.k_proj, kv_heads)[n], positions[n]) for n in range(2)])
    group = [c * kv_heads // heads for c in range(heads)]  # the key/value head of each query head
    # a real query sees the real keys up to it; a pad query its causal row
    allowed = torch.ones(T, T, dtype=torch.bool).tril() & (real[:, None, :] | ~real[:, :, None])
    _, expected = attention_float64(q, k[:, group], k[:, group], allowed[:, None])  # (N, h, T, T)
    with torch.no_grad():
        _, weights = ours(x, attention_mask=real, output_attentions=True)
    torch.testing.assert_close(weights, expected, atol=1e-12, rtol=0)


KERNELS = {"book": "scaled_dot_product_attention", "tiled": "tiled_attention"}  # their functions


def count_calls(monkeypatch, kernel):
    """A list that grows by one at each call of the kernel's function inside CausalSelfAttention."""
    calls, original = [], getattr(decoding, KERNELS[kernel])
    monkeypatch.setattr(decoding, KERNELS[kernel], lambda *args, **kwargs: calls.append(1) or original(*args, **kwargs))
    return calls


@pytest.mark.parametrize("kernel", ["book", "tiled"])
@pytest.mark.parametrize("kv_heads", [1, 2, 8])
def test_the_books_kernels_equal_the_fused_one_in_any_pieces(kernel, kv_heads, monkeypatch):
    torch.manual_seed(kv_heads)
    fused = CausalSelfAttention(64, 8, num_kv_heads=kv_heads).eval()
    other = CausalSelfAttention(64, 8, num_kv_heads=kv_heads, attention=kernel).eval()
    other.load_state_dict(fused.state_dict())
    assert (fused.attention, other.attention) == ("fused", kernel)
    x = randn(2, 12, 64, seed=12)
    # tiled: a prefill, then one token at a time; book: chunks after a cache too
    bounds = [0, 5, 6, 7, 8, 9, 10, 11, 12] if kernel == "tiled" else [0, 5, 6, 9, 12]
    caches = KVCache(), KVCache()
    calls = count_calls(monkeypatch, kernel)
    with torch.no_grad():
        torch.testing.assert_close(other(x), fused(x), atol=1e-5, rtol=0)
        for start, end in zip(bounds, bounds[1:]):
            piece = x[:, start:end]
            expected = fused(piece, cache=caches[0])
            torch.testing.assert_close(other(piece, cache=caches[1]), expected, atol=1e-5, rtol=0)
    assert len(calls) == len(bounds)  # the chosen kernel attended at every call of `other`, only there


def test_the_book_kernel_pads_as_the_fused_one():
    torch.manual_seed(13)
    fused = CausalSelfAttention(32, 4, num_kv_heads=2).eval()
    book = CausalSelfAttention(32, 4, num_kv_heads=2, attention="book").eval()
    book.load_state_dict(fused.state_dict())
    x = randn(2, 7, 32, seed=13)
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1], [1] * 7])
    caches = KVCache(), KVCache()
    with torch.no_grad():
        torch.testing.assert_close(book(x, attention_mask=mask), fused(x, attention_mask=mask),
                                   atol=1e-5, rtol=0)
        for start, end in [(0, 3), (3, 5), (5, 6), (6, 7)]:
            piece, seen = x[:, start:end], mask[:, :end]
            torch.testing.assert_close(book(piece, cache=caches[1], attention_mask=seen),
                                       fused(piece, cache=caches[0], attention_mask=seen),
                                       atol=1e-5, rtol=0)


@torch.no_grad()
def test_the_tiled_kernel_refuses_a_mask_and_a_chunk_after_a_cache():
    layer = CausalSelfAttention(16, 4, attention="tiled")
    x = randn(2, 4, 16)
    with pytest.raises(ValueError, match=r"^attention\b.*'tiled'.*attention_mask"):
        layer(x, attention_mask=torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]]))
    layer(x, attention_mask=torch.ones(2, 4, dtype=torch.long))  # no padding: no mask needed
    cache = KVCache()
    layer(x, cache=cache)
    with pytest.raises(ValueError, match=r"^attention\b.*'tiled'.*cache"):
        layer(randn(2, 2, 16), cache=cache)
    assert len(cache) == 4  # the refused chunk appended nothing
    layer(randn(2, 1, 16), cache=cache)  # one token at a time: no mask needed
    assert len(cache) == 5


@torch.no_grad()
def test_output_attentions_is_off_by_default_and_the_same_output():
    _, _, layer = llama_and_ours(kv_heads=2, seed=14)
    x = randn(2, 6, 64, seed=14)
    alone = layer(x)
    assert isinstance(alone, torch.Tensor)
    output, weights = layer(x, output_attentions=True)
    torch.testing.assert_close(output, alone, atol=1e-5, rtol=0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 8, 6))
    assert (weights.triu(1) == 0).all()  # causal: no weight on a later key


@pytest.mark.parametrize("kwargs, error", [
    (dict(attention="flash"), ValueError),
    (dict(attention="eager"), ValueError),
    (dict(attention="FUSED"), ValueError),
    (dict(attention=None), TypeError),
    (dict(attention=1), TypeError),
])
def test_a_bad_attention_names_the_argument(kwargs, error):
    with pytest.raises(error, match=r"^attention\b"):
        CausalSelfAttention(16, 4, **kwargs)


def test_a_bad_output_attentions_names_the_argument():
    with pytest.raises(TypeError, match=r"^output_attentions\b"):
        CausalSelfAttention(16, 4)(randn(1, 2, 16), output_attentions=1)


def test_an_attention_changed_after_construction_is_checked_at_the_call():
    layer = CausalSelfAttention(16, 4)
    layer.attention = "sdpa"
    with pytest.raises(ValueError, match=r"^attention\b.*'sdpa'"):
        layer(randn(1, 2, 16))
    layer.attention = "book"
    layer(randn(1, 2, 16))


# --- the sliding window ---------------------------------------------------------------------


def mistral_and_ours(window, d_model=64, heads=8, kv_heads=2, *, seed=0, attention="fused"):
    """transformers' MistralAttention (eager, sliding_window=window) and the book's layer, the same weights."""
    config = MistralConfig(hidden_size=d_model, num_attention_heads=heads, num_key_value_heads=kv_heads,
                           head_dim=d_model // heads, sliding_window=window, num_hidden_layers=1,
                           attn_implementation="eager")
    torch.manual_seed(seed)
    theirs = MistralAttention(config, layer_idx=0).eval()
    ours = CausalSelfAttention(d_model, heads, num_kv_heads=kv_heads, sliding_window=window,
                               attention=attention).eval()
    ours.load_state_dict(theirs.state_dict())
    return config, theirs, ours


def mistral(config, theirs, x, real, cache=None):
    """MistralAttention on x (N, T, d_model) under transformers' own sliding mask: its output and
    weights. ``real``: the (N, T_seen + T) mask of real tokens; positions count them (cumsum - 1)."""
    T = x.shape[1]
    positions = (real.long().cumsum(-1) - 1).clamp(min=0)[:, -T:]
    mask = create_sliding_window_causal_mask(config, x, real.long(), cache, positions)
    embeddings = MistralRotaryEmbedding(config)(x, positions)
    return theirs(x, embeddings, mask, cache=cache)


def test_sliding_window_is_transformers_name_and_convention():
    """The same name as in transformers' configs; key j visible to query i when i - W < j <= i."""
    assert MistralConfig(sliding_window=4).sliding_window == 4
    layer = CausalSelfAttention(16, 4, sliding_window=3)
    assert layer.sliding_window == 3 and CausalSelfAttention(16, 4).sliding_window is None
    with torch.no_grad():
        _, weights = layer(randn(1, 6, 16), output_attentions=True)  # (1, h, 6, 6)
    i, j = torch.arange(6)[:, None], torch.arange(6)
    assert torch.equal(weights[0, 0] > 0, (j <= i) & (j > i - 3))


@pytest.mark.parametrize("attention", ["fused", "book"])
@pytest.mark.parametrize("window", [1, 3, 5, 11, 40])
@pytest.mark.parametrize("kv_heads", [1, 2, 8])
def test_sliding_window_equals_mistral_attention(window, kv_heads, attention):
    config, theirs, ours = mistral_and_ours(window, kv_heads=kv_heads, seed=window, attention=attention)
    x = randn(3, 11, 64, seed=20)
    with torch.no_grad():
        expected, expected_weights = mistral(config, theirs, x, torch.ones(3, 11, dtype=torch.bool))
        output, weights = ours(x, output_attentions=True)
        torch.testing.assert_close(ours(x), expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(output, expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(weights, expected_weights, atol=1e-5, rtol=0)


@pytest.mark.parametrize("attention", ["fused", "book"])
@pytest.mark.parametrize("window", [2, 3, 5])
def test_a_windowed_cache_decodes_as_mistral_with_its_sliding_cache(window, attention):
    """Pieces and single tokens, left padding, weights too: the same outputs and the same cache.

    Not window=1: transformers' DynamicSlidingWindowLayer keeps keys[:, :, -window + 1:], which is
    every key for window=1, and its own attention then fails on the mask (transformers 5.24)."""
    config, theirs, ours = mistral_and_ours(window, kv_heads=2, seed=21, attention=attention)
    x = randn(2, 12, 64, seed=21)
    real = torch.tensor([[0, 0, 0] + [1] * 9, [1] * 12], dtype=torch.bool)  # the first padded
    their_cache, our_cache = DynamicCache(config=config), KVCache(window=window)
    assert isinstance(their_cache.layers[0], DynamicSlidingWindowLayer)
    with torch.no_grad():
        for start, end in [(0, 5), (5, 6), (6, 9), (9, 10), (10, 11), (11, 12)]:
            piece, seen = x[:, start:end], real[:, :end]
            expected, expected_weights = mistral(config, theirs, piece, seen, cache=their_cache)
            output, weights = ours(piece, cache=our_cache, attention_mask=seen, output_attentions=True)
            keep = seen[:, -piece.shape[1]:]  # real queries: a pad's row is unused (and not theirs)
            torch.testing.assert_close(output[keep], expected[keep], atol=1e-5, rtol=0)
            torch.testing.assert_close(weights.transpose(1, 2)[keep], expected_weights.transpose(1, 2)[keep],
                                       atol=1e-5, rtol=0)
            assert our_cache.next_position == end and len(our_cache) == min(end, window - 1)
    torch.testing.assert_close(our_cache.keys, their_cache.layers[0].keys, atol=1e-6, rtol=0)
    torch.testing.assert_close(our_cache.values, their_cache.layers[0].values, atol=1e-6, rtol=0)


@pytest.mark.parametrize("attention", ["fused", "book"])
def test_a_padded_windowed_cache_decodes_as_the_padded_full_pass(attention):
    torch.manual_seed(22)
    layer = CausalSelfAttention(32, 4, num_kv_heads=2, sliding_window=3, attention=attention).eval()
    x = randn(2, 10, 32, seed=22)
    real = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 1, 1, 1], [1] * 10])
    cache = KVCache(window=3)
    with torch.no_grad():
        full = layer(x, attention_mask=real)
        for start, end in [(0, 4), *[(t, t + 1) for t in range(4, 10)]]:
            step = layer(x[:, start:end], cache=cache, attention_mask=real[:, :end])
            keep = real[:, start:end].bool()
            torch.testing.assert_close(step[keep], full[:, start:end][keep], atol=1e-5, rtol=0)
        with pytest.raises(ValueError, match=r"^attention_mask\b.*\(2, 11\)"):  # the whole history
            layer(x[:, :1], cache=cache, attention_mask=real[:, -3:])


@pytest.mark.parametrize("window", [1, 2, 5])
@pytest.mark.parametrize("kv_heads", [1, 3, 6])
def test_sliding_window_float64_equals_an_independent_computation(kv_heads, window):
    torch.manual_seed(kv_heads)
    heads, d_model, T = 6, 48, 9
    ours = CausalSelfAttention(d_model, heads, num_kv_heads=kv_heads, rope_base=500.0,
                               sliding_window=window).double()
    x = randn(2, T, d_model, seed=23, dtype=torch.float64)
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    allowed = (j <= i) & (i - j < window)  # the window most recent keys, its own included
    _assert_float64_under(ours, x, allowed)


@settings(max_examples=25, deadline=None)
@given(
    heads_and_kv=st.sampled_from([(4, 1), (4, 2), (4, 4), (6, 3)]),
    window=st.integers(1, 12),
    cuts=st.lists(st.integers(1, 29), max_size=6, unique=True),
    attention=st.sampled_from(["fused", "book"]),
    seed=st.integers(0, 2**16),
)
def test_a_windowed_cache_in_any_pieces_equals_the_full_sliding_pass(heads_and_kv, window, cuts,
                                                                      attention, seed):
    heads, kv_heads = heads_and_kv
    T, d_k = 30, 4
    torch.manual_seed(seed)
    layer = CausalSelfAttention(heads * d_k, heads, num_kv_heads=kv_heads, sliding_window=window,
                                attention=attention).eval()
    x = randn(2, T, heads * d_k, seed=seed)
    bounds = [0, *sorted(cuts), T]
    cache = KVCache(window=window)
    with torch.no_grad():
        full = layer(x)
        for start, end in zip(bounds, bounds[1:]):
            torch.testing.assert_close(layer(x[:, start:end], cache=cache), full[:, start:end],
                                       atol=1e-5, rtol=0)
            held = min(end, window - 1)
            assert cache.next_position == end and len(cache) == held
            assert cache.keys.shape == cache.values.shape == (2, kv_heads, held, d_k)


@torch.no_grad()
def test_a_windowed_cache_holds_at_most_window_positions_token_by_token():
    """W - 1 positions held (the next query's window besides itself), in a buffer of 2W."""
    window, N, kv_heads, d_k, steps = 8, 2, 2, 4, 100
    layer = CausalSelfAttention(16, 4, num_kv_heads=kv_heads, sliding_window=window)
    x = randn(N, steps, 16, seed=24)
    cache, full = KVCache(window=window), layer(x)
    assert cache.window == window and KVCache().window is None
    for t in range(steps):
        torch.testing.assert_close(layer(x[:, t : t + 1], cache=cache), full[:, t : t + 1],
                                   atol=1e-5, rtol=0)
        assert len(cache) == min(t + 1, window - 1) and cache.next_position == t + 1
        assert cache.capacity <= 2 * window
    # the keys and values held: 2 tensors of N * h_kv * (W - 1) * d_k float32 numbers
    held = cache.keys.numel() * cache.keys.element_size() + cache.values.numel() * cache.values.element_size()
    assert held == 2 * N * kv_heads * (window - 1) * d_k * 4 == 896
    cache.reset()
    assert (len(cache), cache.next_position, cache.capacity, cache.window) == (0, 0, 0, window)


@torch.no_grad()
def test_a_windowed_decoding_step_copies_its_own_keys_and_not_the_window():
    """Between two shifts of the buffer (once every W + 1 steps), a step copies only its token."""
    layer = CausalSelfAttention(16, 4, num_kv_heads=2, sliding_window=6)
    cache = KVCache(window=6)
    layer(randn(1, 3, 16), cache=cache)
    before = cache.capacity
    buffer = cache._keys
    layer(randn(1, 1, 16, seed=1), cache=cache)
    assert cache._keys is buffer and cache.capacity == before  # written in place, no new buffer


@pytest.mark.parametrize("T", [1, 4, 6])
def test_a_window_as_long_as_the_text_is_no_window(T):
    torch.manual_seed(25)
    plain = CausalSelfAttention(16, 4).eval()
    windowed = CausalSelfAttention(16, 4, sliding_window=6).eval()
    windowed.load_state_dict(plain.state_dict())
    x = randn(2, T, 16, seed=25)
    with torch.no_grad():
        torch.testing.assert_close(windowed(x), plain(x), atol=1e-6, rtol=0)


@torch.no_grad()
def test_the_tiled_kernel_takes_a_window_only_where_it_covers_every_key(monkeypatch):
    torch.manual_seed(26)
    fused = CausalSelfAttention(16, 4, sliding_window=3).eval()
    tiled = CausalSelfAttention(16, 4, sliding_window=3, attention="tiled").eval()
    tiled.load_state_dict(fused.state_dict())
    x = randn(2, 8, 16, seed=26)
    torch.testing.assert_close(tiled(x[:, :3]), fused(x[:, :3]), atol=1e-5, rtol=0)  # T <= W
    with pytest.raises(ValueError, match=r"^sliding_window\b.*'tiled'"):
        tiled(x)
    calls = count_calls(monkeypatch, "tiled")
    for cache in (KVCache(), KVCache(window=3)):  # one token at a time: the last W keys
        tiled(x[:, :3], cache=cache)
        for t in range(3, 8):
            torch.testing.assert_close(tiled(x[:, t : t + 1], cache=cache), fused(x)[:, t : t + 1],
                                       atol=1e-5, rtol=0)
    assert len(calls) == 2 * 6


@torch.no_grad()
def test_a_windowed_cache_refuses_a_layer_with_a_wider_or_no_window():
    x = randn(1, 5, 16)
    for layer in (CausalSelfAttention(16, 4), CausalSelfAttention(16, 4, sliding_window=4)):
        cache = KVCache(window=3)
        with pytest.raises(ValueError, match=r"^cache\b.*window=3.*sliding_window"):
            layer(x, cache=cache)
        assert len(cache) == 0 and cache.next_position == 0  # nothing appended
    # a cache that holds every key the window reaches: a narrower window, or no cache window
    torch.manual_seed(27)
    layer = CausalSelfAttention(16, 4, sliding_window=2).eval()
    full = layer(x)
    for cache in (KVCache(window=4), KVCache()):
        for t in range(5):
            torch.testing.assert_close(layer(x[:, t : t + 1], cache=cache), full[:, t : t + 1],
                                       atol=1e-5, rtol=0)


@pytest.mark.parametrize("value, error", [
    (0, ValueError), (-2, ValueError), (2.0, TypeError), ("4", TypeError), (True, TypeError),
])
def test_bad_windows_name_the_argument(value, error):
    with pytest.raises(error, match=r"^sliding_window\b"):
        CausalSelfAttention(16, 4, sliding_window=value)
    with pytest.raises(error, match=r"^window\b"):
        KVCache(window=value)
    layer = CausalSelfAttention(16, 4)
    layer.sliding_window = value  # an attribute: checked at the call as well
    with pytest.raises(error, match=r"^sliding_window\b"):
        layer(randn(1, 2, 16))


@torch.no_grad()
def test_a_subclass_with_a_window_of_its_own_is_not_refused():
    """Chapter 10's exercise subclasses KVCache with its own `window`: the checks read `_window`."""

    class Mine(KVCache):
        def __init__(self):
            super().__init__()
            self.window = 2

    cache = Mine()
    CausalSelfAttention(16, 4)(randn(1, 3, 16), cache=cache)
    assert len(cache) == 3 and cache._window is None


def test_windows_accept_numpy_integers():
    assert CausalSelfAttention(16, 4, sliding_window=np.int64(3)).sliding_window == 3
    assert type(KVCache(window=np.int32(3)).window) is int



# --- attention sinks beside a window (StreamingLLM) ----------------------------------------


@pytest.mark.parametrize("attention", ["fused", "book"])
@pytest.mark.parametrize("window, sinks", [(1, 1), (2, 1), (3, 4), (4, 2), (9, 3)])
def test_sink_tokens_float64_equal_an_independent_computation(window, sinks, attention):
    """Query i sees keys i - W < j <= i and the first S keys j <= i: written out, in float64."""
    torch.manual_seed(window + sinks)
    heads, kv_heads, d_model, T = 6, 3, 48, 11
    ours = CausalSelfAttention(d_model, heads, num_kv_heads=kv_heads, rope_base=500.0,
                               sliding_window=window, num_sink_tokens=sinks,
                               attention=attention).double()
    x = randn(2, T, d_model, seed=28, dtype=torch.float64)
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    allowed = (j <= i) & ((i - j < window) | (j < sinks))
    _assert_float64_under(ours, x, allowed)


@torch.no_grad()
@pytest.mark.parametrize("attention", ["fused", "book"])
def test_sink_tokens_are_the_first_real_tokens_of_a_padded_row(attention):
    """Left padding: the sinks are a row's first real tokens, not its pads."""
    torch.manual_seed(29)
    layer = CausalSelfAttention(16, 4, num_kv_heads=2, sliding_window=3, num_sink_tokens=2,
                                attention=attention).eval()
    x = randn(2, 10, 16, seed=29)
    real = torch.ones(2, 10, dtype=torch.bool)
    real[1, :4] = False  # row 1: 4 pads, then 6 real tokens
    padded = layer(x, attention_mask=real)
    torch.testing.assert_close(padded[1, 4:], layer(x[1:, 4:])[0], atol=1e-6, rtol=0)
    torch.testing.assert_close(padded[0], layer(x[:1])[0], atol=1e-6, rtol=0)


@settings(max_examples=20, deadline=None)
@given(window=st.integers(1, 8), sinks=st.integers(0, 5),
       cuts=st.lists(st.integers(1, 19), max_size=5, unique=True),
       attention=st.sampled_from(["fused", "book"]), seed=st.integers(0, 2**16))
def test_a_full_cache_in_any_pieces_keeps_the_sinks(window, sinks, cuts, attention, seed):
    torch.manual_seed(seed)
    T = 20
    layer = CausalSelfAttention(16, 4, num_kv_heads=2, sliding_window=window,
                                num_sink_tokens=sinks, attention=attention).eval()
    x = randn(2, T, 16, seed=seed)
    bounds, cache = [0, *sorted(cuts), T], KVCache()
    with torch.no_grad():
        full = layer(x)
        for start, end in zip(bounds, bounds[1:]):
            torch.testing.assert_close(layer(x[:, start:end], cache=cache), full[:, start:end],
                                       atol=1e-5, rtol=0)


@torch.no_grad()
def test_sink_tokens_change_nothing_without_a_window_or_past_the_text():
    torch.manual_seed(30)
    plain = CausalSelfAttention(16, 4).eval()
    x = randn(2, 7, 16, seed=30)
    for kwargs in ({"num_sink_tokens": 3}, {"sliding_window": 2, "num_sink_tokens": 7}):
        other = CausalSelfAttention(16, 4, **kwargs).eval()
        other.load_state_dict(plain.state_dict())
        torch.testing.assert_close(other(x), plain(x), atol=1e-6, rtol=0)
    windowed = CausalSelfAttention(16, 4, sliding_window=2).eval()
    windowed.load_state_dict(plain.state_dict())
    sunk = CausalSelfAttention(16, 4, sliding_window=2, num_sink_tokens=1).eval()
    sunk.load_state_dict(plain.state_dict())
    assert (sunk(x) - windowed(x))[:, 2:].abs().max() > 1e-3  # the sink is seen from query 2 on
    assert sunk.num_sink_tokens == 1 and plain.num_sink_tokens == 0


@torch.no_grad()
def test_sink_tokens_refuse_a_windowed_cache_and_a_tiled_kernel_that_drops_keys():
    x = randn(1, 6, 16)
    layer = CausalSelfAttention(16, 4, sliding_window=3, num_sink_tokens=1)
    with pytest.raises(ValueError, match=r"^cache\b.*window=3.*num_sink_tokens=1"):
        layer(x, cache=KVCache(window=3))
    tiled = CausalSelfAttention(16, 4, sliding_window=3, num_sink_tokens=1, attention="tiled")
    tiled.load_state_dict(layer.state_dict())
    torch.testing.assert_close(tiled(x[:, :3]), layer(x[:, :3]), atol=1e-5, rtol=0)  # T <= W
    cache = KVCache()
    tiled(x[:, :3], cache=cache)
    with pytest.raises(ValueError, match=r"^num_sink_tokens=1\b.*'tiled'"):
        tiled(x[:, 3:4], cache=cache)


@pytest.mark.parametrize("value, error", [(-1, ValueError), (1.0, TypeError), (None, TypeError),
                                          (True, TypeError)])
def test_bad_sink_tokens_name_the_argument(value, error):
    with pytest.raises(error, match=r"^num_sink_tokens\b"):
        CausalSelfAttention(16, 4, sliding_window=2, num_sink_tokens=value)
    layer = CausalSelfAttention(16, 4, sliding_window=2)
    layer.num_sink_tokens = value  # an attribute: checked at the call as well
    with pytest.raises(error, match=r"^num_sink_tokens\b"):
        layer(randn(1, 2, 16))

# --- learned sinks (gpt-oss) ----------------------------------------------------------------


def gpt_oss_and_ours(layer_type, kv_heads=2, *, d_model=64, heads=8, window=3, seed=0,
                     attention="fused"):
    """transformers' GptOssAttention (eager, biased, learned sinks) and the book's layer, the
    same weights; layer 0 slides over ``window`` keys, layer 1 sees every key."""
    config = GptOssConfig(hidden_size=d_model, num_attention_heads=heads, num_key_value_heads=kv_heads,
                          head_dim=d_model // heads, sliding_window=window, num_hidden_layers=2,
                          layer_types=["sliding_attention", "full_attention"], attention_bias=True,
                          rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                          attn_implementation="eager")
    torch.manual_seed(seed)
    theirs = GptOssAttention(config, layer_idx=["sliding_attention", "full_attention"].index(layer_type))
    with torch.no_grad():  # transformers leaves the sinks and the biases to its model's init
        for parameter in theirs.parameters():
            parameter.normal_(std=0.3 if parameter.dim() == 2 else 1.0)
    ours = CausalSelfAttention(d_model, heads, num_kv_heads=kv_heads, bias=True, sinks=True,
                               sliding_window=theirs.sliding_window, attention=attention)
    ours.load_state_dict(theirs.state_dict())
    return config, theirs.eval(), ours.eval()


def gpt_oss(config, theirs, x, real, cache=None):
    """GptOssAttention on x under transformers' own mask for its layer: output and weights."""
    T = x.shape[1]
    positions = (real.long().cumsum(-1) - 1).clamp(min=0)[:, -T:]
    make_mask = create_sliding_window_causal_mask if theirs.sliding_window else create_causal_mask
    mask = make_mask(config, x, real.long(), cache, positions)
    embeddings = GptOssRotaryEmbedding(config)(x, positions)
    return theirs(x, embeddings, mask, cache=cache)


def test_sinks_are_gpt_oss_names_and_shapes():
    """``sinks=True`` adds ``sinks`` (h,), as ``bias=True`` adds a bias; off, it is None."""
    _, theirs, ours = gpt_oss_and_ours("full_attention")
    assert {k: v.shape for k, v in ours.state_dict().items()} == \
        {k: v.shape for k, v in theirs.state_dict().items()}
    assert ours.sinks.shape == (8,) and isinstance(ours.sinks, nn.Parameter)
    plain = CausalSelfAttention(64, 8)
    assert plain.sinks is None and "sinks" not in plain.state_dict()


@pytest.mark.parametrize("attention", ["fused", "book"])
@pytest.mark.parametrize("layer_type", ["sliding_attention", "full_attention"])
@pytest.mark.parametrize("kv_heads", [1, 2, 8])
def test_learned_sinks_equal_gpt_oss_attention(layer_type, kv_heads, attention):
    """Outputs and weights (rows summing below 1: the rest went to the sink), left padding too."""
    config, theirs, ours = gpt_oss_and_ours(layer_type, kv_heads, seed=kv_heads, attention=attention)
    x = randn(2, 9, 64, seed=31)
    real = torch.ones(2, 9, dtype=torch.bool)
    real[0, :3] = False  # row 0: 3 pads, then 6 real tokens
    with torch.no_grad():
        expected, expected_weights = gpt_oss(config, theirs, x, real)
        output, weights = ours(x, attention_mask=real, output_attentions=True)
        plain = ours(x, attention_mask=real)
    keep = real  # real queries: a pad's row is unused (and not theirs)
    torch.testing.assert_close(output[keep], expected[keep], atol=1e-5, rtol=0)
    torch.testing.assert_close(plain[keep], expected[keep], atol=1e-5, rtol=0)
    torch.testing.assert_close(weights.transpose(1, 2)[keep], expected_weights.transpose(1, 2)[keep],
                               atol=1e-5, rtol=0)
    assert weights.sum(-1).transpose(1, 2)[keep].min() < 0.9  # the sink took a share of some rows


@pytest.mark.parametrize("attention", ["fused", "book"])
@pytest.mark.parametrize("layer_type", ["sliding_attention", "full_attention"])
def test_learned_sinks_decode_as_gpt_oss_with_its_cache(layer_type, attention):
    config, theirs, ours = gpt_oss_and_ours(layer_type, seed=32, attention=attention)
    x = randn(2, 10, 64, seed=32)
    real = torch.tensor([[0, 0] + [1] * 8, [1] * 10], dtype=torch.bool)
    their_cache = DynamicCache(config=config)
    our_cache = KVCache(window=ours.sliding_window)
    with torch.no_grad():
        for start, end in [(0, 4), (4, 5), (5, 8), (8, 9), (9, 10)]:
            piece, seen = x[:, start:end], real[:, :end]
            expected, _ = gpt_oss(config, theirs, piece, seen, cache=their_cache)
            output = ours(piece, cache=our_cache, attention_mask=seen)
            keep = seen[:, -piece.shape[1]:]
            torch.testing.assert_close(output[keep], expected[keep], atol=1e-5, rtol=0)


@pytest.mark.parametrize("window", [None, 1, 3])
@pytest.mark.parametrize("kv_heads", [1, 3])
def test_learned_sinks_float64_equal_an_independent_computation(kv_heads, window):
    """The sink as one more column of logits, s_c for every query of head c, whose value is 0."""
    torch.manual_seed(33)
    heads, d_model, T, N = 6, 48, 8, 2
    ours = CausalSelfAttention(d_model, heads, num_kv_heads=kv_heads, rope_base=500.0,
                               sinks=True, sliding_window=window).double()
    with torch.no_grad():
        ours.sinks.normal_()
    x = randn(N, T, d_model, seed=33, dtype=torch.float64)
    q, k, v = _float64_heads(ours, x)  # (N, h, T, d_k) each
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    allowed = (j <= i) & ((i - j < window) if window else True)
    scores = (q @ k.transpose(-1, -2) / math.sqrt(ours.d_k)).masked_fill(~allowed, -math.inf)
    sink = ours.sinks.detach().view(1, heads, 1, 1).expand(N, heads, T, 1)
    probabilities = torch.softmax(torch.cat((scores, sink), dim=-1), dim=-1)[..., :T]
    expected = (probabilities @ v).transpose(1, 2).reshape(N, T, d_model) @ ours.o_proj.weight.T
    with torch.no_grad():
        output, weights = ours(x, output_attentions=True)
        torch.testing.assert_close(ours(x), expected, atol=1e-12, rtol=0)
    torch.testing.assert_close(output, expected, atol=1e-12, rtol=0)
    torch.testing.assert_close(weights, probabilities, atol=1e-12, rtol=0)


@pytest.mark.parametrize("attention", ["fused", "book"])
def test_gradients_reach_the_sinks_as_in_gpt_oss(attention):
    """Every parameter's gradient, to 1e-5 of its largest entry (they reach 1e3 here).

    Not in float64: transformers' rotary embedding forms its angles in float32 whatever the
    dtype, so the two differ by 1.5e-6 there too."""
    config, theirs, ours = gpt_oss_and_ours("sliding_attention", seed=34, attention=attention)
    x = randn(2, 7, 64, seed=34)
    expected, _ = gpt_oss(config, theirs, x, torch.ones(2, 7, dtype=torch.bool))
    expected.square().sum().backward()
    ours(x).square().sum().backward()
    for name, parameter in ours.named_parameters():
        reference = theirs.get_parameter(name).grad
        torch.testing.assert_close(parameter.grad, reference, rtol=0,
                                   atol=1e-5 * float(reference.abs().max()), msg=name)


@torch.no_grad()
def test_a_sink_far_below_every_logit_is_no_sink():
    torch.manual_seed(35)
    plain = CausalSelfAttention(16, 4, num_kv_heads=2).eval()
    sunk = CausalSelfAttention(16, 4, num_kv_heads=2, sinks=True).eval()
    sunk.load_state_dict({**plain.state_dict(), "sinks": torch.full((4,), -1e4)})
    x = randn(2, 6, 16, seed=35)
    torch.testing.assert_close(sunk(x), plain(x), atol=1e-6, rtol=0)
    sunk.sinks.fill_(1e4)  # a sink far above every logit takes all the weight: the output is o_proj's bias
    torch.testing.assert_close(sunk(x), torch.zeros(2, 6, 16), atol=1e-6, rtol=0)


@torch.no_grad()
def test_the_tiled_kernel_refuses_learned_sinks():
    layer = CausalSelfAttention(16, 4, sinks=True, attention="tiled")
    with pytest.raises(ValueError, match=r"^sinks\b.*'tiled'"):
        layer(randn(1, 3, 16))
    _, weights = layer(randn(1, 3, 16), output_attentions=True)  # chapter 2's function forms the weights
    assert weights.shape == (1, 4, 3, 3)


@pytest.mark.parametrize("value", [1, None, "yes"])
def test_a_bad_sinks_names_the_argument(value):
    with pytest.raises(TypeError, match=r"^sinks\b"):
        CausalSelfAttention(16, 4, sinks=value)


# --- a whole model --------------------------------------------------------------------------


class _BookAttention(nn.Module):
    """The book's attention in place of LlamaAttention; positions and masks from its cache."""

    def __init__(self, config, llama_attention):
        super().__init__()
        self.attention = CausalSelfAttention(config.hidden_size, config.num_attention_heads,
                                             num_kv_heads=config.num_key_value_heads)
        self.attention.load_state_dict(llama_attention.state_dict())
        self.cache = None

    def forward(self, hidden_states, **ignored):
        return self.attention(hidden_states, cache=self.cache), None


def test_greedy_generation_inside_llama_gives_transformers_tokens():
    config = LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                         max_position_embeddings=64, pad_token_id=0)
    torch.manual_seed(9)
    model = LlamaForCausalLM(config).eval()
    prompts = torch.randint(1, 300, (3, 6), generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        expected = model.generate(prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=15,
                                  do_sample=False)
        for layer in model.model.layers:
            layer.self_attn = _BookAttention(config, layer.self_attn)
        for use_cache in (False, True):
            for layer in model.model.layers:
                layer.self_attn.cache = KVCache() if use_cache else None
            tokens, step_input = prompts, prompts
            for _ in range(15):
                next_token = model(step_input, use_cache=False).logits[:, -1].argmax(-1, keepdim=True)
                tokens = torch.cat([tokens, next_token], dim=1)
                step_input = next_token if use_cache else tokens
            assert torch.equal(tokens, expected), use_cache
    assert all(len(layer.self_attn.cache) == 6 + 14 for layer in model.model.layers)


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, name",
    [
        (dict(d_model=64, num_heads=8, num_kv_heads=3), ValueError, "num_kv_heads"),
        (dict(d_model=64, num_heads=8, num_kv_heads=16), ValueError, "num_kv_heads"),
        (dict(d_model=60, num_heads=8), ValueError, "d_model"),
        (dict(d_model=24, num_heads=8), ValueError, "d_model"),  # d_k = 3: odd
        (dict(d_model=64, num_heads=8.0), TypeError, "num_heads"),
        (dict(d_model=64, num_heads=8, num_kv_heads="2"), TypeError, "num_kv_heads"),
        (dict(d_model=64, num_heads=0), ValueError, "num_heads"),
        (dict(d_model=64, num_heads=8, rope_base=-1.0), ValueError, "rope_base"),
        (dict(d_model=64, num_heads=8, rope_base=math.inf), ValueError, "rope_base"),
        (dict(d_model=64, num_heads=8, rope_base="10000"), TypeError, "rope_base"),
    ],
)
def test_bad_sizes_name_the_argument(kwargs, error, name):
    with pytest.raises(error, match=rf"^{name}\b"):
        CausalSelfAttention(**kwargs)


@pytest.mark.parametrize(
    "x, error",
    [
        (torch.zeros(5, 16), ValueError),               # not (N, T, d_model)
        (torch.zeros(2, 5, 8), ValueError),             # another d_model
        (torch.zeros(2, 5, 16, dtype=torch.float64), TypeError),  # not the weights' dtype
        (torch.zeros(2, 5, 16, dtype=torch.long), TypeError),
        ([[0.0] * 16], TypeError),
    ],
)
def test_bad_input_names_x(x, error):
    with pytest.raises(error, match=r"^x\b"):
        CausalSelfAttention(16, 4)(x)


@torch.no_grad()
def test_a_cache_that_does_not_fit_names_cache():
    layer = CausalSelfAttention(16, 4, num_kv_heads=2)
    with pytest.raises(TypeError, match=r"^cache\b.*KVCache"):
        layer(randn(2, 3, 16), cache={})
    cache = KVCache()
    layer(randn(2, 3, 16), cache=cache)
    with pytest.raises(ValueError, match=r"^cache\b.*\(2, 2, 3, 4\)"):  # another batch size
        layer(randn(3, 1, 16), cache=cache)
    with pytest.raises(ValueError, match=r"^cache\b"):  # another layer: 4 key/value heads
        CausalSelfAttention(16, 4)(randn(2, 1, 16), cache=cache)
    with pytest.raises(TypeError, match=r"^cache\b.*float32"):  # the same layer, now float64
        layer.double()(randn(2, 1, 16, dtype=torch.float64), cache=cache)
    assert len(cache) == 3  # nothing was appended by the refused calls


@torch.no_grad()
def test_a_cache_filled_by_one_layer_is_refused_by_another_of_the_same_shape():
    first, second = CausalSelfAttention(16, 4, num_kv_heads=2), CausalSelfAttention(16, 4, num_kv_heads=2)
    cache = KVCache()
    first(randn(2, 3, 16), cache=cache)
    keys = cache.keys.clone()
    with pytest.raises(ValueError, match=r"^cache\b.*another CausalSelfAttention"):
        second(randn(2, 1, 16, seed=1), cache=cache)
    assert len(cache) == 3 and torch.equal(cache.keys, keys)  # nothing was appended
    first(randn(2, 1, 16, seed=1), cache=cache)  # the layer that filled it goes on
    assert len(cache) == 4
    fresh = KVCache()
    second(randn(2, 1, 16, seed=1), cache=fresh)  # a cache of its own works


@torch.no_grad()
def test_a_cache_refuses_a_layer_that_took_the_place_of_a_deleted_one():
    cache = KVCache()
    CausalSelfAttention(16, 4)(randn(1, 2, 16), cache=cache)  # that layer is gone at once
    with pytest.raises(ValueError, match=r"^cache\b.*another CausalSelfAttention"):
        CausalSelfAttention(16, 4)(randn(1, 1, 16), cache=cache)


def test_bad_appends_name_keys_or_values():
    cache = KVCache()
    with pytest.raises(ValueError, match=r"^keys\b"):
        cache.append(torch.zeros(2, 3, 4), torch.zeros(2, 3, 4))
    with pytest.raises(TypeError, match=r"^values\b"):
        cache.append(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"^keys and values\b"):
        cache.append(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 2, 4))
    with pytest.raises(TypeError, match=r"^values\b.*float64.*float32"):  # on the first call too
        cache.append(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"^values\b.*meta"):
        cache.append(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4, device="meta"))
    assert len(cache) == 0 and cache.keys is None
    cache.append(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 6))
    with pytest.raises(ValueError, match=r"^values\b"):
        cache.append(torch.zeros(1, 2, 1, 4), torch.zeros(1, 2, 1, 4))
    with pytest.raises(TypeError, match=r"^keys\b.*float32"):  # not the cache's dtype
        cache.append(torch.zeros(1, 2, 1, 4, dtype=torch.float64), torch.zeros(1, 2, 1, 6, dtype=torch.float64))
    assert len(cache) == 3
