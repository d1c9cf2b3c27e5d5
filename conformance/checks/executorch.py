"""Check `executorch`: the exported generation parts run in the ExecuTorch runtime.

Contract: the parts of `export_generate` (vision encoder + projector, text
embedding, prefill and decode step over a static cache; batch 1) are lowered
with ``to_edge_transform_and_lower`` and the XNNPACK partitioner (what
XNNPACK does not take runs on the portable kernels), serialized to a
``.pte`` buffer, loaded with ``executorch.runtime.Runtime`` and run from
Python: the prefill and `STEPS` greedy decode steps. Each step's logits
match the same parts run eagerly (same static cache, same inputs) within the
export tolerance; the decode steps feed the tokens the eager parts chose, so
one near-tie cannot cascade. The cache tensors the step program mutates come
back from the runtime as its first outputs and are carried to the next step.

Optional: it requires the ``[executorch]`` extra; where it is not
installed the column is not run (its cells are deselected and the report
says "not run", `registry.unavailable`). Metrics: `lower_seconds`,
`max_abs_diff`, `steps`.
"""

from __future__ import annotations

import time

import torch
from torch.utils import _pytree as pytree

from conformance.build.case import Case
from conformance.checks.common.compare import assert_close
from conformance.checks.common.generation import DecoderPart, EmbedPart, ExportedGeneration, VisionPart, single_prompt
from conformance.checks.common.outcome import ContractViolation, NotApplicable
from conformance.checks.common.registry import check
from conformance.reasons import one_line

STEPS = 2


class LoweredProgram:
    """One exported program lowered to ExecuTorch and loaded in its runtime, called like the program."""

    def __init__(self, program: torch.export.ExportedProgram):
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        from executorch.exir import to_edge_transform_and_lower
        from executorch.runtime import Runtime

        self.in_spec = program.call_spec.in_spec
        self.out_spec = program.call_spec.out_spec
        self.kwarg_order = _kwarg_order(self.in_spec)
        edge = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])
        # Lowering functionalizes the graph: in-place updates of inputs (the cache)
        # become extra outputs, which the runtime returns first, in this order.
        signature = edge.exported_program().graph_signature
        self.mutation_targets = [signature.user_inputs.index(name) for name in signature.user_inputs_to_mutate.values()]
        # The runtime's method borrows the program and its buffer: keep both alive.
        self.buffer = edge.to_executorch().buffer
        self.program = Runtime.get().load_program(self.buffer)
        self.method = self.program.load_method("forward")

    def __call__(self, *args, **kwargs):
        ordered = {k: kwargs[k] for k in self.kwarg_order if k in kwargs}
        flat, _ = pytree.tree_flatten((args, ordered))
        outputs = list(self.method.execute([t.contiguous() for t in flat]))
        count = len(self.mutation_targets)
        for index, value in zip(self.mutation_targets, outputs[:count]):
            flat[index].copy_(value)
        return pytree.tree_unflatten(outputs[count:], self.out_spec)


def _kwarg_order(in_spec) -> list[str]:
    """Keyword names in the order the program was exported with."""
    kwargs_spec = in_spec.children_specs[1] if in_spec.num_children == 2 else None
    return list(kwargs_spec.context) if kwargs_spec is not None and kwargs_spec.context else []


def eager_runner(generation: ExportedGeneration):
    """Runs each part of `generation` eagerly, as plain modules."""
    embedding = EmbedPart(generation.owner.get_input_embeddings())
    parts = {
        "embed_prefill": embedding,
        "embed_step": embedding,
        "prefill": DecoderPart(generation.owner, generation.max_len),
        "step": DecoderPart(generation.owner, generation.max_len),
    }
    if generation.vision_model is not None:
        parts["vision"] = VisionPart(generation.vision_model)
    return lambda name, *args, **kwargs: parts[name](*args, **kwargs)


@check("executorch", column=100, compares=("max_abs_diff",), tolerance="export", requires=("executorch", "torchao"),
       extra="executorch")
def check_executorch(case: Case) -> dict:
    if getattr(case.tiny.config, "is_encoder_decoder", False) or "input_ids" not in case.sample.inputs:
        raise NotApplicable("encoder-decoder generation (no decoder-only prompt ids) is not split by this check")
    inputs = single_prompt(case.inputs())
    generation = ExportedGeneration(case.fresh_model(), inputs)
    programs = generation.export()
    started = time.perf_counter()
    lowered = {}
    for name, program in programs.items():
        try:
            lowered[name] = LoweredProgram(program)
        except Exception as exc:
            raise ContractViolation(f"lowering of part {name!r} to ExecuTorch failed: {one_line(exc)}") from exc
    metrics = {"lower_seconds": round(time.perf_counter() - started, 3), "steps": STEPS}

    def run_lowered(name, *args, **kwargs):
        return lowered[name](*args, **kwargs)

    reference = ExportedGeneration(case.fresh_model(), inputs)
    run_eager = eager_runner(reference)
    tol = case.tol("export")
    with torch.no_grad():
        logits, *state = run_lowered("prefill", generation.prefill_embeds(run_lowered), **generation.text)
        expected, *eager_state = run_eager("prefill", reference.prefill_embeds(run_eager), **reference.text)
        assert_close(logits, expected, tol, "ExecuTorch prefill", metrics)
        state = [t.clone() for t in state]
        for step in range(STEPS):
            token = expected.argmax(-1, keepdim=True)
            logits = run_lowered("step", run_lowered("embed_step", token), state)
            expected = run_eager("step", run_eager("embed_step", token), eager_state)
            assert_close(logits, expected, tol, f"ExecuTorch decode step {step}", metrics)
    return metrics
