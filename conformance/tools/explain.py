"""`conformance explain CLASS CHECK`: re-run one cell alone, in this process, and say why.

Contract: `explain(model, check_id, device, dtype, backend, out)` builds the
case the way the pytest plugin does (`conformance.build.case.build_case`; a
row the build stage decides, `RowVerdict`, gets the same verdict and reason
as in a run), runs the check with dynamo's graph-break and recompile
logs on, and prints the raw verdict, the verdict after expectations, the
reason, the metrics (graph breaks, recompiles, ...), the full traceback and
a one-line pytest command reproducing the cell. It returns 0 when the cell
passes or does not apply, 1 otherwise. An unknown class or check id, a
check with no implementation, or one whose required packages are missing
(the install command), raises `ExplainError` (one line) before anything is
built.
"""

from __future__ import annotations

import difflib
import json
import sys
import traceback
from typing import TextIO

from conformance.report.reproduce import reproducer

# Metric names containing these words are shown on their own lines.
HIGHLIGHTED_METRICS = ("break", "recompile", "guard")


class ExplainError(ValueError):
    """Bad input to explain; the message is one line for a person."""


def resolve_model(name: str):
    from conformance.discover import by_name, quiet_transformers

    with quiet_transformers():
        index = by_name()
    if name in index:
        return index[name]
    close = difflib.get_close_matches(name, list(index), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else "; see `conformance list` for the names"
    raise ExplainError(f"unknown class {name!r}{hint}")


def resolve_check(check_id: str):
    from conformance.checks.common.registry import load_all, unavailable

    checks = load_all()
    if check_id not in checks:
        raise ExplainError(f"unknown check id {check_id!r}; known: {', '.join(checks)}")
    why = unavailable(check_id)
    if why:
        raise ExplainError(f"{check_id} {why}")
    return checks[check_id]


def resolve_device(device: str) -> str:
    """`device` checked against this machine; auto = cuda when present, else cpu."""
    from conformance.run.options import UsageError
    from conformance.run.options import resolve_device as resolve

    try:
        return resolve(device)
    except UsageError as exc:
        raise ExplainError(str(exc)) from None


def _expectation(model: str, check_id: str, device: str, dtype: str, backend: str):
    """The expectation of the cell under this run's conditions, and a note when none could be read."""
    import torch

    from conformance.gate import expectations as gate

    run = gate.run_conditions(device, dtype, backend, torch.__version__)
    try:
        return gate.load(run=run).get((model, check_id)), ""
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

    from conformance.build.case import BUILD_FAILED, build_case
    from conformance.build.model_failure import MissingDependency, RowVerdict
    from conformance.checks.common.outcome import Outcome, run_check
    from conformance.gate.ratchet import judge
    from conformance.reasons import one_line
    from conformance.run.session import harness_fingerprint
    from conformance.verdicts import FAILING

    device = resolve_device(device)
    torch.set_num_threads(max(1, min(torch.get_num_threads(), 4)))

    def say(line: str = "") -> None:
        print(line, file=out, flush=True)

    say(f"== {info.name} / {check_id} on {device}, {dtype}, backend {backend}")
    try:
        case = build_case(info, device, dtype, backend)
    except MissingDependency as exc:  # as the run: no cell
        say(f"not run: {exc}")
        return 0
    except RowVerdict as exc:  # decided by the build stage: the model's own failure, or not a standalone model
        outcome = Outcome(*exc.cell(check_id), traceback=traceback.format_exc(),
                          fingerprint=exc.fingerprint(check_id))
    except Exception as exc:
        outcome = Outcome("error", f"{BUILD_FAILED}: {one_line(exc)}", traceback=traceback.format_exc())
    else:
        if check_id != "build":
            say("(dynamo graph-break and recompile logs go to stderr)")
            torch._logging.set_logs(graph_breaks=True, recompiles=True)
        try:
            outcome = run_check(check_id, case)
        finally:
            torch._logging.set_logs()
    if outcome.verdict in FAILING and outcome.fingerprint is None:
        outcome.fingerprint = harness_fingerprint(outcome)  # as the run does
    expectation, note = _expectation(info.name, check_id, device, dtype, backend)
    judgement = judge(outcome.verdict, expectation, outcome.fingerprint)
    verdict = judgement.verdict
    say(f"verdict: {verdict}" + (f" (raw: {outcome.verdict})" if verdict != outcome.verdict else ""))
    if expectation is not None:
        say(f"expectation: {expectation.verdict}: {expectation.reason}" +
            (f" ({expectation.link})" if expectation.link else ""))
    for line in (judgement.note, note):
        if line:
            say(line)
    if outcome.fingerprint is not None:
        say(f"fingerprint: {outcome.fingerprint.summary()}")
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
