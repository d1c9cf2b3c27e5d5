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
* `Worker(packages, folder, metrics)` is the long-lived form of that process
  for generation (`aoti_generate`): one ``python -I`` importing only torch
  loads several packages (part -> path) and answers one part call at a
  time over a pipe (length-prefixed ``torch.save`` messages on two file
  descriptors of their own, so nothing the C++ runtime prints reaches
  them). It can keep outputs of a call (a cache) and pass them to a later
  call, which updates them in place there, so the state never leaves the
  process, as in a C++ server. Its failures are ``load: part <name>: ...``
  and ``run: part <name>: ...``; `in_part(part, violation)` names the part
  in any other step's failure.

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
import io
import json
import logging
import os
import re
import select
import signal
import struct
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


def in_part(part: str, exc: ContractViolation, metrics: dict | None = None) -> ContractViolation:
    """`exc`, a failure at one of `STEPS`, restated as that step's failure in generation part `part` (with
    `metrics`, when given, in place of its own)."""
    step = next(s for s in STEPS if exc.reason.startswith(f"{s}: "))
    fingerprint = exc.fingerprint or Fingerprint("contract", what=mask(exc.reason))
    what = fingerprint.what[len(f"{step}: "):] if fingerprint.what.startswith(f"{step}: ") else fingerprint.what
    return violation(step, f"part {part}: {exc.reason[len(step) + 2:]}", exc.metrics if metrics is None else metrics,
                     dataclasses.replace(fingerprint, what=f"{step}: part {part}: {what}".rstrip()))


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
    call = f"call {last['call']}: " if last.get("call") else f"part {last['part']}: " if last.get("part") else ""
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


# --- a long-lived worker serving several packages, one call at a time ------------------------------

# The worker: torch only. argv: the folder, the request fd, the reply fd, then part=path pairs. Each message is
# 8 bytes of length and a `torch.save` of a dict; the worker loads what it receives with weights_only=True.
WORKER = r'''
import io, os, struct, sys, time
import torch

folder, inbox, outbox = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def receive():
    data = b""
    while len(data) < 8:
        chunk = os.read(inbox, 8 - len(data))
        if not chunk:
            return None
        data += chunk
    size, data = struct.unpack(">Q", data)[0], b""
    while len(data) < size:
        data += os.read(inbox, min(size - len(data), 1 << 20))
    return torch.load(io.BytesIO(data), weights_only=True)

def send(**message):
    buffer = io.BytesIO()
    torch.save(message, buffer)
    data = buffer.getvalue()
    view = memoryview(struct.pack(">Q", len(data)) + data)
    while view:
        view = view[os.write(outbox, view):]

step, part, packages, held = "load", "", {}, []
try:
    started = time.perf_counter()
    for entry in sys.argv[4:]:
        part, path = entry.split("=", 1)
        packages[part] = torch._inductor.aoti_load_package(path)
    send(step="loaded", seconds=round(time.perf_counter() - started, 3))
    step = "run"
    while True:
        request = receive()
        if request is None or request.get("part") is None:
            send(step="done", imported=sorted(n for n in WATCHED if n in sys.modules))
            break
        part, inputs = request["part"], dict(request["inputs"])
        if request.get("held"):  # the state the worker keeps between calls, updated in place by this call
            inputs[request["held"]] = held
        with torch.no_grad():
            out = packages[part](**inputs)
        out = list(out) if isinstance(out, (list, tuple)) else [out]
        if request.get("keep") is not None:  # the outputs after the first `keep` are held, not sent back
            out, held = out[: request["keep"]], out[request["keep"]:]
        send(step="answer", outputs=out, held=len(held))
except Exception as exc:
    send(step=step, part=part, error=type(exc).__name__, message=str(exc))
    sys.exit(1)
'''.replace("WATCHED", repr(WATCHED))


class Held:
    """Stands for one tensor of the state the worker keeps (a cache it updates in place); the caller never has it."""

    def __repr__(self) -> str:
        return "<held by the worker>"


class Worker:
    """A fresh ``python -I`` importing only torch that loads `packages` (part -> package path) and answers part
    calls over a pipe until closed: what a C++ server that holds the packages and the cache does.

    `call(part, inputs, keep=None, held=None)` runs one package on keyword tensors and returns its outputs (a
    list). `keep=k` keeps the outputs after the first k in the worker (returned as `Held` markers); `held=name`
    passes the kept state as keyword `name` (the package updates it in place there). A failure is ``load: part
    <name>: ...`` or ``run: part <name>: ...`` (`violation`): the error the worker reported, else how it ended.
    Records `load_seconds`, `serve_seconds` (the worker's life), `calls` and, on `close`,
    `fresh_process_imported` ([]: neither transformers nor this suite served the calls).
    """

    def __init__(self, packages: dict[str, str], folder: str, metrics: dict):
        self.metrics = metrics
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env["AOTI_RUNTIME_CHECK_INPUTS"] = "1"
        request_read, self._requests = os.pipe()
        self._replies, reply_write = os.pipe()
        self._stderr = open(os.path.join(folder, "worker.stderr"), "w+")
        self._started = time.perf_counter()
        self._process = subprocess.Popen(
            [sys.executable, "-I", "-c", WORKER, folder, str(request_read), str(reply_write),
             *(f"{part}={path}" for part, path in packages.items())],
            cwd=folder, env=env, pass_fds=(request_read, reply_write), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=self._stderr)
        os.close(request_read)
        os.close(reply_write)
        self._failure: ContractViolation | None = None
        metrics["calls"] = 0
        try:
            loaded = self._reply("load", "")
        except ContractViolation:
            self.close()
            raise
        metrics["load_seconds"] = loaded.get("seconds")

    def call(self, part: str, inputs: dict, keep: int | None = None, held: str | None = None) -> list:
        if self._failure is not None:
            raise self._failure
        self._send({"part": part, "inputs": inputs, "keep": keep, "held": held})
        answer = self._reply("run", part)
        self.metrics["calls"] += 1
        return list(answer["outputs"]) + [Held() for _ in range(answer["held"] if keep is not None else 0)]

    def close(self) -> None:
        if self._process.poll() is None and self._failure is None:
            try:
                self._send({"part": None})
                self.metrics["fresh_process_imported"] = self._reply("run", "").get("imported", [])
            except ContractViolation:
                pass
        for fd in (self._requests, self._replies):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._stderr.close()
        self.metrics["serve_seconds"] = round(time.perf_counter() - self._started, 3)

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _send(self, message: dict) -> None:
        buffer = io.BytesIO()
        torch.save(message, buffer)
        data = buffer.getvalue()
        try:
            os.write(self._requests, struct.pack(">Q", len(data)))
            view = memoryview(data)
            while view:
                view = view[os.write(self._requests, view):]
        except OSError:  # the worker is gone: its reply (none) says how it ended
            pass

    def _read(self, size: int, deadline: float) -> bytes | None:
        data = b""
        while len(data) < size:
            ready, _, _ = select.select([self._replies], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError
            chunk = os.read(self._replies, min(size - len(data), 1 << 20))
            if not chunk:
                return None
            data += chunk
        return data

    def _reply(self, step: str, part: str) -> dict:
        deadline = time.monotonic() + SERVE_TIMEOUT
        try:
            head = self._read(8, deadline)
            body = self._read(struct.unpack(">Q", head)[0], deadline) if head else None
        except TimeoutError:
            self._process.kill()
            self._process.wait()
            body, returncode = None, None
        else:
            returncode = None if body is not None else self._process.wait()
        if body is not None:
            answer = torch.load(io.BytesIO(body), weights_only=True)
            if "error" not in answer:
                return answer
            entries = [answer]
        else:
            entries = [{"step": step, "part": part}]
        self._stderr.flush()
        self._stderr.seek(0)
        failure = _served_failure(entries, returncode if body is None else 1, self._stderr.read(), self.metrics)
        self._failure = failure
        raise failure
