"""Stage 5, gate: known failures as data, each with the fingerprint it was measured with and the run's conditions.

`fixtures/expectations/<transformers major.minor>[-<name>].toml` lists known
failing cells, one table per cell, under the conditions of the run that
measured them::

    [conditions]                # the run these were measured on (absent: cpu, float32, eager)
    device = "cpu"              # cpu | cuda
    dtype = "float32"
    backend = "eager"
    # torch = "2.13"            # only where it matters: then a run of another torch uses none of them

    [[cell]]
    model = "Blip2ForConditionalGeneration"
    check = "compile_prefill"
    verdict = "fail"            # or "error" (a harness gap) or "timeout"
    reason = "graph break: ..."
    link = "https://github.com/huggingface/transformers/issues/..."   # optional
    conditions = { backend = "inductor" }                               # optional: narrows the file's
    [cell.fingerprint]          # what failed and where (conformance.fingerprints)
    kind = "graph_break"
    where = "transformers.models.blip_2.modeling_blip_2:Blip2Model.forward"

A condition's value is a string or a list of strings (any of them).

Contracts:

* `parse(text, path, classes)` validates one file into an `ExpectationsFile`
  or raises `ExpectationsError` with one line naming the file, the entry and
  the fix: invalid TOML, a missing or mistyped field, a verdict other than
  fail/error/timeout, an unknown field or condition, a malformed fingerprint,
  a cell listed twice, a failure whose fingerprint site is the suite's own
  code (``conformance.``) listed as anything but a harness gap (kind
  ``harness_error``, verdict ``error``), a class not discovered in the installed transformers
  (when `classes` is given; an alias counts as the class), an unknown check id.
* `files_for(version)` are the files of a transformers version: its
  major.minor's, or, for a version with none yet (a development checkout,
  5.25.0.dev0), the newest older release's of the same major, so a pull
  request is gated against the release it starts from.
* `load_for_run(run, path=None, version=None, classes=None)`: the
  expectations that apply to a run, i.e. whose effective conditions (the
  file's, narrowed by the cell's) match `run` (device, dtype, backend,
  torch), from `path` or the version's files, with the `Source`s applied
  (file, conditions, cells used). A cell that two applicable entries list is
  an error.
* `dumps(file)` writes a file back (sorted by model then check) so that
  `parse(dumps(f)) == f`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

from conformance import locations
from conformance.fingerprints import Fingerprint, FingerprintError
from conformance.verdicts import FAILING

EXPECTATIONS_DIR = locations.EXPECTATIONS
REQUIRED = ("model", "check", "verdict", "reason")
OPTIONAL = ("link", "fingerprint", "conditions")
CONDITION_KEYS = ("device", "dtype", "backend", "torch")
DEFAULT_CONDITIONS = {"device": "cpu", "dtype": "float32", "backend": "eager"}  # a file that names none
HEADER = (
    "# Known failing cells of the conformance matrix (the gate's ratchet), under the conditions they were measured.\n"
    "# Regenerate with `conformance expectations --update RUN.json`; edit reasons and links by hand.\n"
)


class ExpectationsError(ValueError):
    """An expectations file is unusable; the message is one line for a person."""


@dataclass(frozen=True)
class Expectation:
    model: str
    check: str
    verdict: str
    reason: str
    link: str = ""
    fingerprint: Fingerprint | None = None
    conditions: dict = field(default_factory=dict, hash=False)  # the cell's own (narrowing the file's)


@dataclass(frozen=True)
class ExpectationsFile:
    path: Path
    conditions: dict
    cells: dict  # (model, check) -> Expectation


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


def run_conditions(device: str, dtype: str, backend: str, torch_version: str) -> dict:
    """The conditions of a run: device type, dtype, backend, torch major.minor."""
    return {"device": device.split(":")[0], "dtype": dtype, "backend": backend,
            "torch": ".".join(torch_version.split("+")[0].split(".")[:2])}


def matches(conditions: dict, run: dict) -> bool:
    """Whether every condition holds for `run` (a list: any of its values)."""
    for key, wanted in conditions.items():
        values = wanted if isinstance(wanted, list) else [wanted]
        if run.get(key) not in values:
            return False
    return True


def _conditions(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise ExpectationsError(f"{where}: conditions must be a table such as {{ backend = \"eager\" }}")
    unknown = sorted(set(value) - set(CONDITION_KEYS))
    if unknown:
        raise ExpectationsError(f"{where}: unknown condition {unknown[0]!r}; known: {', '.join(CONDITION_KEYS)}")
    for key, wanted in value.items():
        values = wanted if isinstance(wanted, list) else [wanted]
        if not values or not all(isinstance(v, str) for v in values):
            raise ExpectationsError(f"{where}: condition {key!r} must be a string or a list of strings")
    return dict(value)


# --------------------------------------------------------------------------- files


def path_for_version(version: str, name: str = "") -> Path:
    """The expectations file of a transformers version (``5.24.0`` -> ``5.24.toml``; a name: ``5.24-<name>.toml``)."""
    major, minor = version.split(".")[:2]
    return EXPECTATIONS_DIR / (f"{major}.{minor}" + (f"-{name}" if name else "") + ".toml")


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
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        detail = " ".join(str(exc).split())
        raise ExpectationsError(f"{path}: not valid TOML ({detail}); fix the syntax or regenerate it with "
                                "`conformance expectations --update RUN.json`") from None
    extra = sorted(set(data) - {"cell", "conditions"})
    if extra:
        raise ExpectationsError(f"{path}: unknown top-level key {extra[0]!r}; the file holds [conditions] and "
                                "[[cell]] tables")
    conditions = _conditions(data["conditions"], f"{path}: [conditions]") if "conditions" in data \
        else dict(DEFAULT_CONDITIONS)
    cells = data.get("cell", [])
    if not isinstance(cells, list):
        raise ExpectationsError(f"{path}: `cell` must be an array of tables; write each entry as [[cell]]")
    found: dict[tuple[str, str], Expectation] = {}
    for i, entry in enumerate(cells, start=1):
        where = f"{path}: cell #{i}"
        for name in REQUIRED:
            if name not in entry:
                raise ExpectationsError(f"{where} lacks {name!r}; every [[cell]] needs {', '.join(REQUIRED)}")
        unknown = sorted(set(entry) - set(REQUIRED) - set(OPTIONAL))
        if unknown:
            raise ExpectationsError(f"{where} has unknown field {unknown[0]!r}; allowed: "
                                    f"{', '.join(REQUIRED + OPTIONAL)}")
        for name in REQUIRED + ("link",):
            if name in entry and not isinstance(entry[name], str):
                raise ExpectationsError(f"{where}: {name!r} must be a string, got {entry[name]!r}")
        if entry["verdict"] not in FAILING:
            raise ExpectationsError(f"{where} has verdict {entry['verdict']!r}; use one of {', '.join(FAILING)}")
        if entry["check"] not in known_checks:
            raise ExpectationsError(f"{where} names unknown check {entry['check']!r}; known: {', '.join(known_checks)}")
        fingerprint = None
        if "fingerprint" in entry:
            try:
                fingerprint = Fingerprint.from_data(entry["fingerprint"])
            except FingerprintError as exc:
                raise ExpectationsError(f"{where}: fingerprint: {exc}; regenerate it with "
                                        "`conformance expectations --update RUN.json`") from None
            suite_gap = _suite_gap_problem(fingerprint, entry["verdict"])
            if suite_gap:
                raise ExpectationsError(f"{where} ({entry['model']} / {entry['check']}): {suite_gap}")
        own = _conditions(entry["conditions"], where) if "conditions" in entry else {}
        model = entry["model"]
        if classes is not None:
            if model not in classes:
                raise ExpectationsError(f"{where} names {model!r}, which is not discovered in the installed "
                                        "transformers; fix the name or remove the entry")
            model = classes[model]
        key = (model, entry["check"])
        if key in found:
            raise ExpectationsError(f"{where}: cell {model} / {entry['check']} is listed twice; keep one entry "
                                    "(an entry for other conditions goes in a file of its own)")
        found[key] = Expectation(model, entry["check"], entry["verdict"], entry["reason"], entry.get("link", ""),
                                 fingerprint, own)
    return ExpectationsFile(Path(path), conditions, found)


SUITE_SITE = "conformance."  # a fingerprint site in this package: the suite's own code
SUITE_KINDS = ("harness_error",)  # the kind such a failure is listed as: a known gap of the suite, never a finding


def _suite_gap_problem(fingerprint: Fingerprint, verdict: str) -> str:
    """Why an entry that lists a failure of the suite's own code as something else is refused ('' if fine)."""
    if fingerprint.where.startswith(SUITE_SITE) and fingerprint.kind not in SUITE_KINDS:
        return (f"lists a failure at the suite's own {fingerprint.where} as kind {fingerprint.kind!r}; the suite's "
                "own exception is a harness error, never a model's known failure: fix the check, or list it as "
                "kind \"harness_error\" with verdict \"error\"")
    if fingerprint.kind in SUITE_KINDS and verdict != "error":
        return f"lists kind {fingerprint.kind!r} with verdict {verdict!r}; a harness gap's verdict is \"error\""
    return ""


def read(path: Path, classes: dict[str, str] | None = None) -> ExpectationsFile:
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ExpectationsError(f"{path}: cannot read it ({exc}); pass a readable TOML file") from None
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
        used = 0
        for key, expectation in file.cells.items():
            if not matches({**file.conditions, **expectation.conditions}, run):
                continue
            if key in cells:
                raise ExpectationsError(f"{file_path}: cell {key[0]} / {key[1]} also applies from {origin[key]} "
                                        "under this run's conditions; keep one entry or narrow its conditions")
            cells[key], origin[key] = expectation, file_path
            used += 1
        if used or matches(file.conditions, run):
            sources.append(Source(file_path, file.conditions, used))
    return Applied(cells, tuple(sources), tuple(paths))


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
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _key(name: str) -> str:
    return name if name.replace("_", "").isalnum() else json.dumps(name, ensure_ascii=False)


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
        if e.fingerprint is not None:
            data = e.fingerprint.to_data()
            sites = data.pop("sites", None)
            lines.append("[cell.fingerprint]")
            lines += [f"{name} = {_toml(value)}" for name, value in data.items()]
            if sites:  # one line a site: reviewable diffs
                lines.append("[cell.fingerprint.sites]")
                lines += [f"{_key(site)} = {count}" for site, count in sites.items()]
        parts.append("\n" + "\n".join(lines) + "\n")
    return "".join(parts)
