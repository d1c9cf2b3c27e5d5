"""Stage 5, gate: known failures as data, applied as a strict ratchet.

`fixtures/expectations/<transformers major.minor>.toml` lists known failing
cells, one table per cell::

    [[cell]]
    model = "Blip2ForConditionalGeneration"
    check = "compile_prefill"
    verdict = "fail"            # or "error" (a harness gap) or "timeout"
    reason = "graph break: ..."
    link = "https://github.com/huggingface/transformers/issues/..."   # optional

Contracts:

* `default_path()` is the file of the installed major.minor, or, when there
  is none (a development checkout), the newest older one of the same major.
* `load(path)` returns {(canonical class name, check id): Expectation}; a
  missing file means no expectations. A bad file raises `ExpectationsError`
  with one line naming the file, the entry and the fix: invalid TOML, a
  missing or non-string field, a verdict other than fail/error/timeout, an
  unknown field, a cell listed twice, a class not discovered in the installed
  transformers, an unknown check id. An alias of a class counts as the class.
* `judge(outcome_verdict, expectation)`: a listed failure is `xfail`; a
  listed cell that passes is `xpass` (fails the run: remove the
  expectation); an unlisted failure stays `fail`; pass/skip are unchanged.
* `update_expectations(run_json, path)` rewrites the file from a run's
  envelope: cells of the run whose verdict is fail/error/timeout/xfail are
  listed, cells of the run that passed (or xpassed, or were skipped) are
  removed, cells the run did not cover are kept as they were. Reasons and
  links of cells that stay are kept; new cells get the run's reason. The
  listed verdict is what the run observed: an xfail cell's raw verdict
  (`observed` in the envelope); for a run file that lacks it, the verdict
  listed before (for a new entry: the run's `expected`, else fail).
  Entries are sorted by model then check; the file is written atomically.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import tomllib

from conformance import locations
from conformance.report.envelope import EnvelopeError, load_envelope
from conformance.report.io import write_text_atomic
from conformance.verdicts import FAILING

EXPECTATIONS_DIR = locations.EXPECTATIONS
REQUIRED = ("model", "check", "verdict", "reason")
OPTIONAL = ("link",)
HEADER = (
    "# Known failing cells of the conformance matrix (the gate's ratchet).\n"
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


def path_for_version(version: str) -> Path:
    """The expectations file of a transformers version (``5.24.0`` -> ``5.24.toml``)."""
    major, minor = version.split(".")[:2]
    return EXPECTATIONS_DIR / f"{major}.{minor}.toml"


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


def default_path(version: str | None = None) -> Path:
    """The expectations file for transformers `version` (default: the installed one).

    The file of the same major.minor when it exists; otherwise, for a
    version with no file yet (a development checkout, 5.25.0.dev0), the
    newest file of an older release of the same major (5.24.toml), so a
    pull request is gated against the known failures of the release it
    starts from; otherwise the (missing) file of the version itself.
    """
    if version is None:
        import transformers

        version = transformers.__version__
    exact = path_for_version(version)
    if exact.exists():
        return exact
    wanted = _minor(version)
    older = []
    for candidate in EXPECTATIONS_DIR.glob("*.toml"):
        try:
            found = _minor(candidate.stem + ".0")
        except ValueError:
            continue
        if found[0] == wanted[0] and found < wanted:
            older.append((found, candidate))
    return max(older)[1] if older else exact


def parse(text: str, path: Path, classes: dict[str, str] | None = None) -> dict[tuple[str, str], Expectation]:
    """Validate expectations TOML `text` (from `path`, for messages).

    `classes` maps accepted class names to canonical names; None skips the
    class check (used when rewriting a file from a run of another version).
    """
    from conformance.checks.common.registry import check_ids

    known_checks = check_ids()

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        detail = " ".join(str(exc).split())
        raise ExpectationsError(f"{path}: not valid TOML ({detail}); fix the syntax or regenerate it with "
                                "`conformance expectations --update RUN.json`") from None
    extra = sorted(set(data) - {"cell"})
    if extra:
        raise ExpectationsError(f"{path}: unknown top-level key {extra[0]!r}; the file holds only [[cell]] tables")
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
        for name, value in entry.items():
            if not isinstance(value, str):
                raise ExpectationsError(f"{where}: {name!r} must be a string, got {value!r}")
        if entry["verdict"] not in FAILING:
            raise ExpectationsError(f"{where} has verdict {entry['verdict']!r}; use one of {', '.join(FAILING)}")
        if entry["check"] not in known_checks:
            raise ExpectationsError(f"{where} names unknown check {entry['check']!r}; known: {', '.join(known_checks)}")
        model = entry["model"]
        if classes is not None:
            if model not in classes:
                raise ExpectationsError(f"{where} names {model!r}, which is not discovered in the installed "
                                        "transformers; fix the name or remove the entry")
            model = classes[model]
        key = (model, entry["check"])
        if key in found:
            raise ExpectationsError(f"{where}: cell {model} / {entry['check']} is listed twice; keep one entry")
        found[key] = Expectation(model, entry["check"], entry["verdict"], entry["reason"], entry.get("link", ""))
    return found


def load(path: Path | None = None) -> dict[tuple[str, str], Expectation]:
    """Parse and validate an expectations file into {(model, check): Expectation}; missing file = none."""
    path = Path(path) if path else default_path()
    if not path.exists():
        return {}
    from conformance.discover import class_index

    return parse(path.read_text(), path, class_index())


def judge(verdict: str, expectation: Expectation | None) -> str:
    """The final verdict of a cell given its raw verdict and its expectation."""
    if expectation is None:
        return verdict
    if verdict in FAILING:
        return "xfail"
    if verdict == "pass":
        return "xpass"
    return verdict


def _toml_string(value: str) -> str:
    # A JSON string is a valid TOML basic string (same escapes; control characters as \uXXXX).
    return json.dumps(value, ensure_ascii=False)


def dumps(expectations: dict[tuple[str, str], Expectation]) -> str:
    """The TOML text of `expectations`, sorted by model then check."""
    parts = [HEADER]
    for key in sorted(expectations):
        e = expectations[key]
        lines = ["[[cell]]", f"model = {_toml_string(e.model)}", f"check = {_toml_string(e.check)}",
                 f"verdict = {_toml_string(e.verdict)}", f"reason = {_toml_string(e.reason)}"]
        if e.link:
            lines.append(f"link = {_toml_string(e.link)}")
        parts.append("\n" + "\n".join(lines) + "\n")
    return "".join(parts)


def _observed(cell: dict) -> str:
    """The raw failing verdict of an xfail cell ("" when the run file does not record it)."""
    observed = cell.get("observed", "")
    return observed if observed in FAILING else ""


def update_expectations(run_path: Path | str, path: Path | str | None = None) -> Path:
    """Rewrite the expectations file from the run at `run_path`; returns the file written.

    Without `path`, the file of the run's transformers version is used. An
    unusable run file raises ExpectationsError (one line, as load_envelope says it).
    """
    try:
        envelope = load_envelope(run_path)
    except EnvelopeError as exc:
        raise ExpectationsError(str(exc)) from None
    if path is None:
        version = envelope.get("environment", {}).get("transformers", "")
        path = path_for_version(version) if version.count(".") >= 1 else default_path()
    path = Path(path)
    current = parse(path.read_text(), path, None) if path.exists() else {}
    updated = dict(current)
    for model, row in envelope["models"].items():
        for check_id, cell in (row.get("cells") or {}).items():
            key = (model, check_id)
            verdict = cell.get("verdict", "")
            if verdict in FAILING or verdict == "xfail":
                observed = verdict if verdict in FAILING else _observed(cell)
                old = current.get(key)
                if old is not None:
                    updated[key] = Expectation(model, check_id, observed or old.verdict, old.reason, old.link)
                else:
                    reason = " ".join(str(cell.get("reason", "")).split()) or f"{verdict} (no reason recorded)"
                    listed = cell.get("expected") if cell.get("expected") in FAILING else "fail"
                    updated[key] = Expectation(model, check_id, observed or listed, reason)
            else:
                updated.pop(key, None)
    write_text_atomic(path, dumps(updated))
    return path
