"""Options of a run: declared here, checked before anything runs (each bad one a `UsageError` of one line).

Contract: `add_options(parser)` declares the run's command-line options.
Every other function either returns the resolved value or raises
`UsageError` naming the option (or file), what is wrong and the fix.
`select_models(config, source)` is the sorted class names selected by
--models (globs over names and aliases) and the impact options
(--changed-files, --since). `check_data()` fails when the package was
installed without its data (model fixtures, expectations).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.gate import expectations as gate

DEFAULT_OUT = Path("reports/latest/matrix.json")
DEFAULT_GRACE = 30.0


class UsageError(pytest.UsageError):
    pass


def add_options(parser) -> None:
    group = parser.getgroup("conformance")
    group.addoption("--device", default="auto", help="cpu, cuda, cuda:N or auto (cuda when present)")
    group.addoption("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    group.addoption("--backend", default="eager", help="dynamo backend: eager, aot_eager, inductor")
    group.addoption("--models", default="", help="comma-separated class names or globs (default: all)")
    group.addoption("--checks", default="", help="comma-separated check ids (default: all)")
    group.addoption("--matrix-out", default=str(DEFAULT_OUT), help="where the JSON envelope is written")
    group.addoption("--expectations", default="", help="expectations TOML (default: fixtures/expectations/<major.minor>.toml)")
    group.addoption("--shard", default="", help="i/N: run the i-th of N shares of the classes, balanced by the published seconds")
    group.addoption("--changed-files", nargs="+", default=[], help="run only classes impacted by these transformers files")
    group.addoption("--since", default="", help="git ref: impacted classes from `git diff REF` in --transformers-repo")
    group.addoption("--transformers-repo", default="", help="a transformers checkout, for --since")
    group.addoption("--cell-timeout", type=float, default=300.0, help="seconds before a cell becomes `timeout`")
    group.addoption("--cell-timeout-grace", type=float, default=DEFAULT_GRACE,
                    help="seconds after --cell-timeout before a cell that ignores it ends its worker process")


def check_data() -> None:
    from conformance import locations

    try:
        locations.require_data()
    except locations.DataMissing as exc:
        raise UsageError(str(exc)) from None


def split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def check_ids(checks: list[str], known: tuple[str, ...]) -> None:
    unknown = [c for c in checks if c not in known]
    if unknown:
        raise UsageError(f"--checks: unknown check id {unknown[0]!r}; known: {', '.join(known)}")


def unavailable_checks(checks: list[str], known: tuple[str, ...], why, opt_in=None) -> dict[str, str]:
    """The checks a run would include (--checks, else all) that it does not run: id -> why (`why(id)`, "" = can).

    Naming such a check in --checks is a UsageError (the run was asked for it); left out of --checks it is
    simply not run, and the run says so. Without --checks, an opt-in column (`opt_in(id)`: why it is left out
    and how to run it, "" for other checks) is not run either; named in --checks it runs.
    """
    found = {c: why(c) or ("" if checks or opt_in is None else opt_in(c)) for c in (checks or known)}
    found = {c: reason for c, reason in found.items() if reason}
    for check_id in checks:
        if check_id in found:
            raise UsageError(f"--checks: {check_id} {found[check_id]}; install it or leave {check_id} out of --checks")
    return found


def check_shard(spec: str) -> None:
    if spec:
        from conformance.run.shards import parse

        try:
            parse(spec)
        except ValueError as exc:
            raise UsageError(f"--shard: {exc}") from None


def check_seconds(option: str, value: float) -> None:
    if not value > 0:
        raise UsageError(f"{option}: must be a positive number of seconds, got {value:g}")


def resolve_device(value: str) -> str:
    import torch

    if value == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(value)
    except (RuntimeError, ValueError):
        raise UsageError(f"--device: {value!r} is not a device; use cpu, cuda, cuda:N or auto") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"--device {value}: no CUDA device is available here; use --device cpu (or auto)")
    return value


def check_backend(value: str) -> None:
    import torch._dynamo

    known = torch._dynamo.list_backends(exclude_tags=())
    if value not in known:
        raise UsageError(f"--backend: unknown dynamo backend {value!r}; use eager, aot_eager or inductor "
                         "(any name in torch._dynamo.list_backends(exclude_tags=()) works)")


def load_expectations(value: str, source, run: dict):
    """The expectations that apply to a run with conditions `run` (`gate.expectations.Applied`), from
    --expectations or the installed version's files."""
    path = Path(value) if value else None
    if path is not None and not path.exists():
        raise UsageError(f"--expectations: {path} does not exist; pass an existing TOML file "
                         "or leave the option out for the default")
    try:
        return gate.load_for_run(run, path, classes=source.index())
    except gate.ExpectationsError as exc:
        raise UsageError(str(exc)) from None


def check_writable(out: Path) -> None:
    """Fail now, not after hours of cells, if the envelope could not be written."""
    import tempfile

    if out.is_dir():
        raise UsageError(f"--matrix-out: {out} is a directory; pass a file path such as {out / 'matrix.json'}")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out.parent, prefix=f".{out.name}.", suffix=".probe"):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UsageError(f"--matrix-out: cannot write {out} ({reason}); choose a writable path") from None


def select_models(config, source) -> list[str]:
    from conformance.discover import select_classes

    patterns = split(config.getoption("models"))
    try:
        names = select_classes(patterns, source.index() if patterns else {}, source.names())
    except LookupError as exc:
        raise UsageError(f"--models: no discovered class matches {exc.args[0]!r}; "
                         "see `conformance list` for the names") from None
    changed = list(config.getoption("changed_files"))
    since = config.getoption("since")
    if changed or since:
        from conformance.gate import impact

        try:
            definitions = {}
            if since:
                repo = config.getoption("transformers_repo")
                diffed = impact.changed_since(since, repo)
                # A diff narrows a file to the definitions it touches; a file named by --changed-files stays whole.
                whole = {impact.normalize(path) for path in changed}
                definitions = {rel: names for rel, names in impact.changed_definitions(since, repo, diffed).items()
                               if rel not in whole}
                changed += diffed
            impacted = impact.impacted_classes(changed, definitions)
        except impact.ImpactError as exc:
            raise UsageError(str(exc)) from None
        names = [n for n in names if n in impacted]
    return names
