"""Stage 5, gate: known failures as data: one entry per cell, with the fingerprint it was measured with and
conditions only where a device, dtype or backend differs.

`fixtures/expectations/<transformers major.minor>.toml` lists the known
failing cells of a release, one ``[[cell]]`` table per cell (model, check)
whatever the runs it fails on, as web-platform-tests keeps one metadata
entry per test and conditions only what differs::

    [conditions]                # where an entry holds unless it says otherwise (absent: cpu, float32, eager)
    device = "cpu"              # cpu | cuda
    dtype = "float32"
    backend = "eager"
    # torch = "2.13"            # only where it matters: then a run of another torch uses none of them

    [[cell]]
    model = "AyaVisionForConditionalGeneration"
    check = "compile_decode"
    verdict = "fail"            # or "error" (a harness gap) or "timeout"
    reason = "decode step recompiled after the first step; ..."
    link = "https://github.com/huggingface/transformers/issues/..."   # optional
    conditions = { backend = ["eager", "inductor"] }                   # optional: see below
    [cell.fingerprint]          # what failed and where (conformance.fingerprints)
    kind = "recompile"
    recompiles = 1
    guard = "kwargs['cache'].layers[#].cumulative_length_int == # @ cache_utils:update"
    [[cell.when]]               # optional, any number: what differs under narrower conditions
    backend = "inductor"        # its conditions (keys of [conditions]) ...
    reason = "decode step recompiled ...; failed guard: ... == 18"   # ... and what it overrides

The grammar:

* A condition's value is a string or a list of strings (any of them); a key
  left unnamed holds for every value.
* An entry holds where its conditions match the run: the file's
  ``[conditions]`` with each key the entry's ``conditions`` names replaced
  (``{ backend = "inductor" }``: on inductor only; ``{ backend = ["eager",
  "inductor"] }``: on both). Where no one table says it, ``conditions`` is
  a list of tables, any of them (``[{}, { device = "cuda", dtype =
  "bfloat16" }]``: the file's conditions, and cuda with bfloat16); no run
  matches two of them.
* Where it holds, its expectation is its own verdict, reason, link and
  fingerprint, with those of the ``[[cell.when]]`` whose conditions match
  the run put in their place (``[cell.when.fingerprint]`` replaces the whole
  fingerprint; a field it does not name stays the entry's).
* A ``[[cell.when]]`` names at least one condition and overrides at least one
  of verdict, reason, link, fingerprint; its conditions lie within the
  entry's and are narrower (one covering the whole entry says the entry's
  fields wrong: write them in the entry); no two of an entry's hold for the
  same run.

Contracts:

* `parse(text, path, classes)` validates one file into an `ExpectationsFile`
  or raises `ExpectationsError` with one line naming the file, the entry and
  the fix: invalid TOML, a missing or mistyped field, a verdict other than
  fail/error/timeout, an unknown field or condition (also in a
  ``[[cell.when]]``), a malformed fingerprint, a cell listed twice (also
  under other conditions: one entry a cell), conditions tables that
  overlap, a ``[[cell.when]]`` that contradicts its entry (a condition
  value the entry does not hold under, one covering the whole entry, two
  that hold for one run, one overriding nothing), a failure whose fingerprint site is the suite's own
  code (``conformance.``) listed as anything but a harness gap (kind
  ``harness_error``, verdict ``error``), a class not discovered in the installed transformers
  (when `classes` is given; an alias counts as the class), an unknown check id.
* `files_for(version)` are the files of a transformers version: its
  major.minor's, or, for a version with none yet (a development checkout,
  5.25.0.dev0), the newest older release's of the same major, so a pull
  request is gated against the release it starts from.
* `load_for_run(run, path=None, version=None, classes=None)`: the
  expectations that apply to a run (`ExpectationsFile.applying`: each entry
  that holds, resolved for it) from `path` or the version's files, with the
  `Source`s applied (file, the conditions it was applied under: the file's
  with the run's value where the run differs, cells used). A cell that two
  applicable files list is an error. `load_for_environment(environment,
  backend=None, path=None, classes=None)` is the same for the run an
  envelope's ``environment`` describes (`conditions.conditions_of`; the
  files of its transformers version unless `path` is given).
* `dumps(file)` writes a file back (sorted by model then check) so that
  `parse(dumps(f)) == f`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import tomllib

from conformance import locations
from conformance.fingerprints import LISTABLE_SUITE_KINDS, SUITE_SITE, Fingerprint, FingerprintError
from conformance.gate.conditions import DEFAULT as DEFAULT_CONDITIONS
from conformance.gate.conditions import KEYS as CONDITION_KEYS
from conformance.gate.conditions import (  # noqa: F401 (run_conditions, matches: re-exported for the run)
    conditions_of,
    intersection,
    matches,
    overlap,
    run_conditions,
    values,
    within,
)
from conformance.verdicts import FAILING

EXPECTATIONS_DIR = locations.EXPECTATIONS
REQUIRED = ("model", "check", "verdict", "reason")
OPTIONAL = ("link", "fingerprint", "conditions", "when")
OVERRIDABLE = ("verdict", "reason", "link", "fingerprint")  # what a [[cell.when]] may put in its entry's place
HEADER = (
    "# Known failing cells of the conformance matrix (the gate's ratchet): one entry a cell, with conditions where a\n"
    "# device, dtype or backend differs. Regenerate with `conformance expectations --update RUN.json`; edit reasons\n"
    "# and links by hand.\n"
)


class ExpectationsError(ValueError):
    """An expectations file is unusable; the message is one line for a person."""


@dataclass(frozen=True)
class Override:
    """A ``[[cell.when]]`` table: under `conditions` (within its entry's), `changes` take the entry's fields' place."""

    conditions: dict
    changes: dict  # verdict, reason, link (strings), fingerprint (a Fingerprint): only those that differ


@dataclass(frozen=True)
class Expectation:
    """One entry: a known failing cell. As read from a file it keeps its own `conditions` (a table of the keys it
    replaces in the file's, or a list of such tables: any of them) and its `overrides`; as applied to a run
    (`resolved`) it has none."""

    model: str
    check: str
    verdict: str
    reason: str
    link: str = ""
    fingerprint: Fingerprint | None = None
    conditions: dict | list = field(default_factory=dict, hash=False)
    overrides: tuple[Override, ...] = field(default=(), hash=False)

    def resolved(self, run: dict) -> "Expectation":
        """The expectation under `run` (where the entry holds): its fields with the matching override's in place."""
        changes = next((o.changes for o in self.overrides if matches(o.conditions, run)), {})
        return replace(self, conditions={}, overrides=(), **changes)


@dataclass(frozen=True)
class ExpectationsFile:
    path: Path
    conditions: dict
    cells: dict  # (model, check) -> Expectation, as written

    def holds(self, entry: Expectation) -> list[dict]:
        """Where `entry` holds: the file's conditions with those of the entry's table in their place (a table a
        list item)."""
        own = entry.conditions if isinstance(entry.conditions, list) else [entry.conditions]
        return [{**self.conditions, **table} for table in own]

    def applying(self, run: dict) -> dict:
        """(model, check) -> the resolved `Expectation` of each entry that holds for `run`."""
        return {key: e.resolved(run) for key, e in self.cells.items()
                if any(matches(table, run) for table in self.holds(e))}


@dataclass(frozen=True)
class Source:
    """An expectations file a run applies, under which conditions, and how many of its cells."""

    path: Path
    conditions: dict
    cells: int

    def describe(self) -> str:
        shown = ", ".join(f"{k} {v}" for k, v in self.conditions.items())
        return f"{locations.shown(self.path)} ({shown}): {self.cells} cells"


# --------------------------------------------------------------------------- conditions


def _conditions(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise ExpectationsError(f"{where}: conditions must be a table such as {{ backend = \"eager\" }}")
    unknown = sorted(set(value) - set(CONDITION_KEYS))
    if unknown:
        raise ExpectationsError(f"{where}: unknown condition {unknown[0]!r}; known: {', '.join(CONDITION_KEYS)}")
    for key, wanted in value.items():
        found = wanted if isinstance(wanted, list) else [wanted]
        if not found or not all(isinstance(v, str) for v in found):
            raise ExpectationsError(f"{where}: condition {key!r} must be a string or a list of strings")
    return dict(value)


def _shown(conditions: dict | list) -> str:
    """Conditions as a person reads them: ``device cpu, backend eager or inductor`` (a list: ``...; or ...``)."""
    if isinstance(conditions, list):
        return "; or ".join(_shown(table) for table in conditions)
    return ", ".join(f"{key} {' or '.join(values(wanted))}" for key, wanted in conditions.items())


def _own_conditions(value, where: str, file_conditions: dict) -> dict | list:
    """An entry's `conditions`: a table, or a non-empty list of tables that no run matches two of."""
    if not isinstance(value, list):
        return _conditions(value, where)
    if not value:
        raise ExpectationsError(f"{where}: conditions is an empty list; name a table such as "
                                "{ backend = \"inductor\" }, or remove it (the file's conditions)")
    tables = [_conditions(table, f"{where} conditions #{i}") for i, table in enumerate(value, start=1)]
    for i, a in enumerate(tables, start=1):
        for j, b in enumerate(tables[i:], start=i + 1):
            both = intersection({**file_conditions, **a}, {**file_conditions, **b})
            if both is not None:
                raise ExpectationsError(f"{where}: conditions #{i} and #{j} both hold under {_shown(both)}; "
                                        "keep each run in one of them")
    return tables


# --------------------------------------------------------------------------- files


def path_for_version(version: str) -> Path:
    """The expectations file of a transformers version (``5.24.0`` -> ``5.24.toml``)."""
    major, minor = version.split(".")[:2]
    return EXPECTATIONS_DIR / f"{major}.{minor}.toml"


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


def _release_of(path: Path) -> tuple[int, int] | None:
    try:
        return _minor(path.stem.split("-", 1)[0] + ".0")
    except ValueError:
        return None


def files_for(version: str | None = None) -> list[Path]:
    """The expectations files of transformers `version` (default: the installed one); see the module."""
    if version is None:
        import transformers

        version = transformers.__version__
    wanted = _minor(version)
    by_release: dict[tuple[int, int], list[Path]] = {}
    for candidate in sorted(EXPECTATIONS_DIR.glob("*.toml")):
        release = _release_of(candidate)
        if release is not None:
            by_release.setdefault(release, []).append(candidate)
    if wanted in by_release:
        return by_release[wanted]
    older = [r for r in by_release if r[0] == wanted[0] and r < wanted]
    return by_release[max(older)] if older else []


def default_path(version: str | None = None) -> Path:
    """The main file of a version (the default conditions', named `<major.minor>.toml`) among `files_for`,
    else the version's own (missing) file."""
    found = files_for(version)
    main = [path for path in found if "-" not in path.stem]
    if main or found:
        return (main or found)[0]
    if version is None:
        import transformers

        version = transformers.__version__
    return path_for_version(version)


def parse(text: str, path: Path, classes: dict[str, str] | None = None) -> ExpectationsFile:
    """Validate expectations TOML `text` (from `path`, for messages); see the module."""
    from conformance.checks.common.registry import check_ids

    known_checks = check_ids()
    file_name = locations.shown(path)  # fixtures/..., the file a person edits, not the conformance/data link
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # `expectations --update` reads the file it rewrites (it keeps the reasons people wrote), so it cannot
        # be the fix: the file is mended by hand or restored.
        detail = " ".join(str(exc).split())
        raise ExpectationsError(f"{file_name}: not valid TOML ({detail}); {locations.fix_or_restore(path)}") from None
    extra = sorted(set(data) - {"cell", "conditions"})
    if extra:
        raise ExpectationsError(f"{file_name}: unknown top-level key {extra[0]!r}; the file holds [conditions] and "
                                "[[cell]] tables")
    conditions = _conditions(data["conditions"], f"{file_name}: [conditions]") if "conditions" in data \
        else dict(DEFAULT_CONDITIONS)
    cells = data.get("cell", [])
    if not isinstance(cells, list):
        raise ExpectationsError(f"{file_name}: `cell` must be an array of tables; write each entry as [[cell]]")
    found: dict[tuple[str, str], Expectation] = {}
    for i, entry in enumerate(cells, start=1):
        where = f"{file_name}: cell #{i}"
        for name in REQUIRED:
            if name not in entry:
                raise ExpectationsError(f"{where} lacks {name!r}; every [[cell]] needs {', '.join(REQUIRED)}")
        unknown = sorted(set(entry) - set(REQUIRED) - set(OPTIONAL))
        if unknown:
            raise ExpectationsError(f"{where} has unknown field {unknown[0]!r}; allowed: "
                                    f"{', '.join(REQUIRED + OPTIONAL)}")
        for name in ("model", "check"):
            if not isinstance(entry[name], str):
                raise ExpectationsError(f"{where}: {name!r} must be a string, got {entry[name]!r}")
        fields = _scalars(entry, where)
        if entry["check"] not in known_checks:
            raise ExpectationsError(f"{where} names unknown check {entry['check']!r}; known: {', '.join(known_checks)}")
        fields.update(_fingerprint(entry, where, path))
        named = f"{where} ({entry['model']} / {entry['check']})"
        _checked_gap(fields, named)
        own = _own_conditions(entry["conditions"], where, conditions) if "conditions" in entry else {}
        holds = [{**conditions, **table} for table in (own if isinstance(own, list) else [own])]
        overrides = _overrides(entry.get("when", []), named, holds, fields, path)
        model = entry["model"]
        if classes is not None:
            if model not in classes:
                raise ExpectationsError(f"{where} names {model!r}, which is not discovered in the installed "
                                        "transformers; fix the name or remove the entry")
            model = classes[model]
        key = (model, entry["check"])
        if key in found:
            raise ExpectationsError(f"{where}: cell {model} / {entry['check']} is listed twice; keep one entry a "
                                    "cell, with what differs under other conditions in its [[cell.when]] tables")
        found[key] = Expectation(model, entry["check"], fields["verdict"], fields["reason"], fields.get("link", ""),
                                 fields.get("fingerprint"), own, overrides)
    return ExpectationsFile(Path(path), conditions, found)


def _scalars(table: dict, where: str) -> dict:
    """The verdict, reason and link `table` names, validated."""
    fields = {}
    for name in ("verdict", "reason", "link"):
        if name in table:
            if not isinstance(table[name], str):
                raise ExpectationsError(f"{where}: {name!r} must be a string, got {table[name]!r}")
            fields[name] = table[name]
    if "verdict" in fields and fields["verdict"] not in FAILING:
        raise ExpectationsError(f"{where} has verdict {fields['verdict']!r}; use one of {', '.join(FAILING)}")
    return fields


def _fingerprint(table: dict, where: str, path: Path) -> dict:
    """{"fingerprint": the Fingerprint `table` names}, validated; {} where it names none."""
    if "fingerprint" not in table:
        return {}
    try:
        return {"fingerprint": Fingerprint.from_data(table["fingerprint"])}
    except FingerprintError as exc:
        raise ExpectationsError(f"{where}: fingerprint: {exc}; {locations.fix_or_restore(path)}") from None


def _checked_gap(fields: dict, named: str) -> None:
    suite_gap = _suite_gap_problem(fields["fingerprint"], fields["verdict"]) if fields.get("fingerprint") else ""
    if suite_gap:
        raise ExpectationsError(f"{named}: {suite_gap}")


def _overrides(tables, named: str, holds: list[dict], fields: dict, path: Path) -> tuple[Override, ...]:
    """An entry's [[cell.when]] tables, validated against the entry (`holds`: where it holds; `fields`: its own)."""
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ExpectationsError(f"{named}: `when` must be an array of tables; write each override as [[cell.when]]")
    found: list[Override] = []
    for j, table in enumerate(tables, start=1):
        where = f"{named} [[cell.when]] #{j}"
        unknown = sorted(set(table) - set(CONDITION_KEYS) - set(OVERRIDABLE))
        if unknown:
            raise ExpectationsError(f"{where} has unknown key {unknown[0]!r}; a condition is one of "
                                    f"{', '.join(CONDITION_KEYS)}, an override one of {', '.join(OVERRIDABLE)}")
        conditions = _conditions({k: v for k, v in table.items() if k in CONDITION_KEYS}, where)
        changes = {**_scalars(table, where), **_fingerprint(table, where, path)}
        if not conditions:
            raise ExpectationsError(f"{where} names no condition; say where it holds, e.g. backend = \"inductor\"")
        if not changes:
            raise ExpectationsError(f"{where} overrides nothing; remove it, or name the verdict, reason, link or "
                                    "fingerprint that differs there")
        _checked_gap({**fields, **changes}, where)
        outside = {k: [v for v in values(w) if not any(overlap(t, {**conditions, k: v}) for t in holds)]
                   for k, w in conditions.items()}
        outside = {k: v for k, v in outside.items() if v}
        if outside:
            raise ExpectationsError(f"{where} holds under {_shown(outside)}, where the entry does not ({_shown(holds)})"
                                    f"; contradictory: add it to the entry's conditions or remove it from the override")
        if all(within(table, conditions) for table in holds):
            raise ExpectationsError(f"{where} covers every run the entry holds for ({_shown(holds)}); contradictory: "
                                    "write its fields in the entry itself")
        for k, other in enumerate(found, start=1):
            shared = [both for t in holds if (both := intersection(t, other.conditions)) is not None]
            if any(overlap(both, conditions) for both in shared):
                raise ExpectationsError(f"{where} and #{k} both hold under {_shown({**other.conditions, **conditions})}"
                                        "; contradictory: make their conditions disjoint")
        found.append(Override(conditions, changes))
    return tuple(found)




def _suite_gap_problem(fingerprint: Fingerprint, verdict: str) -> str:
    """Why an entry that lists a failure of the suite's own code as something else is refused ('' if fine)."""
    if fingerprint.where.startswith(SUITE_SITE) and fingerprint.kind not in LISTABLE_SUITE_KINDS:
        return (f"lists a failure at the suite's own {fingerprint.where} as kind {fingerprint.kind!r}; the suite's "
                "own exception is a harness error, never a model's known failure: fix the check, or list it as "
                "kind \"harness_error\" with verdict \"error\"")
    if fingerprint.kind in LISTABLE_SUITE_KINDS and verdict != "error":
        return f"lists kind {fingerprint.kind!r} with verdict {verdict!r}; a harness gap's verdict is \"error\""
    return ""


def read(path: Path, classes: dict[str, str] | None = None) -> ExpectationsFile:
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ExpectationsError(f"{locations.shown(path)}: cannot read it ({exc}); pass a readable TOML file") from None
    return parse(text, Path(path), classes)


@dataclass(frozen=True)
class Applied:
    """The expectations a run applies and where they come from."""

    cells: dict  # (model, check) -> Expectation
    sources: tuple[Source, ...]
    considered: tuple[Path, ...]  # every file looked at, applicable or not


def load_for_run(run: dict, path: Path | None = None, version: str | None = None,
                 classes: dict[str, str] | None = None) -> Applied:
    """The expectations that apply to a run with conditions `run` (see the module)."""
    paths = [Path(path)] if path else files_for(version)
    cells: dict[tuple[str, str], Expectation] = {}
    origin: dict[tuple[str, str], Path] = {}
    sources = []
    for file_path in paths:
        file = read(file_path, classes)
        used = file.applying(run)
        for key, expectation in used.items():
            if key in cells:
                raise ExpectationsError(f"{locations.shown(file_path)}: cell {key[0]} / {key[1]} also applies from "
                                        f"{locations.shown(origin[key])} "
                                        "under this run's conditions; keep one entry or narrow its conditions")
            cells[key], origin[key] = expectation, file_path
        if used or matches(file.conditions, run):
            applied_under = {key: wanted if matches({key: wanted}, run) else run[key]
                             for key, wanted in file.conditions.items()}
            sources.append(Source(file_path, applied_under, len(used)))
    return Applied(cells, tuple(sources), tuple(paths))


def load_for_environment(environment: dict, backend: str | None = None, path: Path | None = None,
                         classes: dict[str, str] | None = None) -> Applied:
    """The expectations that apply to the run an envelope's environment describes (see the module)."""
    return load_for_run(conditions_of(environment, backend), path,
                        version=None if path else environment.get("transformers"), classes=classes)


def load(path: Path | None = None, run: dict | None = None) -> dict[tuple[str, str], Expectation]:
    """The expectations of `path` (default: the installed version's files) that apply to `run`
    (default: the suite's default conditions); missing files = none."""
    from conformance.discover import class_index

    run = run or {**DEFAULT_CONDITIONS}
    if path is not None and not Path(path).exists():
        return {}
    return load_for_run(run, path, classes=class_index()).cells


# --------------------------------------------------------------------------- writing


def _toml(value) -> str:
    # A JSON string is a valid TOML basic string (same escapes; control characters as \uXXXX).
    if isinstance(value, dict) and not value:
        return "{}"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _key(name: str) -> str:
    return name if name.replace("_", "").isalnum() else json.dumps(name, ensure_ascii=False)


def _field_lines(fields: dict, table: str) -> list[str]:
    """verdict, reason, link as lines, then the fingerprint as `[<table>.fingerprint]` (and its sites)."""
    lines = [f"{name} = {_toml(fields[name])}" for name in ("verdict", "reason", "link") if name in fields]
    if fields.get("fingerprint") is not None:
        data = fields["fingerprint"].to_data()
        sites = data.pop("sites", None)
        lines.append(f"[{table}.fingerprint]")
        lines += [f"{name} = {_toml(value)}" for name, value in data.items()]
        if sites:  # one line a site: reviewable diffs
            lines.append(f"[{table}.fingerprint.sites]")
            lines += [f"{_key(site)} = {count}" for site, count in sites.items()]
    return lines


def dumps(file: ExpectationsFile) -> str:
    """The TOML text of `file`, cells sorted by model then check."""
    parts = [HEADER, "\n[conditions]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in file.conditions.items())]
    for key in sorted(file.cells, key=lambda k: (k[0], k[1])):
        e = file.cells[key]
        lines = ["[[cell]]", f"model = {_toml(e.model)}", f"check = {_toml(e.check)}",
                 f"verdict = {_toml(e.verdict)}", f"reason = {_toml(e.reason)}"]
        if e.link:
            lines.append(f"link = {_toml(e.link)}")
        if e.conditions:
            lines.append(f"conditions = {_toml(e.conditions)}")
        lines += _field_lines({"fingerprint": e.fingerprint}, "cell")
        for override in e.overrides:
            lines.append("[[cell.when]]")
            lines += [f"{k} = {_toml(v)}" for k, v in override.conditions.items()]
            lines += _field_lines(override.changes, "cell.when")
        parts.append("\n" + "\n".join(lines) + "\n")
    return "".join(parts)
