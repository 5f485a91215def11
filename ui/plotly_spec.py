"""Each shared figure's JSON made once, not on every rerun, and its arrays sent as bytes, not base64.

The figures of ``ui.compute.figures`` live in ``ui.store``, shared and read-only, and a rerun shows the
same figure objects again (a head change whose figures were prefetched, a rerun that changed nothing
they show). Encoding a figure is ``fig.to_dict()`` (a deep copy of every array, then base64) and
``plotly.io.to_json`` on the result: about 0.2 s of a 64-token derivation rerun when it was done on every
run. ``spec_bytes(fig)`` makes it once, on first use, and keeps it on the figure; ``ui.chart`` sends it.
Since the fourteenth session the store keeps only those bytes (``Sent``), not the Figure they came from.

What is sent (``pack``): plotly's own JSON for the figure (``plotly.io.to_json(fig.to_dict(),
validate=False)``, made without ``to_dict``'s deep copy: ``spec_json``), except that each typed array's
``bdata`` is left empty and its bytes follow the JSON, raw. plotly's JSON holds every numeric array as base64
text, a third larger than its bytes: the softmax weights at 512 tokens were 1.48 MB of JSON and are 1.11 MB
packed. plotly.js takes a typed array's ``bdata`` as an ArrayBuffer as well as base64
(``decodeTypedArraySpec``), so the browser (``ui/components/lens_chart/chart.js``) puts each buffer back where
its path says and draws exactly the same numbers. The layout, little-endian::

    b"LNS1" | u32 length of the meta JSON | meta JSON | figure JSON | buffers, each at a multiple of 8

meta: ``{"digest": the figure's hash (the browser redraws only when it changes), "figure": [offset, length],
"buffers": [[path, offset, length], ...], "end": length of the whole}`` (offsets from the first byte; a path is the
keys and indices from the figure to the typed array's spec), and where there are any, "grids" (hover labels said
once per row and column, ``ui.label_grids``) and "narrowed" (the indices of the buffers sent as float32 though the
figure holds float64: every value a float32, ``ui.narrow``; their spec says ``f4``). ``unpack`` turns it back into
plotly's own figure dict (the tests).

A figure kept for every head (``viz.selection``) may be followed, after ``end``, by the JSON of an update
``[restyle, relayout]`` (``with_update``: appended, nothing else copied or re-encoded) that marks the chosen head:
the browser applies it with ``Plotly.update`` to the chart already drawn, and redraws the whole figure only when the
digest changes. ``unpack`` applies it too (``apply_update``), so the tests read the figure as it is drawn.

No Streamlit, no tensors, no figure building.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import threading
from collections import OrderedDict

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.basedatatypes import convert_to_base64  # plotly.py's own step of to_dict (from _plotly_utils)
from plotly.io.json import to_json_plotly

from viz.query_flip import flip_frame, flip_rows

from .label_grids import put_label_grids, take_label_grids
from .narrow import NARROW, WIDE, narrowed, widened

_ATTRIBUTE = "_attention_lens_json"  # where a figure keeps its JSON (underscore: plotly allows it)
ROWS_KEY = "lens_rows"  # beside "data" and "layout": the rows a step-through flips through (viz.query_flip)


def spec_json(fig: go.Figure) -> str:
    """plotly's own JSON for ``fig``: the text of ``plotly.io.to_json(fig.to_dict(), validate=False)``.

    ``to_dict`` deep-copies every property (each array, each string of an object array of hover labels) so
    that plotly's base64 step (``convert_to_base64``, which replaces a dict's array values by typed-array
    specs) cannot touch the figure. That step only ever replaces values held by dicts, so copying the dicts
    and lists and sharing everything else is enough: the same bytes for a fraction of the work (a 64-token
    heatmap: 3.2 ms to copy before, a tenth of that now). It reads plotly's own ``_data`` / ``_layout``
    (plotly is pinned; tests/test_plotly_spec.py compares the bytes with ``to_dict``'s for every view)."""
    return pio.to_json(_spec(fig), validate=False)


def _spec(fig: go.Figure) -> dict:
    """What ``spec_json`` encodes: the figure's dicts and lists copied, its numeric arrays as base64 specs."""
    spec = {"data": _containers(fig._data), "layout": _containers(fig._layout)}
    frames = [_containers(frame._props) for frame in fig._frame_objs]
    if frames:
        spec["frames"] = frames
    convert_to_base64(spec)
    return spec


def _sendable(fig: go.Figure) -> tuple[dict, bytes | None]:
    """``_spec(fig)``, and the rows a step-through flips through (``viz.query_flip``) packed on their own, which the
    figure names by their digest (``ROWS_KEY``), so a page that has them is not sent them again (``ui.chart``)."""
    spec = _spec(fig)
    rows = flip_rows(fig)
    if rows is None:
        return spec, None
    packed = _packed_rows(rows)
    spec[ROWS_KEY] = {"digest": _meta(packed)["digest"], "frame": flip_frame(fig)}
    return spec, packed


_ROWS_PACKED: OrderedDict = OrderedDict()  # id(rows) -> (rows, their bytes): the last few, shared by the figures
_ROWS_LOCK = threading.Lock()  # of one head's queries (viz.query_flip.HEAD_ROWS hands them the same dict)


def _packed_rows(rows: dict) -> bytes:
    """``pack`` of ``{"rows": rows}``, made once per rows dict (held while kept, so its id stays its own)."""
    with _ROWS_LOCK:
        hit = _ROWS_PACKED.get(id(rows))
        if hit is not None and hit[0] is rows:
            _ROWS_PACKED.move_to_end(id(rows))
            return hit[1]
    convert_to_base64(extra := {"rows": _containers(rows)})
    packed = pack(extra)
    with _ROWS_LOCK:
        _ROWS_PACKED[id(rows)] = (rows, packed)
        while len(_ROWS_PACKED) > 4:
            _ROWS_PACKED.popitem(last=False)
    return packed


def rows_digest(packed_rows: bytes) -> str:  # the digest a figure names its rows by (``_sendable``)
    return _meta(packed_rows)["digest"]


MAGIC_ROWS = b"LNS2"  # a packed figure followed by the rows it names: see ``with_rows``


def with_rows(first: bytes, rows: bytes | None) -> bytes:
    """A figure and its rows: ``MAGIC_ROWS`` | u32 length of ``first`` | ``first`` (``pack``'s bytes, perhaps with an
    update) | ``rows`` (``pack``'s bytes of the rows); ``rows`` None (the page has them): ``first`` alone."""
    if rows is None:
        return first
    return MAGIC_ROWS + struct.pack("<I", len(first)) + first + rows


def _parts(data: bytes) -> tuple[bytes, bytes | None]:
    """(the figure's bytes, the rows' bytes or None) of what ``with_rows`` made."""
    if not data.startswith(MAGIC_ROWS):
        return data, None
    (length,) = struct.unpack_from("<I", data, 4)
    return data[8 : 8 + length], data[8 + length :]


def _containers(value):
    """``value`` with every dict, list and tuple copied and every other object shared."""
    if isinstance(value, dict):
        return {key: _containers(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_containers(item) for item in value)
    return value


MAGIC = b"LNS1"
_ALIGN = 8  # each buffer starts at a multiple of 8, so a typed array view (float64 too) could read it in place


def pack(spec: dict) -> bytes:
    """``spec`` (plotly's figure dict with base64 typed arrays; changed here) as sent: see the module doc.
    The bytes are taken back out of plotly's own base64 rather than from the arrays, so that what is sent follows
    plotly's conversion exactly (its dtypes, its integer downcasts); once per figure, off the click's path."""
    found: list[tuple[list, bytes, bool]] = []  # (path, bytes sent, narrowed)
    _take_buffers(spec, [], found)
    grids = take_label_grids(spec)
    figure = pio.to_json(spec, validate=False).encode("utf-8")
    digest = hashlib.blake2b(figure, digest_size=12)
    for _, raw, _ in found:
        digest.update(raw)
    if grids:
        digest.update(json.dumps(grids).encode("utf-8"))

    def meta_for(start: int) -> bytes:
        offset, buffers = _aligned(start + len(figure)), []
        for path, raw, _ in found:
            buffers.append([path, offset, len(raw)])
            offset = _aligned(offset + len(raw))
        meta = {"digest": digest.hexdigest(), "figure": [start, len(figure)], "buffers": buffers, "end": offset}
        meta |= {"grids": grids} if grids else {}
        meta |= {"narrowed": narrow} if (narrow := [k for k, item in enumerate(found) if item[2]]) else {}
        return json.dumps(meta, separators=(",", ":")).encode("utf-8")

    meta = meta_for(8)
    for _ in range(8):  # the meta's own length moves the offsets it holds: repeat until it stays the same
        again = meta_for(8 + len(meta))
        if again == meta:
            break
        meta = again
    head = MAGIC + struct.pack("<I", len(meta)) + meta
    assert json.loads(meta)["figure"][0] == len(head), "packed figure: the offsets did not settle"
    parts, at = [head, figure], len(head) + len(figure)
    for _, raw, _ in found:
        pad = _aligned(at) - at
        parts += [b"\0" * pad, raw]
        at += pad + len(raw)
    end = json.loads(meta)["end"]
    parts.append(b"\0" * (end - at))  # the last buffer's padding: ``end`` is where an update may follow
    return b"".join(parts)


def _meta(data: bytes) -> dict:
    (length,) = struct.unpack_from("<I", data, 4)
    return json.loads(data[8 : 8 + length])


def with_update(packed: bytes, update) -> bytes:
    """``packed`` (``pack``'s bytes, no update yet) followed by ``update`` = (restyle, relayout) as JSON; None: as is."""
    if update is None:
        return packed
    restyle, relayout = update
    return packed + json.dumps([restyle, relayout], separators=(",", ":")).encode("utf-8")


def update_of(data: bytes):
    """The update that follows a packed figure ([restyle, relayout]), or None."""
    data, _ = _parts(data)
    if not data.startswith(MAGIC):
        return None
    end = _meta(data)["end"]
    return json.loads(data[end:]) if len(data) > end else None


def _aligned(offset: int) -> int:
    return -(-offset // _ALIGN) * _ALIGN


def _take_buffers(value, path: list, found: list) -> None:
    """Empty every typed array spec's base64 ``bdata`` in ``value``, keeping (path, its bytes) in ``found``; an
    ``f8`` array of float32 values only is kept as float32 and its spec says ``f4`` (``ui.narrow``)."""
    if isinstance(value, dict):
        if isinstance(value.get("bdata"), str) and isinstance(value.get("dtype"), str):
            raw = base64.b64decode(value["bdata"])
            narrow = narrowed(value["dtype"], raw)
            found.append((list(path), raw if narrow is None else narrow, narrow is not None))
            value["bdata"], value["dtype"] = "", value["dtype"] if narrow is None else NARROW
            return
        for key, item in value.items():
            if isinstance(item, dict | list | tuple):
                _take_buffers(item, [*path, key], found)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if isinstance(item, dict | list | tuple):
                _take_buffers(item, [*path, index], found)


def unpack(data: bytes) -> dict:
    """plotly's own figure dict from what ``pack`` sent (or from plain JSON): each bdata base64 again. Rows sent
    with it (``with_rows``) are put in place of the digest that names them (``ROWS_KEY``)."""
    data, rows = _parts(data)
    if rows is not None:
        figure = unpack(data)
        figure[ROWS_KEY] = unpack(rows)["rows"]
        return figure
    if not data.startswith(MAGIC):
        return json.loads(data)
    meta = _meta(data)
    start, size = meta["figure"]
    figure = json.loads(data[start : start + size])
    narrowed_buffers = set(meta.get("narrowed", ()))
    for k, (path, offset, size) in enumerate(meta["buffers"]):
        spec = figure
        for step in path:
            spec = spec[step]
        raw = data[offset : offset + size]
        if k in narrowed_buffers:  # sent as float32 (ui.narrow): plotly's own f8 again
            raw, spec["dtype"] = widened(raw), WIDE
        spec["bdata"] = base64.b64encode(raw).decode("ascii")
    put_label_grids(figure, meta.get("grids", ()))
    update = update_of(data)
    return figure if update is None else apply_update(figure, update)


def apply_update(figure: dict, update) -> dict:
    """``figure`` (a plotly figure dict) with ``update`` = (restyle, relayout) applied as ``Plotly.update`` does
    for ``viz.selection``'s paths: a restyle list gives trace i its item i (modulo its length), any other value every
    trace; None removes the attribute. In place (checked against plotly.py's ``Figure.plotly_update``; the page: marks.js)."""
    restyle, relayout = update
    for index, trace in enumerate(figure.get("data", [])):
        for path, value in restyle.items():
            _set_path(trace, path, value[index % len(value)] if isinstance(value, list) else value)
    layout = figure.setdefault("layout", {})
    for path, value in relayout.items():
        _set_path(layout, path, value)
    return figure


def _set_path(target: dict, path: str, value) -> None:
    steps: list = []
    for part in path.split("."):
        name, _, rest = part.partition("[")
        steps.append(name)
        steps += [int(index) for index in rest.rstrip("]").split("][")] if rest else []
    for step, following in zip(steps, steps[1:], strict=False):
        empty = [] if isinstance(following, int) else {}
        target = target[step] if isinstance(step, int) else target.setdefault(step, empty)
    if value is not None or isinstance(steps[-1], int):
        target[steps[-1]] = value
    else:
        target.pop(steps[-1], None)


def spec_bytes(fig: go.Figure) -> bytes:
    """``pack`` of the figure's spec, made on the first call and kept on the figure. Only for figures that
    nobody changes after they are built (every figure of ``ui.compute.figures``)."""
    kept = getattr(fig, _ATTRIBUTE, None)
    if kept is None:
        spec, rows = _sendable(fig)
        kept = with_rows(pack(spec), rows)  # a figure sent once: its rows with it
        setattr(fig, _ATTRIBUTE, kept)
    return kept


def prepare(figs: dict) -> dict:
    """Make each figure's JSON now (the prefetch builds figures off the click's path: their JSON too)."""
    for fig in figs.values():
        spec_bytes(fig)
    return figs


def json_bytes(fig) -> int:
    """Bytes of what is kept on ``fig`` to send (0 before it was shown or prepared)."""
    if isinstance(fig, Sent):
        return len(fig.packed) + len(fig.rows or b"")
    kept = getattr(fig, _ATTRIBUTE, None)
    return 0 if kept is None else len(kept)


class Sent:
    """A figure kept as what the browser is sent: ``pack``'s bytes, and its sliders as plain JSON (the steps
    ``viz.selection.slider_selection`` reads to mark a head). ``figure()`` builds the plotly Figure again from the
    bytes, for a download: the same figure (tests/test_plotly_spec.py compares their JSON).

    Why not keep the plotly Figure: a Figure is thousands of small Python objects (its traces, their property
    dicts and validators, every slider step), about 14,000 allocator blocks for one 64-token set of views. Thirty
    visitors kept about 3,000 Figures at once, 2.5 million blocks; the cycle collector walked them all on every
    full pass (0.1-0.3 s with every session waiting), and Python's allocator kept the pages they had filled after
    the visitors left (benchmarks/REPORT.md section 7, "fourteenth"). Bytes are one object each."""

    __slots__ = ("packed", "rows", "sliders")

    def __init__(self, fig: go.Figure) -> None:
        spec, rows = _sendable(fig)
        sliders = spec["layout"].get("sliders")
        self.sliders = json.loads(to_json_plotly(sliders)) if sliders else []
        kept = getattr(fig, _ATTRIBUTE, None)
        self.packed, self.rows = _parts(kept) if kept is not None else (pack(spec), rows)

    def figure(self) -> go.Figure:
        """The plotly Figure these bytes draw, its arrays numpy arrays again (a new one each call: downloads
        change theirs)."""
        meta = _meta(self.packed)
        start, size = meta["figure"]
        spec = json.loads(self.packed[start : start + size])
        narrow = set(meta.get("narrowed", ()))
        for k, (path, offset, size) in enumerate(meta["buffers"]):
            holder = spec
            for step in path[:-1]:
                holder = holder[step]
            typed = holder[path[-1]]  # plotly's {"dtype", "bdata", "shape"}, its bytes sent apart
            dtype = np.dtype(typed["dtype"]).newbyteorder("<")
            array = np.frombuffer(self.packed, dtype=dtype, count=size // dtype.itemsize, offset=offset)
            array = array.astype("<f8") if k in narrow else array  # float64, as the figure held it (ui.narrow)
            shape = typed.get("shape")
            holder[path[-1]] = array.reshape([int(n) for n in str(shape).split(",")]) if shape else array
        put_label_grids(spec, meta.get("grids", ()))
        spec.pop(ROWS_KEY, None)  # the browser's, not the figure's
        return go.Figure(spec)


def kept(figs: dict) -> dict:
    """name -> ``Sent`` for each figure of ``figs``: what ``ui.compute.figures`` keeps in the shared store."""
    return {name: fig if isinstance(fig, Sent) else Sent(fig) for name, fig in figs.items()}


def plotly_figure(fig):
    """A plotly Figure for ``fig``: a ``Sent`` one built again from its bytes, any other figure as it is."""
    return fig.figure() if isinstance(fig, Sent) else fig
