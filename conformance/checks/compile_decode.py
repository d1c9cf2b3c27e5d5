"""Check `compile_decode`: decode steps compiled fullgraph over a StaticCache.

Contract: greedy `generate` on the case's multimodal prefill with a
`StaticCache` (the one generate would build, `_cache.static_cache`) and a
`CompileConfig(fullgraph=True, backend=case.backend)` (generate's default
dynamic-shape setting) — the
way users get compiled decoding — runs an eager prefill and `DECODE_STEPS`
one-token decode steps through the compiled forward, with exactly the cache
and position inputs generate passes (grown attention mask, position ids,
rope deltas kept by the model, no pixels after the prefill). Models whose
generate delegates to a sub-model (BLIP-2 style) are compiled and decoded
through that sub-model, because that is what their generate does.

It holds when:
* dynamo compiled the decode step, fullgraph (no graph break);
* no step after the first recompiled (dynamo's counters; the reason names
  the guard that failed; every step may recompile, so `recompiles` counts
  them and the fingerprint holds the count and the first guard's site);
* at every step the logits match (a) eager greedy decoding of a fresh
  instance with the default dynamic cache and (b) one forward without cache
  over the same tokens (so a cache that silently returns wrong values is
  caught), within the tolerance of the backend it compiles with (it
  declares none: `registry.declared_tolerance`). The compiled run is forced
  onto the tokens of the eager run, so a near-tie cannot make the two runs
  compare different
  sequences (except where generate returns no token ids in `sequences`, e.g.
  decoded audio: then it is not forced, metric `forced_tokens` False).

Under a code-generating backend (inductor) a failure raised after dynamo's
trace is the backend's (kind `backend`) when the same generate compiled
with dynamo alone (backend eager) runs (`conformance.checks.common.backend`).

Not applicable when generate passes no KV cache to any forward, or returns
no token `sequences` (a scoring output such as CLVP's).
Metrics: `max_abs_diff`, `max_abs_diff_no_cache`, `recompiles`,
`graph_breaks`, `compile_seconds`, `decode_steps`.
"""

from __future__ import annotations

import torch
from transformers import LogitsProcessor, LogitsProcessorList
from transformers.cache_utils import Cache

from conformance.cases.case import Case
from conformance.cases.configs import is_encoder_decoder
from conformance.checks.common.backend import blame_backend
from conformance.checks.common.cache import cache_kwarg, generate_inputs, greedy, static_cache
from conformance.checks.common.compare import judge_close, logits_of, max_abs_diff
from conformance.checks.common.generation import require_token_scores
from conformance.checks.common.dynamo import DynamoWatch, break_reason, describe_guard, graph_break_sites, guard_site
from conformance.checks.common.outcome import ContractViolation, NotApplicable
from conformance.checks.common.registry import check, declared_tolerance
from conformance.fingerprints import Fingerprint, kind_of, where_of
from conformance.tolerances import Tolerance

DECODE_STEPS = 4
NEW_TOKENS = DECODE_STEPS + 1  # the prefill predicts the first new token


class ForceTokens(LogitsProcessor):
    """Greedy decoding that follows given tokens (raw logits are left untouched)."""

    def __init__(self, tokens: torch.Tensor):
        self.tokens = tokens
        self.step = 0

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        forced = torch.full_like(scores, float("-inf"))
        forced.scatter_(1, self.tokens[:, self.step : self.step + 1].to(scores.device), 0.0)
        self.step += 1
        return forced


class ForwardRecorder:
    """Records the kwargs of every forward call of the model and its generating sub-models."""

    def __init__(self, model: torch.nn.Module):
        from transformers import GenerationMixin

        self.modules = [model] + [m for m in model.modules() if m is not model and isinstance(m, GenerationMixin)]
        self.calls: dict[int, list[dict]] = {id(m): [] for m in self.modules}
        self.handles = [m.register_forward_pre_hook(self._hook(m), with_kwargs=True) for m in self.modules]

    def _hook(self, module):
        def record(_module, args, kwargs):
            self.calls[id(module)].append(dict(kwargs))

        return record

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()

    def decoder(self) -> tuple[torch.nn.Module, list[dict]] | None:
        """The outermost module generate decoded with (a call of it got a Cache), and its calls from the
        prefill on: the first call with a Cache, or the call just before it when that one had none (a
        model whose prefill creates its cache inside the forward; an earlier prefill whose output generate
        dropped is not part of the decoded sequence)."""
        for module in self.modules:
            calls = self.calls[id(module)]
            first = next((i for i, c in enumerate(calls) if any(isinstance(v, Cache) for v in c.values())), None)
            if first is not None:
                return module, calls[max(first - 1, 0) if first else 0:]
        return None


def _sequence_length(call: dict) -> int:
    ids = call.get("input_ids")
    if ids is None:
        ids = call.get("decoder_input_ids")
    if ids is not None:
        return ids.shape[1]
    return call["inputs_embeds"].shape[1]


def no_cache_inputs(decoder: torch.nn.Module, calls: list[dict]) -> dict:
    """Kwargs of one forward without cache over every token the recorded calls fed.

    A sequence-aligned input is the concatenation of its per-call slices; an
    input that already spans the whole sequence in the last call (the 2D
    attention mask) is taken from there; a per-token integer marker only the
    prefill carries is extended with zeros (decoded tokens are text);
    per-position media every call carries (k rows per token along dim 1) are the calls' slices joined;
    anything else (pixels, encoder outputs) is the prefill's. A prefill given as embeddings is continued
    with the decoder's own input embeddings of the decoded tokens.
    """
    lengths = [_sequence_length(c) for c in calls]
    total = sum(lengths)
    first, last = calls[0], calls[-1]
    full: dict = {}
    for key, value in first.items():
        if isinstance(value, Cache) or key in ("logits_to_keep", "use_cache", "cache_position"):
            continue
        full[key] = value
        if not isinstance(value, torch.Tensor):
            continue
        # Token ids run along dim 1 (a (batch, steps, codebooks) id tensor too); other per-token inputs along -1.
        axis = 1 if key in ("input_ids", "decoder_input_ids") and value.dim() > 2 else -1
        latest = last.get(key)
        if isinstance(latest, torch.Tensor) and latest.shape[axis] == total and latest.dim() == value.dim():
            full[key] = latest
        elif key == "inputs_embeds":
            later = [c.get("inputs_embeds") if c.get("inputs_embeds") is not None
                     else decoder.get_input_embeddings()(c["input_ids"]) for c in calls[1:]]
            full[key] = torch.cat([value, *later], dim=1)
        elif all(isinstance(c.get(key), torch.Tensor) and c[key].shape[axis] == n for c, n in zip(calls, lengths)):
            full[key] = torch.cat([c[key] for c in calls], dim=axis)
        elif value.is_floating_point() and value.dim() > 1 and _proportional(key, calls, lengths):
            # Per-position media every call carries (streaming audio embeddings, k per token): the calls' slices.
            full[key] = torch.cat([c[key] for c in calls], dim=1)
        elif value.shape[-1] == lengths[0] and not value.is_floating_point() and all(key not in c for c in calls[1:]):
            # A per-token marker only the prefill carries (e.g. where media embeddings go): decoded tokens are text.
            full[key] = torch.cat([value, value.new_zeros(*value.shape[:-1], total - lengths[0])], dim=-1)
    if "inputs_embeds" in full and full.get("input_ids") is None:
        full.pop("input_ids", None)
    full["use_cache"] = False
    return full


def _proportional(key: str, calls: list[dict], lengths: list[int]) -> bool:
    """Every call carries `key` with k rows along dim 1 per token it feeds (the same k > 0 for all)."""
    values = [c.get(key) for c in calls]
    if not all(isinstance(v, torch.Tensor) and v.dim() > 1 for v in values) or not lengths[0]:
        return False
    k = values[0].shape[1] // lengths[0]
    return k > 0 and all(v.shape[1] == k * n for v, n in zip(values, lengths))


def _compile_config(backend: str):
    from transformers.generation.configuration_utils import CompileConfig

    config = CompileConfig(fullgraph=True, backend=backend, mode=None)  # dynamic: generate's default
    config._compile_all_devices = True  # generate compiles on CUDA only unless told otherwise
    return config


def _cache_kwargs(model: torch.nn.Module, decoder: torch.nn.Module, prefill: dict) -> dict:
    """The static cache generate would use: ours for decoder-only, generate's own for encoder-decoder."""
    if is_encoder_decoder(model.config):
        return {"cache_implementation": "static"}
    first = next(v for k, v in prefill.items() if k in ("input_ids", "inputs_embeds") and v is not None)
    cache = static_cache(decoder, _sequence_length(prefill) + NEW_TOKENS, batch_size=first.shape[0])
    return {cache_kwarg(decoder): cache}


@check("compile_decode", column=30, observes=("_can_compile_fullgraph",), backend_columns=True)
def check_compile_decode(case: Case) -> dict:
    metrics: dict = {"graph_breaks": 0, "recompiles": 0}
    inputs = case.generate_inputs()
    tol = declared_tolerance(case)

    reference = case.fresh_model()
    if not hasattr(reference, "generate"):
        raise NotApplicable("the model has no generate()")
    inputs = generate_inputs(reference, inputs)
    recorder = ForwardRecorder(reference)
    try:
        with torch.no_grad():
            eager = reference.generate(**inputs, **greedy(NEW_TOKENS), output_logits=True,
                                       return_dict_in_generate=True)
    finally:
        recorder.remove()
    if not hasattr(eager, "sequences"):
        raise NotApplicable(f"generate returns a {type(eager).__name__} without token `sequences` (a scoring "
                            "output): no decoded tokens to compare")
    require_token_scores(eager.logits)
    found = recorder.decoder()
    if found is None:
        raise NotApplicable("generate passes no KV cache to any forward: nothing to decode with a StaticCache")
    decoder, calls = found
    tokens = eager.sequences[:, -NEW_TOKENS:]
    # A generate whose `sequences` are not token ids (decoded audio) cannot be forced onto the eager tokens.
    forced = [ForceTokens(tokens)] if not tokens.is_floating_point() else []
    if not forced:
        metrics["forced_tokens"] = False
    with torch.no_grad():
        no_cache = logits_of(decoder(**no_cache_inputs(decoder, calls)))
    prefill_length = _sequence_length(calls[0])

    model = case.fresh_model()
    generate_kwargs = greedy(NEW_TOKENS) | {"disable_compile": False}
    # One recompile is enough to fail; the limit lets every step recompile, so that the count is the model's.
    with DynamoWatch() as watch, torch._dynamo.config.patch(recompile_limit=NEW_TOKENS + 1):
        try:
            with torch.no_grad():
                compiled = model.generate(
                    **inputs, **generate_kwargs, **_cache_kwargs(model, decoder, calls[0]),
                    compile_config=_compile_config(case.backend), output_logits=True, return_dict_in_generate=True,
                    logits_processor=LogitsProcessorList(forced))
        except Exception as exc:
            metrics["compile_seconds"] = watch.compile_seconds
            _judge_recompiles(watch, metrics)
            traced = getattr(exc, "real_stack", None) is not None  # raised while dynamo traced
            metrics["graph_breaks"] = max(int(traced), len(watch.graph_breaks))
            kind = kind_of(exc)
            fingerprint = Fingerprint("graph_break" if kind == "unsupported" else kind, where=where_of(exc),
                                      error=type(exc).__name__)
            reason = break_reason(exc)

            def decode_alone(backend: str) -> None:
                fresh = case.fresh_model()
                with torch.no_grad(), torch._dynamo.config.patch(recompile_limit=NEW_TOKENS + 1):
                    fresh.generate(**inputs, **generate_kwargs, **_cache_kwargs(fresh, decoder, calls[0]),
                                   compile_config=_compile_config(backend), logits_processor=LogitsProcessorList(
                                       [ForceTokens(tokens)] if forced else []))

            (own,) = blame_backend(case.backend, [exc], decode_alone)
            if own is not None:  # dynamo traced the step fullgraph: the failure is the backend's
                reason, fingerprint = own
                metrics["graph_breaks"] = 0
            raise ContractViolation(f"generate with a StaticCache and compiled decode failed: {reason}",
                                    metrics, fingerprint) from exc
        metrics["compile_seconds"] = watch.compile_seconds
        _judge_compilation(watch, metrics)

    metrics["decode_steps"] = len(compiled.logits) - 1
    _compare_steps(compiled.logits, eager.logits, no_cache, prefill_length, tol, metrics)
    return metrics


def _judge_compilation(watch: DynamoWatch, metrics: dict) -> None:
    breaks = watch.graph_breaks
    if breaks:
        metrics["graph_breaks"] = len(breaks)
        metrics["first_break"] = breaks[0]
        sites = graph_break_sites()
        raise ContractViolation(f"the compiled decode step has {len(breaks)} graph break(s), first: {breaks[0]}",
                                metrics, Fingerprint("graph_break", sites=sites, breaks=sum(sites.values())))
    if watch.graphs == 0:
        raise ContractViolation("generate did not compile the decode step (its cache is not a compileable "
                                "static cache, or the model's generate bypasses compilation)", metrics)
    _judge_recompiles(watch, metrics)


def _judge_recompiles(watch: DynamoWatch, metrics: dict) -> None:
    reasons = watch.guard_failure_reasons  # every failed guard check, several per recompile once entries pile up
    recompiles = max(watch.graphs - 1, 1) if reasons else 0  # the decode step is one frame, compiled fullgraph
    metrics["recompiles"] = recompiles
    if reasons:
        fingerprint = Fingerprint("recompile", recompiles=recompiles, guard=guard_site(reasons[0]))
        raise ContractViolation(f"decode step recompiled after the first step; failed guard: "
                                f"{describe_guard(reasons[0])}", metrics, fingerprint)


def _compare_steps(compiled: tuple, eager: tuple, no_cache: torch.Tensor, prefill_length: int, tol: Tolerance,
                   metrics: dict) -> None:
    """Each step's logits vs eager dynamic-cache decoding (a) and vs the no-cache forward (b)."""
    if len(compiled) != len(eager):
        raise ContractViolation(f"compiled run produced {len(compiled)} steps, eager {len(eager)}", metrics)
    metrics.setdefault("max_abs_diff", 0.0)
    metrics.setdefault("max_abs_diff_no_cache", 0.0)
    for step, (actual, expected) in enumerate(zip(compiled, eager)):
        full = no_cache[:, prefill_length - 1 + step]
        found = judge_close(actual, expected, tol, metrics)
        found_full = judge_close(actual, full, tol, metrics, "max_abs_diff_no_cache")
        what = "prefill" if step == 0 else f"decode step {step}"
        if not found.within:
            raise ContractViolation(f"{what}: compiled static-cache logits differ from eager dynamic-cache "
                                    f"decoding by {found.beyond()}", metrics)
        if not found_full.within:
            eager_full = max_abs_diff(expected, full)
            raise ContractViolation(f"{what}: compiled static-cache logits differ from a forward without cache by "
                                    f"{found_full.beyond()} (eager dynamic-cache decoding differs by "
                                    f"{eager_full:.3g}): the cache returns wrong values", metrics)
