"""Check `export_generate`: one set of exported programs serves the next prompt, greedily, like eager generate.

Contract: the model is split into the parts generation needs, each exported
once with ``torch.export.export`` (non-strict):

* ``vision``: the vision encoder and projector, i.e. ``get_image_features``
  over the media inputs, giving the features that replace the image
  placeholders (models without a vision path have no such part);
* ``embed_prefill`` / ``embed_step``: the text embedding over the prompt ids
  and over one token;
* ``prefill`` / ``step``: the decoder (its logits head included) over
  ``inputs_embeds`` and a ``StaticCache`` of one fixed size (the longest
  request plus the new tokens). The prefill starts from a fresh cache, as
  ``generate`` does, and returns the cache tensors; the step takes them as
  inputs and updates them in place, its write position being an input (each
  layer's length tensor), so the two programs share one cache the way
  ExecuTorch's and ONNX Runtime's LLM runners do.

What varies between requests is dynamic (``Dim.AUTO``, bounded): the prompt
length in ``embed_prefill`` and ``prefill``, the image dims in ``vision``
where an image request exists; the step is static. Then greedy decoding runs
from those programs alone (the placeholder merge, a ``masked_scatter``, and
the argmax are the runner's glue) for every request of
`conformance.checks.common.served`: the sample's prompt (batch 1, its second
row without padding), another prompt length from `conformance.cases.variants`
and, where the class takes it, images of another size. Each request's first
`NEW_TOKENS` tokens must equal eager ``generate(do_sample=False)`` of a fresh
model over the same inputs, then each step's logits must match eager
``generate``'s within the export tolerance (declared,
``tolerance="export"``); the traced prompt's prefill also matches a plain
forward without cache. Models
whose ``generate`` hands ``inputs_embeds`` to their ``language_model``
(BLIP-2 style) are exported through that language model.

Why not transformers' own exporters: in the versions this suite targets,
``TorchExportableModuleForVLM`` is wired to SmolVLM's attribute names and its
``generate`` is a stub, and ``TorchExportableModuleForDecoderOnlyLM`` runs
prefill and decode through one program whose cache is a buffer, with no
attention or token-type inputs. The split here follows their pattern (an
early-shaped StaticCache, sliding layers as full layers while the generation
fits in the window).

Failure: the exporter's own first line and the part that failed; for the
traced prompt the first step where the tokens or logits diverge; for another
request, ``served traced, not <request> (<what>): ...`` with a
``specialisation`` fingerprint when a dimension it changes was kept static
(the input, the dimension, the guard's transformers site) or the step baked
a value of the traced prompt. Metrics: `requests` (name -> "pass" or why
not), `served`, `requests_unavailable` (kinds of request the class cannot be
given, and why), `static_export` (whether the traced prompt is served: the
single-prompt success of before, kept when another request fails), `parts`,
`dynamic_parts` (parts with a dynamic input, read from the programs),
`max_len`, `export_seconds`, `new_tokens`, `max_abs_diff` (worst logits
difference against eager generate over requests and steps),
`max_abs_diff_no_cache`.
"""

from __future__ import annotations

import torch

from conformance.cases.case import Case
from conformance.cases.configs import is_encoder_decoder
from conformance.checks.common.compare import judge_close, logits_of
from conformance.checks.common.generation import NEW_TOKENS, ExportedGeneration, eager_generation
from conformance.checks.common.outcome import ContractViolation, NotApplicable
from conformance.checks.common.registry import check, declared_tolerance
from conformance.checks.common.served import serve
from conformance.checks.common.shapes import dynamic_inputs


def not_decoder_only(case: Case) -> None:
    if is_encoder_decoder(case.tiny.config) or "input_ids" not in case.sample.inputs:
        raise NotApplicable("encoder-decoder generation (no decoder-only prompt ids) is not split by this check")


def eager(new_tokens: int):
    return lambda model, inputs: eager_generation(model, inputs, new_tokens)


@check("export_generate", column=90, compares=("max_abs_diff", "max_abs_diff_no_cache"), tolerance="export")
def check_export_generate(case: Case) -> dict:
    not_decoder_only(case)
    metrics: dict = {"new_tokens": NEW_TOKENS}

    def build(generation: ExportedGeneration, shapes: dict):
        generation.export(shapes)
        metrics["parts"] = sorted(generation.programs)
        metrics["export_seconds"] = round(generation.export_seconds, 3)
        metrics["dynamic_parts"] = sorted(n for n, p in generation.programs.items() if dynamic_inputs(p))
        return generation.run_program

    plan = serve(case, build, NEW_TOKENS, eager(NEW_TOKENS), declared_tolerance(case), metrics)
    traced = plan.requests[0]
    generation = plan.generation
    with torch.no_grad():
        first = generation.run_program("prefill", inputs_embeds=generation.prefill_embeds(generation.run_program),
                                       **generation.text)[0]
        plain = logits_of(case.fresh_model()(**traced.inputs))[:, -1, :]
    found = judge_close(first, plain, declared_tolerance(case), metrics, "max_abs_diff_no_cache")
    if not found.within:
        raise ContractViolation(f"prefill of the exported programs vs a forward without cache: logits differ by "
                                f"{found.beyond()}", metrics)
    return metrics
