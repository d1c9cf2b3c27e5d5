"""The exporter columns, declared once: the backends of `transformers.exporters` and one row per column.

Torch-free (the report's readers and reproducer table read it). Contracts:

* `BACKENDS` names each backend's exporter, config and runner class in ``transformers.exporters``, the words
  its columns use for it (`title`), the packages it requires beyond the suite's own and the extra (or opt-in
  group) that brings it in: ``dynamo`` (torch.export, opt-in group ``exporters``), ``onnx`` (ONNX Runtime,
  extra ``[onnx]``), ``executorch`` (XNNPACK, extra ``[executorch]``), ``openvino`` (OpenVINO CPU, extra
  ``[openvino]``; its runners compiled in float32: `OPENVINO_FULL_PRECISION`).
* `QUANTIZERS` names each quantizer of ``transformers.exporters.quantizers`` the columns call, and per backend it
  takes the recipe (`RECIPES`: what a user of that backend passes it, whether it reads calibration data, the
  packages it needs): every quantizer x backend pair transformers 5.24 declares (its `supported_formats`),
  ``pt2e`` (`PT2EQuantizer`: dynamo, ONNX, OpenVINO with torchao's X86InductorQuantizer, ExecuTorch with
  XNNPACKQuantizer), ``ort_dynamic`` / ``ort_static`` (`OnnxRuntimeQuantizer`: ONNX), ``nncf_fx``
  (`NNCFTorchFXQuantizer`: int8 on dynamo, ONNX and OpenVINO; weights only on ExecuTorch, the one result it
  lowers), ``nncf_openvino`` / ``nncf_openvino_weights`` (`NNCFOpenVINOQuantizer`: quantization, weight
  compression) and ``nncf_onnx`` (`NNCFOnnxQuantizer`).
* `COLUMNS` is every exporter column, one `Column` a row: (backend, part, column number, quantizer). A row's
  `part` is ``forward`` or ``generate``; its `quantizer` is None for the float export (`exporters.export_forward`,
  `exporters.export_generation`), else a quantizer the backend takes (`quantized.export_forward`,
  `quantized.export_generation`; its id ``exporter_<backend>_<quantizer>_<part>``). `checks/exporter_columns.py`
  registers one check per row, with `row_registration(row)` (the backend's packages and extra, or its opt-in
  group; a quantized row: the backend's and the recipe's packages, extra ``[quantized]``), the export tolerance and
  `contract(row)` as its docstring.
* `column(check_id)` is the row of a check id (KeyError naming the known ids); `paths()` the float exporter
  columns per backend (the findings' ``exporter:<backend>`` paths), in column order.
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
class Recipe:
    """What a quantizer is given for one backend: in words, whether it reads calibration samples, its packages."""

    words: str
    calibrates: bool
    requires: tuple[str, ...] = ()


RECIPES = {
    "x86_int8": Recipe("static int8, weights per channel (torchao's X86InductorQuantizer, its default config)", True),
    "xnnpack_int8": Recipe("static int8, symmetric per tensor (ExecuTorch's XNNPACKQuantizer)", True, ("executorch",)),
    "ort_dynamic_int8": Recipe("int8 weights, activations quantized at run time (OnnxRuntimeDynamicConfig())", False),
    "ort_static_int8": Recipe("static int8 QDQ (OnnxRuntimeStaticConfig())", True),
    "nncf_int8": Recipe("int8 weights and activations (NNCFQuantizationConfig(): nncf.quantize)", True),
    "nncf_weights_int8": Recipe("int8 weights only, data-free (NNCFWeightCompressionConfig(): nncf.compress_weights)",
                                False),
}


@dataclass(frozen=True)
class Quantizer:
    """A quantizer of ``transformers.exporters`` (its class name) and the recipe each backend it takes gets."""

    name: str
    cls: str
    recipes: tuple[tuple[str, str], ...]  # (backend, recipe name)
    requires: tuple[str, ...] = ()

    def recipe(self, backend: str) -> Recipe:
        return RECIPES[dict(self.recipes)[backend]]


QUANTIZED_EXTRA = "quantized"
QUANTIZERS = {
    "pt2e": Quantizer("pt2e", "PT2EQuantizer", (("dynamo", "x86_int8"), ("onnx", "x86_int8"),
                                                 ("executorch", "xnnpack_int8"), ("openvino", "x86_int8")),
                      ("torchao",)),
    "ort_dynamic": Quantizer("ort_dynamic", "OnnxRuntimeQuantizer", (("onnx", "ort_dynamic_int8"),)),
    "ort_static": Quantizer("ort_static", "OnnxRuntimeQuantizer", (("onnx", "ort_static_int8"),)),
    "nncf_fx": Quantizer("nncf_fx", "NNCFTorchFXQuantizer", (("dynamo", "nncf_int8"), ("onnx", "nncf_int8"),
                                                              ("executorch", "nncf_weights_int8"),
                                                              ("openvino", "nncf_int8")), ("nncf",)),
    "nncf_openvino": Quantizer("nncf_openvino", "NNCFOpenVINOQuantizer", (("openvino", "nncf_int8"),), ("nncf",)),
    "nncf_openvino_weights": Quantizer("nncf_openvino_weights", "NNCFOpenVINOQuantizer",
                                       (("openvino", "nncf_weights_int8"),), ("nncf",)),
    "nncf_onnx": Quantizer("nncf_onnx", "NNCFOnnxQuantizer", (("onnx", "nncf_int8"),), ("nncf",)),
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
        quantizer = QUANTIZERS.get(self.quantizer or "")
        if self.quantizer is not None and (quantizer is None or self.backend not in dict(quantizer.recipes)):
            takes = {name: [b for b, _ in q.recipes] for name, q in QUANTIZERS.items()}
            raise ValueError(f"exporter column {self}: quantizer one of {takes} on a backend it takes")

    @property
    def id(self) -> str:
        middle = f"_{self.quantizer}" if self.quantizer else ""
        return f"exporter_{self.backend}{middle}_{self.part}"


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
# The quantized exports: every quantizer x backend pair, forward and generate, from column 120 on.
COLUMNS += tuple(Column(backend, part, 120 + 2 * index + offset, quantizer)
                 for index, (quantizer, backend) in enumerate((name, backend) for name, q in QUANTIZERS.items()
                                                              for backend, _ in q.recipes)
                 for offset, part in enumerate(PARTS))


def column(check_id: str) -> Column:
    for row in COLUMNS:
        if row.id == check_id:
            return row
    raise KeyError(f"no exporter column {check_id!r}; known: {', '.join(row.id for row in COLUMNS)}")


def paths() -> dict[str, tuple[str, ...]]:
    """``exporter:<backend>`` -> that backend's column ids, in column order."""
    found: dict[str, tuple[str, ...]] = {}
    for row in sorted(COLUMNS, key=lambda row: row.number):
        if row.quantizer:
            continue
        key = f"exporter:{row.backend}"
        found[key] = found.get(key, ()) + (row.id,)
    return found


def registration(backend: str) -> dict:
    """The `@check` keywords of a backend's columns: its packages and extra, or its opt-in group."""
    spec = BACKENDS[backend]
    if spec.requires:
        return {"requires": spec.requires, "extra": spec.extra}
    return {"opt_in": spec.opt_in}


def row_registration(row: Column) -> dict:
    """The `@check` keywords of a row: its backend's (`registration`); a quantized row needs its backend's and its
    recipe's packages too, installed by the ``[quantized]`` extra, and compares no logits elementwise (its
    judgement is the SQNR band of `tolerances.sqnr_bounds`)."""
    if row.quantizer is None:
        return registration(row.backend)
    quantizer = QUANTIZERS[row.quantizer]
    packages = BACKENDS[row.backend].requires + quantizer.requires + quantizer.recipe(row.backend).requires
    return {"requires": tuple(dict.fromkeys(packages)), "extra": QUANTIZED_EXTRA, "compares": ()}


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


QUANTIZED_FORWARD = """\
Check `{id}`: transformers' own exporter with {quantizer_cls} ({recipe}), one dynamic graph, on {title}.

Contract (`conformance.checks.common.quantized.export_forward`): a fresh model
exported with ``transformers.exporters.{exporter}().export(model, inputs,
Config(dynamic=True, quantizer={quantizer_cls}(...)))``, calibrated on the
export's own sample where the recipe reads data, runs through the backend's
runner ({runner}) on the sample and on a sample of another prompt length (the
second request, not calibrated on); the SQNR of each call's logits against a
plain eager float forward (non-padding positions) is within the quantized band
of `conformance.tolerances.sqnr_bounds` (floor 30 dB, ceiling 98 dB: above it
nothing was quantized), and the saved artifact is smaller than the float
export's. With random weights top-1 agreement means nothing: it is recorded,
never judged. Where the installed transformers has no
``transformers.exporters`` the column does not apply.
{availability}
Failure: its step first (export, prepare, calibrate, convert, lower: the
backend's conversion of the quantized graph, load, run, quantize: the numbers
or the size), then the exporter's own first line and the innermost transformers
site. Metrics: `backend`, `quantizer`, `recipe`, `variant`, `sqnr_db`,
`sqnr_floor_db`, `quantized_bytes`, `float_bytes`, `size_ratio`,
`top1_agreement`, `export_seconds`, `float_export_seconds`.
"""

QUANTIZED_GENERATE = """\
Check `{id}`: transformers' own decomposition for generation with {quantizer_cls} ({recipe}), on {title}.

Contract (`conformance.checks.common.quantized.export_generation`): a fresh
model exported with ``export_for_generation(model, request,
Config(dynamic=True, quantizer={quantizer_cls}(..., calibration_dataset=[request])),
generation_config=<static cache>)`` (each component quantized, calibrated on
its own inputs captured from the request); another fresh instance routed to
the components' runners ({runner}), its own ``generate`` the glue, made to
follow eager float ``generate``'s tokens, for the sample's second prompt and
the same prompt at another length; the SQNR of every step's logits against
eager's is within the quantized band of `conformance.tolerances.sqnr_bounds`,
and the saved components are smaller than the float export's. A submodule
left out of the components fails as in the float column. Where the installed
transformers has no ``transformers.exporters`` the column does not apply;
encoder-decoder classes are not decomposed by it.
{availability}
Failure: its step first (calibrate: capturing the components' calibration
inputs, export, prepare, calibrate, convert, lower, load, run, quantize), the
component, the exporter's own first line and the innermost transformers site.
Metrics: `backend`, `quantizer`, `recipe`, `components`, `variant`,
`sqnr_db`, `sqnr_floor_db`, `quantized_bytes`, `float_bytes`, `size_ratio`,
`top1_agreement`, `export_seconds`, `generate_seconds`.
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
    if row.quantizer is None:
        template = FORWARD if row.part == "forward" else GENERATE
        return template.format(id=row.id, title=backend.title, exporter=backend.exporter, runner=backend.runner,
                               availability=availability(backend))
    quantizer = QUANTIZERS[row.quantizer]
    template = QUANTIZED_FORWARD if row.part == "forward" else QUANTIZED_GENERATE
    return template.format(id=row.id, title=backend.title, exporter=backend.exporter, runner=backend.runner,
                           quantizer_cls=quantizer.cls, recipe=quantizer.recipe(row.backend).words,
                           availability=(f"Optional: it requires the ``[{QUANTIZED_EXTRA}]`` extra; where it is not "
                                         "installed the column is not run."))
