"""AOTInductor plumbing: compile and package an exported program, then serve it where no Python model exists.

Contracts:

* Every failure is a ContractViolation whose reason starts with its step
  (`STEPS`: ``export: ``, ``compile: ``, ``package: ``, ``load: ``, ``run: ``,
  ``compare: ``) and whose fingerprint's ``what`` starts with the same word,
  so that two cells that fail at different steps never share a fingerprint.
  `at_step(step, violation)` prefixes a violation raised by a shared helper
  (the export helpers') that way.
* `compile_and_package(program, folder, metrics)` is what a user calls,
  ``torch._inductor.aoti_compile_and_package``, into ``folder/model.pt2``.
  It records `compile_seconds` (compile and package together, as the call
  does both), `package_bytes`, `missing_c_shims` (the aten operators that
  torch's ``torch._inductor.ir`` logger says are "missing a c-shim
  implementation, using proxy executor as fallback") and
  `proxy_executor_ops` (every operator the package's runtime dispatches
  through the proxy executor, read from the extern-kernel list inside the
  package: those aten operators and any custom operator). A failure is
  ``package`` when it raised in ``torch/_inductor/package/``, else
  ``compile`` (fingerprint kind ``backend``: the export succeeded, so what
  failed is inductor's lowering, code generation or C++ build).
* `serve_in_fresh_process(package, calls, folder, metrics)` loads the
  package in a new interpreter, ``python -I`` (no PYTHONPATH, no user site,
  not this suite's folder) that imports torch and nothing else, calls it
  with each entry of `calls` (name -> keyword tensors, passed by
  ``torch.save`` / ``torch.load``), and returns name -> output, also passed
  back by ``torch.save``. The runtime checks each call's shapes against the
  program's constraints (``AOTI_RUNTIME_CHECK_INPUTS=1``), so a prompt
  length outside the program's range is a ``run`` failure naming the
  check, not silent garbage. It records `load_seconds`, `serve_seconds`
  (the whole process) and `fresh_process_imported` (which of transformers
  and this suite the process had imported when done: [] is the proof that
  neither served the calls). A failure is ``load`` (the package or the
  inputs could not be loaded) or ``run`` (a call raised; its name is in the
  reason), from the error the process reported, or the signal or exit
  status it died with.

Why a fresh process and not proof that the runner holds no reference to the
model: a reference count says the Python model object is gone, not that the
package can run without Python. AOTInductor dispatches operators without a
C++ kernel through the proxy executor back into the interpreter's operator
registry, so a custom operator defined in Python serves every call in the
process that defined it and none in a C++ server. A process that imports
only torch is the deployment: what it serves, the package serves.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
import traceback
import zipfile

import torch

from conformance.checks.common.backend import backend_site
from conformance.checks.common.outcome import ContractViolation
from conformance.fingerprints import Fingerprint, mask

STEPS = ("export", "compile", "package", "load", "run", "compare")
PACKAGE = "model.pt2"
INPUTS = "inputs.pt"
OUTPUTS = "outputs.pt"
IR_LOGGER = "torch._inductor.ir"  # where inductor says an aten operator has no c-shim
MISSING_C_SHIM = re.compile(r"^(\S+) is missing a c-shim implementation")
PACKAGE_CODE = "/torch/_inductor/package/"
SERVE_TIMEOUT = 600.0  # seconds; the cell's own limit usually ends it first
MESSAGE_LIMIT = 240
MARK = "AOTI-RUNNER "  # the fresh process's progress lines on stdout start with it
WATCHED = ("transformers", "conformance")  # what the fresh process must not have imported

# The fresh process: torch only. argv[1] is the folder with the package and the inputs.
RUNNER = r'''
import json, sys, time
import torch

def say(**entry):
    print("AOTI-RUNNER " + json.dumps(entry), flush=True)

folder, step, call = sys.argv[1], "load", ""
try:
    say(step="load")
    started = time.perf_counter()
    package = torch._inductor.aoti_load_package(folder + "/model.pt2")
    calls = torch.load(folder + "/inputs.pt", weights_only=True)
    say(step="loaded", seconds=round(time.perf_counter() - started, 3))
    step, outputs = "run", {}
    for call, kwargs in calls.items():
        say(step="run", call=call)
        with torch.no_grad():
            outputs[call] = package(**kwargs)
    torch.save(outputs, folder + "/outputs.pt")
    say(step="done", imported=sorted(n for n in WATCHED if n in sys.modules))
except Exception as exc:
    say(step=step, call=call, error=type(exc).__name__, message=str(exc))
    sys.exit(1)
'''.replace("WATCHED", repr(WATCHED))


def _first_line(text: str) -> str:
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    line = " ".join(line.split())
    return line if len(line) <= MESSAGE_LIMIT else line[: MESSAGE_LIMIT - 3] + "..."


def violation(step: str, reason: str, metrics: dict, fingerprint: Fingerprint) -> ContractViolation:
    """A failure at `step`: the reason and the fingerprint's ``what`` both start with the step's name."""
    assert step in STEPS, step
    what = fingerprint.what if fingerprint.what.startswith(f"{step}: ") else f"{step}: {fingerprint.what}".rstrip()
    return ContractViolation(f"{step}: {reason}", metrics, dataclasses.replace(fingerprint, what=what))


def at_step(step: str, exc: ContractViolation) -> ContractViolation:
    """`exc` (a shared helper's violation) restated as a failure at `step`."""
    fingerprint = exc.fingerprint or Fingerprint("contract", what=mask(exc.reason))
    return violation(step, exc.reason, exc.metrics, fingerprint)


# --- compile and package --------------------------------------------------------------------------


class _FallbackLog(logging.Handler):
    """The aten operators inductor's logger names as served by the proxy executor while active."""

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.ops: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        found = MISSING_C_SHIM.match(record.getMessage())
        if found:
            self.ops.add(found.group(1))

    def __enter__(self) -> "_FallbackLog":
        logger = logging.getLogger(IR_LOGGER)
        self._level = logger.level
        if logger.getEffectiveLevel() > logging.WARNING:
            logger.setLevel(logging.WARNING)
        logger.addHandler(self)
        return self

    def __exit__(self, *exc_info) -> None:
        logger = logging.getLogger(IR_LOGGER)
        logger.removeHandler(self)
        logger.setLevel(self._level)


def proxy_executor_ops(package: str) -> list[str]:
    """Every operator the package dispatches through the proxy executor (its extern-kernel lists)."""
    ops: set[str] = set()
    with zipfile.ZipFile(package) as archive:
        for name in archive.namelist():
            if name.endswith(".json") and not name.endswith("_metadata.json"):
                try:
                    nodes = json.loads(archive.read(name)).get("nodes", [])
                except (ValueError, AttributeError):
                    continue
                ops.update(n["node"]["target"] for n in nodes if isinstance(n, dict) and "node" in n)
    return sorted(ops)


def _compile_failure(exc: BaseException, metrics: dict) -> ContractViolation:
    chain, inner = [], exc
    while inner is not None and inner not in chain:
        chain.append(inner)
        inner = getattr(inner, "inner_exception", None) or inner.__cause__ or inner.__context__
    frames = [f.filename for e in chain for f in traceback.extract_tb(e.__traceback__)]
    step = "package" if any(PACKAGE_CODE in f for f in frames) else "compile"
    root = next((e for e in chain if type(e).__name__ != "InductorError"), chain[-1])
    message = _first_line(str(root)) or repr(root)
    where = backend_site(exc)
    reason = (f"torch._inductor.aoti_compile_and_package failed on the exported program: "
              f"{type(root).__name__}: {message}" + (f" (at {where})" if where else ""))
    return violation(step, reason, metrics, Fingerprint("backend", where=where, error=type(root).__name__,
                                                        what=mask(message)))


def compile_and_package(program, folder: str, metrics: dict) -> str:
    """The path of ``folder/model.pt2``, the program compiled and packaged by AOTInductor (see the module)."""
    path = os.path.join(folder, PACKAGE)
    started = time.perf_counter()
    try:
        with _FallbackLog() as log:
            torch._inductor.aoti_compile_and_package(program, package_path=path)
    except Exception as exc:
        raise _compile_failure(exc, metrics) from exc
    finally:
        metrics["compile_seconds"] = round(time.perf_counter() - started, 3)
    metrics["missing_c_shims"] = sorted(log.ops)
    metrics["package_bytes"] = os.path.getsize(path)
    metrics["proxy_executor_ops"] = proxy_executor_ops(path)
    return path


# --- serve in a fresh process ---------------------------------------------------------------------


def _progress(stdout: str) -> list[dict]:
    entries = []
    for line in stdout.splitlines():
        if line.startswith(MARK):
            try:
                entries.append(json.loads(line[len(MARK):]))
            except json.JSONDecodeError:
                continue
    return entries


def _ending(returncode: int | None) -> tuple[str, str]:
    """(how a fresh process that reported no error ended, in words; the fingerprint's `error` for it)."""
    if returncode is None:
        return f"it ran past {SERVE_TIMEOUT:g} s", ""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"the process died of {name}", name
    return f"the process exited with status {returncode}", f"exit status {returncode}"


def _served_failure(entries: list[dict], returncode: int | None, stderr: str, metrics: dict) -> ContractViolation:
    """The violation of a fresh process that did not finish: the error it reported, else how it ended; at the
    step its last progress line names (``load`` until the package and the inputs are loaded, then ``run``)."""
    last = entries[-1] if entries else {"step": "load"}
    step = "load" if last.get("step") == "load" else "run"
    call = f"call {last['call']}: " if last.get("call") else ""
    if "error" in last:
        message = _first_line(last.get("message", "")) or last["error"]
        return violation(step, f"{call}{last['error']}: {message}", metrics,
                         Fingerprint("export_error", error=last["error"], what=mask(message)))
    ended, error = _ending(returncode)
    tail = _first_line(stderr.strip().splitlines()[-1]) if stderr.strip() else ""
    return violation(step, f"{call}{ended}" + (f" ({tail})" if tail else ""), metrics,
                     Fingerprint("timeout" if returncode is None else "export_error", error=error,
                                 what="the fresh process ended without a result"))


def serve_in_fresh_process(package: str, calls: dict[str, dict], folder: str, metrics: dict) -> dict:
    """name -> the package's output for `calls[name]`, computed in a fresh ``python -I`` (see the module)."""
    torch.save(calls, os.path.join(folder, INPUTS))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["AOTI_RUNTIME_CHECK_INPUTS"] = "1"
    started = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-I", "-c", RUNNER, folder], cwd=folder, env=env,
                              capture_output=True, text=True, timeout=SERVE_TIMEOUT)
        returncode, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        returncode = None
        stdout, stderr = (s.decode(errors="replace") if isinstance(s, bytes) else (s or "")
                          for s in (exc.stdout, exc.stderr))
    finally:
        metrics["serve_seconds"] = round(time.perf_counter() - started, 3)
    entries = _progress(stdout)
    loaded = next((e for e in entries if e.get("step") == "loaded"), None)
    if loaded is not None:
        metrics["load_seconds"] = loaded.get("seconds")
    done_entry = entries[-1] if entries and entries[-1].get("step") == "done" else None
    if returncode != 0 or done_entry is None:
        raise _served_failure(entries, returncode, stderr, metrics)
    metrics["fresh_process_imported"] = done_entry.get("imported", [])
    return torch.load(os.path.join(folder, OUTPUTS), weights_only=True)
