"""Attention Lens benchmarks: one command writes benchmarks/REPORT.md with tables and plots.

    .venv/bin/python -m benchmarks            # or: make bench
    .venv/bin/python -m benchmarks --smoke --out /tmp/bench   # tiny and fast (the test suite runs this)

One module per section (each has ``run(cfg) -> SectionResult``):

1. ``core_sdpa``        the from-scratch core vs torch SDPA (math, default) vs transformers' eager: time, peak memory
2. ``models``           capture + replay vs the model's own forward with attentions (MiniLM, SmolLM2)
3. ``app_speed``        app rerun time per control change (AppTest); figure JSON size and encode time
4. ``browser_latency``  headless chromium: control change until the chart updates; JS heap
5. ``peer``             bertviz head_view / model_view vs the app's equivalent views: HTML size, browser time
6. ``limit``            achieved GFLOP/s of the core vs plain matmuls

Quick tables without the report, one module each: ``python -m benchmarks.core_sdpa`` (any device, causal or
not), ``python -m benchmarks.models`` (capture + replay vs forward), ``python -m benchmarks.training_lab`` (the
training lab's run time, attention vs RNN/GRU). Every compute timing goes through ``common.interleaved``.

Helpers: ``common`` (config, interleaved timing, tables, machine facts), ``memory`` (kernel-counted peak
memory in a child process), ``jslibs`` (bertviz's JavaScript from npm, served through page.route),
``plots`` (plotly figures -> PNG), ``report`` (REPORT.md and results/*.json).

This package is a composition root: it may import attention_core, viz, ui (plain modules such as
ui.training_verdict, and the app through AppTest) and tests/browser.py's helpers; nothing in the app imports it.
"""
