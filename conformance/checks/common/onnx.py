"""ONNX plumbing shared by the ONNX checks (`export_onnx`, `onnx_generate`).

Contracts:

* `PACKAGES` / `EXTRA` are what the ONNX checks declare to the registry
  (``requires=PACKAGES, extra=EXTRA``): without them installed their cells
  are not run at all (never a skip, never a pass).
* `exporter_name()` is the exporter a run uses: transformers' own
  ``transformers.exporters.OnnxExporter`` where the installed transformers has
  it (the supported path: it patches ops ONNX cannot lower and precomputes the
  data-dependent inputs of some encoders), else the dynamo-based
  ``torch.onnx.export(..., dynamo=True)``. ``CONFORMANCE_ONNX_EXPORTER=torch``
  forces the latter (to compare the two).
* `export_onnx_file(module, kwargs, path, metrics, stage)` exports a module
  called as ``module(**kwargs)`` to an ONNX file at `path` (weights in a
  sidecar ``.data`` file) and returns the graph's feed: its input names
  -> tensors (the transformers exporter adds inputs it precomputes, e.g.
  ``position_ids``). Failure: ContractViolation with the exporter's first line
  and the transformers ``file:line`` it points at.
* `OrtProgram(path)` opens the file in an ONNX Runtime CPU session; calling it
  with a feed returns ``{output name: torch tensor}``. A graph input the feed
  does not hold is a ContractViolation; feed entries the graph pruned are not
  passed.
* `dynamic_inputs(path)`: the graph inputs of an ONNX file with at least
  one symbolic dimension (a ``dim_param``, or a dimension without a value),
  sorted: what the file serves at other shapes; [] for a static graph.
* `leaf_feed(kwargs)` names the tensor leaves of keyword inputs as the graph
  inputs are named (``name``, ``name.0``, ...).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from typing import Any

import torch

from conformance.checks.common import export as _export
from conformance.checks.common.compare import logits_of
from conformance.checks.common.exporters import installed
from conformance.checks.common.generation import NamedInputs
from conformance.checks.common.outcome import ContractViolation, NotApplicable
from conformance.reasons import exception_chain, innermost, package_path

PACKAGES = ("onnx", "onnxscript", "onnxruntime")
EXTRA = "onnx"
TRANSFORMERS_EXPORTER = "transformers.exporters.OnnxExporter"
TORCH_EXPORTER = "torch.onnx.export(dynamo=True)"
EXPORTER_ENV = "CONFORMANCE_ONNX_EXPORTER"


def has_transformers_exporter() -> bool:
    return installed("transformers.exporters.exporter_onnx")


def exporter_name() -> str:
    if os.environ.get(EXPORTER_ENV, "").lower() == "torch" or not has_transformers_exporter():
        return TORCH_EXPORTER
    return TRANSFORMERS_EXPORTER


# --- naming the graph inputs ----------------------------------------------------------------------


def _leaves(value: Any, prefix: str):
    if isinstance(value, torch.Tensor):
        yield prefix, value
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _leaves(item, f"{prefix}.{index}")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, f"{prefix}.{key}")


def leaf_feed(kwargs: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Tensor leaves of `kwargs` by dotted path, in pytree order (the graph's input order)."""
    feed: dict[str, torch.Tensor] = {}
    for key, value in kwargs.items():
        feed.update(_leaves(value, key))
    return feed


# --- export ---------------------------------------------------------------------------------------


def export_onnx_file(module: torch.nn.Module, kwargs: dict[str, Any], path: str, metrics: dict,
                     stage: str = "export", keep: dict | None = None, shapes: dict | None = None,
                     log: Any = None) -> dict[str, torch.Tensor]:
    """Export `module(**kwargs)` to `path`; the feed (input name -> tensor) the graph was traced with.

    `keep`, when given, receives the torch.export program handed to the ONNX translation (``program``)
    and the keyword inputs it takes (``kwargs``), to tell the exporter's error from ONNX Runtime's.
    `shapes` are the ``dynamic_shapes`` of the inputs by name (None: a static graph); `log`, a
    `ShapeLog`, records what the shape environment decided while tracing.
    """
    exporter = exporter_name()
    metrics.setdefault("exporter", exporter)
    programs: list = []
    sample = dict(kwargs)
    try:
        with (log if log is not None else contextlib.nullcontext()), torch.no_grad(), _capturing_programs(programs):
            if exporter == TRANSFORMERS_EXPORTER:
                feed = _export_transformers(module, sample, path, shapes)
            else:
                feed = _export_torch(module, sample, path, shapes)
    except (ContractViolation, NotApplicable):
        raise
    except Exception as exc:
        said = innermost(exc, at_repeat=True)
        if isinstance(said, NotApplicable):  # a part said so while traced (`generation.carried_only`), re-raised
            raise said  # by the exporter's wrappers: the check does not apply, nothing failed
        raise ContractViolation(failure_reason(exc, f"{stage} ({exporter})", programs), metrics) from exc
    if keep is not None and programs:
        keep.update(program=programs[-1], kwargs=sample)
    return feed


def failure_reason(exc: BaseException, stage: str, programs: list) -> str:
    """The innermost error's first line, at the transformers line of the graph node that failed to translate
    (torch.onnx names the node; its stack trace is in the exported program) or of the traceback."""
    root = innermost(exc, at_repeat=True)
    reason = _export.exporter_reason(root, stage)
    location = _failed_node_location(exc, programs)
    if location and "(at " not in reason:
        reason += f" (at {location})"
    elif location:
        reason = reason[: reason.rindex("(at ")] + f"(at {location})"
    return reason


NODE = re.compile(r"Error when translating node %(\w+)")


def _failed_node_location(exc: BaseException, programs: list) -> str:
    """`transformers/...:N` of the node torch.onnx could not translate, from the program's node stack traces."""
    names = [name for raised in exception_chain(exc, context=True) for name in NODE.findall(str(raised))]
    for program in reversed(programs):
        for node in program.graph.nodes:
            if node.name in names:
                frames = _export.TRANSFORMERS_FRAME.findall(node.meta.get("stack_trace") or "")
                if frames:
                    file, line = frames[-1]
                    return f"{package_path(file)}:{line}"
    return ""


@contextlib.contextmanager
def _capturing_programs(programs: list):
    """Record the ExportedPrograms handed to torch.onnx.export (to locate a node that fails to translate)."""
    original = torch.onnx.export

    @functools.wraps(original)
    def export(model, *args, **kwargs):
        if isinstance(model, torch.export.ExportedProgram):
            programs.append(model)
        return original(model, *args, **kwargs)

    torch.onnx.export = export
    try:
        yield
    finally:
        torch.onnx.export = original


def _export_torch(module, kwargs, path, shapes=None) -> dict[str, torch.Tensor]:
    """torch.export (non-strict, as torch.onnx.export tries first), then torch.onnx.export of the program."""
    feed = leaf_feed(kwargs)
    module.eval()
    if shapes:
        module = NamedInputs(module, list(kwargs))
        program = torch.export.export(module, (), kwargs=dict(kwargs), strict=False,
                                      dynamic_shapes={k: shapes.get(k) for k in kwargs})
    else:
        program = torch.export.export(module, (), kwargs=dict(kwargs), strict=False)
    onnx_program = torch.onnx.export(program, (), kwargs=dict(kwargs), dynamo=True, input_names=list(feed),
                                     external_data=True, optimize=True, verbose=False)
    onnx_program.save(path, external_data=True)
    return feed


def _export_transformers(module, kwargs, path, shapes=None) -> dict[str, torch.Tensor]:
    from transformers.exporters import OnnxConfig, OnnxExporter

    # The exporter adds the inputs it precomputes (rope positions, cu_seqlens, ...) to `kwargs` in place.
    config = OnnxConfig(dynamic_shapes={k: shapes.get(k) for k in kwargs}) if shapes else OnnxConfig()
    exported = OnnxExporter().export(module, kwargs, config)
    OnnxExporter.save_program(exported.program, path)
    return leaf_feed(kwargs)


def program_logits(keep: dict) -> torch.Tensor | None:
    """Logits of the kept torch.export program (what ONNX translated) over its inputs; None if it cannot run."""
    if "program" not in keep:
        return None
    try:
        with torch.no_grad():
            out = keep["program"].module()(**keep["kwargs"])
        return logits_output(out) if isinstance(out, dict) else logits_of(out)
    except Exception:
        return None


def graph_nodes(path: str) -> int:
    """Nodes of the saved graph (main graph; function bodies not expanded)."""
    import onnx

    return len(onnx.load(path, load_external_data=False).graph.node)


def dynamic_inputs(path: str) -> list[str]:
    """Graph inputs of the ONNX file at `path` with a symbolic (or unknown) dimension, sorted."""
    import onnx

    graph = onnx.load(path, load_external_data=False).graph
    names = []
    for value in graph.input:
        dims = value.type.tensor_type.shape.dim
        if any(dim.HasField("dim_param") or not dim.HasField("dim_value") for dim in dims):
            names.append(value.name)
    return sorted(names)


def model_bytes(path: str) -> int:
    """The .onnx file and its weights sidecar(s) next to it."""
    folder, name = os.path.split(path)
    return sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder) if f.startswith(name))


# --- ONNX Runtime ---------------------------------------------------------------------------------


class OrtProgram:
    """An ONNX file in an ONNX Runtime CPU session: `program(feed) -> {output name: tensor}`."""

    def __init__(self, path: str, metrics: dict, stage: str = "onnxruntime session"):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, torch.get_num_threads())
        options.log_severity_level = 3  # errors only: unused-initializer warnings are noise
        try:
            self.session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise ContractViolation(ort_reason(exc, stage), metrics) from exc
        self.metrics = metrics
        self.inputs = [spec.name for spec in self.session.get_inputs()]
        self.outputs = [spec.name for spec in self.session.get_outputs()]

    def __call__(self, feed: dict[str, torch.Tensor], stage: str = "onnxruntime run") -> dict[str, torch.Tensor]:
        missing = [name for name in self.inputs if _lookup(feed, name) is None]
        if missing:
            raise ContractViolation(f"{stage}: the graph takes {missing}, which the inputs {list(feed)} do not hold",
                                    self.metrics)
        arrays = {name: _lookup(feed, name).detach().cpu().contiguous().numpy() for name in self.inputs}
        try:
            values = self.session.run(None, arrays)
        except Exception as exc:
            raise ContractViolation(ort_reason(exc, stage), self.metrics) from exc
        return {name: torch.from_numpy(value) for name, value in zip(self.outputs, values)}


ORT_SOURCE = re.compile(r"/onnxruntime_src/\S+ (?:\S+\(.*?\) )?")
ORT_PREFIX = re.compile(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ")


def ort_reason(exc: BaseException, stage: str) -> str:
    """`stage: Type: message` of an ONNX Runtime error on one line, without its C++ source path and signature."""
    text = ORT_PREFIX.sub("", ORT_SOURCE.sub("", " ".join(str(exc).split())))
    text = text.replace("Non-zero status code returned while running ", "")
    text = re.sub(r"Load model from \S+ failed: ?", "model does not load: ", text)
    if len(text) > _export.REASON_LIMIT:
        text = text[: _export.REASON_LIMIT - 3] + "..."
    return f"{stage}: {type(exc).__name__}: {text}"


def _lookup(feed: dict[str, torch.Tensor], name: str) -> torch.Tensor | None:
    # transformers' exporter prefixes an input that is also an output (a mutated one) with `input.`.
    if name in feed:
        return feed[name]
    return feed.get(name.removeprefix("input."))


def logits_output(outputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """The `logits` output, else the first one."""
    if "logits" in outputs:
        return outputs["logits"]
    return next(iter(outputs.values()))
