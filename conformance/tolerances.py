"""How close two outputs must be: one rule, one table.

Contract: `tolerance(dtype_name, backend)` is the `Tolerance` a check
judges logits with, for a dtype name (``float32``, ``bfloat16``,
``float16``) and a backend (a dynamo backend, or ``export`` for exported
programs run anywhere). A check names the backend once, in its
registration (``@check(tolerance=...)``, default: the backend its cell runs
under), and asks for the result with
`conformance.checks.common.registry.declared_tolerance`. A difference is allowed elementwise when
``|actual - expected| <= atol + rtol * |expected|`` (the rule of
`torch.testing.assert_close`): a rounding-level difference on large logits
is not a failure, and a difference on small ones is judged as tightly as
before. `atol` is design.md's absolute table (float32: 1e-5 for eager and
aot_eager, 1e-4 for inductor and exported programs; bfloat16/float16: 1e-2);
`rtol` is torch.testing's default of the dtype (float32 1.3e-6, float16
1e-3, bfloat16 1.6e-2), the floor the issue tracker's rule names. Nothing
here is widened per model.

A comparison that is not of logits has its own kind in the same table
(`KINDS`), asked for the same way, ``tolerance(dtype_name, kind)``:

* ``cache_contents``: the keys and values two caches hold for the same
  positions (`static_cache` and its property test). float32: rounding only
  (the same projections of the same hidden states, summed in another
  order), so a tight bound, atol 1e-6, rtol 3e-5. bfloat16/float16: the
  logits' own (atol 1e-2, the dtype's rtol): torch.testing's defaults for
  the dtype (bf16 rtol 1.6e-2, fp16 1e-3, atol 1e-5) assume one rounding of
  values of magnitude ~1, while the keys of a deeper layer carry the
  rounding of every earlier layer's attention (one ulp of bf16 is 2^-8 of
  the value, and an entry near 0 that is a sum of terms of magnitude ~1
  keeps their absolute error), so the absolute floor is design.md's 1e-2.
* ``batch_repeat``: a doubled batch must repeat the sample's logits
  (`cases.variants`, whether the ``batch`` variant exists). float32: an
  absolute 1e-4 (batch-size numerics, no rtol); bfloat16/float16: the eager
  logits' own row.

A dtype a kind has no row for (float64, the witness) gets its float32 row.
A quantized export is not judged elementwise: its logits carry the
quantization's noise by design. `sqnr_bounds(dtype_name, kind)` is the
band its signal-to-quantization-noise ratio (``20 log10(|expected| /
|actual - expected|)``, dB, over every compared logit) must fall in, keyed
as the rest of the table by (dtype, kind), kind ``quantized``
(`SQNR_KINDS`): floor 30 dB, the bound PyTorch's own quantization numerics
test asserts of a whole int8 model against its float model
(``test/test_quantized_models.py``: "SQNR > 30 dB", "relative error 1e-3")
and torchao asserts of whole quantized models (``compute_error(out_q, out)
> 30``: its MoE and GPTQ tests); ceiling 98 dB, what 16-bit uniform
quantization of a full-scale signal reaches (6.02 * 16 + 1.76): every
quantizer of these columns is 8 bits or fewer, so logits closer to float
than that were not quantized on their path (float32 reorderings alone give
well above it). A dtype the kind has no row for gets its float32 row.

No comparison elsewhere in the suite holds a tolerance constant of its own,
and none asks for a dtype other than its run's
(`conformance/meta/test_dtype_contracts.py` reads the code to keep it so).

A comparing cell records ``worst_ratio`` (the largest ``|actual - expected|
/ (atol + rtol * |expected|)`` over everything it compared: 1.0 is the edge,
above it the cell failed) and the ``atol`` and ``rtol`` it was judged with;
`NEAR_EDGE` is the factor within which a ratio sits at the edge (a pass above
1/2, a failure whose comparison failed below 2: where a verdict can flip with
the machine).
`COMPARISON_METRICS` are the metric names a check records for a comparison
it asserts (a check registers its own list when it differs:
`conformance.checks.common.registry`). Torch-free, so a reader of a run
file can apply it too.
"""

from __future__ import annotations

from dataclasses import dataclass

FLOAT32 = {
    "eager": 1e-5,
    "aot_eager": 1e-5,
    "inductor": 1e-4,
    "export": 1e-4,
}
FLOAT32_OTHER = 1e-4  # any other backend
LOW_PRECISION = 1e-2
LOW_PRECISION_DTYPES = ("bfloat16", "float16")
RTOL = {"float32": 1.3e-6, "float64": 1e-7, "float16": 1e-3, "bfloat16": 1.6e-2}  # torch.testing's defaults
CACHE = (1e-6, 3e-5)  # float32 (atol, rtol) of the keys/values two caches hold for the same positions
# Comparisons with their own kind (see the module): kind -> dtype -> (atol, rtol).
KINDS = {
    "cache_contents": {"float32": CACHE, "bfloat16": (LOW_PRECISION, RTOL["bfloat16"]),
                       "float16": (LOW_PRECISION, RTOL["float16"])},
    "batch_repeat": {"float32": (1e-4, 0.0), "bfloat16": (LOW_PRECISION, RTOL["bfloat16"]),
                     "float16": (LOW_PRECISION, RTOL["float16"])},
}
# Quantized exports (see the module): kind -> dtype -> (floor, ceiling) of the SQNR in dB.
SQNR_KINDS = {"quantized": {"float32": (30.0, 98.0)}}
NEAR_EDGE = 2.0
# Worst difference against the reference, against a forward without cache, between two calls of one program.
COMPARISON_METRICS = ("max_abs_diff", "max_abs_diff_no_cache", "repeat_diff")


@dataclass(frozen=True)
class Tolerance:
    """``|actual - expected| <= atol + rtol * |expected|``, elementwise."""

    atol: float
    rtol: float

    def allowed(self, expected: float) -> float:
        """The difference allowed where the expected value is `expected`."""
        return self.atol + self.rtol * abs(expected)

    def __str__(self) -> str:
        return f"{self.atol:g} + {self.rtol:g}*|expected|"


def _dtype(dtype_name: str) -> str:
    return dtype_name.removeprefix("torch.")


def tolerance(dtype_name: str, backend: str) -> Tolerance:
    """The row of the table for a dtype name and a backend, or a kind of comparison (`KINDS`)."""
    name = _dtype(dtype_name)
    if backend in KINDS:
        return Tolerance(*KINDS[backend].get(name, KINDS[backend]["float32"]))
    atol = LOW_PRECISION if name in LOW_PRECISION_DTYPES else FLOAT32.get(backend, FLOAT32_OTHER)
    return Tolerance(atol, RTOL.get(name, RTOL["float32"]))


@dataclass(frozen=True)
class SqnrBounds:
    """A quantized output's SQNR against its float reference must be in ``[floor_db, ceiling_db]``: below, the
    quantization destroyed the numbers; above, nothing on their path was quantized."""

    floor_db: float
    ceiling_db: float

    def __str__(self) -> str:
        return f"[{self.floor_db:g}, {self.ceiling_db:g}] dB"


def sqnr_bounds(dtype_name: str, kind: str = "quantized") -> SqnrBounds:
    """The SQNR band of a kind of quantized comparison (`SQNR_KINDS`) at a dtype (its float32 row by default)."""
    rows = SQNR_KINDS[kind]
    return SqnrBounds(*rows.get(_dtype(dtype_name), rows["float32"]))


def near_edge(ratio: float | None, passed: bool) -> bool:
    """Whether a cell's worst ratio is within `NEAR_EDGE` of the edge on its side (a flip is one bad day away)."""
    if ratio is None or ratio != ratio:  # no comparison recorded, or NaN (a real failure, far from any edge)
        return False
    # A failing cell is near the edge only when its comparison is what failed, barely (1 < ratio < 2).
    return 1 / NEAR_EDGE < ratio <= 1 if passed else 1 < ratio < NEAR_EDGE
