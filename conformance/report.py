"""Stage 5, report: per-cell records -> the JSON envelope of design.md.

Contract: `write_record(path, record)` appends one finished cell as a JSON
line and flushes it, so an interrupted run loses no finished cell.
`build_envelope(records, environment)` makes the envelope (schema
`vlm-conformance/1`); `write_atomic(path, data)` replaces a file only once
the new content is fully written.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterable

SCHEMA = "vlm-conformance/1"
VERDICTS = ("pass", "fail", "xfail", "xpass", "skip", "error", "timeout")
ROOT = Path(__file__).resolve().parent.parent


def write_record(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record, sort_keys=True, default=str)
    with open(path, "a") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def read_records(paths: Iterable[Path]) -> list[dict]:
    """Records from JSON-lines files; a torn last line (killed writer) is dropped."""
    records = []
    for path in paths:
        for line in Path(path).read_text().splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records


def suite_version() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("vlm-conformance")
    except PackageNotFoundError:
        ver = "0+unknown"
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True, timeout=5).stdout.strip()
    except Exception:
        commit = ""
    return {"version": ver, "commit": commit}


def environment(device: str, dtype: str, backend: str) -> dict[str, str]:
    import torch
    import transformers

    name = platform.processor() or platform.machine()
    if device.startswith("cuda") and torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": device,
        "device_name": name,
        "dtype": dtype,
        "backend": backend,
    }


def build_envelope(records: list[dict], env: dict, checks: list[str], models: dict[str, dict]) -> dict:
    """The envelope from cell records; later records of a cell replace earlier ones.

    `models` maps class name -> row metadata (model_type, modalities, declared,
    tiny); records may carry richer `tiny` data, which wins.
    """
    rows: dict[str, Any] = {}
    for name, meta in sorted(models.items()):
        rows[name] = {**meta, "cells": {}}
    for record in records:
        row = rows.setdefault(record["model"], {"cells": {}})
        if record.get("tiny"):
            row["tiny"] = record["tiny"]
        row["cells"][record["check"]] = {
            "verdict": record["verdict"],
            "reason": record.get("reason", ""),
            "seconds": record.get("seconds", 0.0),
            "metrics": record.get("metrics", {}),
            "nodeid": record.get("nodeid", ""),
        }
    summary = {c: {v: 0 for v in VERDICTS} for c in checks}
    for row in rows.values():
        for check_id, cell in row["cells"].items():
            summary.setdefault(check_id, {v: 0 for v in VERDICTS})
            summary[check_id][cell["verdict"]] = summary[check_id].get(cell["verdict"], 0) + 1
    return {
        "schema": SCHEMA,
        "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "suite": suite_version(),
        "environment": env,
        "checks": list(checks),
        "models": rows,
        "summary": summary,
    }


def write_atomic(path: Path, data: Any) -> None:
    """Write JSON to `path` via a temporary file and rename: never half-written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle, indent=1, sort_keys=False, default=str)
            handle.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
