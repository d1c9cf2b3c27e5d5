"""`conformance explain CLASS CHECK`: re-run one cell alone, in this process, and say why.

Contract: `explain(model, check_id, device, dtype, backend, out)` builds the
case the way the pytest plugin does (discover -> tiny_config -> new_model ->
make_sample -> Case), runs the check with dynamo's graph-break and recompile
logs on, and prints the raw verdict, the verdict after expectations, the
reason, the metrics (graph breaks, recompiles, ...), the full traceback and
a one-line pytest command reproducing the cell. It returns 0 when the cell
passes or does not apply, 1 otherwise. An unknown class or check id, or a
check with no implementation, raises `ExplainError` (one line) before
anything is built.
"""

from __future__ import annotations

import difflib
import json
import re
import sys
import traceback
from pathlib import Path
from typing import TextIO

TESTS_DIR = Path(__file__).resolve().parent
# Metric names containing these words are shown on their own lines.
HIGHLIGHTED_METRICS = ("break", "recompile", "guard")


class ExplainError(ValueError):
    """Bad input to explain; the message is one line for a person."""


def resolve_model(name: str):
    from conformance.discover import by_name
    from conformance.discover import quiet_transformers

    with quiet_transformers():
        index = by_name()
    if name in index:
        return index[name]
    close = difflib.get_close_matches(name, list(index), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else "; see `conformance list` for the names"
    raise ExplainError(f"unknown class {name!r}{hint}")


def resolve_check(check_id: str):
    from conformance.checks.base import CHECK_IDS, load_all_checks

    if check_id not in CHECK_IDS:
        raise ExplainError(f"unknown check id {check_id!r}; known: {', '.join(CHECK_IDS)}")
    checks = load_all_checks()
    if check_id not in checks:
        raise ExplainError(f"check {check_id!r} has no implementation in conformance/checks in this checkout")
    return checks[check_id]


def resolve_device(device: str) -> str:
    """`device` checked against this machine; auto = cuda when present, else cpu."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        kind = torch.device(device).type
    except (RuntimeError, ValueError):
        raise ExplainError(f"--device {device!r}: not a device; use cpu, cuda, cuda:N or auto") from None
    if kind == "cuda" and not torch.cuda.is_available():
        raise ExplainError(f"--device {device!r}: no CUDA device on this machine; use --device cpu") from None
    return device


def locate_test(check_id: str, tests_dir: Path = TESTS_DIR) -> tuple[str, str] | None:
    """(test file relative to the repository, test function) of the check's cell, if found."""
    marker = re.compile(r"conformance_check\(\s*['\"]" + re.escape(check_id) + r"['\"]\s*\)\s*\n"
                        r"(?:\s*@.*\n)*\s*def\s+(test_\w+)")
    for path in sorted(tests_dir.glob("test_*.py")):
        found = marker.search(path.read_text())
        if found:
            return f"{tests_dir.name}/{path.name}", found.group(1)
    return None


def reproducer(model: str, check_id: str, device: str, dtype: str, backend: str) -> str:
    """The one-line pytest command that runs exactly this cell."""
    location = locate_test(check_id)
    target = f"{location[0]}::{location[1]}" if location else TESTS_DIR.name
    options = [f"--models {model}", f"--checks {check_id}"]
    for name, value, default in (("device", device, "auto"), ("dtype", dtype, "float32"),
                                 ("backend", backend, "eager")):
        if value != default:
            options.append(f"--{name} {value}")
    return f"pytest {target} {' '.join(options)} -p no:randomly"


def build_case(info, device: str, dtype: str, backend: str):
    """The case the plugin would build for `info` (exceptions propagate)."""
    from conformance.case_source import build_case as build

    return build(info, device, dtype, backend)


def _expectation(model: str, check_id: str):
    from conformance import gate

    try:
        return gate.load().get((model, check_id)), ""
    except Exception as exc:  # an unusable expectations file must not hide the cell
        return None, f"(expectations not applied: {exc})"


def explain(model: str, check_id: str, device: str = "auto", dtype: str = "float32", backend: str = "eager",
            out: TextIO | None = None) -> int:
    out = out or sys.stdout
    if dtype not in ("float32", "bfloat16", "float16"):
        raise ExplainError(f"--dtype {dtype!r}: use float32, bfloat16 or float16")
    resolve_check(check_id)
    info = resolve_model(model)
    import torch

    from conformance import gate
    from conformance.checks.base import Outcome, one_line, run_check

    device = resolve_device(device)
    torch.set_num_threads(max(1, min(torch.get_num_threads(), 4)))

    def say(line: str = "") -> None:
        print(line, file=out, flush=True)

    say(f"== {info.name} / {check_id} on {device}, {dtype}, backend {backend}")
    try:
        case = build_case(info, device, dtype, backend)
    except Exception as exc:
        outcome = Outcome("error", f"tiny model or inputs could not be built: {one_line(exc)}",
                          traceback=traceback.format_exc())
    else:
        if check_id != "build":
            say("(dynamo graph-break and recompile logs go to stderr)")
            torch._logging.set_logs(graph_breaks=True, recompiles=True)
        try:
            outcome = run_check(check_id, case)
        finally:
            torch._logging.set_logs()
    expectation, note = _expectation(info.name, check_id)
    verdict = gate.judge(outcome.verdict, expectation)
    say(f"verdict: {verdict}" + (f" (raw: {outcome.verdict})" if verdict != outcome.verdict else ""))
    if expectation is not None:
        say(f"expectation: {expectation.verdict}: {expectation.reason}" +
            (f" ({expectation.link})" if expectation.link else ""))
    if note:
        say(note)
    if outcome.reason:
        say(f"reason: {outcome.reason}")
    for name, value in sorted(outcome.metrics.items()):
        if any(word in name for word in HIGHLIGHTED_METRICS):
            say(f"{name}: {value}")
    say("metrics: " + json.dumps(outcome.metrics, sort_keys=True, default=str))
    if outcome.traceback:
        say("traceback:")
        say(outcome.traceback.rstrip())
    say(f"reproduce: {reproducer(info.name, check_id, device, dtype, backend)}")
    return 0 if verdict in ("pass", "skip") else 1
