"""What the shared store counts for a capture and a trace (bytes they own), and giving freed memory back.

Pure Python and numpy (no Streamlit): ``ui.compute`` hands these to ``ui.store``.
"""

from __future__ import annotations


def _nbytes(*arrays) -> int:
    return sum(int(a.nbytes) for a in arrays if a is not None)


def capture_bytes(cap) -> int:
    layers = [layer for layer in cap.layers]
    owned = [cap.stacked if cap.stacked is not None else cap.attentions]  # packed: its triangles' bytes
    for layer in layers:
        owned += [layer.hidden_in, layer.q, layer.k, layer.v, layer.attn_output]
    return _nbytes(*owned)


def trace_bytes(trace) -> int:
    """What a trace owns (the model's weights and ``model_attentions`` are views of the capture's buffer)."""
    core = trace.core  # score_bias: ALiBi only (H, L, S), else None
    own = [core.scores, core.scaled, core.masked, core.score_bias, core.weights, core.q, core.k, core.v, core.output]
    own.append(core.x)
    if trace.model is not None:
        own += [trace.model.q, trace.model.k, trace.model.v]  # repeated key/value heads are copies
    return _nbytes(*own)


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number
MMAP_THRESHOLD_BYTES = 128 * 1024


def return_freed_memory() -> bool:
    """Ask glibc to serve every allocation above 128 kB with its own mapping, returned to the system when
    freed. By default glibc raises that threshold after large frees (up to 32 MB), and the big arrays of
    evicted traces then stay in the heap: the server's RSS keeps what the cache let go. True when set."""
    try:
        import ctypes

        return bool(ctypes.CDLL("libc.so.6").mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
    except (OSError, AttributeError):  # not glibc (macOS, musl): nothing to do
        return False


def trim_heap() -> bool:
    """Hand the free pages of every malloc arena back to the system (glibc's ``malloc_trim(0)``): many
    sessions' runs leave the heaps of their threads holding freed small objects (figures, messages) that the
    mapping threshold above does not cover. True when it returned memory; False elsewhere or when none."""
    try:
        import ctypes

        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):
        return False
