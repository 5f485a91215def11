"""ui/plotly_spec.py: a shared figure's JSON is made once and is byte for byte what plotly makes for it; what is
sent (its arrays as raw bytes after the JSON) unpacks to exactly plotly's own figure."""

from __future__ import annotations

import base64
import json
import struct

import numpy as np
import plotly.graph_objects as go
import plotly.io._json as plotly_json

from ui import plotly_spec
from viz.scores import attention_heatmap


def plotly_own(fig: go.Figure) -> bytes:
    """plotly's JSON for the figure, through plotly's own function, as UTF-8."""
    return plotly_json.to_json(fig.to_dict(), validate=False).encode("utf-8")


def small_figure(seed: int = 0) -> go.Figure:
    rng = np.random.default_rng(seed)
    weights = rng.random((5, 5)).astype(np.float32)
    return attention_heatmap(weights / weights.sum(-1, keepdims=True), list("abcde"), list("abcde"), title="<t>")


def test_every_figure_of_every_view_keeps_plotly_s_own_json():
    from attention_core.pipeline import run_trace
    from attention_core.request import TraceRequest
    from viz.views import figures_for_trace

    trace = run_trace(TraceRequest(text="The cat sat on the mat."))  # the bundled MiniLM
    count = 0
    for view in ("derivation", "compare", "heads", "query"):
        for name, fig in plotly_spec.prepare(figures_for_trace(trace, view)).items():
            kept = plotly_spec.spec_bytes(fig)
            assert kept is plotly_spec.spec_bytes(fig), name  # made once, kept on the figure
            sent = plotly_spec.unpack(kept)
            rows = sent.pop(plotly_spec.ROWS_KEY, None)  # the step-through's rows for the browser (viz/query_flip.py)
            assert sent == json.loads(plotly_own(fig)), (view, name)
            assert (rows is not None) == (view == "query"), (view, name)
            assert plotly_spec.spec_json(fig).encode("utf-8") == plotly_own(fig), (view, name)
            assert plotly_spec.json_bytes(fig) == len(kept)
            count += 1
    assert count > 10


def test_nothing_is_kept_before_a_figure_is_shown_or_prepared():
    fig = small_figure()
    assert plotly_spec.json_bytes(fig) == 0
    assert plotly_spec.spec_json(fig) == plotly_own(fig).decode("utf-8")
    assert plotly_spec.json_bytes(fig) == 0  # spec_json alone keeps nothing
    plotly_spec.prepare({"weights": fig})
    assert plotly_spec.json_bytes(fig) == len(plotly_spec.pack(json.loads(plotly_own(fig))))


def test_making_the_json_leaves_the_figure_as_it_was():
    fig = small_figure()
    before = plotly_own(fig)
    plotly_spec.spec_json(fig)
    assert isinstance(fig.data[0].z, np.ndarray) and isinstance(fig.data[0].customdata, np.ndarray)
    assert plotly_own(fig) == before


def test_long_and_animated_figures_keep_plotly_s_own_json():
    """A display copy (more positions than pixels) and a figure with frames."""
    rng = np.random.default_rng(3)
    weights = rng.random((600, 600)).astype(np.float32)
    tokens = [f"t{i}" for i in range(600)]
    long = attention_heatmap(weights / weights.sum(-1, keepdims=True), tokens, tokens)
    frames = go.Figure(
        data=[go.Heatmap(z=rng.random((4, 4)))],
        frames=[go.Frame(data=[go.Heatmap(z=rng.random((4, 4)))], name=str(i)) for i in range(3)],
    )
    for fig in (long, frames):
        assert plotly_spec.spec_json(fig) == plotly_own(fig).decode("utf-8")


def test_packed_arrays_are_raw_bytes_at_aligned_offsets_and_the_digest_follows_the_numbers():
    fig = small_figure()
    packed = plotly_spec.pack(json.loads(plotly_own(fig)))
    assert packed[:4] == b"LNS1"
    (length,) = struct.unpack_from("<I", packed, 4)
    meta = json.loads(packed[8 : 8 + length])
    start, size = meta["figure"]
    assert start == 8 + length
    figure = json.loads(packed[start : start + size])
    z = fig.data[0].z  # float64 in the figure, every value a float32 (float32 weights)
    assert z.dtype == np.float64 and figure["data"][0]["z"]["bdata"] == ""  # no base64 left in the JSON
    paths = {tuple(path): (k, offset, size) for k, (path, offset, size) in enumerate(meta["buffers"])}
    k, offset, count = paths[("data", 0, "z")]
    assert offset % 8 == 0 and offset >= start + size  # after the JSON, aligned for any typed array
    # sent as float32 (ui/narrow.py): half the bytes, and each value widens back to exactly the figure's
    assert figure["data"][0]["z"]["dtype"] == "f4" and k in meta["narrowed"] and count == z.size * 4
    sent = np.frombuffer(packed[offset : offset + count], dtype="<f4").reshape(z.shape)
    assert np.array_equal(sent.astype(np.float64), z)
    own = json.loads(plotly_own(fig))["data"][0]["z"]
    assert own["dtype"] == "f8" and base64.b64decode(own["bdata"]) == sent.astype("<f8").tobytes()
    assert plotly_spec.unpack(packed) == json.loads(plotly_own(fig))  # plotly's own f8 again
    # the digest changes with any number, and only then
    assert plotly_spec.pack(json.loads(plotly_own(small_figure()))) == packed
    other = small_figure(seed=1)
    other_meta = plotly_spec.pack(json.loads(plotly_own(other)))
    assert json.loads(other_meta[8 : 8 + struct.unpack_from("<I", other_meta, 4)[0]])["digest"] != meta["digest"]


def test_plain_json_unpacks_as_it_is():
    text = plotly_own(small_figure())
    assert plotly_spec.unpack(text) == json.loads(text)


def test_a_figure_kept_as_sent_is_the_same_figure_and_marks_the_same_way():
    """``Sent`` (what ui.compute.figures keeps): the bytes ``spec_bytes`` makes, the figure built again from them
    with plotly's own JSON and numpy arrays, and the same head marks from its sliders as from the Figure's."""
    from attention_core.pipeline import run_trace
    from attention_core.request import TraceRequest
    from viz.selection import slider_selection
    from viz.views import figures_for_trace

    trace = run_trace(TraceRequest(text="The cat sat on the mat."))  # the bundled MiniLM
    sliders = 0
    for view, options in (("derivation", {}), ("compare", {}), ("heads", {"only": ("head_grid", "head_flip")})):
        figures = figures_for_trace(trace, view, **options)
        for name, sent in plotly_spec.kept(figures).items():
            fig = figures[name]
            assert isinstance(sent, plotly_spec.Sent) and sent.packed == plotly_spec.pack(json.loads(plotly_own(fig)))
            assert plotly_spec.json_bytes(sent) == len(sent.packed)
            again = plotly_spec.plotly_figure(sent)
            assert again is not plotly_spec.plotly_figure(sent)  # a new one each time: a download may change it
            assert json.loads(plotly_own(again)) == json.loads(plotly_own(fig)), (view, name)
            assert isinstance(again.data[0].z, np.ndarray), (view, name)
            for step in range(-1, trace.core.num_heads + 1):
                assert slider_selection(sent, step) == slider_selection(fig, step), (view, name, step)
            sliders += bool(fig.layout.sliders)
    assert sliders >= 1  # the flip chart's slider was compared
    fig = small_figure()
    assert plotly_spec.plotly_figure(fig) is fig
    assert plotly_spec.kept({"w": plotly_spec.Sent(fig)})["w"].packed == plotly_spec.spec_bytes(fig)


def test_the_shared_store_keeps_figures_as_bytes_not_plotly_objects():
    """ui.compute.figures keeps each figure as ``Sent``: thirty visitors' plotly Figures were millions of small
    objects for the cycle collector to walk and for the allocator to keep after they left."""
    from attention_core.request import TraceRequest
    from ui import compute

    request = TraceRequest(text="The cat sat on the mat.")
    trace = compute.trace_for(request)
    for view, options in (("derivation", {"head": 0}), ("compare", {"head": 0}), ("heads", {"only": ("head_grid",)})):
        figures = compute.figures(trace, request, view, theme="screen", show_values=None, **options)
        assert figures and all(isinstance(fig, plotly_spec.Sent) for fig in figures.values()), view
        assert not any(isinstance(fig, go.Figure) for fig in figures.values())


def test_a_download_of_a_figure_kept_as_sent_renders_the_figure_as_drawn(monkeypatch):
    """The SVG / PNG of a stored figure (ui.views.common._image) is made from the figure built again from its
    bytes, with the chosen head's mark applied: the same figure the plotly Figure and its mark gave before."""
    from attention_core.pipeline import run_trace
    from attention_core.request import TraceRequest
    from ui.views import common
    from viz import export as viz_export
    from viz.selection import marked, slider_selection
    from viz.theme import apply_theme
    from viz.views import figures_for_trace

    rendered = []
    monkeypatch.setattr(viz_export, "figure_image", lambda fig, fmt, **kw: rendered.append((fig, fmt)) or b"image")
    trace = run_trace(TraceRequest(text="The cat sat on the mat."))
    fig = figures_for_trace(trace, "heads", only=("head_flip",))["head_flip"]
    update = slider_selection(fig, 2)
    assert update is not None
    assert common._image(plotly_spec.Sent(fig), "svg", update)() == b"image"
    (drawn, fmt), expected = rendered[0], apply_theme(marked(fig, update), "slides")
    assert fmt == "svg" and json.loads(plotly_own(drawn)) == json.loads(plotly_own(expected))
    assert drawn.layout.sliders[0].active == 2


def test_hover_labels_repeated_along_rows_or_columns_are_sent_once_and_built_again():
    """A heatmap's token names per cell (rows x cols x 2) are sent as one label per row and per column: the 12 heads
    of a grid carry their names in a few KB, and unpack (as the browser's chart.js) gives back plotly's own
    customdata. customdata that varies along both axes is sent as it is."""
    from viz.heads import head_grid

    rng = np.random.default_rng(0)
    tokens = [f"tok{i}" for i in range(40)]
    weights = rng.random((12, 40, 40)).astype(np.float32)
    grid = head_grid(weights / weights.sum(-1, keepdims=True), tokens, tokens)
    own = json.loads(plotly_own(grid))
    assert all(np.shape(trace["customdata"]) == (40, 40, 2) for trace in own["data"])
    packed = plotly_spec.pack(json.loads(plotly_own(grid)))
    meta = json.loads(packed[8 : 8 + struct.unpack_from("<I", packed, 4)[0]])
    assert [index for index, *_ in meta["grids"]] == list(range(12))
    assert all(layers[0][0] == "rows" and layers[1][0] == "cols" for *_, layers in meta["grids"])
    assert b"tok39" in packed and packed.count(b"tok39") == 2 * 12  # once as a row, once as a column, per head
    assert len(packed) < 12 * 40 * 40 * 8 + 30_000  # the weights (float64 at this size) and little else
    assert plotly_spec.unpack(packed) == own
    again = plotly_spec.Sent(grid).figure()
    assert np.array_equal(np.asarray(again.data[3].customdata), np.asarray(grid.data[3].customdata))

    mixed = go.Figure(go.Heatmap(z=[[1, 2], [3, 4]], customdata=[[["a"], ["b"]], [["c"], ["d"]]]))
    packed = plotly_spec.pack(json.loads(plotly_own(mixed)))
    assert "grids" not in json.loads(packed[8 : 8 + struct.unpack_from("<I", packed, 4)[0]])
    assert plotly_spec.unpack(packed) == json.loads(plotly_own(mixed))


def test_only_arrays_of_float32_values_are_sent_as_float32_and_every_number_stays_the_same():
    """ui/narrow.py: a float64 array goes as float32 only when every value is one (NaN, infinities and -0 too);
    a value that float32 rounds, overflows or flushes keeps the whole array float64. The figure a download
    builds from the bytes (``Sent.figure``) holds the float64 numbers the figure held."""
    from ui import narrow

    exact = np.array([0.25, -0.0, np.nan, np.inf, -np.inf, np.float32(1 / 3), np.float32(1e-40)], dtype=np.float64)
    sent = narrow.narrowed("f8", exact.tobytes())
    assert sent is not None and len(sent) == exact.size * 4
    assert np.array_equal(np.frombuffer(narrow.widened(sent), dtype="<f8"), exact, equal_nan=True)
    assert np.signbit(np.frombuffer(narrow.widened(sent), dtype="<f8")[1])  # -0 stays -0
    for inexact in (1 / 3, 1e39, 1e-50, 0.1):  # rounded, beyond float32's range, below its smallest, rounded
        assert narrow.narrowed("f8", np.array([0.5, inexact]).tobytes()) is None, inexact
    assert narrow.narrowed("f4", np.float32([0.5]).tobytes()) is None  # already float32: as plotly made it
    assert narrow.narrowed("i1", bytes([1, 2])) is None

    rng = np.random.default_rng(5)
    thirds = go.Figure(go.Heatmap(z=rng.random((3, 4))))  # float64 values: not narrowed
    quarter = go.Figure(go.Heatmap(z=rng.integers(0, 8, (3, 4)) / 4.0))  # float64 dtype, float32 values
    for fig, narrowed in ((thirds, False), (quarter, True)):
        packed = plotly_spec.pack(json.loads(plotly_own(fig)))
        (length,) = struct.unpack_from("<I", packed, 4)
        assert bool(json.loads(packed[8 : 8 + length]).get("narrowed")) is narrowed
        assert plotly_spec.unpack(packed) == json.loads(plotly_own(fig))
        plotly_spec.prepare({"z": fig})
        again = plotly_spec.Sent(fig).figure().data[0].z
        assert again.dtype == np.float64 and np.array_equal(again, fig.data[0].z)
