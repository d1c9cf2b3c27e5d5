"""Which requests one set of exported generation parts serves: the generation columns' deployment question.

A runner exports a model's parts once and serves every next prompt from them.
The generation columns (`export_generate`, `onnx_generate`, `executorch`)
export once with the prompt length dynamic and generate for several requests.

Contracts:

* `requests_of(case)` is the sample's prompt (``traced``) and the requests
  made from its variants (`conformance.cases.variants`), each batch 1
  (`single_prompt`): another prompt length (``longer``, else ``shorter``)
  and, where the class can be given one, images of another size
  (``image_size``). `unavailable` says in one line why a kind of request
  could not be made for the class (a stated reason, never an error).
* `cache_length(requests, new_tokens)` is the one static cache's size: the
  longest prompt plus the new tokens.
* `dynamic_shapes(generation, prompts)` maps each part whose inputs change
  between the requests to the ``dynamic_shapes`` of those inputs
  (``Dim.AUTO`` bounded: at least 2, the prompt dims at most the cache, the
  others at most 4 times their largest size, since ExecuTorch plans memory
  for the largest), and raises ValueError naming the input when one changes
  rank (no single program takes both). The decode step is always static: its
  write position is an input, its shapes are the cache's.
* `specialised(generation, shapes)` reads each export's `ShapeLog`: every
  dimension marked dynamic that the exporter kept static, with its guard.
* `judge_requests(...)` generates from the same artifacts for every request
  and compares each with eager ``generate`` of a fresh model step by step:
  the tokens, then every step's logits within the tolerance; tokens that
  differ where the logits agree within it up to that step are a near tie
  split by rounding (`is_tie`, recorded as ``tie_at_step``), judged on the
  logits up to it, as the static_cache check judges one. It records
  ``requests`` (name -> "pass" or why not), ``served`` (the names served)
  and ``max_abs_diff``; the traced request's failure is raised as it is,
  another request's is raised after all were judged, prefixed with what was
  served, fingerprinted ``specialisation`` (the input, the dimension and the
  guard's transformers site, as `export_dynamic` names them) when a
  dimension the request changes was specialised, or when the decode step
  traced after this request's prefill is another graph than the one traced
  after the sample's (the step baked a value of the traced prompt: the
  first differing node's site).
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch.export import Dim

from conformance.checks.common.compare import judge_close
from conformance.checks.common.generation import (DecoderPart, ExportedGeneration, Prompt, export_part, greedy_generate,
                                                   single_prompt)
from conformance.checks.common.outcome import ContractViolation, HarnessGap
from conformance.checks.common.shapes import Place, dim_name, specialisation_fingerprint, varying_dims
from conformance.fingerprints import Fingerprint, kind_of, where_of
from conformance.reasons import one_line

TRACED = "traced"
LENGTH_REQUESTS = ("longer", "shorter")  # the first the class can be given
IMAGE_REQUEST = "image_size"
MIN_SIZE = 2  # 0 and 1 are always specialised
MEDIA_HEADROOM = 4
PROMPT_PARTS = ("embed_prefill", "prefill")
ONE_TRACED = "has size 1 in the sample, which torch.export always specialises: not served, the sample's limit"
FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


@dataclass
class Request:
    """One prompt the artifacts must serve: its name, what it is in words, its batch-1 inputs."""

    name: str
    what: str
    inputs: dict[str, Any]


@dataclass
class Unserved:
    """A request the artifacts did not serve: why, and the failure's fingerprint."""

    request: Request
    reason: str
    fingerprint: Fingerprint | None = None
    limit: bool = False  # the sample's limit (a traced size of 1), stated, not the model's failure


def requests_of(case) -> tuple[list[Request], dict[str, str]]:
    """(the requests, kind of request -> why it could not be made) for `case` (see the module)."""
    traced = Request(TRACED, "the sample's prompt", single_prompt(case.inputs()))
    variants = case.variants()
    requests, unavailable = [traced], {}
    length = next((variants.available[n] for n in LENGTH_REQUESTS if n in variants.available), None)
    if length is not None:
        requests.append(Request(length.name, length.what, single_prompt(case.inputs(length.sample))))
    else:
        unavailable["prompt length"] = variants.unavailable.get("longer", "no other prompt length can be made")
    image = variants.available.get(IMAGE_REQUEST)
    if image is not None:
        requests.append(Request(image.name, image.what, single_prompt(case.inputs(image.sample))))
    elif case.sample.media_keys:
        unavailable[IMAGE_REQUEST] = variants.unavailable.get(IMAGE_REQUEST, "cannot be made")
    return requests, unavailable


def cache_length(requests: list[Request], new_tokens: int) -> int:
    return max(r.inputs["input_ids"].shape[1] for r in requests) + new_tokens


def _part_shapes(generation: ExportedGeneration, prompt: Prompt) -> dict[str, dict[str, Any]]:
    """The inputs of each prompt-dependent part whose shapes can change (the prefill's embeddings by the ids')."""
    parts = {"embed_prefill": {"input_ids": prompt.ids}, "prefill": {"inputs_embeds": prompt.ids, **prompt.text}}
    if generation.vision_model is not None:
        parts["vision"] = dict(prompt.media)
    return parts


def dynamic_shapes(generation: ExportedGeneration, prompts: list[Prompt]) -> dict[str, dict[str, Any]]:
    """Per part, the ``dynamic_shapes`` of its inputs that differ between `prompts` (see the module)."""
    base = _part_shapes(generation, prompts[0])
    others = [_part_shapes(generation, p) for p in prompts[1:]]
    shapes: dict[str, dict[str, Any]] = {}
    for part, tensors in base.items():
        changing = varying_dims(tensors, [o[part] for o in others])
        for key, dims in changing.items():
            sizes = [t[part][key].shape for t in [base] + others]
            spec = {d: Dim.AUTO(min=MIN_SIZE, max=generation.max_len if part in PROMPT_PARTS else
                                max(s[d] for s in sizes) * MEDIA_HEADROOM) for d in sorted(dims) if sizes[0][d] > 1}
            if spec:
                shapes.setdefault(part, {})[key] = spec
    return shapes


def request_changes(generation: ExportedGeneration, requests: list[Request], prompts: list[Prompt]
                    ) -> dict[str, dict[str, set[int]]]:
    """Per request, the dims of each part input it changes against the traced prompt (`prompts[0]`)."""
    base = _part_shapes(generation, prompts[0])
    changes = {}
    for request, prompt in zip(requests, prompts):
        theirs = _part_shapes(generation, prompt)
        merged: dict[str, set[int]] = {}
        for part, tensors in base.items():
            for key, dims in varying_dims(tensors, [theirs[part]]).items():
                merged.setdefault(key, set()).update(dims)
        changes[request.name] = merged
    return changes


def specialised(generation: ExportedGeneration, shapes: dict[str, dict[str, Any]]) -> dict[tuple[str, int], Any]:
    """(input, dim) -> (part, source, Specialisation or None) of every dim marked dynamic the export kept static."""
    found = {}
    for part, spec in shapes.items():
        log = generation.logs.get(part)
        if log is None:
            continue
        for key, dims in spec.items():
            for d in dims:
                source = f"L['{key}'].size()[{d}]"
                if log.is_static(source):
                    found[(key, d)] = (part, source, log.specialisation(source))
    return found


def _why_static(generation: ExportedGeneration, part: str, source: str, found) -> tuple[str, Fingerprint]:
    dim = dim_name(source)
    reason = f"part {part}: {dim} {generation.logs[part].why_static(source)}"
    fingerprint = specialisation_fingerprint(dim, found.guard) if found else Fingerprint("specialisation", what=dim)
    return reason, fingerprint


def judge_requests(generation: ExportedGeneration, requests: list[Request], run: Callable, reference: Callable,
                   eager: Callable, tol, metrics: dict, changes: dict[str, dict[str, set[int]]],
                   static: dict | None = None) -> None:
    """Generate every request from `run` and compare with eager (see the module).

    `reference()` is a fresh model; `eager(model, inputs)` its (tokens, per-step logits); `changes` maps a
    request to the dims it changes per input (of `_part_shapes`); `static` is `specialised(...)`.
    """
    metrics.setdefault("requests", {})
    unserved: list[Unserved] = []
    for request in requests:
        prompt = generation.prompt(request.inputs)
        problem = _serve(generation, request, prompt, run, reference, eager, tol, metrics,
                         changes.get(request.name, {}), static or {})
        metrics["requests"][request.name] = problem.reason if problem else "pass"
        if problem and request.name == TRACED:
            raise ContractViolation(problem.reason, metrics, problem.fingerprint)
        if problem and not problem.limit:
            unserved.append(problem)
    metrics["served"] = [r.name for r in requests if metrics["requests"][r.name] == "pass"]
    metrics["max_len"] = generation.max_len
    if unserved:
        first = unserved[0]
        raise ContractViolation(f"served {', '.join(metrics['served'])}, not {first.request.name} "
                                f"({first.request.what}): {first.reason}", metrics, first.fingerprint)


def _serve(generation, request, prompt, run, reference, eager, tol, metrics, changes, static) -> Unserved | None:
    media = set(prompt.media)
    for key, dims in changes.items():
        if key in media and "vision" in generation.refused:
            exc = generation.refused["vision"]
            return Unserved(request, f"exporting its dims dynamic fails: {exc.reason}", exc.fingerprint)
        for d in sorted(dims):
            if _traced_size(generation, key, d) == 1:
                return Unserved(request, f"{key} dim {d} {ONE_TRACED}", limit=True)
            if (key, d) in static:
                part, source, found = static[(key, d)]
                reason, fingerprint = _why_static(generation, part, source, found)
                return Unserved(request, reason, fingerprint)
    try:
        tokens, logits = generation.generate(run, prompt)
    except ContractViolation as exc:
        if request.name == TRACED:
            raise
        return Unserved(request, exc.reason, exc.fingerprint)
    except Exception as exc:
        if request.name == TRACED:  # the artifacts fail on the prompt they were traced with: that error itself
            raise
        return Unserved(request, f"the artifacts fail on it: {one_line(exc)}",
                        Fingerprint(kind_of(exc, "export_error"), where=where_of(exc), error=type(exc).__name__,
                                    what="exported parts"))
    expected, expected_logits = eager(reference(), request.inputs)
    if not _agree(tokens, logits, expected, expected_logits, tol):
        _require_faithful_parts(generation, prompt, request, reference, tol)
    step = first_differing_token(tokens, expected)
    if step is not None and not is_tie(step, logits, expected_logits, tol):
        reason = (f"tokens from the exported parts differ from eager generate at new token {step}: "
                  f"{tokens[0].tolist()} vs {expected[0].tolist()}")
        return _baked(generation, request, prompt, step) or Unserved(request, reason)
    if step is not None:
        metrics.setdefault("tie_at_step", {})[request.name] = step
    compared = len(logits) if step is None else step + 1
    for step, (actual, wanted) in enumerate(list(zip(logits, expected_logits))[:compared]):
        found = judge_close(actual, wanted.float(), tol, metrics)
        if not found.within:
            what = "prefill" if step == 0 else f"decode step {step}"
            reason = (f"{what} of the exported parts vs eager generate: logits differ by {found.beyond()} (the same "
                      "parts run eagerly agree with generate)")
            baked = _baked(generation, request, prompt, step) if step else None
            return baked or Unserved(request, reason, Fingerprint("numerical_mismatch", what=what))
    return None


def first_differing_token(tokens: torch.Tensor, expected: torch.Tensor) -> int | None:
    """The first new token (the last dim) where any row differs; None when all agree."""
    differs = (tokens != expected).reshape(-1, tokens.shape[-1]).any(dim=0)
    return int(differs.nonzero()[0, 0]) if differs.any() else None


def is_tie(step: int, logits, expected_logits, tol) -> bool:
    """Whether greedy decoding split a near tie at `step`: the logits agree within `tol` at every step up to and
    including it, so the other argmax is the dtype's rounding, not a wrong program (what follows is conditioned
    on other tokens and compares nothing). The static_cache check judges a divergence the same way."""
    return step < len(logits) and all(judge_close(actual, wanted.float(), tol, {}).within
                                      for actual, wanted in list(zip(logits, expected_logits))[:step + 1])


def _agree(tokens, logits, expected, expected_logits, tol) -> bool:
    step = first_differing_token(tokens, expected)
    if step is not None:
        return is_tie(step, logits, expected_logits, tol)
    return all(judge_close(actual, wanted.float(), tol, {}).within for actual, wanted in zip(logits, expected_logits))


def _require_faithful_parts(generation: ExportedGeneration, prompt: Prompt, request: Request, reference: Callable,
                            tol) -> None:
    """HarnessGap when the suite's parts, run eagerly (no exporter), disagree with eager `generate` over the same
    kind of cache they hold (a StaticCache): the decomposition does not reproduce this model's generate (its
    position ids, a state it keeps), so a difference of the artifacts says nothing about the exporter or the
    runtime. A model whose static-cache generation is itself wrong agrees with its parts here: its failure stands.
    Undecidable (either side cannot run) -> the artifacts' failure stands."""
    try:
        tokens, logits = generation.generate(generation.run_eager, prompt)
        out = greedy_generate(reference(), request.inputs, generation.new_tokens, output_logits=True,
                              return_dict_in_generate=True, cache_implementation="static")
        expected, expected_logits = out.sequences[:, -generation.new_tokens:], list(out.logits)
    except Exception:
        return None
    step = first_differing_token(tokens, expected)
    if step is not None and not is_tie(step, logits, expected_logits, tol):
        raise HarnessGap(f"the generation parts run eagerly already differ from eager generate with a static cache "
                         f"({request.name} request, new token {step}): the suite's decomposition does not reproduce "
                         "this model's generate")
    compared = len(logits) if step is None else step + 1
    for step, (actual, wanted) in enumerate(list(zip(logits, expected_logits))[:compared]):
        found = judge_close(actual, wanted.float(), tol, {})
        if not found.within:
            what = "prefill" if step == 0 else f"decode step {step}"
            raise HarnessGap(f"the generation parts run eagerly already differ from eager generate with a static "
                             f"cache ({request.name} request, {what}: logits differ by {found.beyond()}): the "
                             "suite's decomposition does not reproduce this model's generate")
    return None


def _traced_size(generation: ExportedGeneration, key: str, dim: int) -> int | None:
    for tensors in _part_shapes(generation, generation.traced).values():
        value = tensors.get(key)
        if isinstance(value, torch.Tensor) and dim < value.dim():
            return value.shape[dim]
    return None


def _baked(generation: ExportedGeneration, request: Request, prompt: Prompt, step: int) -> Unserved | None:
    """When the decode step traced after this request's prefill is another graph than the one traced after the
    sample's, the step baked a value of the traced prompt: Unserved naming the first differing node's site (None:
    the same graph, or a step that does not export)."""
    if step == 0 or request.name == TRACED:
        return None
    try:
        node = _first_difference(_step_after(generation, generation.traced), _step_after(generation, prompt))
    except ContractViolation:
        return None
    if node is None:
        return None
    place = _place(node)
    dim = "input_ids dim 1" if request.name in LENGTH_REQUESTS else "the request's shapes"
    at = f" (at {place.text})" if place.text else ""
    reason = (f"part step bakes a value of the traced prompt (its {dim}): traced after this prompt it is another "
              f"graph, first at {node.op} {node.target}{at}; the step must take what varies from its inputs (the "
              "cache's write position), not a Python int")
    return Unserved(request, reason, Fingerprint("specialisation", where=place.site, what=f"{dim} in part step",
                                                 guard="a Python int of the traced prompt"))


def _step_after(generation: ExportedGeneration, prompt: Prompt):
    """The decode step exported (torch.export) after an eager prefill of `prompt`."""
    modules = {**generation.modules(), "step": DecoderPart(generation.owner, generation.max_len)}
    with torch.no_grad():
        embeds = generation.prefill_embeds(lambda name, **kw: modules[name](**kw), prompt)
        _, *state = modules["prefill"](embeds, **prompt.text)
    return export_part("step", modules["step"], {"inputs_embeds": embeds[:, -1:], "cache_tensors": state})


def _signature(node) -> tuple:
    def plain(value):
        return f"%{value.name}" if isinstance(value, torch.fx.Node) else repr(value)
    return node.op, str(node.target), tuple(plain(a) for a in node.args), tuple(sorted(
        (k, plain(v)) for k, v in node.kwargs.items()))


def _first_difference(first, second):
    """The first node of `first`'s graph that `second`'s does not repeat (None when the graphs are alike)."""
    theirs = list(second.graph.nodes)
    for index, node in enumerate(first.graph.nodes):
        if index >= len(theirs) or _signature(node) != _signature(theirs[index]):
            return node
    return None


def _place(node) -> Place:
    frames = [traceback.FrameSummary(f, int(line), fn) for f, line, fn in FRAME.findall(
        node.meta.get("stack_trace") or "")]
    return Place.of(frames)


@dataclass
class Plan:
    """What a generation column exports once and serves: the parts, the requests, each part's dynamic shapes."""

    generation: ExportedGeneration
    requests: list[Request]
    shapes: dict[str, dict[str, Any]]
    changes: dict[str, dict[str, set[int]]]


def plan(case, new_tokens: int, metrics: dict, generation_class=ExportedGeneration) -> Plan:
    """The requests of `case`, the parts of a fresh model with one cache for all of them, their dynamic shapes.

    A request no single set of parts can take (an input changes rank) is left out, its reason in
    ``requests``; `metrics["requests_unavailable"]` holds the kinds of request the class cannot be given.
    """
    requests, unavailable = requests_of(case)
    metrics["requests_unavailable"] = unavailable
    metrics["requests"] = {}
    generation = generation_class(case.fresh_model(), requests[0].inputs, new_tokens,
                                  max_len=cache_length(requests, new_tokens))
    kept, prompts = [requests[0]], [generation.traced]
    for request in requests[1:]:
        prompt = generation.prompt(request.inputs)
        try:
            dynamic_shapes(generation, prompts + [prompt])
        except ValueError as exc:
            metrics["requests"][request.name] = f"no single set of parts takes it: {exc}"
            continue
        kept.append(request)
        prompts.append(prompt)
    return Plan(generation, kept, dynamic_shapes(generation, prompts), request_changes(generation, kept, prompts))


def serve(case, build: Callable, new_tokens: int, eager: Callable, tol, metrics: dict,
          generation_class=ExportedGeneration) -> Plan:
    """Export once (`build(generation, shapes) -> run`), then judge every request (`judge_requests`).

    When the export with the dynamic shapes fails, the traced prompt alone is exported static and judged, so
    ``static_export`` says whether the single-prompt artifacts of before still serve it; the dynamic export's
    failure is the verdict.
    """
    found = plan(case, new_tokens, metrics, generation_class)
    generation = found.generation
    try:
        run = build(generation, found.shapes)
    except ContractViolation as exc:
        if not found.shapes:
            raise
        metrics["static_export"] = _static_only(case, build, new_tokens, eager, tol, found.requests[0],
                                                generation_class)
        raise ContractViolation(exc.reason, metrics, exc.fingerprint) from exc
    try:
        judge_requests(generation, found.requests, run, case.fresh_model, eager, tol, metrics, found.changes,
                       specialised(generation, found.shapes))
    finally:
        traced = metrics["requests"].get(TRACED)
        if traced is not None:
            metrics["static_export"] = traced
    return found


def _static_only(case, build, new_tokens, eager, tol, traced: Request, generation_class) -> str:
    generation = generation_class(case.fresh_model(), traced.inputs, new_tokens)
    scratch: dict = {}
    try:
        run = build(generation, {})
        judge_requests(generation, [traced], run, case.fresh_model, eager, tol, scratch, {})
    except ContractViolation as exc:
        return exc.reason
    return "pass"
