"""The live temperature (issue 16): the browser's softmax against the core's, and the release path.

1. The component's own JavaScript, run in headless Chromium, gets the arguments the app sends
   (``ui.live_temperature.payload`` of a head traced by the core at one temperature) and recomputes
   softmax(QK^T / t) at other temperatures. The reference is the core's
   ``scaled_dot_product_attention`` run at scale 1/t with the same mask: weights and row entropies
   within 1e-6, for a boolean mask with an all-blocked row (-inf fill: that row is all zeros), the
   -1e9 fill (the all-blocked row leaks), an ALiBi bias added after masking (with either fill), and a
   float mask with values of its own.
2. The component's protocol, with the page as its own parent: componentReady, a render, a drag of
   the range input (frames drawn, nothing sent), a release (one setComponentValue with t on the
   sidebar slider's step).
3. The release path on the server (AppTest cannot run a custom component): the handler puts t into
   the settings; the derivation and query views render with the component present and then use t.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from attention_core.analysis import row_entropy
from attention_core.sdpa import scaled_dot_product_attention
from attention_core.traces import HeadTrace
from ui import live_temperature as lt

APP = str(Path(__file__).resolve().parents[1] / "app.py")
INDEX = lt.FOLDER / "index.html"
N = 32
TEXT = "The cat sat on the mat because it was tired."


# --------------------------------------------------------------------------- the core as reference


def _inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(N, 16, generator=g) * 2.0  # (L, E) large enough that softmax is far from uniform
    k = torch.randn(N, 16, generator=g) * 2.0  # (S, E)
    v = torch.randn(N, 8, generator=g)  # (S, Ev)
    allowed = torch.rand(N, N, generator=g) > 0.25  # (L, S) about a quarter of the cells blocked
    allowed[5] = False  # query 5 may see no key at all
    allowed[:, 0] = allowed[:, 0] | (torch.arange(N) != 5)  # every other row keeps a key
    return q, k, v, allowed


DISTANCE = (torch.arange(N)[:, None] - torch.arange(N)[None, :]).abs().float()  # (L, S) |i - j|
KINDS = {  # name: (mask, fill, ALiBi bias after masking)
    "bool": ("bool", "-inf", False),
    "-1e9": ("-1e9", "-1e9", False),
    "alibi": ("bool", "-inf", True),
    "alibi -1e9": ("-1e9", "-1e9", True),
    "float mask": ("float", "-inf", False),
}


def _attn_mask(allowed: torch.Tensor, kind: str) -> torch.Tensor:
    if kind == "bool":
        return allowed
    if kind == "-1e9":
        return torch.zeros(allowed.shape).masked_fill(~allowed, -1e9)
    return (-0.37 * DISTANCE).masked_fill(~allowed, float("-inf"))  # a float mask with values of its own


def _core(q, k, v, attn_mask, t: float, bias: torch.Tensor | None = None):
    return scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=1.0 / t, score_bias=bias)


def _head(trace, allowed: torch.Tensor) -> HeadTrace:
    def np32(x):
        return x.detach().numpy().astype(np.float32)

    return HeadTrace(
        q=np.zeros((N, 16), np.float32),
        k=np.zeros((N, 16), np.float32),
        v=np.zeros((N, 8), np.float32),
        scores=np32(trace.scores),
        scaled=np32(trace.scaled),
        masked=np32(trace.masked),
        weights=np32(trace.weights),
        output=np32(trace.output),
        mask=allowed.numpy(),
        scale=trace.scale,
        score_bias=None if trace.score_bias is None else np32(trace.score_bias),
    )


def _js_args(args: dict) -> dict:
    """The payload as JSON for page.evaluate: bytes as base64 (the page turns them into Uint8Array)."""
    return {k: base64.b64encode(v).decode() if isinstance(v, bytes) else v for k, v in args.items()}


TO_BYTES = """(a) => { const out = {...a};
  for (const k of ['scores', 'allowed', 'added', 'bias']) if (typeof a[k] === 'string')
    out[k] = Uint8Array.from(atob(a[k]), c => c.charCodeAt(0));
  return out; }"""


# --------------------------------------------------------------------------- browser


@pytest.fixture(scope="module")
def page(browser):  # tests/conftest.py's Chromium
    pg = browser.new_page(viewport={"width": 900, "height": 900})
    pg.add_init_script(
        "window.__sent = []; window.addEventListener('message', e => "
        "{ if (e.data && e.data.isStreamlitMessage) window.__sent.push(e.data); });"
    )
    pg.goto(INDEX.as_uri())
    pg.wait_for_function("window.liveTemperature !== undefined")
    yield pg
    pg.close()


@pytest.mark.browser
@pytest.mark.parametrize("kind", list(KINDS))
def test_browser_softmax_matches_the_core(page, kind):
    mask_kind, fill, alibi = KINDS[kind]
    q, k, v, allowed = _inputs()
    attn_mask = _attn_mask(allowed, mask_kind)
    bias = -0.5 * DISTANCE if alibi else None  # ALiBi's -slope * |i - j|, added after masking
    served_t = 4.0  # the temperature the server traced at; the browser rescales from its payload
    args = lt.payload(_head(_core(q, k, v, attn_mask, served_t, bias), allowed), fill)
    assert (args["added"] is not None) == (mask_kind == "float")  # the app's masks travel as one byte a cell
    assert (args["bias"] is not None) == alibi
    assert args["temperature"] == pytest.approx(served_t)
    for t in (0.3, 1.0, served_t, 5.7, 40.0):
        got = page.evaluate(f"(a) => LiveTemperature.compute(({TO_BYTES})(a), {t})", _js_args(args))
        ref = _core(q, k, v, attn_mask, t, bias).weights  # (L, S) float32, the core's softmax at scale 1/t
        ref_entropy = row_entropy(ref.double())  # (L,) nats
        weights, entropy = np.array(got["weights"]), np.array(got["entropy"])
        assert np.abs(weights - ref.numpy()).max() < 1e-6, (kind, t)
        assert np.abs(entropy - ref_entropy.numpy()).max() < 1e-6, (kind, t)
        if fill == "-1e9":  # the classic leak: the all-blocked row spreads its weight over hidden keys
            assert weights[5].sum() == pytest.approx(1.0, abs=1e-6)
            if t == 40.0 and not alibi:  # small scores vanish next to -1e9 in float32: exactly uniform
                np.testing.assert_allclose(weights[5], 1.0 / N, atol=1e-7)
        else:  # -inf: it attends to nothing, as the core
            assert not weights[5].any() and entropy[5] == 0.0
        assert not weights[~allowed.numpy() & (np.arange(N) != 5)[:, None]].any()  # blocked keys get 0 (but row 5)


@pytest.mark.browser
def test_browser_drag_draws_and_release_sends_once(page):
    q, k, v, allowed = _inputs(1)
    args = lt.payload(_head(_core(q, k, v, allowed, 4.0), allowed), "-inf")
    args.update(labels=[f"tok{i}" for i in range(N)], query=3, t_min=0.1, t_max=64.0, step=0.1, applied=None)
    page.evaluate("window.__sent.length = 0")
    page.evaluate(
        f"(a) => window.postMessage({{type: 'streamlit:render', args: ({TO_BYTES})(a), theme: {{}}}}, '*')",
        _js_args(args),
    )
    page.wait_for_function("window.liveTemperature.frames > 0")
    assert page.evaluate("window.liveTemperature.t") == pytest.approx(4.0)  # at rest: the server's value
    before = page.evaluate("window.liveTemperature.frames")
    box = page.locator("input.lt-range").bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.6, y)
    page.mouse.down()
    for step in range(12):  # drag towards the low end: sharper rows
        page.mouse.move(box["x"] + box["width"] * (0.6 - 0.04 * step), y)
        page.wait_for_timeout(20)
    drawn = page.evaluate("window.liveTemperature.frames") - before
    sent = page.evaluate("window.__sent.filter(m => m.type === 'streamlit:setComponentValue').length")
    assert drawn >= 3 and sent == 0  # redrawn while moving; nothing leaves the browser
    t_drag = page.evaluate("window.liveTemperature.t")
    assert t_drag < 4.0
    # what the widget drew at the handle's t equals the core at that t
    drawn_weights = np.array(page.evaluate("Array.from(window.liveTemperature.out.weights)")).reshape(N, N)
    ref = _core(q, k, v, allowed, t_drag).weights.numpy()
    assert np.abs(drawn_weights - ref).max() < 1e-6
    page.mouse.up()
    page.wait_for_function("window.__sent.some(m => m.type === 'streamlit:setComponentValue')")
    values = page.evaluate("window.__sent.filter(m => m.type === 'streamlit:setComponentValue')")
    assert len(values) == 1 and values[0]["dataType"] == "json"
    released = values[0]["value"]
    assert released["temperature"] == pytest.approx(t_drag)
    assert lt.released_temperature(released) == pytest.approx(t_drag)  # already on the slider's 0.1 grid
    assert "recomputing" in page.locator(".lt-status").inner_text()
    # the server answers with the new temperature: the preview becomes the server's value
    args.update(temperature=lt.released_temperature(released), applied=released["nonce"])
    page.evaluate(
        f"(a) => window.postMessage({{type: 'streamlit:render', args: ({TO_BYTES})(a), theme: {{}}}}, '*')",
        _js_args(args),
    )
    page.wait_for_function("window.liveTemperature.pending === null")
    assert "server's value" in page.locator(".lt-status").inner_text()
    types = page.evaluate("window.__sent.map(m => m.type)")
    assert "streamlit:setFrameHeight" in types


@pytest.mark.browser
def test_browser_ready_message(page):
    page.evaluate("window.__sent.length = 0")
    page.reload()
    page.wait_for_function("window.__sent.some(m => m.type === 'streamlit:componentReady')")
    ready = page.evaluate("window.__sent.find(m => m.type === 'streamlit:componentReady')")
    assert ready["apiVersion"] == 1


# --------------------------------------------------------------------------- the server side


def test_released_temperature_lands_on_the_slider():
    assert lt.released_temperature({"temperature": 2.3000000000000003, "nonce": 1}) == 2.3
    assert lt.released_temperature(7.04) == 7.0
    assert lt.released_temperature({"temperature": 1e6}) == 64.0  # the sidebar slider's range
    assert lt.released_temperature({"temperature": 0.0}) == 0.1
    for bad in (None, {}, {"temperature": "x"}, {"temperature": float("nan")}, True, [1.0]):
        assert lt.released_temperature(bad) is None


def test_apply_release_sets_the_scaling():
    state: dict = {"scaling": "sqrt_dk", "temperature": 8.0}
    assert lt.apply_release(state, {"temperature": 2.5, "nonce": 3}) == 2.5
    assert state == {"scaling": "custom", "temperature": 2.5, lt.RELEASED: True}
    state = {"scaling": "none"}
    assert lt.apply_release(state, None) is None and state == {"scaling": "none"}


def test_payload_sends_floats_only_for_a_bias():
    q, k, v, allowed = _inputs()
    args = lt.payload(_head(_core(q, k, v, allowed, 2.0), allowed), "-inf")
    assert args["n"] == args["s"] == N and args["added"] is None
    assert len(args["scores"]) == 4 * N * N and len(args["allowed"]) == N * N
    assert np.array_equal(np.frombuffer(args["allowed"], np.uint8).reshape(N, N), allowed.numpy())
    assert json.dumps({k: v for k, v in args.items() if not isinstance(v, bytes)})  # the rest is JSON


@pytest.fixture(scope="module")
def app():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params.update({"text": TEXT, "max_tokens": "16"})
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def _components(at) -> list:
    """The live temperatures in the page: drawn in the page itself (a v2 component), never an iframe."""
    assert not [e for e in at.get("component_instance") if e.proto.component_name.endswith("live_temperature")]
    return [e for e in at.get("bidi_component") if e.proto.component_name.endswith("live_temperature")]


def _sent(element) -> dict:
    return lt.unpack(element.proto.bytes)


@pytest.mark.parametrize("view", ["derivation", "query"])
def test_views_render_the_component_and_follow_a_release(app, view):
    at = app
    at.segmented_control(key="view").set_value(view).run()
    assert not at.exception and not at.error, [e.message for e in at.exception]
    found = _components(at)
    assert len(found) == 1
    sent = _sent(found[0])
    assert sent["n"] == sent["s"] > 0 and sent["fill"] == "-inf" and len(sent["labels"]) == sent["n"]
    assert sent["temperature"] == pytest.approx(32**0.5)  # MiniLM's own 1/sqrt(d_k): t = sqrt(32)
    # What the component's release callback does, then the next run: the whole app at t = 2.5.
    lt.apply_release(at.session_state, {"temperature": 2.5, "nonce": 1.0})
    at.run()
    assert not at.exception and not at.error, [e.message for e in at.exception]
    assert at.session_state["scaling"] == "custom" and at.session_state["temperature"] == 2.5
    assert lt.RELEASED not in at.session_state
    sent = _sent(_components(at)[0])
    assert sent["temperature"] == pytest.approx(2.5)  # the server traced at the released t
    at.session_state["scaling"] = "sqrt_dk"  # back for the next case
    at.run()


# --------------------------------------------------------------------------- in the app's page (no iframe)


def test_pack_puts_every_byte_array_on_a_4_byte_boundary_and_unpacks_to_the_same_arguments():
    q, k, v, allowed = _inputs()
    args = lt.payload(_head(_core(q, k, v, allowed, 2.0, -0.5 * DISTANCE), allowed), "-1e9")
    args.update(labels=["a", "b'c", "ünï"], query=3, applied=None)
    blob = lt.pack(args)
    assert blob[:4] == lt.MAGIC
    back = lt.unpack(blob)
    assert back == args
    header = json.loads(blob[8 : 8 + int.from_bytes(blob[4:8], "little")])
    assert set(header["buffers"]) == {"scores", "allowed", "bias"}  # "added" is None: in the header
    assert all(offset % 4 == 0 for offset, _ in header["buffers"].values())
    with pytest.raises(ValueError):
        lt.unpack(b"nope" + blob[4:])


@pytest.mark.browser
def test_the_browser_unpacks_what_pack_sends(page):
    q, k, v, allowed = _inputs(2)
    args = lt.payload(_head(_core(q, k, v, allowed, 3.0, -0.5 * DISTANCE), allowed), "-inf")
    args.update(labels=[f"t{i}" for i in range(N)], query=1)
    got = page.evaluate(
        """(b64) => { const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
             const a = LiveTemperature.unpack(bytes), p = LiveTemperature.decode(a);
             return {n: a.n, labels: a.labels, query: a.query, fill: p.fill, scores: Array.from(p.scores),
                     allowed: Array.from(p.allowed), bias: Array.from(p.bias), added: p.added}; }""",
        base64.b64encode(lt.pack(args)).decode(),
    )
    assert got["n"] == N and got["labels"] == args["labels"] and got["query"] == 1 and got["fill"] == "-inf"
    np.testing.assert_array_equal(np.array(got["scores"], np.float32), np.frombuffer(args["scores"], np.float32))
    np.testing.assert_array_equal(np.array(got["bias"], np.float32), np.frombuffer(args["bias"], np.float32))
    assert got["allowed"] == list(args["allowed"]) and got["added"] is None


@pytest.mark.browser
def test_in_the_app_it_is_drawn_in_the_page_and_a_release_applies_the_temperature(browser, url):
    """The derivation at 16 tokens: the widget sits in the page (no iframe), drawn in the page's own font; a
    release turns the scaling to "÷ temperature" at that t, and the widget then says it shows the server's value."""
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(f"{url}/?text=The%20cat%20sat%20on%20the%20mat.&max_tokens=16")
    rng = page.locator(".lt-root input.lt-range")
    rng.wait_for(state="attached", timeout=60000)
    page.wait_for_function(
        "() => document.querySelector('.lt-root').__lt && document.querySelector('.lt-root').__lt.frames > 0"
    )
    assert page.locator("iframe").count() == 0  # nothing on the page is an iframe any more
    assert page.evaluate("() => document.querySelector('.lt-root canvas').getBoundingClientRect().width") > 200
    ids = page.evaluate("() => [...document.querySelectorAll('input.lt-range')].map(i => i.id)")
    assert len(ids) == len(set(ids))
    rng.scroll_into_view_if_needed()
    rng.evaluate(
        "(r) => { r.value = '150'; r.dispatchEvent(new Event('input')); r.dispatchEvent(new Event('change')); }"
    )
    t = page.evaluate("() => document.querySelector('.lt-root').__lt.t")
    assert 0.1 <= t < 1.0  # low on the log scale: sharper rows
    page.wait_for_function(
        "() => document.querySelector('.lt-root').__lt.pending === null "
        "&& document.querySelector('.lt-root .lt-status').textContent.includes(\"server's value\")",
        timeout=60000,
    )
    checked = page.locator('[data-testid="stSidebar"] label:has(input[type="radio"]:checked)').all_inner_texts()
    assert any("temperature" in text for text in checked), checked
    assert page.evaluate("() => document.querySelector('.lt-root').__lt.serverT") == pytest.approx(t)
    assert not errors, errors
    page.close()


def test_the_inline_loader_is_small_has_its_route_and_the_shared_base_url():
    from ui import chart

    js = lt.inline_js(lt.FOLDER / "loader.js", {"__LT_SOURCE__": lt.SOURCE})
    assert "__LT_" not in js and f'"{lt.SOURCE}"' in js and "function baseUrl()" in js
    assert js.count("function baseUrl()") == 1 and "function baseUrl()" in chart.loader()  # one definition, shared
    assert len(js.encode()) < 2_500  # sent with every rerun of the view
    assert lt.SOURCE == "component/ui.live_temperature.live_temperature/live_temperature.js"
    assert (lt.FOLDER / "live_temperature.js").is_file()


@pytest.mark.browser
def test_a_widget_whose_view_left_the_page_is_let_go(page):
    """The window's listeners are shared: a widget whose root left the page (its view cleared) is dropped, not kept
    alive with its buffers by a listener of its own."""
    q, k, v, allowed = _inputs(3)
    args = lt.payload(_head(_core(q, k, v, allowed, 2.0), allowed), "-inf")
    before = page.evaluate("LiveTemperature.widgets()")
    count = page.evaluate(
        """(b64) => { const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
             const roots = [0, 1, 2].map(() => document.body.appendChild(document.createElement('div')));
             roots.forEach(r => LiveTemperature.mount(r, bytes, () => {}));
             const shown = LiveTemperature.widgets();
             roots.forEach(r => r.remove());
             return [shown, LiveTemperature.widgets()]; }""",
        base64.b64encode(lt.pack(args)).decode(),
    )
    assert count == [before + 3, before]


@pytest.mark.browser
def test_a_rerun_with_the_same_bytes_draws_nothing_and_new_bytes_draw(page):
    """A rerun that hands the widget the bytes it already shows (the view was drawn again around it) leaves it as it
    is: no reading of the page's theme or width, no redraw. Other bytes (another head, a release applied) draw."""
    q, k, v, allowed = _inputs(4)
    first = lt.payload(_head(_core(q, k, v, allowed, 2.0), allowed), "-inf")
    first.update(labels=[f"t{i}" for i in range(N)], query=1)
    other = dict(first, query=2)
    updates = page.evaluate(
        """([a, b]) => { const bytes = s => Uint8Array.from(atob(s), c => c.charCodeAt(0));
             const root = document.body.appendChild(document.createElement('div'));
             let updates = 0;
             const widget = LiveTemperature.mount(root, bytes(a), () => {});
             const plain = widget.update;
             widget.update = function (...args) { updates++; return plain.apply(this, args); };
             const seen = [];
             LiveTemperature.mount(root, bytes(a), () => {}); seen.push(updates);  // same bytes, a new buffer
             LiveTemperature.mount(root, bytes(b), () => {}); seen.push(updates);  // another query
             LiveTemperature.mount(root, bytes(b), () => {}); seen.push(updates);
             LiveTemperature.mount(root, bytes(a), () => {}); seen.push(updates);
             seen.push(widget.q);
             root.remove();
             return seen; }""",
        [base64.b64encode(lt.pack(first)).decode(), base64.b64encode(lt.pack(other)).decode()],
    )
    assert updates == [0, 1, 1, 2, 1], updates


@pytest.mark.browser
def test_a_query_shown_at_once_is_not_drawn_again_when_the_server_s_bytes_for_it_come(page):
    """The Query inspector's box shows a pick in the widget at once (``show``, called by follow.js before the
    server's rerun). The rerun's bytes then differ from the last ones in their query alone, which is on screen: no
    update, no redraw, the server's query noted. Bytes whose query is not the one shown, or whose numbers differ,
    are drawn as before (a query of two digits moves the arrays, which must still compare equal)."""
    q, k, v, allowed = _inputs(5)
    first = lt.payload(_head(_core(q, k, v, allowed, 2.0), allowed), "-inf")
    first.update(labels=[f"t{i}" for i in range(N)], query=1)
    warmer = lt.payload(_head(_core(q, k, v, allowed, 3.0), allowed), "-inf")  # other numbers
    warmer.update(labels=first["labels"], query=12)
    packed = [lt.pack(dict(first, query=query)) for query in (1, 2, 12, 3)] + [lt.pack(warmer)]
    seen = page.evaluate(
        """(blobs) => { const [at1, at2, at12, at3, warmer12] = blobs.map(s => Uint8Array.from(atob(s), c => c.charCodeAt(0)));
             const root = document.body.appendChild(document.createElement('div'));
             let updates = 0;
             const widget = LiveTemperature.mount(root, at1, () => {});
             const plain = widget.update;
             widget.update = function (...args) { updates++; return plain.apply(this, args); };
             const seen = [];
             const note = () => seen.push([updates, widget.frames, widget.q, widget.serverQuery]);
             note();
             widget.show(2); note();                           // the box's pick: drawn at once
             LiveTemperature.mount(root, at2, () => {}); note();   // the server's bytes for it: nothing drawn
             widget.show(12); note();
             LiveTemperature.mount(root, at12, () => {}); note();  // "12": a longer header, the same arrays
             LiveTemperature.mount(root, at3, () => {}); note();   // a query not shown: drawn
             widget.show(12); note();
             LiveTemperature.mount(root, warmer12, () => {}); note();  // the query shown, other numbers: drawn
             root.remove();
             return seen; }""",
        [base64.b64encode(blob).decode() for blob in packed],
    )
    frames = seen[0][1]
    assert seen == [
        [0, frames, 1, 1],
        [0, frames + 1, 2, 1],
        [0, frames + 1, 2, 2],
        [0, frames + 2, 12, 2],
        [0, frames + 2, 12, 12],
        [1, frames + 3, 3, 3],
        [1, frames + 4, 12, 3],
        [2, frames + 5, 12, 12],
    ], seen
