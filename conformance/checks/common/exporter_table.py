"""The exporter columns, declared once: the backends of `transformers.exporters` and one row per column.

Torch-free (the report's readers and reproducer table read it). Contracts:

* `BACKENDS` names each backend's exporter, config and runner class in ``transformers.exporters``, the words
  its columns use for it (`title`), the packages it requires beyond the suite's own and the extra (or opt-in
  group) that brings it in: ``dynamo`` (torch.export, opt-in group ``exporters``), ``onnx`` (ONNX Runtime,
  extra ``[onnx]``), ``executorch`` (XNNPACK, extra ``[executorch]``), ``openvino`` (OpenVINO CPU, extra
  ``[openvino]``; its runners compiled in float32: `OPENVINO_FULL_PRECISION`).
* `COLUMNS` is every exporter column, one `Column` a row: (backend, part, column number, quantizer). A row's
  `part` is ``forward`` (`exporters.export_forward`) or ``generate`` (`exporters.export_generation`); its
  `quantizer` is None for the float export (every row today; a quantized export is meant to be a row with the
  quantizer's name). `checks/exporter_columns.py` registers one check per row, with `registration` (the
  backend's packages and extra, or its opt-in group), the export tolerance and `contract(row)` as its docstring.
* `column(check_id)` is the row of a check id (KeyError naming the known ids); `paths()` the exporter columns
  per backend (the findings' ``exporter:<backend>`` paths), in column order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PARTS = ("forward", "generate")


@dataclass(frozen=True)
class Backend:
    name: str
    exporter: str  # class name in transformers.exporters
    config: str
    runner: str  # the runner class its components run through
    title: str  # what its columns run on, in words
    requires: tuple[str, ...] = ()
    extra: str = ""
    opt_in: str = ""
    # What `ExportedModel.to(device, **runner_options)` passes the backend's runner (`exporters.runner_options`).
    runner_options: tuple[tuple[str, Any], ...] = ()


# OpenVINO's CPU plugin compiles a float32 model in bf16 where the CPU has it (AVX512-BF16, AMX): a performance
# default of the machine, not of the model. The columns ask for the export's own precision, as a user who needs
# float32 results does (`to(config=...)`, transformers' documented runner option), so a verdict says whether the
# conversion computes the model, the same on every CPU; the machine's default is recorded (`default_precision`).
OPENVINO_FULL_PRECISION = {"INFERENCE_PRECISION_HINT": "f32"}

BACKENDS = {
    "dynamo": Backend("dynamo", "DynamoExporter", "DynamoConfig", "DynamoModelRunner", "torch.export",
                      opt_in="exporters"),
    "onnx": Backend("onnx", "OnnxExporter", "OnnxConfig", "OnnxModelRunner", "ONNX Runtime CPU",
                    ("onnx", "onnxscript", "onnxruntime"), "onnx"),
    "executorch": Backend("executorch", "ExecutorchExporter", "ExecutorchConfig", "ExecutorchModelRunner",
                          "ExecuTorch with XNNPACK", ("executorch", "torchao"), "executorch"),
    "openvino": Backend("openvino", "OpenVINOExporter", "OpenVINOConfig", "OpenVINOModelRunner", "OpenVINO CPU",
                        ("openvino",), "openvino", runner_options=(("config", OPENVINO_FULL_PRECISION),)),
}


@dataclass(frozen=True)
class Column:
    """One exporter column: `backend`'s exporter, `part` (forward or generate), its matrix column `number`."""

    backend: str
    part: str
    number: int
    quantizer: str | None = None  # None: the float export
    tolerance: str = "export"  # the backend whose tolerance its comparisons use (`registry.check`)

    def __post_init__(self):
        if self.backend not in BACKENDS or self.part not in PARTS:
            raise ValueError(f"exporter column {self}: backend one of {sorted(BACKENDS)}, part one of {PARTS}")
        if self.quantizer is not None:
            raise ValueError(f"exporter column {self}: quantized exporter columns are not implemented yet")

    @property
    def id(self) -> str:
        return f"exporter_{self.backend}_{self.part}"


COLUMNS = (
    Column("dynamo", "forward", 102),
    Column("dynamo", "generate", 103),
    Column("onnx", "forward", 104),
    Column("onnx", "generate", 105),
    Column("executorch", "forward", 106),
    Column("executorch", "generate", 107),
    Column("openvino", "forward", 108),
    Column("openvino", "generate", 109),
)


def column(check_id: str) -> Column:
    for row in COLUMNS:
        if row.id == check_id:
            return row
    raise KeyError(f"no exporter column {check_id!r}; known: {', '.join(row.id for row in COLUMNS)}")


def paths() -> dict[str, tuple[str, ...]]:
    """``exporter:<backend>`` -> that backend's column ids, in column order."""
    found: dict[str, tuple[str, ...]] = {}
    for row in sorted(COLUMNS, key=lambda row: row.number):
        key = f"exporter:{row.backend}"
        found[key] = found.get(key, ()) + (row.id,)
    return found


def registration(backend: str) -> dict:
    """The `@check` keywords of a backend's columns: its packages and extra, or its opt-in group."""
    spec = BACKENDS[backend]
    if spec.requires:
        return {"requires": spec.requires, "extra": spec.extra}
    return {"opt_in": spec.opt_in}


# --- the contract a column states (its check function's docstring) -------------------------------------


FORWARD = """\
Check `{id}`: transformers' own exporter, one dynamic graph, on {title}.

Contract (`conformance.checks.common.exporters.export_forward`): a fresh model
exported with ``transformers.exporters.{exporter}().export(model, inputs,
Config(dynamic=True))`` runs through the backend's runner ({runner}) on the sample
and on a sample of another prompt length, each call within the export tolerance
of eager on the non-padding positions. Where the installed transformers has no
``transformers.exporters`` the column does not apply.
{availability}
Failure: the exporter's (or runner's) own first line and the innermost
transformers site (``transformers/exporters/`` included). Metrics: `backend`,
`variant`, `export_seconds`, `runner_seconds`, `max_abs_diff`,
`compared_positions`.
"""

GENERATE = """\
Check `{id}`: transformers' own decomposition for generation, greedy on {title}.

Contract (`conformance.checks.common.exporters.export_generation`): a fresh
model exported with ``export_for_generation(model, request,
Config(dynamic=True), generation_config=<static cache>)``; another fresh
instance's submodules and forward routed to the components' runners
({runner}), its own ``generate`` the glue; for the sample's
second prompt and the same prompt at another length, the greedy tokens equal
eager ``generate``'s (same static cache), then every step's logits within the
export tolerance. Where the installed transformers has no
``transformers.exporters`` the column does not apply; encoder-decoder classes
are not decomposed by it.
{availability}
Failure: the exporter's (or runner's) own first line, the component it names
and the innermost transformers site; or the first token / step that differs.
Metrics: `backend`, `components`, `variant`, `export_seconds`,
`generate_seconds`, `routed_calls`, `new_tokens`, `max_abs_diff`.
"""


def availability(backend: Backend) -> str:
    """The contract's line on when the column runs: its opt-in group, or the extra it requires."""
    if backend.requires:
        return (f"Optional: it requires the ``[{backend.extra}]`` extra; where it is not installed the column is "
                "not run.")
    return (f"An opt-in column (group ``{backend.opt_in}``, ``tox -e {backend.opt_in}``): it runs only when "
            "``--checks`` names it.")


def contract(row: Column) -> str:
    """What the column `row` checks, how it fails and what it measures: its check's docstring."""
    backend = BACKENDS[row.backend]
    template = FORWARD if row.part == "forward" else GENERATE
    return template.format(id=row.id, title=backend.title, exporter=backend.exporter, runner=backend.runner,
                           availability=availability(backend))
