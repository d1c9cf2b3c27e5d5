"""Options of a run, checked before anything runs: each bad one is a `UsageError` of one line.

Contract: every function here either returns the resolved value or raises
`UsageError` naming the option (or file), what is wrong and the fix.
`select_models(config, source)` is the sorted class names selected by
--models (globs over names and aliases) and the impact options
(--changed-files, --since).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance import gate


class UsageError(pytest.UsageError):
    pass


def split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def check_ids(checks: list[str], known: tuple[str, ...]) -> None:
    unknown = [c for c in checks if c not in known]
    if unknown:
        raise UsageError(f"--checks: unknown check id {unknown[0]!r}; known: {', '.join(known)}")


def check_shard(spec: str) -> None:
    if spec:
        from conformance.shard import parse

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


def load_expectations(value: str, source) -> tuple[Path, dict]:
    """The expectations file (--expectations, else gate's default) and its validated cells."""
    path = Path(value) if value else gate.default_path()
    if not path.exists():
        if value:
            raise UsageError(f"--expectations: {path} does not exist; pass an existing TOML file "
                             "or leave the option out for the default")
        return path, {}
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--expectations: cannot read {path} ({exc}); pass a readable TOML file") from None
    try:
        return path, gate.parse(text, path, source.index())
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
    names = source.names()
    patterns = split(config.getoption("models"))
    if patterns:
        import fnmatch

        index = source.index()
        chosen = set()
        for pattern in patterns:
            hits = {index[n] for n in index if fnmatch.fnmatchcase(n, pattern)}
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
