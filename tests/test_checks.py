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

X = torch.arange(24.0).reshape(2, 3, 4)
CALLS = {  # argument name -> what a call that passes `value` as that argument gives
    "T_q": lambda value: causal_mask(value).tolist(),
    "T_k": lambda value: causal_mask(3, value).tolist(),
    "max_len": lambda value: padding_mask([1, 2], value).tolist(),
    "lengths": lambda value: padding_mask([value, 1]).tolist(),
    "dim": lambda value: softmax(X, value).tolist(),
    "num_heads": lambda value: split_heads(X, value).tolist(),
    "d_model": lambda value: (MultiHeadAttention(value, 2).d_model, MultiHeadAttention(value, 2).d_k),
    "hidden_size": lambda value: BertSelfAttention(BertConfig(value, 2)).attention_head_size,
    "num_attention_heads": lambda value: BertSelfAttention(BertConfig(4, value)).attention_head_size,
}


@pytest.mark.parametrize("name", CALLS)
@pytest.mark.parametrize("integer", [np.int64(2), np.int32(2), np.uint8(2)])
def test_any_integer_gives_what_a_python_int_gives(name, integer):
    assert CALLS[name](integer) == CALLS[name](2)


@pytest.mark.parametrize("name", CALLS)
@pytest.mark.parametrize("value", [2.0, True, "2", torch.tensor(2)])
def test_other_values_are_a_type_error_naming_the_argument(name, value):
    with pytest.raises(TypeError, match=rf"^{name}\b"):
        CALLS[name](value)


# --- expect_error: how the chapters show an error without stopping "Run all" -----------------
def test_expect_error_prints_the_error_as_one_line(capsys):
    from attention_book._checks import expect_error

    with expect_error(ValueError, TypeError):
        raise TypeError("`x` is not a tensor")
    assert capsys.readouterr().out == "TypeError: `x` is not a tensor\n"


def test_expect_error_fails_when_nothing_or_another_error_is_raised():
    from attention_book._checks import expect_error

    with pytest.raises(AssertionError, match="expected ValueError, but the block raised nothing"):
        with expect_error(ValueError):
            pass
    with pytest.raises(KeyError):  # another kind is not swallowed
        with expect_error(ValueError):
            raise KeyError("k")


@pytest.mark.parametrize("kinds", [(), ("ValueError",), (int,)])
def test_expect_error_needs_exception_classes(kinds):
    from attention_book._checks import expect_error

    with pytest.raises(TypeError, match="exception classes"):
        with expect_error(*kinds):
            pass
