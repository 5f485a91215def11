"""The app's path to a trace validates the request as the command line does (``pipeline.run_trace``)."""

from __future__ import annotations

from types import SimpleNamespace

from attention_core.request import TraceRequest, validate


def test_trace_for_validates_like_the_cli(monkeypatch):
    from ui import compute

    seen = {}

    def build_trace(request, facts, cap, notices, *, with_replay):
        seen.update(request=request, notices=notices)
        return SimpleNamespace(head=0, core=SimpleNamespace(num_heads=1))

    monkeypatch.setattr(compute, "load_model", lambda name: SimpleNamespace(facts=None))
    monkeypatch.setattr(compute, "capture", lambda *args: None)
    monkeypatch.setattr(compute.pipeline, "build_trace", build_trace)
    monkeypatch.setattr(compute, "store", lambda: SimpleNamespace(get=lambda key, build, size: build()))
    bad = TraceRequest(text="x" * 30_000, layer=-4, temperature=0.0, mask="nope")
    compute.trace_for(bad, notices=("from the link",))
    fixed, said = validate(bad)
    assert seen["request"] == fixed and len(fixed.text) < len(bad.text) and fixed.mask == "model"
    assert seen["notices"] == ("from the link", *said) and len(said) == 4
