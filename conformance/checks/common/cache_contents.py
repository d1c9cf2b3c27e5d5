"""What two caches hold: the keys and values of a static and a dynamic cache for the same positions.

Tiny random models have flat logits: a static cache that stores values wrong
by 0.1% in one layer can move the scores by less than the logits tolerance.
The contents cannot hide it.

Contract: `CacheContents(model)` hooks the model (and its generating
sub-models) and keeps, after each outermost forward that got a `Cache`, a
copy of every attention layer's keys and values (self-attention, and the
cross-attention of an encoder-decoder cache): one entry per forward, the
prefill first. `.remove()` takes the hooks off.

`compare_contents((static, dynamic), inputs, agreeing, tol, metrics)`
compares, for each forward up to and including `agreeing` (the first step
where the generated tokens differ: forwards after it consumed different
tokens), every layer the dynamic cache holds with the same layer of the
static cache over the positions the dynamic cache filled: the non-padding
positions of the prompt (the inputs' `attention_mask`) and every generated
one (an encoder-decoder's decoder: every position unless the inputs carry a
`decoder_attention_mask`, as generate starts each row from one start token;
cross-attention: every encoder position). It records
`cache_max_abs_diff`, `cache_worst_ratio`, `cache_atol`, `cache_rtol` and
`cache_compared` (layer comparisons made), and `cache_not_compared` (why,
per kind of layer or for the whole cache, where positions cannot be paired:
a sliding-window layer, which keeps only its window; a layer without key and
value tensors, such as linear attention's state; a prompt whose mask does not
cover the cache's positions, one position a step). Contents beyond `tol` raise ContractViolation
naming the forward, the layer and whether keys or values differ.
"""

from __future__ import annotations

import torch

from conformance.checks.common.compare import closeness, record
from conformance.checks.common.outcome import ContractViolation
from conformance.tolerances import Tolerance

Held = list[dict[str, tuple[str, torch.Tensor, torch.Tensor]]]  # per forward: layer -> (type, keys, values)


def _layers(cache) -> dict[str, tuple[str, torch.Tensor | None, torch.Tensor | None]]:
    found = {}
    decoder = hasattr(cache, "cross_attention_cache")  # an encoder-decoder cache: the decoder's own positions
    parts = (("decoder self-attention" if decoder else "self-attention", getattr(cache, "self_attention_cache", cache)),
             ("cross-attention", getattr(cache, "cross_attention_cache", None)))
    for part, sub in parts:
        for index, layer in enumerate(getattr(sub, "layers", None) or []):
            keys, values = getattr(layer, "keys", None), getattr(layer, "values", None)
            usable = all(isinstance(t, torch.Tensor) and t.dim() == 4 and t.numel() for t in (keys, values))
            found[f"{part} layer {index}"] = (type(layer).__name__, keys.detach().clone() if usable else None,
                                              values.detach().clone() if usable else None)
    return found


class CacheContents:
    """A copy of a cache's layers after each outermost forward of a model (see the module)."""

    def __init__(self, model: torch.nn.Module):
        from transformers import GenerationMixin
        from transformers.cache_utils import Cache

        self.held: Held = []
        self._depth = 0
        modules = [model] + [m for m in model.modules() if m is not model and isinstance(m, GenerationMixin)]

        def enter(_module, _args, _kwargs):
            self._depth += 1

        def leave(_module, _args, kwargs, output):
            self._depth -= 1
            if self._depth:
                return
            cache = next((v for v in kwargs.values() if isinstance(v, Cache)), None)
            cache = cache if cache is not None else getattr(output, "past_key_values", None)
            if isinstance(cache, Cache):
                self.held.append(_layers(cache))

        self.handles = [m.register_forward_pre_hook(enter, with_kwargs=True) for m in modules]
        self.handles += [m.register_forward_hook(leave, with_kwargs=True) for m in modules]

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def _positions(inputs: dict, filled: int, forward: int) -> torch.Tensor | None:
    """Per row, which of the first `filled` cache positions hold a real token after forward `forward` (the
    prompt, then one token a step; None: the cache's positions are not the prompt's)."""
    mask = inputs.get("attention_mask")
    if not isinstance(mask, torch.Tensor) or mask.dim() != 2:
        return None
    prompt = mask.shape[1]
    if filled != prompt + forward:
        return None
    generated = torch.ones(mask.shape[0], filled - prompt, dtype=torch.bool, device=mask.device)
    return torch.cat([mask.bool(), generated], dim=1)


def _why_not(kind: str, static_kind: str, keys, static_keys, filled: int) -> str:
    if "Sliding" in kind or "Sliding" in static_kind:
        return f"{kind if 'Sliding' in kind else static_kind}: a sliding window keeps only its last positions"
    if keys is None or static_keys is None:
        return f"{kind if keys is None else static_kind}: no key and value tensors"
    if static_keys.shape[-2] < filled or static_keys.shape[:2] != keys.shape[:2]:
        return f"{static_kind}: holds {tuple(static_keys.shape)} for the dynamic cache's {tuple(keys.shape)}"
    return ""


def compare_contents(held: tuple[CacheContents, CacheContents], inputs: dict, agreeing: int, tol: Tolerance,
                     metrics: dict) -> None:
    """Static vs dynamic cache contents over the forwards whose tokens agree (see the module)."""
    static, dynamic = held[0].held, held[1].held
    skipped: set[str] = set()
    compared = 0
    inner: dict = {}
    for forward in range(min(len(static), len(dynamic), agreeing + 1)):
        what = "prefill" if forward == 0 else f"decode step {forward}"
        for name, (kind, keys, values) in dynamic[forward].items():
            if name not in static[forward]:
                skipped.add(f"{kind}: no such layer in the static cache")
                continue
            static_kind, static_keys, static_values = static[forward][name]
            filled = keys.shape[-2] if keys is not None else 0
            why = _why_not(kind, static_kind, keys, static_keys, filled)
            if why:
                skipped.add(why)
                continue
            keep = None
            if name.startswith("self-attention"):
                keep = _positions(inputs, filled, forward)
            elif name.startswith("decoder self-attention") and "decoder_attention_mask" in inputs:
                keep = _positions({"attention_mask": inputs["decoder_attention_mask"]}, filled, forward)
                if keep is None:
                    skipped.add("the prompt's attention_mask does not cover the cache's positions")
                    continue
            for label, ours, theirs in (("keys", static_keys[:, :, :filled], keys),
                                        ("values", static_values[:, :, :filled], values)):
                if keep is not None:  # (batch, heads, positions, dim) -> the real positions of each row
                    ours, theirs = ours.transpose(1, 2)[keep], theirs.transpose(1, 2)[keep]
                found = closeness(ours, theirs, tol)
                record(inner, found, tol)
                compared += 1
                if not found.within:
                    _publish(metrics, inner, compared, skipped)
                    raise ContractViolation(
                        f"after the {what}, the static cache's {label} of {name} differ from the dynamic cache's "
                        f"by {found.beyond()} while the scores agree", metrics)
    _publish(metrics, inner, compared, skipped)


def _publish(metrics: dict, inner: dict, compared: int, skipped: set[str]) -> None:
    metrics["cache_compared"] = compared
    if inner:
        metrics["cache_max_abs_diff"] = inner["max_abs_diff"]
        metrics["cache_worst_ratio"] = inner["worst_ratio"]
        metrics["cache_atol"], metrics["cache_rtol"] = inner["atol"], inner["rtol"]
    if skipped:
        metrics["cache_not_compared"] = "; ".join(sorted(skipped))
