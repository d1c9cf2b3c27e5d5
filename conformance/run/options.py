"""Options of a run: declared here, checked before anything runs (each bad one a `UsageError` of one line).

Contract: `add_options(parser)` declares the run's command-line options as
`--conformance-<name>` (any pytest run); `add_short_names(parser)` adds the
short names (`--device`, ...) that no other option of the run has taken (the
suite's own runs); `use_short_dests(config)` makes each value readable as
`config.getoption("<name>")`.
Every other function either returns the resolved value or raises
`UsageError` naming the option (or file), what is wrong and the fix.
`resolve_selection(config, source)` is the run's `Selection`: the sorted
class names selected by --models (`discover.select_classes`: class names,
aliases, model types and globs over them, case-insensitive) and the
impact options (--changed-files, --since), with the changed files it
resolved. Every --changed-files path must name a file of the transformers
being gated (`select.impact.resolve_changed`: ``src/transformers/PATH``,
``transformers/PATH``, ``PATH`` relative to the installed package, or a file
of its checkout outside the package); one that names none is a
`UsageError`, never a selection of nothing. An impact selection of no class
from real files is legitimate (a docs-only change) and says so
(`Selection.nothing_to_check`); the run and `conformance plan` then exit
with `NOTHING_TO_CHECK`. `select_models(config, source)` is its class names.
`check_data()` fails when the package was installed without its data
(model fixtures, expectations).
"""

from __future__ import annotations

import argparse
import weakref
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conformance.gate import expectations as gate

DEFAULT_OUT = Path("reports/latest/matrix.json")
DEFAULT_GRACE = 30.0
# Exit status of a run (and of `conformance plan`) whose impact selection holds no class although every changed
# file is real (a docs-only change): nothing was checked. Distinct from pytest's own codes (0-6; its 5, "no tests
# collected", has other causes too: a -k or --ignore that leaves nothing) and the suite's (2: usage, 70: a hung
# cell), so that a CI job tells "nothing to check" from "checked and green" (docs/gate.md).
NOTHING_TO_CHECK = 10


class UsageError(pytest.UsageError):
    pass


# The run's options: (name, argparse attributes). Each is `--conformance-<name>` (stored in `conformance_<name>`) in
# every pytest run of the environment: a prefix no host project uses. Its short name `--<name>` (what the docs
# write) exists only in the suite's own runs, and only where no other plugin or conftest.py took it.
OPTIONS = (
    ("device", dict(default="auto", help="cpu, cuda, cuda:N or auto (cuda when present)")),
    ("dtype", dict(default="float32", choices=["float32", "bfloat16", "float16"])),
    ("backend", dict(default="eager", help="dynamo backend: eager, aot_eager, inductor")),
    ("models", dict(default="", help="comma-separated class names, model types (llava) or globs, any case; "
                                   ":ci for the CI classes (default: all)")),
    ("checks", dict(default="", help="comma-separated check ids (default: all)")),
    ("matrix-out", dict(default=str(DEFAULT_OUT), help="where the JSON envelope is written")),
    ("expectations", dict(default="", help="expectations TOML (default: fixtures/expectations/<major.minor>.toml)")),
    ("shard", dict(default="", help="i/N: run the i-th of N shares of the classes, balanced by the published seconds")),
    ("changed-files", dict(nargs="+", default=[], help="run only classes impacted by these transformers files")),
    ("since", dict(default="", help="git ref: impacted classes from `git diff REF` in --transformers-repo")),
    ("transformers-repo", dict(default="", help="a transformers checkout, for --since")),
    ("meta", dict(action="store_true", default=False,
                  help="also run the suite's own tests (conformance/meta); naming a path under it runs them too")),
    ("cell-timeout", dict(type=float, default=300.0, help="seconds before a cell becomes `timeout`")),
    ("cell-timeout-grace", dict(
        type=float, default=DEFAULT_GRACE,
        help="seconds after --cell-timeout before a cell that ignores it ends its worker process")),
    ("cell-memory", dict(
        type=float, default=0.0,
        help="MiB of resident memory a cell's worker may hold before the cell is `fail` (kind resources); "
             "default per column from fixtures/cell_memory.toml")),
)
GROUP = "conformance"
GROUP_HELP = ("vlm-conformance (each option also as its short name, e.g. --device, in the suite's own runs "
              "where no other plugin or conftest.py has taken it)")
_SHORT_ADDED: "weakref.WeakSet" = weakref.WeakSet()  # the parsers that got the short names


def dest(name: str) -> str:
    """Where `--conformance-<name>` (and its short name) store the value."""
    return "conformance_" + name.replace("-", "_")


def short_dest(name: str) -> str:
    """The name the suite's code reads (`config.getoption("device")`), set by `use_short_dests`."""
    return name.replace("-", "_")


def add_options(parser) -> None:
    """Declare `--conformance-<name>` for every option: safe in any pytest run (nobody else uses the prefix)."""
    group = parser.getgroup(GROUP, GROUP_HELP)
    for name, attrs in OPTIONS:
        metavar = {} if "choices" in attrs or "action" in attrs else {"metavar": short_dest(name).upper()}
        group.addoption(f"--conformance-{name}", dest=dest(name), **metavar, **attrs)


def add_short_names(parser) -> list[str]:
    """Declare `--<name>` as another spelling of `--conformance-<name>`, for each name no option of this run has
    taken (a host's conftest.py or plugin may own `--device`); returns the names added. Call it once the
    conftest.py files that precede the command line's parsing have declared theirs; a second call does nothing."""
    if parser in _SHORT_ADDED:
        return []
    _SHORT_ADDED.add(parser)
    taken = _taken_names(parser)
    group = parser.getgroup(GROUP, GROUP_HELP)
    added = []
    for name, attrs in OPTIONS:
        if f"--{name}" in taken:
            continue
        try:
            group.addoption(f"--{name}", dest=dest(name), **{**attrs, "help": argparse.SUPPRESS})
        except (ValueError, argparse.ArgumentError):  # taken in a way _taken_names did not see
            continue
        added.append(name)
    return added


def _taken_names(parser) -> set[str]:
    """The option strings declared so far in `parser` (pytest's own conflict check reads the same groups)."""
    groups = [getattr(parser, "_anonymous", None), *getattr(parser, "_groups", [])]
    return {flag for group in groups if group is not None for option in group.options for flag in option.names()}


def use_short_dests(config) -> None:
    """In the suite's own run: copy each `conformance_<name>` value to `<name>`, where the suite's code reads it.

    A `<name>` that another option of this run already stores a different value in (a host conftest.py's
    `--device`) is a UsageError: the suite would read the host's value."""
    for name, _ in OPTIONS:
        value, short = getattr(config.option, dest(name)), short_dest(name)
        if hasattr(config.option, short) and getattr(config.option, short) != value:
            raise UsageError(f"--conformance-{name}: another plugin or conftest.py of this run stores its own option "
                             f"in {short!r}, where the suite reads this one; run the suite where that conftest.py is "
                             "not loaded (e.g. `cd /tmp && pytest --pyargs conformance`)")
        setattr(config.option, short, value)


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


def check_memory(value: float) -> None:
    if value < 0:
        raise UsageError(f"--cell-memory: must be a positive number of MiB (or 0: per column), got {value:g}")


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


@dataclass
class Selection:
    """The classes a run checks and why: `classes` (sorted) from the --models `patterns` and, where an impact
    option was given (`impact`), the changed `files` (`select.impact.ChangedFile`) and the --since `ref`."""

    classes: list[str]
    patterns: list[str] = field(default_factory=list)
    impact: bool = False
    files: list = field(default_factory=list)
    ref: str = ""

    @property
    def changed_files(self) -> list[str]:
        """The changed files as in a transformers checkout (``src/transformers/...``, ``docs/...``)."""
        return [f.path for f in self.files]

    @property
    def nothing_to_check(self) -> str:
        """One line when an impact selection holds no class ("nothing to check: ..."), else ''."""
        if not self.impact or self.classes:
            return ""
        if not self.files:
            return f"nothing to check: git diff {self.ref} changes no file"
        shown = ", ".join(self.changed_files[:3]) + (f" and {len(self.files) - 3} more" if len(self.files) > 3 else "")
        verb = "affects" if len(self.files) == 1 else "affect"
        if self.patterns:
            return f"nothing to check: {shown} {verb} none of the classes --models {','.join(self.patterns)} selects"
        return f"nothing to check: {shown} {verb} no discovered class"

    def record(self) -> dict:
        """What the envelope records of an impact selection (`environment.selection`)."""
        return {"changed_files": self.changed_files, "since": self.ref, "models": self.patterns,
                "classes": list(self.classes), "nothing_to_check": self.nothing_to_check}


def select_models(config, source) -> list[str]:
    """The sorted class names of `resolve_selection`."""
    return resolve_selection(config, source).classes


def model_types(source, names: list[str]) -> dict[str, str]:
    """Each of `names` -> its model type, from the case source's row metadata (`--models llava`); a source
    without row metadata (a test's) has none."""
    rows = source.rows(names) if hasattr(source, "rows") else {}
    return {name: row.get("model_type", "") for name, row in rows.items()}


def resolve_selection(config, source) -> Selection:
    """The run's `Selection` (see the module's contract); a bad option or path raises UsageError (one line)."""
    from conformance.discover import NoMatch, select_classes

    patterns = split(config.getoption("models"))
    names = source.names()
    try:
        names = select_classes(patterns, source.index() if patterns else {}, names,
                               model_types(source, names) if patterns else {})
    except NoMatch as exc:
        raise UsageError(f"--models: {exc}") from None
    except LookupError as exc:
        raise UsageError(f"--models: no discovered class matches {exc.args[0]!r}; "
                         "see `conformance list` for the names") from None
    changed = list(config.getoption("changed_files"))
    since = config.getoption("since")
    if not (changed or since):
        return Selection(names, patterns)
    from conformance.select import impact

    repo = config.getoption("transformers_repo")
    try:
        # Every named path first (cheap, and before any git or graph work): one that names no file stops the run.
        files = impact.resolve_changed(changed, impact.transformers_root(), impact.checkout_of(repo))
        definitions = {}
        if since:
            diffed = impact.changed_since(since, repo)
            named = {f.path for f in files}
            # A diff narrows a file to the definitions it touches; a file named by --changed-files stays whole.
            whole = {f.rel for f in files if f.rel is not None}
            files += [f for f in impact.resolve_diffed(diffed, repo) if f.path not in named]
            definitions = {rel: touched for rel, touched in impact.changed_definitions(since, repo, diffed).items()
                           if rel not in whole}
        impacted = impact.impacted_classes([f.path for f in files], definitions)
    except impact.ImpactError as exc:
        raise UsageError(str(exc)) from None
    return Selection([n for n in names if n in impacted], patterns, True, files, since)
