"""Dynamo plumbing shared by the compile checks: graph breaks and recompiles.

Contract:

* `break_reason(exc)` turns an exception raised while dynamo traced (a graph
  break under ``fullgraph=True``, a data-dependent guard, a failed fake-tensor
  op) into one line: what broke, and where, as ``file:line`` of the innermost
  user frame inside transformers (else the innermost user frame);
* `trace_breaks(fn, **kwargs)` compiles `fn` without ``fullgraph`` with
  dynamo alone and calls it once: every graph break it made, as a site
  ``<what> @ <module:qualname>`` with a count (`graph_break_sites`), and the
  call's output; `break_site(exc)` is the site of a fullgraph failure;
* `guard_site(reason)` names a failed guard the same way, for fingerprints;
  `describe_guard(reason)` with its ``file:line`` for a person;
* `DynamoWatch` resets dynamo on entry and then reads dynamo's own counters:
  how many graphs were compiled, the graph breaks, the guard failures that
  caused recompiles, and the seconds spent compiling. No log scraping.
"""

from __future__ import annotations

import logging
import re
import traceback
from dataclasses import dataclass

import torch
from torch._dynamo.utils import compilation_time_metrics, counters, graph_break_reasons, guard_failures

from conformance.fingerprints import mask
from conformance.reasons import exception_site, package_paths, short_path, site, site_of, where

REASON_LIMIT = 240

# Dynamo's structured trace (for tlparse, enabled by TORCH_TRACE with its own
# handler) logs every traced op at DEBUG; without this, pytest's log capture
# keeps it and prints thousands of lines under every failing compile cell.
logging.getLogger("torch.__trace").propagate = False


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _explanation(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("Explanation:"):
            return line[len("Explanation:"):].strip()
    return ""


def _clip(text: str, limit: int = REASON_LIMIT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _frame_text(frame: traceback.FrameSummary) -> str:
    path = short_path(frame.filename)
    code = f": `{frame.line.strip()}`" if frame.line else ""
    return f"{path}:{frame.lineno}{code}"


def user_frame(exc: BaseException) -> str:
    """`file:line: `code`` of the innermost traced frame in transformers, else the innermost one."""
    stack = list(getattr(exc, "real_stack", None) or [])
    if stack:
        inside = [f for f in stack if "/transformers/" in f.filename]
        return _frame_text((inside or stack)[-1])
    return where(exc)


def break_reason(exc: BaseException) -> str:
    """One line naming what dynamo could not trace and where."""
    text = str(exc)
    what = _first_line(text) or type(exc).__name__
    explanation = _explanation(text)
    if explanation and explanation not in what:
        what = f"{what}: {explanation}"
    location = user_frame(exc)
    return f"{type(exc).__name__}: {_clip(what)}" + (f" (at {location})" if location else "")


@dataclass
class Trace:
    """What one non-fullgraph trace of a call saw: its graph-break sites and its output (or why it raised)."""

    sites: dict[str, int]
    output: object = None
    error: BaseException | None = None

    @property
    def breaks(self) -> int:
        return sum(self.sites.values())


def graph_break_sites() -> dict[str, int]:
    """Each graph break dynamo made since its last reset, as ``<what> @ <module:qualname>``, with how often."""
    sites: dict[str, int] = {}
    for reason in graph_break_reasons:
        key = f"{mask(_first_line(reason.reason)) or 'graph break'} @ {site_of(reason.user_stack) or '?'}"
        sites[key] = sites.get(key, 0) + 1
    return dict(sorted(sites.items()))


def trace_breaks(fn, **kwargs) -> Trace:
    """One call of `fn` compiled without fullgraph by dynamo alone (backend "eager": graph breaks do not
    depend on the backend, and no subgraph is code-generated): its break sites and its output."""
    torch._dynamo.reset()
    counters.clear()
    try:
        with torch.no_grad():
            output = torch.compile(fn, backend="eager")(**kwargs)
    except Exception as exc:  # the model failed under dynamo even with graph breaks allowed
        return Trace(graph_break_sites(), error=exc)
    return Trace(graph_break_sites(), output=output)


def break_site(exc: BaseException) -> str:
    """``<what> @ <module:qualname>`` of a fullgraph failure: the break a Trace would list."""
    return f"{mask(_first_line(str(exc))) or type(exc).__name__} @ {exception_site(exc) or '?'}"


def guard_site(reason: str) -> str:
    """``<guard> @ <module:qualname>`` of one of dynamo's guard-failure reasons (no line numbers)."""
    head = _first_line(reason)
    head = head.split(": ", 1)[1] if re.match(r"^\S+/\S+: ", head) else head  # drop the compile id
    segments = [part.strip() for part in head.split("  # ")]
    located = next((re.search(r"(\S+\.py):(\d+) in (\w+)", part) for part in segments[1:]
                    if re.search(r"\S+\.py:\d+ in ", part)), None)
    where = site(located.group(1), int(located.group(2)), located.group(3)) if located else "?"
    return f"{mask(segments[0])} @ {where}"


def describe_guard(reason: str) -> str:
    """'guard (at file:line in fn)' from one of dynamo's guard-failure reasons."""
    head = _first_line(reason)
    head = head.split(": ", 1)[1] if re.match(r"^\S+/\S+: ", head) else head  # drop the compile id
    segments = [part.strip() for part in head.split("  # ")]
    location = next((part for part in segments[1:] if re.search(r":\d+ in ", part)), "")
    location = package_paths(re.sub(r"\s*\(HINT.*$", "", location))
    return _clip(segments[0] + (f" (at {location})" if location else ""))


class DynamoWatch:
    """Dynamo's own bookkeeping since entering the block (dynamo is reset on entry)."""

    def __enter__(self) -> "DynamoWatch":
        torch._dynamo.reset()
        counters.clear()
        compilation_time_metrics.clear()
        return self

    def __exit__(self, *exc_info) -> None:
        return None

    @property
    def graphs(self) -> int:
        """Graphs compiled so far (with fullgraph: one per compile of the frame)."""
        return int(counters["stats"]["unique_graphs"])

    @property
    def graph_breaks(self) -> list[str]:
        return [_clip(_first_line(reason)) for reason in counters["graph_break"]]

    @property
    def guard_failure_reasons(self) -> list[str]:
        """Why each recompile was attempted, as dynamo said it (see `describe_guard`, `guard_site`)."""
        return [str(reason) for failures in guard_failures.values() for reason in failures]

    @property
    def guard_failures(self) -> list[str]:
        """Why each recompile was attempted: the failed guard, and where its value came from."""
        return [describe_guard(reason) for reason in self.guard_failure_reasons]

    @property
    def compile_seconds(self) -> float:
        return round(sum(compilation_time_metrics.get("_compile.compile_inner", [])), 3)
