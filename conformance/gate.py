"""Stage 6, gate: known failures as data, applied as a strict ratchet.

`fixtures/expectations/<transformers major.minor>.toml` lists known failing
cells, one table per cell::

    [[cell]]
    model = "Blip2ForConditionalGeneration"
    check = "compile_prefill"
    verdict = "fail"            # or "error" (a harness gap) or "timeout"
    reason = "graph break: ..."
    link = "https://github.com/huggingface/transformers/issues/..."   # optional

Contract of `judge(outcome_verdict, expectation)`: a listed failure is
`xfail`; a listed cell that passes is `xpass` (fails the run: remove the
expectation); an unlisted failure stays `fail`; pass/skip are unchanged.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

EXPECTATIONS_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "expectations"
FAILING = ("fail", "error", "timeout")


class ExpectationsError(ValueError):
    """An expectations file is unusable; the message is one line for a person."""


@dataclass(frozen=True)
class Expectation:
    model: str
    check: str
    verdict: str
    reason: str
    link: str = ""


def default_path() -> Path:
    import transformers

    major, minor = transformers.__version__.split(".")[:2]
    return EXPECTATIONS_DIR / f"{major}.{minor}.toml"


def load(path: Path | None = None) -> dict[tuple[str, str], Expectation]:
    """Parse an expectations file into {(model, check): Expectation}; missing file = none."""
    path = path or default_path()
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ExpectationsError(f"{path}: not valid TOML ({exc}); fix the syntax or regenerate it with "
                                "`conformance expectations --update RUN.json`") from None
    found: dict[tuple[str, str], Expectation] = {}
    for i, entry in enumerate(data.get("cell", [])):
        missing = {"model", "check", "reason"} - set(entry)
        if missing:
            raise ExpectationsError(f"{path}: cell #{i + 1} lacks {sorted(missing)[0]!r}")
        verdict = entry.get("verdict", "fail")
        if verdict not in FAILING:
            raise ExpectationsError(f"{path}: cell #{i + 1} has verdict {verdict!r}; use one of {FAILING}")
        key = (entry["model"], entry["check"])
        if key in found:
            raise ExpectationsError(f"{path}: cell {key[0]} / {key[1]} is listed twice; keep one entry")
        found[key] = Expectation(entry["model"], entry["check"], verdict, entry["reason"], entry.get("link", ""))
    return found


def judge(verdict: str, expectation: Expectation | None) -> str:
    """The final verdict of a cell given its raw verdict and its expectation."""
    if expectation is None:
        return verdict
    if verdict in FAILING:
        return "xfail"
    if verdict == "pass":
        return "xpass"
    return verdict
