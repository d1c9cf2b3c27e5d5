"""Stage 4, report: the failures that only half precision has.

Contract: `half_only(envelopes)` lists, per run file, every cell of a dtype column (``static_cache~bf16``: a
bfloat16 run merged into a float32 matrix, `conformance.columns.split_dtype`) whose check failed (``observed``: a
known failure counted as the failure it is) while the same check of the same class passed in the run's own dtype.
Each `HalfOnly` carries the failure's code site (the fingerprint's ``where``; none for a contract or a numerical
mismatch) and the cell's one-line reason, which names the operator or line that differs. `render(envelopes)` is
the findings section: a line per cell, grouped per dtype, with the count of each dtype's cells that fail in both,
and the cells that pass in the dtype but fail in the run's own (a difference below the dtype's tolerance); nothing
when no run holds a dtype column. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass

from conformance import columns
from conformance.report.render import dtype_contrast, dtype_rank
from conformance.verdicts import FAILING

REASON_CHARS = 160


@dataclass(frozen=True)
class HalfOnly:
    row: str
    column: str  # the run's own dtype's column (static_cache)
    dtype: str  # the dtype it fails in only (bfloat16)
    main_dtype: str  # the run's own (float32)
    kind: str
    site: str
    reason: str


def _dtype_cells(envelopes: list[dict]):
    """(envelope, row name, column, column of the run's dtype, dtype, cell, the run's-dtype cell or None) per dtype
    cell."""
    for envelope in envelopes:
        for name, row in sorted(envelope["models"].items()):
            for column, cell in sorted(row["cells"].items()):
                base, dtype = columns.split_dtype(column)
                if dtype:
                    yield envelope, name, column, base, dtype, cell, row["cells"].get(base)


def half_only(envelopes: list[dict]) -> list[HalfOnly]:
    """The dtype cells that fail where the run's own dtype passes (`render.dtype_contrast`, see the module)."""
    found = []
    for envelope, name, column, base, dtype, cell, _ in _dtype_cells(envelopes):
        if dtype_contrast(envelope, name, column) == "passes":
            fingerprint = cell.get("fingerprint") or {}
            found.append(HalfOnly(name, base, dtype, envelope["environment"].get("dtype", "float32"),
                                  fingerprint.get("kind", cell["observed"]),
                                  fingerprint.get("where") or "",
                                  " ".join(str(cell.get("reason") or "").split())))
    return found


def _short(text: str) -> str:
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS - 3] + "..."


def render(envelopes: list[dict]) -> list[str]:
    """The Markdown section (see the module); [] when no run holds a dtype column."""
    cells = list(_dtype_cells(envelopes))
    if not cells:
        return []
    found = half_only(envelopes)
    lines = ["## Failures in half precision only", ""]
    for dtype in sorted({c[4] for c in cells}, key=dtype_rank):
        mine = [f for f in found if f.dtype == dtype]
        both = sum(1 for _, _, _, _, d, cell, plain in cells if d == dtype and cell.get("observed") in FAILING
                   and plain is not None and plain.get("observed") in FAILING)
        main = mine[0].main_dtype if mine else "float32"
        lines.append(f"{dtype}: {len(mine)} cell(s) fail in {dtype} and pass in the run's own dtype; {both} fail in "
                     "both (the checks' own verdicts, known failures counted as failures).")
        lines += [f"- `{f.row}` / {f.column}: {f.kind}{f' at {f.site}' if f.site else ''} (passes in {main})"
                  + (f": {_short(f.reason)}" if f.reason else "") for f in mine]
        hidden = [(name, base, plain) for _, name, _, base, d, cell, plain in cells if d == dtype
                  and cell.get("observed") == "pass" and plain is not None and plain.get("observed") in FAILING]
        if hidden:
            lines.append(f"The other way round, {len(hidden)} cell(s) pass in {dtype} and fail in {main}: a difference "
                         f"{main} sees can be below {dtype}'s tolerance, which then cannot see it (the {main} verdict "
                         "stands):")
            lines += [f"- `{name}` / {base}: {_short(' '.join(str(plain.get('reason') or '').split()))}"
                      for name, base, plain in hidden]
        lines.append("")
    return lines
