"""The closing summary of scripts/gpu-evidence: what ran, what did not, and what it found, in a few dozen lines.

Contract: `main(argv) -> int` prints the summary of one run from its files: the step table (`steps.tsv`: name,
status, seconds, note), the matrix envelope (verdict counts; the selected classes' cells that are missing, i.e.
not run within the budget; the cells that fail, error or time out, with their reasons; the cells whose verdict
differs from the CPU matrix, over the same classes) and the bench report (decode rates per sweep point and what
it did not measure). A file that is missing or unreadable is said to be, never skipped silently. Exit 0; 1 when
the matrix or the bench report is missing. It imports no torch (it also runs when the install step failed).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from conformance.report import diff
from conformance.report.envelope import EnvelopeError, load_envelope

FINDINGS = ("fail", "error", "timeout")
MAX_LINES = 25  # per list: the full lists are in the JSON files


def _limited(lines: list[str], what: str) -> list[str]:
    if len(lines) <= MAX_LINES:
        return lines
    return lines[:MAX_LINES] + [f"    ... and {len(lines) - MAX_LINES} more {what} (see the JSON)"]


def steps_section(path: Path, budget: int, elapsed: int) -> list[str]:
    rows = [line.split("\t") for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    parts = [f"{r[0]} {r[1]}" + (f" {r[2]} s" if r[2] != "0" else "") + (f" ({r[3]})" if len(r) > 3 else "")
             for r in rows]
    return [f"steps: {'; '.join(parts) or 'none recorded'}", f"time: {elapsed} s of a {budget} s budget"]


def matrix_section(path: Path, classes: list[str], cpu_path: Path) -> tuple[list[str], bool]:
    if not path.is_file():
        return [f"matrix: no envelope ({path}): no cell was recorded"], False
    try:
        run = load_envelope(path)
    except (EnvelopeError, OSError, ValueError) as exc:
        return [f"matrix: the envelope is unusable: {' '.join(str(exc).split())[:200]}"], False
    env = run["environment"]
    checks = run["checks"]
    counts: dict[str, int] = {}
    for row in run["models"].values():
        for cell in row["cells"].values():
            counts[cell["verdict"]] = counts.get(cell["verdict"], 0) + 1
    lines = [f"matrix ({path}): {len(classes)} classes x {len(checks)} checks on {env.get('device')} "
             f"({env.get('device_name')}), {env.get('dtype')}, backend {env.get('backend')}; torch "
             f"{env.get('torch')}, transformers {env.get('transformers')}",
             "  verdicts: " + ", ".join(f"{counts[v]} {v}" for v in sorted(counts, key=lambda v: -counts[v]))]
    missing = []
    for name in classes:
        cells = run["models"].get(name, {}).get("cells", {})
        absent = [c for c in checks if c not in cells]
        if len(absent) == len(checks):
            missing.append(f"{name} (no cell)")
        elif absent:
            missing.append(f"{name}: {', '.join(absent)}")
    lines.append(f"  not run (budget): {'; '.join(missing)}" if missing else "  not run: nothing, every cell ran")
    findings = [f"    {name} / {check}: {cell['verdict']}: {cell.get('reason', '')[:140]}"
                for name, row in run["models"].items() for check, cell in row["cells"].items()
                if cell["verdict"] in FINDINGS]
    if findings:
        lines += ["  fail / error / timeout (not listed in the expectations):"] + _limited(findings, "cells")
    lines += _against_cpu(run, cpu_path)
    return lines, True


def _against_cpu(run: dict, cpu_path: Path) -> list[str]:
    """The verdicts that differ from the CPU matrix, over the classes this run holds."""
    try:
        cpu = load_envelope(cpu_path)
    except (EnvelopeError, OSError, ValueError):
        return [f"  vs the CPU matrix: {cpu_path} not readable here; compare with `conformance diff`"]
    ran = {(name, check) for name, row in run["models"].items() for check in row["cells"]}
    same_cells = {"models": {name: {"cells": {c: cell for c, cell in row["cells"].items() if (name, c) in ran}}
                             for name, row in cpu["models"].items() if name in run["models"]}}
    changes = diff.diff_envelopes(same_cells, run)
    cpu_env = cpu["environment"]
    head = (f"  vs the CPU matrix ({cpu_path}: {cpu_env.get('device')}, {cpu_env.get('dtype')}, "
            f"{cpu_env.get('backend')}), same cells: ")
    if not changes:
        return [head + "no verdict differs"]
    kinds = {k: sum(c.kind == k for c in changes) for k in diff.CHANGE_ORDER}
    lines = [head + ", ".join(f"{n} {k}" for k, n in kinds.items() if n)]
    return lines + _limited([f"    {c.model} / {c.check}: {c.old} -> {c.new}" + (f": {c.reason[:110]}" if c.reason
                             and c.new not in ("pass", "xpass") else "") for c in changes], "changes")


def bench_section(path: Path) -> tuple[list[str], bool]:
    if not path.is_file():
        return [f"bench: no report ({path}): nothing was measured"], False
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return [f"bench: the report is unusable: {path}: {type(exc).__name__}: {exc}"], False
    env = report["environment"]
    lines = [f"bench ({path}): {env['sizes']} sizes, {env['dtype']}, backend {env['backend']} mode {env['mode']}, "
             f"{env['new_tokens']} new tokens, median of {env['repeats']}; {env.get('device_name')}, torch "
             f"{env['torch']}; decode tokens/s, eager + dynamic cache vs compiled + static cache"]
    for m in report["models"]:
        head = (f"  {m['model']}: {m['parameters'] / 1e9:.2f} B params, prefill {m['prefill_seconds']:.3f} s "
                f"({m['prefill_tokens']} tokens), compile {m['compile_seconds']:.0f} s, peak {m['peak_memory_mib']:.0f} MiB")
        lines.append(head + (f"; error: {m['error']}" if m["error"] else ""))
        lines += [f"    {p['image_tokens']:>5} image tokens: eager {p['eager_tokens_per_s']:8.1f}, compiled "
                  f"{p['compiled_tokens_per_s']:8.1f}, {p['speedup']:.2f}x" for p in m["sweep"]]
    unmeasured = report.get("unmeasured", [])
    lines.append(f"  not measured: {'; '.join(unmeasured)}" if unmeasured else "  not measured: nothing")
    return lines, True


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=["gpu", "dry"], required=True)
    p.add_argument("--steps", type=Path, required=True)
    p.add_argument("--matrix", type=Path, required=True)
    p.add_argument("--bench", type=Path, required=True)
    p.add_argument("--classes", required=True, help="comma-separated: the classes the matrix step selected")
    p.add_argument("--cpu-matrix", type=Path, default=Path("reports/matrix.json"))
    p.add_argument("--budget", type=int, required=True)
    p.add_argument("--elapsed", type=int, required=True)
    args = p.parse_args(argv)
    title = "GPU evidence" if args.mode == "gpu" else "GPU evidence DRY RUN (cpu, tiny sizes: not evidence)"
    classes = [c for c in args.classes.split(",") if c]
    matrix, matrix_ok = matrix_section(args.matrix, classes, args.cpu_matrix)
    bench, bench_ok = bench_section(args.bench)
    lines = [f"===== {title}", *steps_section(args.steps, args.budget, args.elapsed), *bench, *matrix]
    print("\n".join(lines))
    return 0 if matrix_ok and bench_ok else 1


if __name__ == "__main__":
    sys.exit(main())
