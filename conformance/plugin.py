"""The pytest plugin: options, parametrization, per-cell records, the envelope.

Loaded by the root conftest.py. Contract:

* every test that takes the `model_case` fixture is parametrized over the
  selected discovered classes (ids = class names), grouped per class so that
  with ``-n N --dist loadgroup`` one worker builds each tiny model once;
* `run_cell(check_id, case)` runs a check, applies the expectations (gate)
  and turns the verdict into a pytest outcome (pass, fail, xfail, skip; an
  xpass fails with "remove this expectation");
* every finished cell is appended to a JSON-lines part file as it finishes
  (one per process), and at session end the controller merges all parts into
  the envelope at ``--matrix-out`` (written atomically), also added under the
  key ``conformance`` of pytest-json-report's file when it is active.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

import pytest

from conformance import gate, report
from conformance.checks.base import CHECK_IDS, Case, Outcome, one_line, run_check

CELL_KEY = pytest.StashKey[dict]()
DEFAULT_OUT = Path("reports/latest/matrix.json")


class UsageError(pytest.UsageError):
    pass


def pytest_addoption(parser):
    group = parser.getgroup("conformance")
    group.addoption("--device", default="auto", help="cpu, cuda, cuda:N or auto (cuda when present)")
    group.addoption("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    group.addoption("--backend", default="eager", help="dynamo backend: eager, aot_eager, inductor")
    group.addoption("--models", default="", help="comma-separated class names or globs (default: all)")
    group.addoption("--checks", default="", help="comma-separated check ids (default: all)")
    group.addoption("--matrix-out", default=str(DEFAULT_OUT), help="where the JSON envelope is written")
    group.addoption("--expectations", default="", help="expectations TOML (default: fixtures/expectations/<major.minor>.toml)")
    group.addoption("--shard", default="", help="i/N: run the i-th of N deterministic shares of the cells")
    group.addoption("--changed-files", nargs="+", default=[], help="run only classes impacted by these transformers files")
    group.addoption("--since", default="", help="git ref: impacted classes from `git diff REF` in --transformers-repo")
    group.addoption("--transformers-repo", default="", help="a transformers checkout, for --since")
    group.addoption("--cell-timeout", type=float, default=300.0, help="seconds before a cell becomes `timeout`")


class Session:
    """Per-process state: options resolved once, the current built model."""

    def __init__(self, config):
        import torch

        self.config = config
        device = config.getoption("device")
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = device
        self.dtype_name = config.getoption("dtype")
        self.dtype = getattr(torch, self.dtype_name)
        self.backend = config.getoption("backend")
        self.matrix_out = Path(config.getoption("matrix_out"))
        self.parts_dir = self.matrix_out.with_name(self.matrix_out.name + ".parts")
        path = config.getoption("expectations")
        try:
            self.expectations = gate.load(Path(path) if path else None)
        except gate.ExpectationsError as exc:
            raise UsageError(str(exc)) from None
        self.cell_timeout = config.getoption("cell_timeout")
        self._built: tuple[str, object] | None = None
        self.worker = os.environ.get("PYTEST_XDIST_WORKER", "main")

    @property
    def part_file(self) -> Path:
        return self.parts_dir / f"{self.worker}.jsonl"

    def case_for(self, name: str) -> Case:
        """The built case of class `name`; built once, the previous one freed."""
        if self._built and self._built[0] == name:
            value = self._built[1]
        else:
            self._built = None
            value = _build_case(name, self)
            self._built = (name, value)
        if isinstance(value, Exception):
            raise value
        return value


class BuildError(RuntimeError):
    """The harness could not set up the tiny model or its inputs."""


def _build_case(name: str, session: Session):
    import torch

    from conformance.discover import by_name
    from conformance.samples import make_sample
    from conformance.tiny import new_model, tiny_config

    info = by_name()[name]
    try:
        tiny = tiny_config(info)
        with torch.no_grad():
            model = new_model(tiny)
            sample = make_sample(tiny, model)
        del model
        return Case(info=info, tiny=tiny, sample=sample, device=torch.device(session.device),
                    dtype=session.dtype, backend=session.backend)
    except Exception as exc:
        return BuildError(one_line(exc))


def _session(config) -> Session:
    return config.stash[SESSION_KEY]


SESSION_KEY = pytest.StashKey[Session]()


def pytest_configure(config):
    config.addinivalue_line("markers", "conformance_check(id): the check a test runs")
    checks = [c for c in config.getoption("checks").split(",") if c]
    unknown = [c for c in checks if c not in CHECK_IDS]
    if unknown:
        raise UsageError(f"--checks: unknown check id {unknown[0]!r}; known: {', '.join(CHECK_IDS)}")
    config.stash[SESSION_KEY] = Session(config)


def selected_models(config) -> list[str]:
    """Class names selected by --models and impact options (sorted)."""
    from conformance.discover import discover

    names = [info.name for info in discover()]
    patterns = [p.strip() for p in config.getoption("models").split(",") if p.strip()]
    if patterns:
        from conformance.discover import by_name

        index = by_name()
        chosen = set()
        for pattern in patterns:
            hits = {index[n].name for n in index if fnmatch.fnmatchcase(n, pattern)}
            if not hits:
                raise UsageError(f"--models: no discovered class matches {pattern!r}; "
                                 "see `conformance list` for the names")
            chosen |= hits
        names = [n for n in names if n in chosen]
    changed = list(config.getoption("changed_files"))
    since = config.getoption("since")
    if changed or since:
        from conformance import impact

        try:
            if since:
                changed += impact.changed_since(since, config.getoption("transformers_repo"))
            impacted = impact.impacted_classes(changed)
        except impact.ImpactError as exc:
            raise UsageError(str(exc)) from None
        names = [n for n in names if n in impacted]
    return names


def pytest_generate_tests(metafunc):
    if "model_name" not in metafunc.fixturenames:
        return
    names = selected_models(metafunc.config)
    metafunc.parametrize(
        "model_name",
        [pytest.param(n, id=n, marks=pytest.mark.xdist_group(n)) for n in names],
    )


def _check_of(item) -> str | None:
    marker = item.get_closest_marker("conformance_check")
    return marker.args[0] if marker else None


def pytest_collection_modifyitems(session, config, items):
    checks = [c for c in config.getoption("checks").split(",") if c]
    kept = []
    for item in items:
        check_id = _check_of(item)
        if check_id and checks and check_id not in checks:
            continue
        kept.append(item)
    shard = config.getoption("shard")
    if shard:
        from conformance.shard import select_shard

        try:
            kept = select_shard(kept, shard)
        except ValueError as exc:
            raise UsageError(f"--shard: {exc}") from None
    # Cells of one model run together, checks in their stable order.
    order = {c: i for i, c in enumerate(CHECK_IDS)}

    def key(item):
        callspec = getattr(item, "callspec", None)
        model = callspec.params.get("model_name", "") if callspec else ""
        return (0 if model else 1, model, order.get(_check_of(item), len(order)), item.nodeid)

    kept.sort(key=key)
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in set(kept)])
    items[:] = kept


@pytest.fixture
def model_case(request, model_name) -> Case:
    """The built case of the parametrized class; a build failure is the cell's `error`."""
    session = _session(request.config)
    check_id = _check_of(request.node)
    try:
        return session.case_for(model_name)
    except BuildError as exc:
        reason = f"tiny model or inputs could not be built: {exc}"
    _finish(request.node, model_name, check_id, Outcome("error", reason), session)


def _record(node, model: str, check_id: str, outcome: Outcome, verdict: str, session: Session, case=None):
    record = {
        "model": model,
        "check": check_id,
        "verdict": verdict,
        "reason": outcome.reason,
        "seconds": outcome.metrics.get("seconds", 0.0),
        "metrics": {k: v for k, v in outcome.metrics.items() if k != "seconds"},
        "nodeid": node.nodeid,
    }
    if case is not None and check_id == "build":
        record["tiny"] = {"parameters": outcome.metrics.get("parameters", 0), "source": case.tiny.source,
                          "strategy": case.sample.strategy}
    node.stash[CELL_KEY] = record
    report.write_record(session.part_file, record)


def _finish(node, model: str, check_id: str, outcome: Outcome, session: Session, case=None):
    """Apply the gate to a raw outcome, record the cell, and end the test accordingly."""
    expectation = session.expectations.get((model, check_id))
    verdict = gate.judge(outcome.verdict, expectation)
    _record(node, model, check_id, outcome, verdict, session, case)
    if verdict == "pass":
        return
    if verdict == "skip":
        pytest.skip(outcome.reason)
    if verdict == "xfail":
        pytest.xfail(f"{expectation.reason} | observed: {outcome.reason}")
    if verdict == "xpass":
        pytest.fail(f"XPASS {model} / {check_id}: expected to {expectation.verdict} ({expectation.reason}) "
                    f"but passed; remove this expectation from {gate.default_path().name}", pytrace=False)
    pytest.fail(f"{verdict.upper()} {model} / {check_id}: {outcome.reason}", pytrace=False)


def run_cell(check_id: str, case: Case, request) -> None:
    """Run `check_id` on `case` and end the test with the gated verdict."""
    from conformance.checks.base import load_all_checks

    load_all_checks()
    session = _session(request.config)
    outcome = run_check(check_id, case)
    _finish(request.node, case.info.name, check_id, outcome, session, case)


def _model_rows(names: list[str]) -> dict[str, dict]:
    from conformance.discover import by_name

    index = by_name()
    rows = {}
    for name in names:
        info = index.get(name)
        if info is None:
            continue
        rows[info.name] = {
            "model_type": info.model_type,
            "modalities": list(info.modalities),
            "kind": info.kind,
            "tasks": list(info.tasks),
            "aliases": list(info.aliases),
            "declared": info.declared,
        }
    return rows


def pytest_sessionstart(session):
    state = session.config.stash.get(SESSION_KEY, None)
    if state is not None and not hasattr(session.config, "workerinput"):
        # A fresh run: old parts of this output would be merged into it.
        if state.parts_dir.exists():
            for part in state.parts_dir.glob("*.jsonl"):
                part.unlink()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    config = session.config
    state = config.stash.get(SESSION_KEY, None)
    if state is None or hasattr(config, "workerinput"):
        return
    parts = sorted(state.parts_dir.glob("*.jsonl")) if state.parts_dir.exists() else []
    records = report.read_records(parts)
    if not records:
        return
    models = sorted({r["model"] for r in records})
    checks = [c for c in CHECK_IDS if any(r["check"] == c for r in records)]
    envelope = report.build_envelope(records, report.environment(state.device, state.dtype_name, state.backend),
                                     checks, _model_rows(models))
    report.write_atomic(state.matrix_out, envelope)
    for part in parts:
        part.unlink()
    try:
        state.parts_dir.rmdir()
    except OSError:
        pass
    config.stash[ENVELOPE_KEY] = envelope
    _LAST_ENVELOPE[0] = envelope


ENVELOPE_KEY = pytest.StashKey[dict]()
_LAST_ENVELOPE: list[dict | None] = [None]


@pytest.hookimpl(optionalhook=True)
def pytest_json_modifyreport(json_report):
    """Called by pytest-json-report after our sessionfinish: add the envelope."""
    if _LAST_ENVELOPE[0] is not None:
        json_report["conformance"] = _LAST_ENVELOPE[0]


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    envelope = config.stash.get(ENVELOPE_KEY, None)
    if envelope is not None:
        state = config.stash[SESSION_KEY]
        cells = sum(len(r["cells"]) for r in envelope["models"].values())
        terminalreporter.write_line(f"conformance: {cells} cells written to {state.matrix_out}")
