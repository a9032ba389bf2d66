"""attention_book._interactive: every state of a figure a reader can move, as the JSON the page
draws (tests/test_interactive_figures.py checks the drawing in a browser)."""

from __future__ import annotations

import json
import re

import pytest

from attention_book._interactive import interactive_figure

CONTROLS = [{"name": "a", "label": "a", "options": [1, 2, 3], "kind": "range", "default": 1},
            {"name": "b", "label": "b", "options": ["x", "y"], "kind": "select"}]
PANELS = [{"kind": "bars", "labels": ["p", "q"]}, {"kind": "readout", "items": ["r"]}]


def _data(figure) -> dict:
    match = re.fullmatch(r'<div class="ab-interactive"><script type="application/json">(.*)</script></div>',
                         figure._repr_html_(), re.S)
    assert match
    return json.loads(match[1])


def test_every_combination_of_the_controls_is_a_state():
    calls = []

    def frame(a, b):
        calls.append((a, b))
        return [{"values": [[a / 3, -a]]}, {"values": [b]}]

    data = _data(interactive_figure(CONTROLS, PANELS, frame))
    assert sorted(calls) == [(a, b) for a in (1, 2, 3) for b in ("x", "y")]
    assert set(data["frames"]) == {f"{i},{j}" for i in range(3) for j in range(2)}
    assert data["frames"]["2,1"] == [{"values": [[1.0, -3]]}, {"values": ["y"]}]
    assert data["frames"]["0,0"][0]["values"][0][0] == 0.3333  # 4 decimals: the same on every CPU
    assert data["default"] == [1, 0] and data["controls"] == CONTROLS and data["panels"] == PANELS


def test_tensors_nan_infinities_and_negative_zero_become_json():
    torch = pytest.importorskip("torch")
    figure = interactive_figure(CONTROLS[:1], PANELS[:1], lambda a: [
        {"values": [torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 1 / 7],
                                 dtype=torch.float64)]}])
    assert _data(figure)["frames"]["0"][0]["values"][0] == ["NaN", "∞", "−∞", 0.0, 0.1429]
    assert "-0.0" not in figure._repr_html_()


def test_no_data_can_close_the_script_element():
    figure = interactive_figure(CONTROLS[:1], PANELS[:1], lambda a: [{"values": [["</script><b>"]]}])
    assert figure._repr_html_().count("</script>") == 1
    assert _data(figure)["frames"]["0"][0]["values"][0] == ["</script><b>"]


def test_a_frame_must_give_one_entry_per_panel():
    with pytest.raises(ValueError, match=r"^frame must return one entry per panel \(2\)"):
        interactive_figure(CONTROLS, PANELS, lambda a, b: [{"values": [[1]]}])


def test_the_notebook_shows_a_short_text_where_it_cannot_show_html():
    figure = interactive_figure(CONTROLS, PANELS, lambda a, b: [{"values": [[a]]}, {"values": [b]}])
    assert repr(figure) == "<interactive figure: 6 states of a, b>"
