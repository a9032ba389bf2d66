"""Tests of attention_book.plot_attention, the attention-heatmap helper."""

import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from attention_book import plot_attention  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def random_weights(T_q: int, T_k: int, seed: int = 0) -> torch.Tensor:
    """Rows of softmax weights, (T_q, T_k), float32."""
    generator = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(T_q, T_k, generator=generator), dim=-1)


def image_data(ax) -> np.ndarray:
    (image,) = ax.images
    return np.asarray(image.get_array())


def tick_texts(labels) -> list[str]:
    return [label.get_text() for label in labels]


def test_image_is_the_weights_row_query_column_key():
    weights = random_weights(3, 5)
    ax = plot_attention(weights)
    expected = np.array(weights.tolist())  # (T_q, T_k), built without the helper
    assert image_data(ax).shape == (3, 5)
    np.testing.assert_array_equal(image_data(ax), expected)
    assert ax.get_xlabel() == "key" and ax.get_ylabel() == "query"


def test_numpy_array_input():
    rng = np.random.default_rng(0)
    weights = rng.dirichlet(np.ones(4), size=2)  # (2, 4), rows sum to 1
    ax = plot_attention(weights)
    np.testing.assert_array_equal(image_data(ax), weights)


def test_tensor_that_requires_grad():
    scores = torch.randn(4, 4, generator=torch.Generator().manual_seed(1), requires_grad=True)
    weights = torch.softmax(scores, dim=-1)
    assert weights.requires_grad
    ax = plot_attention(weights)
    np.testing.assert_array_equal(image_data(ax), np.array(weights.tolist()))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_other_floating_dtypes(dtype):
    weights = random_weights(2, 3).to(dtype)
    ax = plot_attention(weights)
    np.testing.assert_array_equal(image_data(ax), np.array(weights.tolist()))


def test_tick_labels_are_the_given_labels():
    queries, keys = ["the", "cat", "sat"], ["the", "cat", "sat", "down"]
    ax = plot_attention(random_weights(3, 4), queries, keys)
    assert tick_texts(ax.get_yticklabels()) == queries
    assert tick_texts(ax.get_xticklabels()) == keys
    np.testing.assert_array_equal(ax.get_xticks(), np.arange(4))
    np.testing.assert_array_equal(ax.get_yticks(), np.arange(3))


def test_labels_may_be_any_objects():
    ax = plot_attention(random_weights(2, 2), (1, 2), np.array([3, 4]))
    assert tick_texts(ax.get_yticklabels()) == ["1", "2"]
    assert tick_texts(ax.get_xticklabels()) == ["3", "4"]


def test_small_matrix_is_annotated_by_default():
    weights = random_weights(3, 4)
    ax = plot_attention(weights)
    expected = {(column, row): f"{value:.2f}"
                for row, values in enumerate(weights.tolist())
                for column, value in enumerate(values)}
    written = {tuple(text.get_position()): text.get_text() for text in ax.texts}
    assert written == expected


def test_large_matrix_is_not_annotated_by_default():
    ax = plot_attention(random_weights(13, 5))
    assert len(ax.texts) == 0


def test_annotation_can_be_forced_on_and_off():
    assert len(plot_attention(random_weights(13, 5), annotate=True).texts) == 65
    assert len(plot_attention(random_weights(3, 3), annotate=False).texts) == 0


def test_annotation_text_contrasts_with_its_cell():
    ax = plot_attention(np.array([[0.0, 1.0]]))  # viridis: dark purple, then bright yellow
    colors = [to_rgba(text.get_color()) for text in ax.texts]
    assert colors == [to_rgba("white"), to_rgba("black")]


def test_new_figure_is_white_with_a_colorbar():
    ax = plot_attention(random_weights(2, 3))
    assert to_rgba(ax.figure.get_facecolor()) == to_rgba("white")
    assert len(ax.figure.axes) == 2  # the heatmap and its colour bar
    (colorbar_ax,) = [other for other in ax.figure.axes if other is not ax]
    assert colorbar_ax.get_ylabel() == "weight"


def test_colorbar_label_names_what_the_colours_mean():
    scores = torch.tensor([[3.0, -1.0], [0.5, 2.0]])  # scores, not weights
    ax = plot_attention(scores, colorbar_label="score q · k")
    (colorbar_ax,) = [other for other in ax.figure.axes if other is not ax]
    assert colorbar_ax.get_ylabel() == "score q · k"
    np.testing.assert_array_equal(image_data(ax), scores.numpy())


def test_colorbar_label_must_be_a_string():
    with pytest.raises(TypeError, match=r"^colorbar_label\b.*int"):
        plot_attention(random_weights(2, 2), colorbar_label=1)


def test_draws_into_the_given_axes_with_title_and_cmap():
    fig, (left, right) = plt.subplots(1, 2)
    ax = plot_attention(random_weights(2, 2), ax=right, title="head 2", cmap="magma")
    assert ax is right
    assert len(left.images) == 0 and len(right.images) == 1
    assert right.get_title() == "head 2"
    assert right.images[0].get_cmap().name == "magma"
    assert ax.figure is fig


@pytest.mark.parametrize("shape", [(5,), (2, 3, 4), ()])
def test_weights_must_be_two_dimensional(shape):
    with pytest.raises(ValueError, match=r"^weights\b.*" + re.escape(str(shape))):
        plot_attention(torch.ones(shape))


def test_weights_must_be_numbers():
    with pytest.raises(TypeError, match=r"^weights\b"):
        plot_attention([["a", "b"], ["c", "d"]])


def test_query_labels_must_match_the_rows():
    with pytest.raises(ValueError, match=r"^query_labels\b.*\(3, 4\)"):
        plot_attention(random_weights(3, 4), query_labels=["a", "b"])


def test_key_labels_must_match_the_columns():
    with pytest.raises(ValueError, match=r"^key_labels\b.*\(3, 4\)"):
        plot_attention(random_weights(3, 4), key_labels=list("abcde"))


def test_a_tiny_nonzero_weight_is_not_written_as_zero():
    ax = plot_attention(np.array([[0.0028, 0.9972, 0.0], [1.96e-44, 0.5, 0.5]]))
    written = {tuple(text.get_position()): text.get_text() for text in ax.texts}
    assert written == {(0, 0): "0.003", (1, 0): "1.00", (2, 0): "0.00",
                       (0, 1): "2e-44", (1, 1): "0.50", (2, 1): "0.50"}


def test_an_additive_mask_shows_minus_infinity_on_a_grey_cell():
    inf = float("inf")
    ax = plot_attention(torch.tensor([[0.0, -inf], [0.0, 0.0]]), colorbar_label="mask M")
    (image,) = ax.images
    bad = to_rgba(image.get_cmap().get_bad())  # the colour of a cell that is not finite
    assert bad[:3] == (0.85, 0.85, 0.85) and bad[3] == 1
    (label,) = [text for text in ax.texts if text.get_position() == (1, 0)]
    assert label.get_text() == "−∞"
    assert to_rgba(label.get_color()) != bad  # readable: black on light grey
    assert to_rgba(label.get_color()) == to_rgba("black")


def test_nan_is_labelled_nan():
    ax = plot_attention(np.array([[np.nan, 1.0]]))
    assert [text.get_text() for text in ax.texts] == ["nan", "1.00"]


@pytest.mark.parametrize("weights", [torch.ones(2, 2, dtype=torch.complex64),
                                     np.ones((2, 2), dtype=np.complex128)])
def test_complex_weights_are_a_type_error(weights):
    with pytest.raises(TypeError, match=r"^weights\b.*complex"):
        plot_attention(weights)


def test_labels_may_be_a_generator():
    ax = plot_attention(random_weights(2, 3), (f"q{i}" for i in range(2)),
                        (f"k{j}" for j in range(3)))
    assert tick_texts(ax.get_yticklabels()) == ["q0", "q1"]
    assert tick_texts(ax.get_xticklabels()) == ["k0", "k1", "k2"]


@pytest.mark.parametrize("labels", ["ab", 2])
def test_labels_must_be_an_iterable_of_labels(labels):
    with pytest.raises(TypeError, match=r"^query_labels\b"):
        plot_attention(random_weights(2, 2), query_labels=labels)
