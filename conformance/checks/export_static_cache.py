"""Check `export_static_cache`: the seed's wrapper with a StaticCache exports with strict=True.

Contract: a freshly built model is wrapped the way the seed pull request does
it (`StaticCacheModule`): the wrapper holds a StaticCache (initialized up
front, its tensors registered as buffers) and a causal-mask buffer; its
forward takes the sample's tensors plus ``cache_position``, passes the model
the causal mask rows of those positions (with the sample's left padding
masked) and the static cache, and returns the logits. The wrapper exports with
``torch.export.export(strict=True)``; after ``torch.export.save`` / ``load``
the program, called twice, gives the same logits both times and matches a
plain forward of a fresh instance of the model over the same sample (its own
default cache and 2D mask), on every non-padding position, within the export
tolerance. Each call writes the cache from ``cache_position[0]``, so a second
prefill overwrites the first instead of continuing it.

Not applicable: the model takes no cache anywhere; encoder-decoder models
(the seed's wrapper holds one decoder-only cache and a causal mask over the
prompt). Metrics: `max_abs_diff`, `repeat_diff`, `export_seconds`,
`pt2_bytes`, `max_cache_len`, `compared_positions`.

The seed builds its mask with ``torch.triu(full(min))``, which also masks the
diagonal; here the diagonal is visible (``triu(diagonal=1)``), as a causal
mask must be.
"""

from __future__ import annotations

import inspect
import time
from typing import Any

import torch

from conformance.build.case import Case
from conformance.build.configs import text_config
from conformance.checks.common import export as _export
from conformance.checks.common.cache import cache_kwarg, cache_owner, static_cache
from conformance.checks.common.compare import assert_close, logits_of
from conformance.checks.common.outcome import ContractViolation, NotApplicable
from conformance.checks.common.registry import check

SPARE_SLOTS = 2  # empty cache slots after the prompt: the mask must hide them


def head_shapes(config) -> tuple[Any, Any]:
    """(kv heads, head dim) per the installed transformers, else from the usual config fields."""
    try:
        from transformers.configuration_utils import get_head_shapes

        return get_head_shapes(config)
    except (ImportError, AttributeError):
        heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        return heads, head_dim


class StaticCacheModule(torch.nn.Module):
    """The seed's TorchExportableModuleWithStaticCacheForVLM, for any cache-taking model."""

    def __init__(self, model: torch.nn.Module, cache_name: str, constants: dict[str, Any], batch: int, max_len: int):
        super().__init__()
        self.model = model
        self.cache_name = cache_name
        self.constants = constants
        self.cache = static_cache(model, max_len, batch)
        if hasattr(self.cache, "early_initialization"):  # lazy layers cannot be exported
            heads, head_dim = head_shapes(text_config(model.config))
            self.cache.early_initialization(batch, heads, head_dim, model.dtype, model.device)
        for i, layer in enumerate(getattr(self.cache, "layers", [])):
            for name in ("keys", "values", "cumulative_length"):
                value = getattr(layer, name, None)
                if isinstance(value, torch.Tensor):
                    self.register_buffer(f"cache_{name}_{i}", value, persistent=False)
        lowest = torch.finfo(model.dtype).min
        causal = torch.full((batch, 1, max_len, max_len), lowest, dtype=model.dtype, device=model.device).triu(1)
        self.register_buffer("causal_mask", causal, persistent=False)
        self.max_len = max_len
        self.takes_cache_position = "cache_position" in inspect.signature(model.forward).parameters

    def forward(self, cache_position: torch.Tensor, attention_mask: torch.Tensor, **tensors: Any) -> torch.Tensor:
        for layer in getattr(self.cache, "layers", []):
            length = getattr(layer, "cumulative_length", None)
            if isinstance(length, torch.Tensor):
                length.copy_(cache_position[0])  # write from the first position on every call
        padding = torch.nn.functional.pad(attention_mask, (0, self.max_len - attention_mask.shape[1]), value=1) == 0
        mask = self.causal_mask[:, :, cache_position, :].masked_fill(padding[:, None, None, :],
                                                                     torch.finfo(self.causal_mask.dtype).min)
        kwargs = dict(tensors, **self.constants)
        kwargs.update({"attention_mask": mask, self.cache_name: self.cache, "use_cache": True})
        if self.takes_cache_position:
            kwargs["cache_position"] = cache_position
        return logits_of(self.model(**kwargs))


@check("export_static_cache", column=80)
def check_export_static_cache(case: Case) -> dict:
    inputs = case.inputs()
    if "decoder_input_ids" in inputs:
        raise NotApplicable("encoder-decoder model: the seed's wrapper holds one decoder-only StaticCache "
                            "and a causal mask over the prompt")
    if "input_ids" not in inputs:
        raise NotApplicable("the sample has no input_ids for the wrapper's prompt")
    model = case.fresh_model().eval()
    owner, _ = cache_owner(model)
    cache_name = cache_kwarg(owner)
    if not _export.accepts(model, cache_name):
        raise NotApplicable(f"the model's forward takes no `{cache_name}` to pass a StaticCache through")

    tensors, constants = _export.split_inputs(inputs)
    ids = tensors["input_ids"]
    mask2d = tensors.pop("attention_mask", None)
    if mask2d is None:
        mask2d = torch.ones_like(ids)
    batch, length = ids.shape
    metrics: dict = {"max_cache_len": length + SPARE_SLOTS}
    wrapper = StaticCacheModule(model, cache_name, constants, batch, length + SPARE_SLOTS)
    program_inputs = dict(tensors, cache_position=torch.arange(length, device=ids.device), attention_mask=mask2d)
    started = time.perf_counter()
    program = _export.export(wrapper, program_inputs, True, metrics)
    metrics["export_seconds"] = round(time.perf_counter() - started, 3)
    del wrapper, model
    loaded = _export.save_and_load(program, metrics)
    first, second = _export.run_twice(loaded, program_inputs, metrics)

    reference_model = case.fresh_model().eval()
    with torch.no_grad():
        expected = logits_of(reference_model(**inputs))
    keep = mask2d.bool()
    metrics["compared_positions"] = int(keep.sum())
    if first.shape != expected.shape:
        raise ContractViolation(f"logits shape {tuple(first.shape)} != plain forward {tuple(expected.shape)}", metrics)
    repeat = float((first.float() - second.float()).abs().max()) if first.numel() else 0.0
    metrics["repeat_diff"] = repeat
    tol = case.tol("export")
    assert_close(first[keep], expected[keep], tol, "loaded program (first call) vs plain forward", metrics)
    if not repeat <= tol:
        raise ContractViolation(f"the loaded program's second call differs from its first by {repeat:.3g} > {tol:g}"
                                " (the static cache is not rewritten from cache_position)", metrics)
    assert_close(second[keep], expected[keep], tol, "loaded program (second call) vs plain forward", metrics)
    return metrics
