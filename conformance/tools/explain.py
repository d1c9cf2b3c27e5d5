"""`conformance explain CLASS CHECK`: re-run one cell alone, in this process, and say why.

Contract: `explain(model, check_id, device, dtype, backend, out)` lives the
cell the way a run does (`conformance.run.cell_life.live`: the same build
outcomes, fingerprints and judgement against the expectations of the run's
conditions, so its verdict is the matrix cell's), with the case built by
`conformance.cases.case.build_case` and the check run with dynamo's
graph-break and recompile logs on, and prints the raw verdict, the verdict
after expectations, the reason, the metrics (graph breaks, recompiles, ...),
the full traceback and a one-line pytest command reproducing the cell. It returns 0 when the cell
passes or does not apply, 1 otherwise. An unknown class or check id, a
check with no implementation, or one whose required packages are missing
(the install command), raises `ExplainError` (one line) before anything is
built. `explain_command(args)` is the subcommand (`cli` parses its options), that error a `CliError`.
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import TextIO

from conformance.report.reproduce import reproducer

# Metric names containing these words are shown on their own lines.
HIGHLIGHTED_METRICS = ("break", "recompile", "guard")


class ExplainError(ValueError):
    """Bad input to explain; the message is one line for a person."""


def explain_command(args) -> int:
    from conformance.tools.errors import CliError

    try:
        return explain(args.model, args.check, device=args.device, dtype=args.dtype, backend=args.backend)
    except ExplainError as exc:
        raise CliError(str(exc)) from None


def resolve_model(name: str):
    """The `ModelInfo` of the one class `name` selects (`discover.select_classes`: a class name, alias, model
    type or glob, any case; a model type whose rows are one class's default row and its checkpoint profiles names
    the default row); no class or several is an ExplainError naming the nearest names or the several."""
    from conformance.discover import NoMatch, by_name, quiet_transformers, select_classes

    with quiet_transformers():
        index = by_name()
    if name in index:
        return index[name]
    canonical = {n: getattr(info, "name", n) for n, info in index.items()}
    types = {canonical[n]: getattr(info, "model_type", "") for n, info in index.items()}
    try:
        found = select_classes([name], canonical, sorted(set(canonical.values())), types)
    except NoMatch as exc:
        raise ExplainError(f"unknown class {name!r}; " + str(exc).split("; ", 1)[1]) from None
    except LookupError as exc:
        raise ExplainError(f"unknown class {exc.args[0]!r}; see `conformance list` for the names") from None
    defaults = [n for n in found if getattr(index[n], "profile", None) is None]
    if len(found) > 1 and len(defaults) == 1 and all(getattr(index[n], "class_name", n) == defaults[0] for n in found):
        found = defaults  # a model type names its class's default row; a profile row is named by its own name
    if len(found) > 1:
        raise ExplainError(f"{name!r} selects {len(found)} classes ({', '.join(found[:4])}"
                           f"{', ...' if len(found) > 4 else ''}); name one")
    return index[found[0]]


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


def _expectations(device: str, dtype: str, backend: str) -> tuple[dict, str]:
    """The expectations that apply under this run's conditions, and a note when none could be read."""
    import torch

    from conformance.gate import expectations as gate

    run = gate.run_conditions(device, dtype, backend, torch.__version__)
    try:
        return gate.load(run=run), ""
    except Exception as exc:  # an unusable expectations file must not hide the cell
        return {}, f"(expectations not applied: {exc})"


def explain(model: str, check_id: str, device: str = "auto", dtype: str = "float32", backend: str = "eager",
            out: TextIO | None = None) -> int:
    out = out or sys.stdout
    if dtype not in ("float32", "bfloat16", "float16"):
        raise ExplainError(f"--dtype {dtype!r}: use float32, bfloat16 or float16")
    resolve_check(check_id)
    info = resolve_model(model)
    import torch

    from conformance.cases.case import build_case
    from conformance.run.cell_life import live

    device = resolve_device(device)
    torch.set_num_threads(max(1, min(torch.get_num_threads(), 4)))

    def say(line: str = "") -> None:
        print(line, file=out, flush=True)

    @contextlib.contextmanager
    def dynamo_logs():
        say("(dynamo graph-break and recompile logs go to stderr)")
        torch._logging.set_logs(graph_breaks=True, recompiles=True)
        try:
            yield
        finally:
            torch._logging.set_logs()

    say(f"== {info.name} / {check_id} on {device}, {dtype}, backend {backend}")
    expectations, note = _expectations(device, dtype, backend)
    cell = live(info.name, check_id, lambda name: build_case(info, device, dtype, backend), expectations,
                watch=dynamo_logs if check_id != "build" else None)
    if cell.not_run:  # as the run: no cell
        say(f"not run: {cell.not_run}")
        return 0
    outcome, expectation, judgement = cell.outcome, cell.expectation, cell.judgement
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
