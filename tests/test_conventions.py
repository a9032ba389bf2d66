"""The package as strangers use it: no silent mistake where PyTorch's or transformers'
conventions would lead a user, and transformers' conventions in generate (each test written
before its fix, from a reproducer of the held-out suite)."""

from __future__ import annotations

import warnings

import pytest
import torch
from test_llm import PAD, VOCAB, ids, left_padded, tiny_llama

from attention_book import CausalSelfAttention, KVCache, LlamaDecoder, MultiHeadAttention, filter_logits, generate
from attention_book import padding_mask


# --- MultiHeadAttention ------------------------------------------------------------------------
def test_mask_is_keyword_only_so_torchs_padding_slot_cannot_take_it():
    """nn.MultiheadAttention's fourth positional slot is key_padding_mask: ours refuses it."""
    module = MultiHeadAttention(8, 2).eval()
    x = torch.randn(4, 4, 8, generator=torch.Generator().manual_seed(0))  # N == T: it would broadcast
    with pytest.raises(TypeError):
        module(x, x, x, padding_mask([4, 3, 2, 1], 4))


@pytest.mark.parametrize("make", [
    lambda: (MultiHeadAttention(8, 2).eval(), lambda m, x, a: m(x, attention_mask=a)),
    lambda: (CausalSelfAttention(8, 2).eval(), lambda m, x, a: m(x, attention_mask=a)),
])
def test_a_sequence_with_no_real_token_is_refused(make):
    """An all-0 row is a sequence of padding only, or an inverted mask (torch's True = padding)."""
    module, call = make()
    x = torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(1))
    inverted = ~padding_mask([3, 2], 3)  # (N, T): torch's meaning, True = padding
    with pytest.raises(ValueError, match=r"^attention_mask.*row 0 .*no real token"):
        call(module, x, inverted)


# --- generate and transformers' conventions -------------------------------------------------------
@pytest.mark.parametrize("setting", [dict(temperature=0.7), dict(top_k=5), dict(top_p=0.9), dict(min_p=0.1)])
def test_a_sampling_setting_without_do_sample_warns_as_transformers_does(setting):
    _, ours = tiny_llama()
    with pytest.warns(UserWarning, match=f"{next(iter(setting))}.*do_sample"):
        greedy = generate(ours, ids(1, 4), max_new_tokens=3, **setting)
    assert torch.equal(greedy, generate(ours, ids(1, 4), max_new_tokens=3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        generate(ours, ids(1, 4), max_new_tokens=3)  # the defaults say nothing


def test_an_out_of_range_setting_is_refused_greedy_or_not():
    _, ours = tiny_llama()
    for do_sample in (False, True):
        with pytest.raises(ValueError, match="^top_p"):
            generate(ours, ids(1, 3), max_new_tokens=2, top_p=1.5, do_sample=do_sample)


def test_several_end_tokens_as_transformers_generate():
    theirs, ours = tiny_llama(seed=7)
    x, mask = left_padded([9, 5, 2], 9, seed=7)
    free = generate(ours, x, attention_mask=mask, max_new_tokens=16)
    eos = [int(free[0, 9 + 4]), int(free[1, 9 + 2])]  # tokens two of the sequences produce
    kwargs = dict(attention_mask=mask, max_new_tokens=16, do_sample=False, eos_token_id=eos, pad_token_id=PAD)
    expected = theirs.generate(x, **kwargs)
    got = generate(ours, x, **{k: v for k, v in kwargs.items() if k != "do_sample"})
    assert torch.equal(got, expected)
    with pytest.raises(ValueError, match="^eos_token_id"):
        generate(ours, x, max_new_tokens=2, eos_token_id=[1, VOCAB])
    with pytest.raises(ValueError, match="^eos_token_id"):
        generate(ours, x, max_new_tokens=2, eos_token_id=[])


def test_from_hf_keeps_the_context_length_and_generate_warns_past_it():
    _, ours = tiny_llama(max_position_embeddings=8)
    assert ours.max_position_embeddings == 8
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        generate(ours, ids(1, 4), max_new_tokens=4)  # 8 positions: within the context
    with pytest.warns(UserWarning, match="max_position_embeddings = 8"):
        generate(ours, ids(1, 4), max_new_tokens=5)
    assert LlamaDecoder(VOCAB, 32, 1, 4, 48).max_position_embeddings is None  # no context given


def test_a_cache_can_be_emptied_for_a_new_prompt():
    _, ours = tiny_llama()
    caches = [KVCache() for _ in ours.layers]
    with torch.no_grad():
        ours(ids(1, 5), caches=caches)
        for cache in caches:
            cache.reset()
        assert all(len(cache) == 0 and cache.capacity == 0 for cache in caches)
        fresh = ours(ids(2, 3, seed=3), caches=caches)  # another batch size, too
        torch.testing.assert_close(fresh, ours(ids(2, 3, seed=3)))


# --- defects of the held-out suite ---------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16])
def test_small_integer_ids_are_refused_with_the_arguments_name(dtype):
    model = LlamaDecoder(50, 32, 2, 4, 48)
    with pytest.raises(TypeError, match="^input_ids .*int64 or int32"):
        model(torch.tensor([[1, 2]], dtype=dtype))
    with pytest.raises(TypeError, match="^input_ids"):
        generate(model, torch.tensor([[1, 2]], dtype=dtype), max_new_tokens=1)
    model(torch.tensor([[1, 2]], dtype=torch.int32))  # what nn.Embedding takes


@pytest.mark.parametrize("setting", [dict(top_p=0.5), dict(min_p=0.1), dict(top_k=2), dict()])
def test_empty_logits_are_refused(setting):
    with pytest.raises(ValueError, match="^logits .*vocab"):
        filter_logits(torch.empty(2, 0), **setting)


def test_top_p_of_one_cuts_nothing_as_transformers_generate():
    """TopPLogitsWarper(1.0) would cut the tokens whose probability underflows to 0;
    transformers' generate never builds it at 1.0, so sampling is the same: as ours."""
    logits = torch.tensor([[0.0, -200.0, 1.0, -300.0]])
    assert torch.equal(filter_logits(logits, top_p=1.0), logits)


def test_a_temperature_whose_logits_overflow_is_refused():
    _, ours = tiny_llama()
    with pytest.raises(ValueError, match="^temperature .*overflow"):
        generate(ours, ids(1, 3), max_new_tokens=2, do_sample=True, temperature=1e-40)
    with pytest.raises(ValueError, match="^temperature .*overflow"):
        filter_logits(torch.tensor([[1.0, 2.0]]), temperature=1e-40)


def test_caches_of_unequal_lengths_are_refused():
    _, ours = tiny_llama()
    x = ids(1, 8)
    caches = [KVCache() for _ in ours.layers]
    with torch.no_grad():
        ours(x[:, :5], caches=caches)
        with pytest.raises(ValueError, match="^caches .*same length"):
            ours(x[:, 5:], caches=[KVCache(), caches[1]])


def test_caches_may_be_a_list_or_a_tuple():
    _, ours = tiny_llama()
    x = ids(1, 6)
    caches = tuple(KVCache() for _ in ours.layers)
    with torch.no_grad():
        ours(x[:, :4], caches=caches)
        torch.testing.assert_close(ours(x[:, 4:], caches=caches), ours(x)[:, 4:])
