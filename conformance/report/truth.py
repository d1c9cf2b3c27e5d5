"""Verdict truth: no passing cell may record a comparison beyond its check's tolerance.

Contracts:

* `comparisons(envelope)` is, per check of the run, the metrics it records
  for a comparison it asserts and the tolerance that applies: the run file's
  `check_info` (``compares``, ``tolerance``: the backend whose tolerance
  applies, else the column's own backend (``compile_prefill@inductor``), else the run's), at the column's
  dtype (``static_cache~bf16``: bfloat16), else the run's (`conformance.tolerances`). A run file written before checks declared
  their comparisons (no ``compares`` in its `check_info`) is read with the
  registry's declarations (`registry.describe`), imported only then.
* `breaches(envelope)` lists every cell whose verdict is `pass` or `xpass`
  while its comparison was beyond the tolerance (NaN included): a contract
  that recorded a difference it did not assert. A cell that records its
  judgement (``worst_ratio``, with the ``atol``/``rtol`` it used) breaches
  when the ratio is above 1 or it was judged with a looser tolerance than
  its check declares; an older cell, when a compared metric is above the
  declared absolute tolerance. A true run has none.
* `breaches_in(path)` is the same for a run file (`load_envelope` reads it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from conformance import columns, tolerances
from conformance.report.envelope import load_envelope

PASSING = ("pass", "xpass")


@dataclass(frozen=True)
class Breach:
    model: str
    check: str
    verdict: str
    metric: str
    value: float
    tolerance: float

    def line(self) -> str:
        return (f"{self.model} / {self.check}: {self.verdict} with {self.metric} = {self.value:.3g} > "
                f"{self.tolerance:g}")


def _declared(envelope: dict) -> dict[str, dict]:
    info = dict(envelope.get("check_info") or {})
    undeclared = [c for c in envelope.get("checks", []) if "compares" not in info.get(c, {})]
    if undeclared:
        from conformance.checks.common.registry import describe

        for check_id, entry in describe(undeclared).items():
            info[check_id] = {**info.get(check_id, {}), **entry}
    return info


def comparisons(envelope: dict) -> dict[str, tuple[tuple[str, ...], tolerances.Tolerance]]:
    """check id -> (compared metrics, tolerance) for the column's dtype (else the run's) and backend."""
    env = envelope["environment"]
    found = {}
    for check_id, entry in _declared(envelope).items():
        backend = entry.get("tolerance") or entry.get("backend") or env["backend"]  # a column's own backend
        dtype = columns.split_dtype(check_id)[1] or env["dtype"]
        found[check_id] = (tuple(entry.get("compares", ())), tolerances.tolerance(dtype, backend))
    return found


def breaches(envelope: dict) -> list[Breach]:
    """Every passing cell with a compared metric beyond its tolerance."""
    rules = comparisons(envelope)
    found = []
    for model, row in sorted(envelope["models"].items()):
        for check_id, cell in sorted(row.get("cells", {}).items()):
            if cell.get("verdict") not in PASSING or check_id not in rules:
                continue
            compared, tol = rules[check_id]
            metrics = cell.get("metrics") or {}
            judged = _number(metrics.get("worst_ratio"))
            if judged is not None:
                used = (_number(metrics.get("atol")), _number(metrics.get("rtol")))
                if math.isnan(judged) or judged > 1.0:
                    found.append(Breach(model, check_id, cell["verdict"], "worst_ratio", judged, 1.0))
                elif None in used or used[0] > tol.atol or used[1] > tol.rtol:
                    found.append(Breach(model, check_id, cell["verdict"], "atol", used[0] or math.nan, tol.atol))
                continue
            for metric in compared:
                value = _number(metrics.get(metric))
                if value is not None and (math.isnan(value) or value > tol.atol):
                    found.append(Breach(model, check_id, cell["verdict"], metric, value, tol.atol))
    return found


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def breaches_in(path: str | Path) -> list[Breach]:
    return breaches(load_envelope(path))
