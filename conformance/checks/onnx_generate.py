"""Check `onnx_generate`: greedy generation from ONNX parts in ONNX Runtime.

Contract: the model is split as `export_generate` splits it (batch 1: the
sample's second row without padding; parts ``vision`` = encoder + projector
over the media, ``embed_prefill`` / ``embed_step`` = the text embedding,
``prefill`` = the decoder and its head over ``inputs_embeds`` from a fresh
StaticCache, ``step`` = one token over the cache), each part is exported to
an ONNX file with the exporter `export_onnx` uses and run in an ONNX Runtime
CPU session. ONNX has no in-place update of a graph input, so the cache is
explicit: the prefill returns the cache tensors (keys, values, length per
layer), the step takes them as inputs and returns the updated ones after its
logits (`FunctionalStep` updates copies), and the runner carries them from
step to step. Greedy decoding from those sessions alone (the placeholder
merge and the argmax are the runner's glue) must give the first
`NEW_TOKENS` tokens of eager ``generate(do_sample=False)`` of a fresh model
over the same inputs, and at every step the logits must match eager
``generate``'s (``output_logits``) within the export tolerance.

Optional: it requires ``onnx``, ``onnxscript`` and ``onnxruntime`` (extra
``[onnx]``); where they are not installed the column is not run.
Failure: the part that failed to export or run with the exporter's first
line, or the first step whose logits or token differ. Metrics: `exporter`,
`parts`, `dynamic_parts` (the parts whose ONNX graph has an input with a
symbolic dimension, as `export_generate` reports its programs'),
`export_seconds`, `ort_seconds`, `graph_nodes` (all parts),
`model_bytes`, `new_tokens`, `max_abs_diff` (ONNX against eager generate,
worst step), `parts_max_abs_diff` (ONNX against the same parts run eagerly:
ONNX's own error) and `decomposition_max_abs_diff` (the parts run eagerly
against eager generate: the static-cache split's own error), so a failure
says which of the two it is.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any, Callable, Iterator

import torch

from conformance.build.case import Case
from conformance.checks.common import onnx as _onnx
from conformance.checks.common.compare import judge_close, max_abs_diff
from conformance.checks.common.generation import (
    DecoderPart,
    EmbedPart,
    ExportedGeneration,
    VisionPart,
    eager_generation,
    single_prompt,
)
from conformance.checks.common.outcome import ContractViolation, NotApplicable
from conformance.checks.common.registry import check

NEW_TOKENS = 4
# Positional arguments of each part, by name (ExportedGeneration.prefill_embeds calls them positionally).
POSITIONAL = {
    "embed_prefill": ("input_ids",),
    "embed_step": ("input_ids",),
    "prefill": ("inputs_embeds",),
    "step": ("inputs_embeds", "cache_tensors"),
}


class FunctionalStep(DecoderPart):
    """The decode step with the cache as explicit inputs and outputs: `(logits, *updated cache)`.

    The cache tensors are copied before the decoder updates them in place, so
    no graph input is mutated (ONNX has no in-place update of an input).
    """

    def forward(self, inputs_embeds, cache_tensors: list[torch.Tensor] | None = None, **text):
        state = [t.clone() for t in cache_tensors]
        logits = super().forward(inputs_embeds, state, **text)
        return (logits, *state)


class OnnxGeneration(ExportedGeneration):
    """The generation parts of one model for one prompt, as ONNX sessions, and greedy decoding from them."""

    def parts(self) -> Iterator[tuple[str, tuple[torch.nn.Module, dict[str, Any]]]]:
        """Each part's name, module and the keyword inputs it is exported over (the decoder's from eager runs),
        in the order `export_generate` exports them: the decoder runs only once the parts before it are taken."""
        embedding = EmbedPart(self.owner.get_input_embeddings())
        decoder = DecoderPart(self.owner, self.max_len)
        ids = self.prompt_ids()
        if self.vision_model is not None:
            yield "vision", (VisionPart(self.vision_model), dict(self.media))
        yield "embed_prefill", (embedding, {"input_ids": ids})
        yield "embed_step", (embedding, {"input_ids": ids[:, -1:]})
        with torch.no_grad():
            embeds = embedding(ids)
            _, *state = decoder(embeds, **self.text)
        yield "prefill", (decoder, {"inputs_embeds": embeds, **self.text})
        yield "step", (FunctionalStep(self.owner, self.max_len), {"inputs_embeds": embeds[:, -1:],
                                                                  "cache_tensors": state})

    def export_onnx(self, folder: str, metrics: dict) -> dict[str, _onnx.OrtProgram]:
        sessions = {}
        export_seconds = ort_seconds = 0.0
        metrics["graph_nodes"] = metrics["model_bytes"] = 0
        dynamic: list[str] = []
        for name, (module, kwargs) in self.parts():
            path = os.path.join(folder, name, "model.onnx")
            os.makedirs(os.path.dirname(path))
            started = time.perf_counter()
            _onnx.export_onnx_file(module, kwargs, path, metrics, stage=f"export of part {name!r}")
            export_seconds += time.perf_counter() - started
            metrics["graph_nodes"] += _onnx.graph_nodes(path)
            if _onnx.dynamic_inputs(path):
                dynamic.append(name)
            metrics["model_bytes"] += _onnx.model_bytes(path)
            started = time.perf_counter()
            sessions[name] = _onnx.OrtProgram(path, metrics, stage=f"onnxruntime session of part {name!r}")
            ort_seconds += time.perf_counter() - started
        metrics["parts"] = sorted(sessions)
        metrics["dynamic_parts"] = sorted(dynamic)
        metrics["export_seconds"] = round(export_seconds, 3)
        metrics["ort_seconds"] = round(ort_seconds, 3)
        return sessions

    def greedy(self, run: Callable) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """(tokens [1, new_tokens], logits of each step) greedily from `run(name, *args, **kwargs)`.

        `run("prefill", ...)` and `run("step", ...)` return ``(logits, *cache)``;
        the step's cache outputs feed the next step.
        """
        with torch.no_grad():
            logits, *state = run("prefill", self.prefill_embeds(run), **self.text)
            steps = [logits.float()]
            tokens = [logits.argmax(-1, keepdim=True)]
            for _ in range(self.new_tokens - 1):
                logits, *state = run("step", run("embed_step", tokens[-1]), list(state))
                steps.append(logits.float())
                tokens.append(logits.argmax(-1, keepdim=True))
        return torch.cat(tokens, dim=1), steps


def ort_runner(sessions: dict[str, _onnx.OrtProgram]) -> Callable:
    def run(name, *args, **kwargs):
        named = dict(zip(POSITIONAL.get(name, ()), args), **kwargs)
        outputs = list(sessions[name](_onnx.leaf_feed(named), stage=f"onnxruntime run of part {name!r}").values())
        return outputs[0] if len(outputs) == 1 else outputs
    return run


def eager_runner(generation: OnnxGeneration) -> Callable:
    """Runs each part as a plain module (what was exported, without ONNX)."""
    modules = {name: module for name, (module, _) in generation.parts()}

    def run(name, *args, **kwargs):
        out = modules[name](*args, **kwargs)
        return list(out) if isinstance(out, tuple) else out
    return run


def step_diffs(actual: list[torch.Tensor], expected: list[torch.Tensor]) -> list[float]:
    return [max_abs_diff(a, e) for a, e in zip(actual, expected)]


@check("onnx_generate", column=96, tolerance="export", requires=_onnx.PACKAGES, extra=_onnx.EXTRA)
def check_onnx_generate(case: Case) -> dict:
    if getattr(case.tiny.config, "is_encoder_decoder", False) or "input_ids" not in case.sample.inputs:
        raise NotApplicable("encoder-decoder generation (no decoder-only prompt ids) is not split by this check")
    inputs = single_prompt(case.inputs())
    metrics: dict = {"new_tokens": NEW_TOKENS}
    generation = OnnxGeneration(case.fresh_model(), inputs, NEW_TOKENS)
    with tempfile.TemporaryDirectory(prefix="conformance-onnx-generate-") as folder:
        sessions = generation.export_onnx(folder, metrics)
        started = time.perf_counter()
        tokens, logits = generation.greedy(ort_runner(sessions))
        metrics["ort_seconds"] = round(metrics["ort_seconds"] + time.perf_counter() - started, 3)
        del sessions

    reference = case.fresh_model()
    expected_tokens, expected_logits = eager_generation(reference, inputs, NEW_TOKENS)
    expected_logits = [logits.float() for logits in expected_logits]
    parts = OnnxGeneration(reference, inputs, NEW_TOKENS)
    parts_tokens, parts_logits = parts.greedy(eager_runner(parts))

    diffs = step_diffs(logits, expected_logits)
    metrics["max_abs_diff"] = max(diffs)
    metrics["parts_max_abs_diff"] = max(step_diffs(logits, parts_logits))
    metrics["decomposition_max_abs_diff"] = max(step_diffs(parts_logits, expected_logits))
    tol = case.tol("export")
    for step, (actual, wanted) in enumerate(zip(logits, expected_logits)):
        found = judge_close(actual, wanted, tol, metrics)
        if not found.within:
            raise ContractViolation(
                f"step {step}: ONNX Runtime logits differ from eager generate by {found.beyond()} "
                f"(ONNX vs the same parts run eagerly: {metrics['parts_max_abs_diff']:.3g}; eager parts vs eager "
                f"generate: {metrics['decomposition_max_abs_diff']:.3g})", metrics)
        if not torch.equal(tokens[:, step], expected_tokens[:, step]):
            raise ContractViolation(
                f"tokens from the ONNX parts differ from eager generate at new token {step}: "
                f"{tokens[0].tolist()} vs {expected_tokens[0].tolist()}", metrics)
    return metrics
