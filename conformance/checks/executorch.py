"""Check `executorch`: one set of generation parts in the ExecuTorch runtime serves the next prompt.

Contract: the parts of `export_generate`, exported once with the same dynamic
dims (the prompt length in ``embed_prefill`` and ``prefill``, bounded by the
one static cache's size; the image dims in ``vision`` where an image request
exists; the decode step static, its write position an input), are lowered
with ``to_edge_transform_and_lower`` and the XNNPACK partitioner (what
XNNPACK does not take runs on the portable kernels), serialized to a
``.pte`` buffer, loaded with ``executorch.runtime.Runtime`` and run from
Python. Greedy decoding of `NEW_TOKENS` tokens from the lowered parts, for
every request of `conformance.checks.common.served` (the sample's prompt,
batch 1; another prompt length; another image size where the class takes
one), must give the tokens of eager ``generate`` of a fresh model, and each
step's logits within the export tolerance. The cache tensors the step
program mutates come back from the runtime as its first outputs and are
carried to the next step.

Optional: it requires the ``[executorch]`` extra; where it is not
installed the column is not run (its cells are deselected and the report
says "not run", `registry.unavailable`). Metrics: `lower_seconds`,
`pte_bytes` (part -> size of its ``.pte``), `delegation` (part -> nodes
XNNPACK took and the operators left to the portable kernels), `requests`, `served`,
`requests_unavailable`, `static_export`, `max_len`, `new_tokens`,
`max_abs_diff`.
"""

from __future__ import annotations

import time

import torch
from torch.utils import _pytree as pytree

from conformance.cases.case import Case
from conformance.cases.configs import is_encoder_decoder
from conformance.checks.common.generation import PART_INPUTS, ExportedGeneration, eager_generation
from conformance.checks.common.outcome import ContractViolation, NotApplicable
from conformance.checks.common.registry import check, declared_tolerance
from conformance.checks.common.served import serve
from conformance.reasons import one_line

NEW_TOKENS = 3


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
        self.delegation = delegation(edge.exported_program().graph_module)
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


def delegation(graph_module) -> dict:
    """What XNNPACK took of a lowered graph and what it left to ExecuTorch's portable kernels: ``{"xnnpack_nodes":
    n, "portable": {operator: count}}`` (the operators outside every delegate; getitem bookkeeping excluded)."""
    from executorch.devtools.backend_debug import get_delegation_info

    info = get_delegation_info(graph_module)
    portable = {op: b.non_delegated for op, b in sorted(info.delegation_by_operator.items())
                if b.non_delegated and op != "getitem"}
    return {"xnnpack_nodes": info.num_delegated_nodes, "portable": portable}


def _kwarg_order(in_spec) -> list[str]:
    """Keyword names in the order the program was exported with."""
    kwargs_spec = in_spec.children_specs[1] if in_spec.num_children == 2 else None
    return list(kwargs_spec.context) if kwargs_spec is not None and kwargs_spec.context else []


@check("executorch", column=100, compares=("max_abs_diff",), tolerance="export", requires=("executorch", "torchao"),
       extra="executorch")
def check_executorch(case: Case) -> dict:
    if is_encoder_decoder(case.tiny.config) or "input_ids" not in case.sample.inputs:
        raise NotApplicable("encoder-decoder generation (no decoder-only prompt ids) is not split by this check")
    metrics: dict = {"new_tokens": NEW_TOKENS}

    def build(generation: ExportedGeneration, shapes: dict):
        programs = generation.export(shapes)
        started = time.perf_counter()
        lowered = {}
        for name, program in programs.items():
            try:
                lowered[name] = LoweredProgram(program)
            except Exception as exc:
                raise ContractViolation(f"lowering of part {name!r} to ExecuTorch failed: {one_line(exc)}",
                                        metrics) from exc
        metrics["lower_seconds"] = round(time.perf_counter() - started, 3)
        metrics["pte_bytes"] = {name: len(part.buffer) for name, part in lowered.items()}
        metrics["delegation"] = {name: part.delegation for name, part in lowered.items()}

        def run(name, *args, **kwargs):
            return lowered[name](**dict(zip(PART_INPUTS.get(name, ()), args), **kwargs))
        return run

    serve(case, build, NEW_TOKENS, lambda model, inputs: eager_generation(model, inputs, NEW_TOKENS),
          declared_tolerance(case), metrics)
    return metrics
