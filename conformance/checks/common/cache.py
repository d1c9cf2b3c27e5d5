"""Cache plumbing shared by the cache, decode and export checks.

Contract: `cache_owner(model)` is the module whose forward takes the cache
(the model, or its ``language_model``; NotApplicable when neither does);
`cache_kwarg(model)` is the name under which the installed
transformers takes a cache in `forward` (``cache`` in newer 5.x, where
``past_key_values`` is a deprecated alias; ``past_key_values`` before);
`static_cache(model, max_len)` builds the StaticCache `generate` would build
for `cache_implementation="static"` (decoder text config), across the
StaticCache signatures of 4.57 and 5.x; `full_static_layers(cache, max_len)`
makes every sliding-window layer whose window holds `max_len` tokens a plain
StaticLayer (what an exported program needs: the sliding layer keeps its
write position in a Python int, which export bakes into the program);
`generate_inputs` is a forward
sample as generate takes it; `greedy(new_tokens)` is the
generate kwargs of a deterministic run of exactly `new_tokens` tokens
(EOS cannot stop it early; generate's own auto-compile is off, so a cache
check never silently becomes a compile check).
"""

from __future__ import annotations

import inspect

import torch

from conformance.cases.configs import text_config
from conformance.checks.common.outcome import NotApplicable


def _forward_params(model: torch.nn.Module) -> set[str]:
    """Parameter names of the first `forward` in the class hierarchy that names any (a wrapper's
    ``forward(*args, **kwargs)`` says nothing; the forward it wraps does)."""
    for cls in type(model).__mro__:
        forward = cls.__dict__.get("forward")
        if forward is None:
            continue
        params = {name for name, p in inspect.signature(forward).parameters.items()
                  if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)} - {"self"}
        if params:
            return params
    return set()


def cache_kwarg(model: torch.nn.Module) -> str:
    params = _forward_params(model)
    if "cache" in params:
        return "cache"
    return "past_key_values"


def static_cache(model: torch.nn.Module, max_len: int, batch_size: int = 2):
    """The StaticCache generate would make for this model (not yet initialized where lazy)."""
    from transformers.cache_utils import StaticCache

    params = inspect.signature(StaticCache.__init__).parameters
    kwargs = {"config": text_config(model.config), "max_cache_len": max_len}
    # 4.57's StaticCache takes batch/device/dtype up front; 5.x initializes lazily.
    if "max_batch_size" in params:
        kwargs["max_batch_size"] = batch_size
    if "batch_size" in params:
        kwargs["batch_size"] = batch_size
    if "device" in params:
        kwargs["device"] = model.device
    if "dtype" in params:
        kwargs["dtype"] = model.dtype
    return StaticCache(**kwargs)


def full_static_layers(cache, max_len: int):
    """`cache` with each sliding-window layer that holds the whole generation replaced by a full StaticLayer."""
    from transformers.cache_utils import StaticLayer, StaticSlidingWindowLayer

    for i, layer in enumerate(getattr(cache, "layers", [])):
        if isinstance(layer, StaticSlidingWindowLayer) and layer.max_cache_len >= max_len:
            cache.layers[i] = StaticLayer(max_len)
    return cache


def has_kv_cache(model: torch.nn.Module) -> bool:
    """Whether the model's forward takes a cache at all."""
    params = _forward_params(model)
    return "cache" in params or "past_key_values" in params


def greedy(new_tokens: int) -> dict:
    """generate kwargs: greedy, exactly `new_tokens` new tokens, no auto-compile."""
    return {"do_sample": False, "num_beams": 1, "max_new_tokens": new_tokens, "min_new_tokens": new_tokens,
            "disable_compile": True}


def generate_inputs(model: torch.nn.Module, inputs: dict) -> dict:
    """A forward sample as generate takes it: decoder-side inputs only where the language model is
    encoder-decoder (generate rejects `decoder_input_ids` a decoder-only forward merely ignores)."""
    encoder_decoder = getattr(model.config, "is_encoder_decoder", False) or getattr(
        text_config(model.config), "is_encoder_decoder", False)
    if encoder_decoder:
        return inputs
    return {k: v for k, v in inputs.items() if not k.startswith("decoder_")}


def cache_owner(model: torch.nn.Module) -> tuple[torch.nn.Module, str]:
    """The module whose forward takes the cache: the model, or its language model."""
    if has_kv_cache(model):
        return model, "model"
    language_model = getattr(model, "language_model", None)
    if isinstance(language_model, torch.nn.Module) and has_kv_cache(language_model):
        return language_model, "language_model"
    raise NotApplicable("the model's forward takes no cache, and it has no language_model that does")
