"""One integer check for the whole package: every size and index argument accepts any integer
(numpy's too) and refuses a bool, a float or a string with a TypeError that names it."""

import numpy as np
import pytest
import torch

from attention_book import (
    BertConfig,
    BertSelfAttention,
    MultiHeadAttention,
    causal_mask,
    padding_mask,
    softmax,
    split_heads,
)

CALLS = {  # argument name -> a call that passes `value` as that argument
    "T_q": lambda value: causal_mask(value),
    "T_k": lambda value: causal_mask(3, value),
    "max_len": lambda value: padding_mask([1, 2], value),
    "lengths": lambda value: padding_mask([value, 1]),
    "dim": lambda value: softmax(torch.zeros(2, 3, 4), value),
    "num_heads": lambda value: split_heads(torch.zeros(1, 2, 4), value),
    "d_model": lambda value: MultiHeadAttention(value, 2),
    "hidden_size": lambda value: BertSelfAttention(BertConfig(hidden_size=value, num_attention_heads=2)),
    "num_attention_heads": lambda value: BertSelfAttention(BertConfig(hidden_size=4, num_attention_heads=value)),
}


@pytest.mark.parametrize("name", CALLS)
@pytest.mark.parametrize("integer", [np.int64(2), np.int32(2), 2])
def test_any_integer_is_accepted(name, integer):
    CALLS[name](integer)


@pytest.mark.parametrize("name", CALLS)
@pytest.mark.parametrize("value", [2.0, True, "2", torch.tensor(2)])
def test_other_values_are_a_type_error_naming_the_argument(name, value):
    with pytest.raises(TypeError, match=name):
        CALLS[name](value)
