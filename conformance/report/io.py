"""Run files on disk: the one atomic writer, the JSON-lines records, JSON text.

Contracts:

* `write_texts_atomic({path: text})` writes several files all or nothing:
  each new content goes to a temporary file beside its target, and only
  when all are written are they renamed into place, so an error (an
  unwritable directory, a full disk) leaves every target as it was;
  `write_text_atomic(path, text)` and `write_json_atomic(path, data)` are
  the one-file forms. A reader never sees a half-written file.
* `append_record(path, record)` appends one JSON line and flushes it to
  disk, so an interrupted run loses no finished cell; `read_records(paths)`
  reads them back, dropping a torn last line (a killed writer).
* `json_text(data)` is how run files are written (indent 1, a final newline): strict JSON, a NaN or infinite
  float written as its name (`finite`: "nan", "inf", "-inf"), since browsers, jq and other strict readers take no
  NaN token; `restore_floats(data)` turns those names back into floats (the envelope reader does, in cells' metrics).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_texts_atomic(files: dict[Path, str]) -> None:
    """Write several text files all or nothing (see the module)."""
    staged: list[tuple[str, Path]] = []
    try:
        for path, text in files.items():
            path = Path(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            staged.append((tmp, path))
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
            os.chmod(tmp, 0o666 & ~_umask())
        for tmp, path in staged:
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write `text` to `path` via a temporary file and rename: never half-written."""
    write_texts_atomic({Path(path): text})


NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def finite(data: Any) -> Any:
    """`data` with every NaN or infinite float written as its name ("nan", "inf", "-inf")."""
    if isinstance(data, float) and not math.isfinite(data):
        return str(data)
    if isinstance(data, dict):
        return {key: finite(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [finite(value) for value in data]
    return data


def restore_floats(data: Any) -> Any:
    """`data` with the names `finite` writes ("nan", "inf", "-inf") read back as floats."""
    if isinstance(data, str) and data in NON_FINITE:
        return NON_FINITE[data]
    if isinstance(data, dict):
        return {key: restore_floats(value) for key, value in data.items()}
    if isinstance(data, list):
        return [restore_floats(value) for value in data]
    return data


def json_text(data: Any) -> str:
    return json.dumps(finite(data), indent=1, sort_keys=False, default=str, allow_nan=False) + "\n"


def write_json_atomic(path: str | Path, data: Any) -> None:
    """Write `data` as JSON to `path` via a temporary file and rename: never half-written."""
    write_text_atomic(path, json_text(data))


def append_record(path: Path, record: dict) -> None:
    """Append `record` as one JSON line, flushed to disk."""
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
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                records.append(record)
    return records
