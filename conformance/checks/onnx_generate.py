"""Check `onnx_generate`: one set of ONNX parts in ONNX Runtime serves the next prompt, like eager generate.

Contract: the model is split as `export_generate` splits it (parts ``vision``
= encoder + projector over the media, ``embed_prefill`` / ``embed_step`` =
the text embedding, ``prefill`` = the decoder and its head over
``inputs_embeds`` from a fresh StaticCache of one fixed size, ``step`` = one
token over that cache), each part exported once to an ONNX file with the
exporter `export_onnx` uses, with the same dynamic dims (the prompt length
in ``embed_prefill`` and ``prefill``, the image dims in ``vision`` where an
image request exists; the step static), and run in an ONNX Runtime CPU
session. ONNX has no in-place update of a graph input, so the cache is
explicit: the prefill returns the cache tensors (keys, values, length per
layer), the step takes them as inputs and returns the updated ones after its
logits (`FunctionalStep` updates copies), and the runner carries them from
step to step; the length tensors are the step's write position. Greedy
decoding from those sessions alone (the placeholder merge and the argmax are
the runner's glue), for every request of `conformance.checks.common.served`
(the sample's prompt, batch 1; another prompt length; another image size
where the class takes one), must give the first `NEW_TOKENS` tokens of
eager ``generate(do_sample=False)`` of a fresh model over the same inputs,
and at every step the logits of eager ``generate`` (``output_logits``)
within the export tolerance.

Optional: it requires ``onnx``, ``onnxscript`` and ``onnxruntime`` (extra
``[onnx]``); where they are not installed the column is not run.
Failure: the part that failed to export or run with the exporter's first
line, the first step whose token or logits differ, or for another request
``served traced, not <request>: ...`` (`served.judge_requests`, with its
``specialisation`` fingerprints). Metrics: `exporter`, `parts`,
`dynamic_parts` (the parts whose ONNX graph has an input with a symbolic
dimension), `requests`, `served`, `requests_unavailable`, `static_export`,
`max_len`, `export_seconds`, `ort_seconds`, `graph_nodes` (all parts),
`model_bytes`, `new_tokens`, `max_abs_diff` (ONNX against eager generate,
worst request and step).
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Callable

import torch

from conformance.cases.case import Case
from conformance.cases.configs import is_encoder_decoder
from conformance.checks.common import onnx as _onnx
from conformance.checks.common.generation import (
    MEDIA_PARTS,
    PART_INPUTS,
    DecoderPart,
    ExportedGeneration,
    eager_generation,
)
from conformance.checks.common.outcome import ContractViolation, NotApplicable
from conformance.checks.common.registry import check, declared_tolerance
from conformance.checks.common.served import serve
from conformance.checks.common.shapes import ShapeLog

NEW_TOKENS = 4
POSITIONAL = PART_INPUTS


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
    """The generation parts of one model as ONNX sessions (the step functional), and greedy decoding from them."""

    def modules(self) -> dict[str, torch.nn.Module]:
        modules = super().modules()
        modules["step"] = FunctionalStep(self.owner, self.max_len)
        return modules

    def export_onnx(self, folder: str, metrics: dict, shapes: dict | None = None) -> dict[str, _onnx.OrtProgram]:
        sessions = {}
        export_seconds = ort_seconds = 0.0
        metrics["graph_nodes"] = metrics["model_bytes"] = 0
        dynamic: list[str] = []
        modules = self.modules()
        for name, kwargs in self.part_inputs():
            path = os.path.join(folder, name, "model.onnx")
            os.makedirs(os.path.dirname(path))
            started = time.perf_counter()
            self.logs[name] = ShapeLog()
            shape = (shapes or {}).get(name)
            try:
                _onnx.export_onnx_file(modules[name], kwargs, path, metrics, stage=f"export of part {name!r}",
                                       shapes=shape, log=self.logs[name])
            except ContractViolation as exc:  # a media part whose dims cannot be dynamic is exported static
                if name not in MEDIA_PARTS or not shape:
                    raise
                self.refused[name] = exc
                _onnx.export_onnx_file(modules[name], kwargs, path, metrics, stage=f"export of part {name!r}")
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


def ort_runner(sessions: dict[str, _onnx.OrtProgram]) -> Callable:
    def run(name, *args, **kwargs):
        named = dict(zip(POSITIONAL.get(name, ()), args), **kwargs)
        outputs = list(sessions[name](_onnx.leaf_feed(named), stage=f"onnxruntime run of part {name!r}").values())
        return outputs[0] if len(outputs) == 1 else outputs
    return run


@check("onnx_generate", column=96, compares=("max_abs_diff",), tolerance="export", requires=_onnx.PACKAGES,
       extra=_onnx.EXTRA)
def check_onnx_generate(case: Case) -> dict:
    if is_encoder_decoder(case.tiny.config) or "input_ids" not in case.sample.inputs:
        raise NotApplicable("encoder-decoder generation (no decoder-only prompt ids) is not split by this check")
    metrics: dict = {"new_tokens": NEW_TOKENS}
    with tempfile.TemporaryDirectory(prefix="conformance-onnx-generate-") as folder:
        def build(generation: OnnxGeneration, shapes: dict):
            target = tempfile.mkdtemp(dir=folder)
            run = ort_runner(generation.export_onnx(target, metrics, shapes))

            def timed(name, *args, **kwargs):
                begun = time.perf_counter()
                try:
                    return run(name, *args, **kwargs)
                finally:
                    metrics["ort_seconds"] = round(metrics["ort_seconds"] + time.perf_counter() - begun, 3)
            return timed

        serve(case, build, NEW_TOKENS, lambda model, inputs: eager_generation(model, inputs, NEW_TOKENS),
              declared_tolerance(case), metrics, generation_class=OnnxGeneration)
    return metrics
