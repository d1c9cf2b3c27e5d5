"""Where a cell's seconds go: each check of the matrix on a few classes, under cProfile, split into phases.

    python scripts/profile_cells.py --models LlavaForConditionalGeneration,Blip2ForConditionalGeneration \
        [--checks compile_prefill,export_forward] [--out docs/profile.json]

For every class: the build (tiny config, model, sample, the eager check
forward), then every selected check (default: the columns a plain run runs),
one after the other on the same built case as the matrix runs them. Each cell
is profiled; the phases are the cumulative seconds of named functions
(`PHASES`; a phase inside another is counted in both, e.g. dynamo's trace
inside the break-count trace). Prints a Markdown table per check (sum over
the classes) and, with --out, the numbers as JSON. cProfile slows Python
code more than C code: read shares, not absolute seconds (the run's own
timings are `conformance bench --suite`).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from collections import defaultdict
from pathlib import Path

# (label, file suffix, function name): cumulative seconds of that function in a cell.
PHASES = (
    ("new model instance", "conformance/cases/tiny.py", "new_model"),
    ("dynamo compile (all frames)", "torch/_dynamo/convert_frame.py", "_compile"),
    ("break-count trace", "conformance/checks/common/dynamo.py", "trace_breaks"),
    ("torch.export.export", "torch/export/__init__.py", "export"),
    ("torch.export.save", "torch/export/__init__.py", "save"),
    ("torch.export.load", "torch/export/__init__.py", "load"),
    ("ExportedProgram.module()", "torch/export/exported_program.py", "module"),
    ("eager generate", "transformers/generation/utils.py", "generate"),
    ("inductor compile_fx", "torch/_inductor/compile_fx.py", "compile_fx"),
    ("make sample", "conformance/cases/samples.py", "make_sample"),
    ("tiny config", "conformance/cases/tiny.py", "tiny_config"),
)


def phases(profile: cProfile.Profile) -> dict[str, float]:
    stats = pstats.Stats(profile).stats  # (file, line, function) -> (cc, nc, tt, ct, callers)
    found: dict[str, float] = defaultdict(float)
    for (filename, _line, function), (_cc, _nc, _tt, cumulative, _callers) in stats.items():
        for label, suffix, name in PHASES:
            if function == name and filename.replace("\\", "/").endswith(suffix):
                found[label] += cumulative
    return dict(found)


def profiled(fn, *args):
    profile = cProfile.Profile()
    started = time.perf_counter()
    profile.enable()
    try:
        result = fn(*args)
    finally:
        profile.disable()
    return result, time.perf_counter() - started, phases(profile)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", required=True, help="comma-separated class names")
    p.add_argument("--checks", default="", help="comma-separated check ids (default: the plain run's columns)")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)

    from conformance.cases.case import TransformersCases
    from conformance.checks.common.outcome import run_check
    from conformance.checks.common.registry import check_ids, get, unavailable

    checks = [c for c in args.checks.split(",") if c] or [
        c for c in check_ids() if c != "build" and not unavailable(c) and not getattr(get(c), "opt_in", "")]
    source = TransformersCases()
    rows: dict[str, dict] = defaultdict(lambda: {"cells": 0, "seconds": 0.0, "phases": defaultdict(float)})
    per_cell = []
    for name in [m for m in args.models.split(",") if m]:
        try:
            case, seconds, found = profiled(source.build, name, "cpu", "float32", "eager")
        except Exception as exc:  # a class that does not build is profiled no further
            print(f"{name}: build failed: {type(exc).__name__}: {exc}"[:300], file=sys.stderr)
            continue
        _add(rows["build"], seconds, found)
        per_cell.append({"model": name, "check": "build", "seconds": round(seconds, 3), "phases": found})
        for check_id in checks:
            outcome, seconds, found = profiled(run_check, check_id, case)
            _add(rows[check_id], seconds, found)
            per_cell.append({"model": name, "check": check_id, "verdict": outcome.verdict,
                             "seconds": round(seconds, 3), "phases": found})
            print(f"{name} {check_id}: {outcome.verdict} {seconds:.1f} s", file=sys.stderr)
    sys.stdout.write(markdown(rows))
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "cells": per_cell}, indent=1, default=float) + "\n")
    return 0


def _add(row: dict, seconds: float, found: dict[str, float]) -> None:
    row["cells"] += 1
    row["seconds"] += seconds
    for label, value in found.items():
        row["phases"][label] += value


def markdown(rows: dict[str, dict]) -> str:
    labels = [label for label, _, _ in PHASES if any(label in row["phases"] for row in rows.values())]
    lines = ["| check | cells | profiled s | " + " | ".join(labels) + " |",
             "| --- | ---: | ---: | " + " | ".join("---:" for _ in labels) + " |"]
    for check_id, row in rows.items():
        total = row["seconds"] or 1.0
        shares = [f"{row['phases'][label] / total:.0%}" if row["phases"].get(label) else "" for label in labels]
        lines.append(f"| `{check_id}` | {row['cells']} | {row['seconds']:.1f} | " + " | ".join(shares) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
