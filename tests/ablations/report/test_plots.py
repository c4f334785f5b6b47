"""effects.png keeps every label inside its picture: the tick labels and the legend inside the
figure, a verdict's note beside its marker inside the plot's frame (the demo's
"input truncated, 3/3 seeds" ran past the frame's right edge)."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Annotation, Text
from PIL import Image

from ablations.analysis.paired import Effect
from ablations.plan.experiment import MetricSection
from ablations.report.plots import DPI, effects_figure, plot_effects

METRIC = MetricSection(name="accuracy", threshold=0.85, useful_effect=0.01)


def _effect(variant: str, verdict: str, diff: float | None = None, **fields: object) -> Effect:
    interval = {} if diff is None else {"ci_low": diff - 0.005, "ci_high": diff + 0.005}
    return Effect(
        variant=variant, category="essential", metric="accuracy", direction="maximize",
        useful_effect=0.01, n_pairs=0 if diff is None else 12, seeds=[0, 1, 2],
        mean_diff=diff, verdict=verdict, **interval, **fields,  # type: ignore[arg-type]
    )  # fmt: skip


# the demo's effects (ablations/recipes/demo.yaml): the note goes to its marker's left
DEMO = [
    _effect("width=16", "worse", -0.031),
    _effect("width=128", "not worse", 0.0005),
    _effect("depth=1", "not worse", -0.0003),
    _effect("dropout=0.3", "not worse", -0.0019),
    _effect("keep_pixels=32", "input truncated", note="3/3 seeds: the input is truncated"),
]
PILOT = _effect("keep_pixels=32", "input truncated", note="pilot: 3/3 seeds", from_pilot=True)
ROOM_RIGHT = [_effect("width=128", "better", 0.04), PILOT]  # the note stays where it is
NO_ROOM = [PILOT]  # the note fits on neither side of its marker: the x-axis widens


@pytest.mark.parametrize(
    "effects", [DEMO, ROOM_RIGHT, NO_ROOM], ids=["demo", "room-right", "no-room"]
)
def test_every_label_of_effects_png_stays_inside_the_picture(effects: list[Effect]) -> None:
    figure = effects_figure(effects, METRIC)
    renderer = FigureCanvasAgg(figure).get_renderer()
    figure.draw(renderer)
    [ax] = figure.axes
    whole, frame = figure.bbox, ax.get_window_extent(renderer)
    texts = [t for t in figure.findobj(Text) if t.get_visible() and t.get_text()]
    assert any(t.get_text().startswith("accuracy: variant - control") for t in texts)
    for text in texts:
        box = text.get_window_extent(renderer)
        inside = whole if not isinstance(text, Annotation) else frame
        assert inside.x0 - 0.5 <= box.x0 and box.x1 <= inside.x1 + 0.5, text.get_text()
        assert inside.y0 - 0.5 <= box.y0 and box.y1 <= inside.y1 + 0.5, text.get_text()
    [note] = [t for t in texts if isinstance(t, Annotation)]
    assert note.get_text() == effects[-1].label + ", 3/3 seeds"


def test_effects_png_is_the_figure_it_checked(tmp_path: Path) -> None:
    """The PNG is that figure with savefig's "tight" margin of 0.1 in: nothing lay outside it."""
    path = plot_effects(DEMO, METRIC, tmp_path / "effects.png")
    assert path is not None
    figure = effects_figure(DEMO, METRIC)
    width, height = Image.open(path).size
    pad = 2 * 0.1 * DPI  # savefig's pad_inches on both sides
    assert width <= figure.get_figwidth() * DPI + pad + 1
    assert height <= figure.get_figheight() * DPI + pad + 1
