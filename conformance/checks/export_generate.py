"""Check `export_generate`: greedy generation from exported programs only.

Contract: the model is split into the parts generation needs, each exported
with ``torch.export.export`` (non-strict):

* ``vision``: the vision encoder and projector, i.e. ``get_image_features``
  over the sample's media inputs, giving the features that replace the
  image placeholders (models without a vision path have no such part);
* ``embed_prefill`` / ``embed_step``: the text embedding over the prompt ids
  and over one token;
* ``prefill`` / ``step``: the decoder (its logits head included) over
  ``inputs_embeds`` and a ``StaticCache``. The prefill starts from a fresh
  cache, as ``generate`` does, and returns the cache tensors; the step takes
  them as inputs and updates them in place, so the two programs share one
  cache the way an ExecuTorch runner does.

Then greedy decoding runs from those programs alone (the placeholder merge,
a ``masked_scatter``, and the argmax are the runner's glue) and the first
`NEW_TOKENS` tokens must equal eager ``generate(do_sample=False)`` of a
freshly built model over the same inputs. Batch 1: the sample's second row
without its padding (one prompt, one image), which is what on-device
runners serve. Models whose ``generate`` bypasses the top-level forward and
hands ``inputs_embeds`` to their ``language_model`` (BLIP-2 style) are
exported through that language model, which is what their ``generate`` runs.

Why not transformers' own exporters: in the versions this suite targets,
``TorchExportableModuleForVLM`` is wired to SmolVLM's attribute names
(``model.model.vision_model/connector/text_model``) and its ``generate`` is a
stub, and ``TorchExportableModuleForDecoderOnlyLM`` runs prefill and decode
through one program whose cache is a buffer, with no attention or token-type
inputs, so its prefill does not see what ``generate``'s prefill sees. The
split here follows their pattern (an early-shaped StaticCache, sliding layers
as full layers while the generation fits in the window).

What is compared to what: the tokens of the programs against eager
``generate``'s tokens, step by step; then, once the tokens agree, every
step's logits of the programs against the logits of eager ``generate`` at
that step (dynamic cache), and the prefill's last logits against a plain
eager forward without cache over the same inputs, all within the export
tolerance (`case.tol("export")`).

Failure: ContractViolation with the exporter's own first line and the part
that failed, the first step where the tokens diverge, or the first step
whose logits differ. Metrics: `parts` (names exported), `dynamic_parts`
(the parts whose program has a dynamic input dimension, read from the
programs: none today, every part is exported for the traced prompt's shapes;
`export_dynamic` is the dynamic question), `export_seconds`,
`new_tokens`, `max_abs_diff` (the worst logits difference of the programs
against eager generate, over the steps), `max_abs_diff_no_cache` (the
prefill's last logits against the forward without cache).
"""

from __future__ import annotations

import torch

from conformance.build.case import Case
from conformance.checks.common.compare import assert_close, judge_close, logits_of
from conformance.checks.common.generation import NEW_TOKENS, ExportedGeneration, eager_generation, single_prompt
from conformance.checks.common.outcome import ContractViolation, NotApplicable
from conformance.checks.common.registry import check
from conformance.checks.common.shapes import dynamic_inputs


@check("export_generate", column=90, compares=("max_abs_diff", "max_abs_diff_no_cache"), tolerance="export")
def check_export_generate(case: Case) -> dict:
    if getattr(case.tiny.config, "is_encoder_decoder", False) or "input_ids" not in case.sample.inputs:
        raise NotApplicable("encoder-decoder generation (no decoder-only prompt ids) is not split by this check")
    inputs = single_prompt(case.inputs())
    model = case.fresh_model()
    generation = ExportedGeneration(model, inputs)
    generation.export()
    metrics = {"parts": sorted(generation.programs), "export_seconds": round(generation.export_seconds, 3),
               "dynamic_parts": sorted(name for name, program in generation.programs.items()
                                       if dynamic_inputs(program))}
    exported, program_logits = generation.generate()

    reference = case.fresh_model()
    expected, eager_logits = eager_generation(reference, inputs, NEW_TOKENS)
    with torch.no_grad():
        plain = logits_of(reference(**inputs))[:, -1, :]
    metrics["new_tokens"] = NEW_TOKENS
    if not torch.equal(exported, expected):
        step = int((exported != expected).int().argmax())
        raise ContractViolation(
            f"tokens from the exported programs differ from eager generate at new token {step}: "
            f"{exported[0].tolist()} vs {expected[0].tolist()}", metrics)
    tol = case.tol("export")
    for step, (actual, wanted) in enumerate(zip(program_logits, eager_logits)):
        what = "prefill" if step == 0 else f"decode step {step}"
        assert_close(actual, wanted, tol, f"{what} of the exported programs vs eager generate", metrics)
    found = judge_close(program_logits[0], plain, tol, metrics, "max_abs_diff_no_cache")
    if not found.within:
        raise ContractViolation(f"prefill of the exported programs vs a forward without cache: logits differ by "
                                f"{found.beyond()}", metrics)
    return metrics
