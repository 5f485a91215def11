"""The sum check of ``contributions`` at matching precision: on a float64 copy of the model.

The check says that the per-head parts plus b^O add up to what the model's own output projection returned.
In float32 that is blurred by rounding: SmolLM2's attention outputs reach about 180, where float32's spacing
is 1.5e-5, and its output projection adds 576 products per number, so the float32 sum and the float32 model
differ by 5e-5..9e-5 from rounding alone, above the 1e-5 tolerance. As ``kvcache_checks`` does for the key/value
cache, the check therefore runs on a float64 copy of the model (``kvcache_checks.float64_copy``) fed the same
tokens: its own weights alpha, values v, W^O and b^O, all float64, taken apart by ``contributions.contributions``
and summed, against what its own output projection returned (a forward hook):

    max_ij | sum_h sum_j alpha[h, i, j] v[g(h), j] W^O_h + b^O  -  o_proj(concat_h o_h)[i] |    # float64

What remains is float64 rounding (about 1e-13). Llama's eager softmax runs in float32 on purpose even in a
float64 model, but the model multiplies its values by the very weights it returns, so that does not enter
the check. A wrong head order, a missing b^O or a wrong key/value head misses by a sizeable part of the output.

One layer at a time: a layer's weights, values and output are checked as soon as all three are seen and then
dropped, so the run never holds every layer's float64 weights (the model returns them only to the hooks:
no ``output_attentions``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from .contributions import LayerContributions, contributions
from .multihead import split_heads


@dataclass(frozen=True)
class Float64Layer:
    """One layer of the float64 copy on one text (CPU float64, batch removed)."""

    layer: int
    weights: torch.Tensor  # (H, L, S)    alpha, the weights its attention returned (and used)
    v: torch.Tensor  # (Hkv, S, Ev)       its values
    w_o: torch.Tensor  # (H*Ev, D)        its output projection, as x @ W^O
    b_o: torch.Tensor | None  # (D,)      b^O
    output: torch.Tensor  # (L, D)        what its output projection returned: the attention output

    def parts(self) -> LayerContributions:
        """``contributions`` of this layer, its sum check against ``output`` (all float64)."""
        return contributions(self.weights, self.v, self.w_o, self.b_o, model_output=self.output, layer=self.layer)


def _tensor(site, key: str, output) -> torch.Tensor:
    """What a hooked module returned, as this layer's values, weights or attention output (float64, CPU, batch
    1 dropped)."""
    if key == "weights":  # the attention module returns (output, weights)
        tensor = output[1] if isinstance(output, tuple) and len(output) > 1 else None
    else:
        tensor = output[0] if isinstance(output, tuple) else output
    if not isinstance(tensor, torch.Tensor):
        raise ValueError(f"layer {site.layer}: no {key} came out of the model's modules (is it eager attention?)")
    tensor = tensor.detach()[0].to("cpu", torch.float64, copy=True)
    if key == "v" and site.fused is not None:  # GPT-2's c_attn: (S, H*E + 2*Hkv*E), values last
        tensor = tensor[:, tensor.shape[1] - site.num_kv_heads * site.head_dim :]  # (S, Hkv*Ev)
    return tensor


def _layer_hooks(site, visit: Callable[[Float64Layer], None]) -> list[tuple]:
    """(module, forward hook) for one layer: each records its tensor; the last of the three hands the layer on."""
    from .pretrained.families import projection_weights

    if site.w_out is None:
        raise ValueError(f"layer {site.layer}: its output projection was not found")
    projection = projection_weights(site, torch.float64)  # W^O (H*Ev, D), b^O (D,)
    found: dict[str, torch.Tensor] = {}

    def hook(key: str, module, args, output) -> None:
        found[key] = _tensor(site, key, output)
        if len(found) < 3:
            return
        visit(
            Float64Layer(
                layer=site.layer,
                weights=found.pop("weights"),  # (H, L, S)
                v=split_heads(found.pop("v"), site.num_kv_heads),  # (S, Hkv*Ev) -> (Hkv, S, Ev)
                w_o=projection.w_o,
                b_o=projection.b_o,
                output=found.pop("output"),  # (L, D)
            )
        )

    values = site.fused if site.fused is not None else site.v
    return [
        (values, partial(hook, "v")),  # BERT, Llama: v before the weights; o_proj's output before or after them
        (site.attention, partial(hook, "weights")),
        (site.w_out, partial(hook, "output")),
    ]


def visit_float64_layers(wide, tokens, layers, visit: Callable[[Float64Layer], None]) -> None:
    """Run ``wide`` (a float64 ``LoadedModel`` copy) on ``tokens`` (batch 1), handing each layer in ``layers``
    to ``visit`` as a ``Float64Layer`` once it is complete; nothing is kept after ``visit`` returns."""
    wanted = set(range(len(wide.sites)) if layers is None else layers)
    runner = wide.runner
    kwargs = {"use_cache": False} if "use_cache" in inspect.signature(runner.forward).parameters else {}
    with wide.lock, torch.no_grad():  # hooks live on the copy's modules: one run at a time
        handles = []
        try:
            for site in wide.sites:
                if site.layer in wanted:
                    handles += [m.register_forward_hook(h) for m, h in _layer_hooks(site, visit)]
            runner(input_ids=tokens.ids.to(wide.device), attention_mask=tokens.attention_mask.to(wide.device), **kwargs)
        finally:
            for handle in handles:
                handle.remove()


def float64_layer(wide, tokens, layer: int) -> Float64Layer:
    """One layer of the float64 copy on ``tokens`` (for a closer look, e.g. a test slipping a mistake in)."""
    seen: list[Float64Layer] = []
    visit_float64_layers(wide, tokens, (layer,), seen.append)
    if not seen:
        raise ValueError(f"layer {layer}: its values, weights or output were not seen by the hooks")
    return seen[0]


def sum_check_float64(wide, tokens, layers=None) -> dict[int, float]:
    """{layer: max |sum_h head output + b^O - the attention output|} on the float64 copy ``wide``
    (every layer when ``layers`` is None): the check of the module docstring, one forward pass."""
    diffs: dict[int, float] = {}

    def visit(found: Float64Layer) -> None:
        diffs[found.layer] = found.parts().sum_check_max_abs_diff

    visit_float64_layers(wide, tokens, layers, visit)
    wanted = range(len(wide.sites)) if layers is None else layers
    missing = [i for i in wanted if i not in diffs]
    if missing:
        raise ValueError(f"layers {missing}: their values, weights or output were not seen by the hooks")
    return dict(sorted(diffs.items()))
