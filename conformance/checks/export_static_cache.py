"""Check `export_static_cache`: prefill and decode through exported static-cache programs (strict=True).

The seed pull request's pattern (`TorchExportableModuleWithStaticCacheForVLM`),
kept recognisable: a wrapper (`StaticCacheModule`) holds a StaticCache,
initialized up front, whose tensors are the wrapper's buffers; its forward
takes the sample's tensors plus ``cache_position``, runs the model over the
cache and returns the logits; it is exported with
``torch.export.export(strict=True)`` and round-tripped through
``torch.export.save`` / ``load``. Nobody stops at one prefill, so here the
programs decode:

* two programs from two instances of the wrapper over fresh models: the
  ``prefill`` (the multimodal prompt, ``cache_position = arange(L)``) and the
  ``decode`` step (one token, ``cache_position = [p]``). The cache lives in
  the programs: the model's own in-place updates of the buffers. Each call
  first copies ``cache_position[0]`` into every layer's write counter
  (StaticLayer's ``cumulative_length``, a registered buffer), so the
  position is an input, never program state; sliding-window layers whose
  window holds the whole generation are plain StaticLayers
  (`full_static_layers`: their Python-int counter would be baked).
* The runner calls ``prefill`` once, hands its cache buffers to ``decode``
  (two loaded programs share no memory: one ``copy_`` per buffer, what an
  ExecuTorch runner does with shared mutable buffers), then calls ``decode``
  `DECODE_STEPS` times with ``cache_position`` advancing, feeding the tokens
  eager greedy ``generate`` chose. After every call, the cache slots the
  call wrote (any layer's keys buffer changed there) must be slots of its
  ``cache_position`` (all of it for a decode step; a prefill may rewrite a
  slot with equal values): a program that writes no slot, or other slots,
  cannot carry its cache across calls and fails with that reason.
* Then a second, different prompt (other media values, another last token)
  goes through the same two programs and is checked the same way.

What is compared to what, per prompt, within the export tolerance: the
prefill program's logits at every non-padding position against a plain
eager forward of a fresh model without cache over the same sample; at the
prefill's last position and at every decode step, the program's logits
against eager ``generate`` (dynamic cache, same tokens) at that step, and
against one eager forward without cache over the prompt and the same
tokens (compile_decode's `no_cache_inputs`).

The mask: the seed passes causal rows of a 4D mask buffer. That mask drops
what the model would add to its own (token_type_ids, bidirectional image
blocks: PaliGemma, Gemma3 differ from eager by 0.1 to 0.4 with it), so the
wrapper passes the model a 2D mask over all cache slots (the prompt's
padding, then ones) and lets the model build its 4D mask from the cache.

Not applicable: the model takes no cache anywhere; encoder-decoder models
(the wrapper holds one decoder-only cache); a sample without input_ids.
Metrics: `max_abs_diff` (worst against eager generate), `max_abs_diff_no_cache`
(worst against the forward without cache, prefill positions included),
`decode_steps`, `second_prompt_change` (how far the second prompt moved the
eager prefill logits), `export_seconds`, `pt2_bytes`, `max_cache_len`,
`compared_positions`.
"""

from __future__ import annotations

import inspect
import time
from typing import Any

import torch

from conformance.cases.case import Case
from conformance.cases.configs import text_config
from conformance.cases.samples import text_tokens
from conformance.checks.common import export as _export
from conformance.checks.common.cache import (
    cache_kwarg,
    cache_owner,
    full_static_layers,
    generate_inputs,
    greedy,
    static_cache,
)
from conformance.checks.common.generation import require_token_scores
from conformance.checks.common.compare import judge_close, logits_of, max_abs_diff
from conformance.checks.common.outcome import ContractViolation, NotApplicable
from conformance.checks.common.registry import check, declared_tolerance
from conformance.checks.compile_decode import ForwardRecorder, no_cache_inputs
from conformance.tolerances import Tolerance

DECODE_STEPS = 4
SPARE_SLOTS = 2  # empty cache slots after the last decode step: the mask must hide them
CACHE_PREFIX = "cache_"


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
    """The seed's TorchExportableModuleWithStaticCacheForVLM, for any cache-taking model, able to decode."""

    def __init__(self, model: torch.nn.Module, cache_name: str, constants: dict[str, Any], batch: int, max_len: int):
        super().__init__()
        self.model = model
        self.cache_name = cache_name
        self.constants = constants
        self.cache = full_static_layers(static_cache(model, max_len, batch), max_len)
        if hasattr(self.cache, "early_initialization"):  # lazy layers cannot be exported
            heads, head_dim = head_shapes(text_config(model.config))
            self.cache.early_initialization(batch, heads, head_dim, model.dtype, model.device)
        for i, layer in enumerate(getattr(self.cache, "layers", [])):
            for name in ("keys", "values", "cumulative_length"):
                value = getattr(layer, name, None)
                if isinstance(value, torch.Tensor):
                    self.register_buffer(f"{CACHE_PREFIX}{name}_{i}", value, persistent=False)
        self.max_len = max_len
        self.takes_cache_position = "cache_position" in inspect.signature(model.forward).parameters

    def forward(self, cache_position: torch.Tensor, attention_mask: torch.Tensor, **tensors: Any) -> torch.Tensor:
        for layer in getattr(self.cache, "layers", []):
            length = getattr(layer, "cumulative_length", None)
            if isinstance(length, torch.Tensor):
                length.copy_(cache_position[0])  # the write position is an input, never program state
        kwargs = dict(tensors, **self.constants)
        kwargs.update({"attention_mask": attention_mask, self.cache_name: self.cache, "use_cache": True})
        if self.takes_cache_position:
            kwargs["cache_position"] = cache_position
        return logits_of(self.model(**kwargs))


def slot_mask(mask2d: torch.Tensor, max_len: int) -> torch.Tensor:
    """The prompt's 2D mask over every cache slot (later slots 1: causality hides the future)."""
    return torch.nn.functional.pad(mask2d, (0, max_len - mask2d.shape[1]), value=1)


def sliding_layers(cache) -> list[str]:
    """`layer i (window W)` for every layer that still slides (its write position is a Python int)."""
    from transformers.cache_utils import StaticSlidingWindowLayer

    return [f"layer {i} ({layer.max_cache_len} slots)" for i, layer in enumerate(getattr(cache, "layers", []))
            if isinstance(layer, StaticSlidingWindowLayer)]


# --- the programs and their cache -----------------------------------------------------------------


def cache_keys(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: buf for name, buf in module.named_buffers() if name.startswith(f"{CACHE_PREFIX}keys_")}


def written_slots(before: dict[str, torch.Tensor], module: torch.nn.Module) -> list[int]:
    """Cache slots (dim 2 of the keys buffers) that changed in any layer since `before`."""
    changed: set[int] = set()
    for name, now in cache_keys(module).items():
        old = before.get(name)
        if old is None or old.shape != now.shape or now.dim() != 4:
            continue
        changed |= set((now != old).any(dim=3).any(dim=1).any(dim=0).nonzero().flatten().tolist())
    return sorted(changed)


def hand_over(source: torch.nn.Module, target: torch.nn.Module) -> int:
    """Copy the cache buffers of `source` into those of `target` with the same name; how many were copied."""
    theirs = {name: buf for name, buf in source.named_buffers() if name.startswith(CACHE_PREFIX)}
    copied = 0
    for name, buf in target.named_buffers():
        if name in theirs and theirs[name].shape == buf.shape:
            buf.copy_(theirs[name])
            copied += 1
    return copied


def _slots(positions: list[int]) -> str:
    if len(positions) > 3 and positions == list(range(positions[0], positions[-1] + 1)):
        return f"{positions[0]}..{positions[-1]}"
    return str(positions)


def call_program(module, what: str, kwargs: dict, expected_slots: list[int], metrics: dict) -> torch.Tensor:
    """Logits of one call of a loaded program; ContractViolation unless it wrote exactly `expected_slots`."""
    before = {name: buf.clone() for name, buf in cache_keys(module).items()}
    try:
        with torch.no_grad():
            logits = logits_of(module(**kwargs)).detach().clone()
    except Exception as exc:
        raise ContractViolation(_export.exporter_reason(exc, what), metrics) from exc
    written = written_slots(before, module)
    # A slot rewritten with the same values leaves no trace (a second prompt's unchanged first tokens): a call
    # must write some slot, and only slots of its cache_position.
    if not written or not set(written) <= set(expected_slots):
        if not written:
            why = "its cache buffers are unchanged after the call: the cache does not persist in the program"
        else:
            why = (f"it wrote cache slot(s) {_slots(written)} instead of {_slots(expected_slots)}: its write "
                   "position does not follow cache_position (program state baked at export, or a wrong slot)")
        raise ContractViolation(f"the program cannot carry its cache across calls: {what}: {why}", metrics)
    return logits


# --- the eager references -------------------------------------------------------------------------


class Reference:
    """Eager greedy generate (dynamic cache) over a prompt: its tokens, per-step logits, and the logits of one
    forward without cache over the prompt and those tokens, at the position that predicts each step."""

    def __init__(self, model: torch.nn.Module, inputs: dict[str, Any], steps: int):
        recorder = ForwardRecorder(model)
        try:
            with torch.no_grad():
                out = model.generate(**inputs, **greedy(steps + 1), output_logits=True, return_dict_in_generate=True)
        finally:
            recorder.remove()
        found = recorder.decoder()
        if found is None:
            raise NotApplicable("generate passes no KV cache to any forward: nothing to decode with a StaticCache")
        decoder, calls = found
        self.tokens = out.sequences[:, -(steps + 1):]
        self.logits = [t.detach() for t in require_token_scores(out.logits)]
        with torch.no_grad():
            full = logits_of(decoder(**no_cache_inputs(decoder, calls)))
        # The forward without cache saw the prompt and `steps` decoded tokens: step k is predicted at -1-steps+k.
        self.no_cache = [full[:, full.shape[1] - 1 - steps + k] for k in range(steps + 1)]


def second_prompt(case: Case) -> dict[str, Any]:
    """The sample with other media values and another ordinary last token in every row (same shapes)."""
    inputs = dict(case.inputs(case.sample.perturbed(seed=1)))
    ids = inputs.get("input_ids")
    config = getattr(case.tiny, "config", None)
    if isinstance(ids, torch.Tensor) and ids.dim() == 2 and config is not None:
        gen = torch.Generator().manual_seed(1)
        last = ids[:, -1].tolist()
        fresh = [next(t for t in text_tokens(config, 8, gen) if t != old) for old in last]
        ids = ids.clone()
        ids[:, -1] = torch.tensor(fresh, dtype=ids.dtype, device=ids.device)
        inputs["input_ids"] = ids
    return inputs


# --- the check ------------------------------------------------------------------------------------


class Programs:
    """The loaded prefill and decode programs of one model, and the prompt's shape they were exported for."""

    def __init__(self, case: Case, inputs: dict[str, Any], cache_name: str, metrics: dict):
        tensors, self.constants = _export.split_inputs(inputs)
        self.mask2d = tensors.pop("attention_mask", None)
        ids = tensors["input_ids"]
        if self.mask2d is None:
            self.mask2d = torch.ones_like(ids)
        self.batch, self.length = ids.shape[:2]
        self.max_len = self.length + DECODE_STEPS + SPARE_SLOTS
        metrics["max_cache_len"] = self.max_len
        started = time.perf_counter()
        prefill_wrapper = self.wrapper(case, cache_name)
        still_sliding = sliding_layers(prefill_wrapper.cache)
        if still_sliding:
            raise ContractViolation(
                f"cache {', '.join(still_sliding)} slides over fewer than the {self.max_len} slots a decode needs: "
                "its write position is a Python int that export bakes into the program", metrics)
        prefill = _export.export(prefill_wrapper, self.prefill_kwargs(tensors), True, metrics)
        step = dict(input_ids=ids[:, -1:], cache_position=torch.tensor([self.length], device=ids.device),
                    attention_mask=slot_mask(self.mask2d, self.max_len))
        try:
            decode = _export.export(self.wrapper(case, cache_name), step, True, metrics)
        except ContractViolation as exc:
            raise ContractViolation(f"decode program: {exc.reason}", metrics) from exc
        metrics["export_seconds"] = round(time.perf_counter() - started, 3)
        self.prefill = _export.save_and_load(prefill, metrics).module()
        size = metrics.get("pt2_bytes", 0)
        self.decode = _export.save_and_load(decode, metrics).module()
        metrics["pt2_bytes"] = size + metrics.get("pt2_bytes", 0)

    def wrapper(self, case: Case, cache_name: str) -> StaticCacheModule:
        return StaticCacheModule(case.fresh_model().eval(), cache_name, self.constants, self.batch, self.max_len)

    def prefill_kwargs(self, tensors: dict[str, Any]) -> dict[str, Any]:
        ids = tensors["input_ids"]
        return dict(tensors, cache_position=torch.arange(self.length, device=ids.device),
                    attention_mask=slot_mask(self.mask2d, self.max_len))

    def run(self, inputs: dict[str, Any], tokens: torch.Tensor, label: str, metrics: dict) -> list[torch.Tensor]:
        """[prefill logits (all positions), decode step 1 logits, ...] of one prompt through both programs."""
        tensors, _ = _export.split_inputs(inputs)
        tensors.pop("attention_mask", None)
        logits = [call_program(self.prefill, f"{label}: prefill (cache_position 0..{self.length - 1})",
                               self.prefill_kwargs(tensors), list(range(self.length)), metrics)]
        hand_over(self.prefill, self.decode)
        mask = slot_mask(self.mask2d, self.max_len)
        for step in range(1, DECODE_STEPS + 1):
            position = self.length + step - 1
            kwargs = dict(input_ids=tokens[:, step - 1:step], cache_position=torch.tensor([position]),
                          attention_mask=mask)
            logits.append(call_program(self.decode, f"{label}: decode step {step} (cache_position {position})",
                                       kwargs, [position], metrics))
        return logits


def _assert(actual: torch.Tensor, expected: torch.Tensor, metric: str, what: str, tol: Tolerance,
            metrics: dict) -> None:
    found = judge_close(actual, expected, tol, metrics, metric)
    if not found.within:
        raise ContractViolation(f"{what}: logits differ by {found.beyond()}", metrics)


def compare_prompt(programs: Programs, case: Case, inputs: dict[str, Any], label: str, metrics: dict,
                   reference: Reference) -> None:
    """Run one prompt through the programs and compare every step with eager generate and the no-cache forward."""
    tol = declared_tolerance(case)
    steps = programs.run(inputs, reference.tokens, label, metrics)
    with torch.no_grad():
        plain = logits_of(case.fresh_model().eval()(**inputs))
    keep = programs.mask2d.bool()
    if steps[0].shape != plain.shape:
        raise ContractViolation(f"{label}: prefill logits shape {tuple(steps[0].shape)} != plain forward "
                                f"{tuple(plain.shape)}", metrics)
    metrics["compared_positions"] = int(keep.sum())
    _assert(steps[0][keep], plain[keep], "max_abs_diff_no_cache",
            f"{label}: prefill program vs a forward without cache (every non-padding position)", tol, metrics)
    for step, logits in enumerate(steps):
        what = "prefill" if step == 0 else f"decode step {step}"
        last = logits[:, -1]
        _assert(last, reference.logits[step], "max_abs_diff", f"{label}: {what} of the program vs eager generate",
                tol, metrics)
        _assert(last, reference.no_cache[step], "max_abs_diff_no_cache",
                f"{label}: {what} of the program vs a forward without cache", tol, metrics)


@check("export_static_cache", column=80, compares=("max_abs_diff", "max_abs_diff_no_cache"), tolerance="export")
def check_export_static_cache(case: Case) -> dict:
    inputs = case.inputs()
    if "decoder_input_ids" in inputs:
        raise NotApplicable("encoder-decoder model: the seed's wrapper holds one decoder-only StaticCache")
    if "input_ids" not in inputs:
        raise NotApplicable("the sample has no input_ids for the wrapper's prompt")
    model = case.fresh_model().eval()
    owner, _ = cache_owner(model)
    cache_name = cache_kwarg(owner)
    if not _export.accepts(model, cache_name):
        raise NotApplicable(f"the model's forward takes no `{cache_name}` to pass a StaticCache through")
    inputs = generate_inputs(model, inputs)
    del model

    metrics: dict = {"decode_steps": DECODE_STEPS}
    programs = Programs(case, inputs, cache_name, metrics)
    first = Reference(case.fresh_model().eval(), inputs, DECODE_STEPS)
    compare_prompt(programs, case, inputs, "prompt 1", metrics, first)
    other = second_prompt(case)
    second = Reference(case.fresh_model().eval(), other, DECODE_STEPS)
    metrics["second_prompt_change"] = max_abs_diff(second.logits[0], first.logits[0])
    compare_prompt(programs, case, other, "prompt 2", metrics, second)
    return metrics
