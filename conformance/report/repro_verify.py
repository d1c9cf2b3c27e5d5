"""Verifying standalone reproducers from outside: each script, run alone, must fail the way its group does.

A script carries no fingerprint code: it makes the failing call and lets the error propagate, or raises an
AssertionError with the check's words and numbers. This module reads what it printed and judges it with the
suite's own rules (`conformance.fingerprints`, `conformance.reasons`, `checks.common.backend`,
`checks.common.dynamo.guard_site`): the rules live there once.

Contracts:

* `run_script(path, timeout, python)` runs one script in a fresh interpreter (``python -I -X faulthandler``: no
  PYTHON* variables, no user site, no script or working directory on the path; `python` another venv's, default this
  one) from an empty temporary working directory, behind a guard that makes `conformance` impossible to import
  (entries of the path holding the suite are dropped and an import finder refuses it, so an editable install cannot
  leak it in). It returns a `Run`: the exit status (None: timed out), the seconds, and its stderr.
* `tracebacks(text)` parses the printed tracebacks of a run's stderr into `Raised` blocks, in print order (the
  root of a ``raise ... from`` chain first): the frames, dynamo's traced user stack (the frames after
  ``from user code:`` in its message), the exception's type name and its message.
* `observed(run, check)` is the fingerprint of what the script raised (kind, where, error, guard, what, message), or
  {} when it printed no traceback (a script that dies in native code prints faulthandler's dump instead, which
  `judge` quotes but does not judge: the suite's dump parser, `run.isolation.crash_frame`, is in a later stage than
  this module). The exporter columns are named by the root of the chain (the exporters re-raise with their own
  wrappers), a backend wrapper by the exception it wraps and the innermost inductor/AOTAutograd frame, any other by
  the exception that propagated. A kind the words decide (data-dependent guard, unsupported) is theirs; which step a
  generic exception came from is the script's structure, so the group's generic kind is kept (`GENERIC`).
* `judge(group, run, check)` is (reproduces, why): it reproduces when the script raised and the fingerprint has
  the group's kind, one of its exception types (when the group records any) and its key (its site, its guard,
  or, for a failure the check states in words or a group keyed by words rather than a frame, the group's masked
  words in the masked message);
  otherwise `why` names what differs, or that it timed out or ran to the end without failing (never a pass).
* `verify(entries, groups, folder, timeout, progress, python)` runs every entry's script and records
  `verified`, `seconds`, `observed` and `why` on the entry. A script that reproduces before its last statement
  is cut after the statement that raised (`repro_cut`) and run again: the cut stays (with a note, `CUT_NOTE`)
  only when it reproduces with the same fingerprint, else the whole script is written back.
* `previous_verdicts(folder)` reads the verdicts of a folder's index (with each script's text) before its
  scripts are written again; `keep_verdicts(entries, folder, previous)` gives an entry whose new script has
  the same code (`same_code`: the header docstring, comments and layout aside) its old verdict and returns
  the others (`findings --verify --keep-verified`: a verification spread over several sessions, in the same
  venv); a new script that is the old one before its cut is cut the same way (`repro_cut.recut`) first.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from conformance import fingerprints
from conformance.report import findings, repro_cut

TIMEOUT = 600.0
STDERR_KEPT = 60_000  # characters of a script's stderr kept (its last traceback is at the end)
GUARD = r"""
import os, runpy, sys
script = sys.argv[1]
sys.path[:] = [p for p in sys.path if "-packages" in p or not os.path.isdir(os.path.join(p or ".", "conformance"))]
class NoSuite:
    def find_spec(self, name, path=None, target=None):
        if name == "conformance" or name.startswith("conformance."):
            raise ModuleNotFoundError(f"{name} is not importable here: a reproducer may not use the suite")
        return None
sys.meta_path.insert(0, NoSuite())
sys.argv = [script]
runpy.run_path(script, run_name="__main__")
"""
# The kinds a step gives an exception whose words say nothing more (the step it was raised in decides).
GENERIC = {"exception", "export_error", "backend", "call_order", "specialisation"}
UNSUPPORTED = {"unsupported", "graph_break", "call_order", "export_error"}  # kinds an Unsupported can be
WORDED = {"contract", "numerical_mismatch", "recompile"}  # stated by an assertion of the script, in words
FATAL_MARK = "Fatal Python error: "  # faulthandler's first line when a script dies in native code
GUARD_MARK = "failed guard: "  # the templates' recompile assertions quote dynamo's guard-failure reason after it
FRAME = re.compile(r'^\s*File "(.+)", line (\d+), in (.+)$')
EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?:: (.*))?$")
CHAIN_LINES = ("The above exception was the direct cause of the following exception:",
               "During handling of the above exception, another exception occurred:")


@dataclass
class Frame:
    filename: str
    lineno: int
    name: str


@dataclass
class Raised:
    frames: list[Frame] = field(default_factory=list)
    error: str = ""  # the type's name, without its module
    message: str = ""
    user_stack: list[Frame] | None = None  # dynamo's traced stack, when the message has one


@dataclass
class Run:
    status: int | None  # None: timed out
    seconds: float
    stderr: str


def run_script(path: Path, timeout: float = TIMEOUT, python: str = sys.executable) -> Run:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="repro-verify-") as cwd:
        try:
            done = subprocess.run([python, "-I", "-X", "faulthandler", "-c", GUARD, str(Path(path).resolve())],
                                  cwd=cwd, env=env,
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            tail = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
            return Run(None, round(time.perf_counter() - started, 1), tail[-STDERR_KEPT:])
    return Run(done.returncode, round(time.perf_counter() - started, 1), done.stderr[-STDERR_KEPT:])


def _frames(lines: list[str]) -> list[Frame]:
    return [Frame(m.group(1), int(m.group(2)), m.group(3).strip()) for m in map(FRAME.match, lines) if m]


def tracebacks(text: str) -> list[Raised]:
    """The tracebacks printed in `text`, in print order (see the module)."""
    blocks: list[Raised] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].rstrip() != "Traceback (most recent call last):":
            i += 1
            continue
        block, i = Raised(), i + 1
        while i < len(lines) and (lines[i].startswith(" ") or not lines[i].strip()):
            match = FRAME.match(lines[i])
            if match:
                block.frames.append(Frame(match.group(1), int(match.group(2)), match.group(3).strip()))
            i += 1
        head = EXCEPTION_LINE.match(lines[i]) if i < len(lines) else None
        if head is None:
            continue
        message = [head.group(2) or ""]
        i += 1
        while i < len(lines) and lines[i].strip() not in CHAIN_LINES and lines[i] != "Traceback (most recent call last):":
            message.append(lines[i])
            i += 1
        block.error = head.group(1).rsplit(".", 1)[-1]
        block.message = "\n".join(message).strip()
        if "from user code:" in block.message:
            block.user_stack = _frames(block.message.split("from user code:", 1)[1].splitlines())
        blocks.append(block)
    return blocks


def observed(run: Run, check: str = "", group_kind: str = "") -> dict:
    """The fingerprint of what the script raised (see the module); {} when it printed no traceback."""
    from conformance.checks.common import backend, dynamo

    blocks = tracebacks(run.stderr)
    if not blocks:
        return {}
    # an exporter column fingerprints the root of the chain it caught (`exporters.exporter_failure`); an exception
    # it did not catch is fingerprinted as raised, the last block, as every other check's
    raised = blocks[0] if check.startswith("exporter_") and group_kind != "exception" else blocks[-1]
    found = {"error": raised.error, "message": " ".join(raised.message.split())[:400]}
    if group_kind == "backend" or raised.error in backend.WRAPPERS:
        inner = next((b for b in reversed(blocks) if b.error not in backend.WRAPPERS), raised)
        inner_line = next((line for line in inner.message.splitlines() if line.strip()), "")
        return {**found, "kind": "backend", "error": inner.error, "what": fingerprints.mask(inner_line),
                "where": backend.backend_site_of([f for b in blocks for f in b.frames])}
    if raised.error == "AssertionError" and group_kind in WORDED:
        found.update(kind=group_kind, what=fingerprints.mask(raised.message))
        if GUARD_MARK in raised.message:
            found["guard"] = dynamo.guard_site(raised.message.split(GUARD_MARK, 1)[1])
        return found
    kind = fingerprints.kind_from(raised.error, raised.message, default="")
    if not kind:
        kind = group_kind if group_kind in GENERIC else "exception"
    elif kind == "unsupported" and group_kind in UNSUPPORTED:
        kind = group_kind
    where = fingerprints.where_from(raised.message, raised.frames, raised.user_stack)
    return {**found, "kind": kind, "where": where}


def _describe(found: dict) -> str:
    parts = [found.get("kind", "?")]
    key = found.get("guard") or found.get("where") or found.get("what") or ""
    if key:
        parts.append(f"at {key}")
    if found.get("error"):
        parts.append(f"({found['error']})")
    return " ".join(parts)


def judge(group: findings.Group, run: Run, check: str = "") -> tuple[bool, str]:
    if run.status is None:
        return False, f"the script ran past {run.seconds:.0f} s (timed out)"
    if run.status == 0:
        return False, "the script ran to the end without failing: the failure does not happen standalone " \
                      "(it may need the suite's call order or its exact inputs)"
    found = observed(run, check, group.kind)
    if not found:
        lines = [line for line in run.stderr.splitlines() if line.strip()]
        fatal = next((line for line in lines if line.startswith(FATAL_MARK)), None)
        if fatal:  # faulthandler's dump: judging its frames needs the suite's dump parser, which is in run/
            return False, (f"the script died in native code (exit status {run.status}): {fatal[:200]}; the verifier "
                           "does not judge a native crash's frames yet")
        return False, f"the script printed no traceback (exit status {run.status}): {(lines or [''])[-1][:200]}"
    differs = []
    if found["kind"] != group.kind:
        differs.append(f"kind {found['kind']} (the group: {group.kind})")
    if group.errors and found.get("error") not in group.errors and found["kind"] not in WORDED:
        differs.append(f"exception {found.get('error') or 'none'} (the group: {', '.join(group.errors)})")
    if found["kind"] in WORDED and not found.get("guard"):
        if group.where not in found.get("what", "") and group.where not in found.get("message", ""):
            differs.append(f"words {found.get('what', '')[:160]!r} (the group: {group.where!r})")
    elif not findings.FRAME.match(group.where):  # keyed by its masked words (an AOTI package's `run: ...`)
        if group.where.removesuffix("...") not in fingerprints.mask(found.get("message", "")):
            differs.append(f"words {fingerprints.mask(found.get('message', ''))[:160]!r} (the group: {group.where!r})")
    elif (found.get("guard") or found.get("where", "")) != group.where:
        differs.append(f"site {found.get('guard') or found.get('where') or 'none'} (the group: {group.where})")
    if differs:
        return False, f"it fails otherwise: {_describe(found)}; differs in " + "; ".join(differs)
    return True, ""


def verify(entries, groups: list[findings.Group], folder: Path, timeout: float = TIMEOUT, progress=None,
           python: str = sys.executable) -> None:
    """Run each entry's script (see the module) and record the verdict on the entry."""
    by_id = {g.id: g for g in groups}
    for entry in entries:
        if not entry.script:
            continue
        run = run_script(folder / entry.script, timeout, python)
        group = by_id[entry.group]
        entry.seconds = run.seconds
        entry.observed = observed(run, entry.check, group.kind) if run.status else {}
        entry.verified, entry.why = judge(group, run, entry.check)
        if entry.verified:
            _cut_after_raise(entry, group, folder / entry.script, run, timeout, python)
        if progress:
            progress(entry)


CUT_NOTE = "ends at the statement that raises: the check's steps after it are cut (verified again after the cut)"
SAME_FAILURE = ("kind", "where", "error", "what", "guard")  # the fields of `observed` a cut must leave as they were


def _cut_after_raise(entry, group: findings.Group, path: Path, run: Run, timeout: float, python: str) -> None:
    """The script cut after the statement that raised, kept when it fails the same way (see the module)."""
    text = path.read_text()
    blocks = tracebacks(run.stderr)
    index = repro_cut.raising_statement(text, blocks[-1].frames, path) if blocks else None
    shorter = repro_cut.cut(text, index) if index is not None else text
    if shorter == text:
        return
    path.write_text(shorter)
    again = run_script(path, timeout, python)
    found = observed(again, entry.check, group.kind) if again.status else {}
    if judge(group, again, entry.check)[0] and all(found.get(k) == entry.observed.get(k) for k in SAME_FAILURE):
        entry.seconds = again.seconds
        entry.notes.append(CUT_NOTE)
    else:
        path.write_text(text)


VERDICT_FIELDS = ("verified", "why", "observed", "seconds")


def same_code(text: str, other: str) -> bool:
    """Whether two scripts run the same code: equal but for their module docstrings (the header, whose counts
    and versions change when other cells join the group), comments and layout. Unparsable: equal texts only."""
    def code(source: str) -> str:
        tree = ast.parse(source)
        body = tree.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            tree.body = body[1:]
        return ast.dump(tree)

    try:
        return code(text) == code(other)
    except SyntaxError:
        return text == other


def previous_verdicts(folder: Path) -> dict[str, tuple[str, dict]]:
    """Group id -> (its script's text, its verdict fields) of every verified script of `folder`'s index, read
    before the scripts are written again; {} when there is no readable index."""
    from conformance.report import repro

    try:
        groups = json.loads((folder / repro.INDEX).read_text())["groups"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    found = {}
    for group in groups:
        script = folder / (group.get("script") or "")
        if group.get("verified") is not None and group.get("script") and script.is_file():
            found[group["group"]] = (script.read_text(), {k: group.get(k) for k in VERDICT_FIELDS})
    return found


def keep_verdicts(entries, folder: Path, previous: dict[str, tuple[str, dict]]) -> list:
    """The entries whose script was written again with the same code as a verified one (`same_code`): each
    takes that verdict (the code is what was verified); the others, to verify, are returned."""
    left = []
    for entry in entries:
        old = previous.get(entry.group)
        if entry.script and old and not same_code((folder / entry.script).read_text(), old[0]):
            shorter = repro_cut.recut((folder / entry.script).read_text(), old[0])
            if shorter and same_code(shorter, old[0]):
                (folder / entry.script).write_text(shorter)
                entry.notes.append(CUT_NOTE)
        if entry.script and old and same_code((folder / entry.script).read_text(), old[0]):
            for name, value in old[1].items():
                setattr(entry, name, value)
        elif entry.script:
            left.append(entry)
    return left
