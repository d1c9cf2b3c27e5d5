"""Parsed files of the code graph kept between runs: the impact graph in a second instead of ten.

Contract:

* `ParseCache.load(root)` reads the entries an earlier run saved for the
  transformers tree at `root`; `save()` writes them back (atomically) when
  this run parsed anything new. Where: ``$CONFORMANCE_CACHE_DIR``, else
  ``$XDG_CACHE_HOME/vlm-conformance``, else ``~/.cache/vlm-conformance``;
  ``CONFORMANCE_CACHE_DIR=`` (empty) turns the cache off.
* A cache never changes a result. `get(rel)` returns a parsed file only when
  the file's size and modification time are those it was parsed at, the
  tree holds the same ``.py`` files (how imports resolve depends on which
  files exist) and `code_graph` is the same code. A missing, unreadable or
  stale cache file is parsed again from the sources, silently.
* The file is data only (JSON: names and paths), never code: whoever can
  write the cache folder (a CI cache, say) can make the gate parse files
  again, not run anything. A malformed file is a miss.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from conformance.select import code_graph
from conformance.report.io import write_text_atomic

_DISABLED = ""


def cache_dir() -> Path | None:
    configured = os.environ.get("CONFORMANCE_CACHE_DIR")
    if configured is not None:
        return Path(configured) if configured != _DISABLED else None
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vlm-conformance"


def tree_key(root: Path) -> str:
    """What every entry depends on besides its own file: the tree's ``.py`` files and this code."""
    digest = hashlib.sha1(Path(code_graph.__file__).read_bytes())
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
    return digest.hexdigest()


class ParseCache:
    """Parsed files by path relative to the tree, each with the (size, mtime) it was parsed at."""

    def __init__(self, path: Path | None, key: str, entries: dict):
        self.path, self.key, self.entries = path, key, entries
        self.dirty = False

    @classmethod
    def load(cls, root: Path) -> "ParseCache":
        directory = cache_dir()
        if directory is None:
            return cls(None, "", {})
        root = root.resolve()
        path = directory / f"code-graph-{hashlib.sha1(str(root).encode()).hexdigest()[:16]}.json"
        key = tree_key(root)
        try:
            data = json.loads(path.read_text())
            if data.get("key") != key:
                return cls(path, key, {})
            entries = {rel: (tuple(entry["file_key"]), code_graph.ParsedFile.from_data(entry["parsed"]))
                       for rel, entry in data["entries"].items()}
        except Exception:  # noqa: BLE001 - no cache, or one this code cannot read: parse again
            return cls(path, key, {})
        return cls(path, key, entries)

    def get(self, rel: str, key: tuple[int, int] | None):
        entry = self.entries.get(rel)
        return entry[1] if entry is not None and key is not None and entry[0] == key else None

    def put(self, rel: str, key: tuple[int, int] | None, parsed) -> None:
        if self.path is not None and key is not None:
            self.entries[rel] = (key, parsed)
            self.dirty = True

    def save(self) -> None:
        if self.path is None or not self.dirty:
            return
        data = {"key": self.key, "entries": {rel: {"file_key": list(file_key), "parsed": parsed.to_data()}
                                             for rel, (file_key, parsed) in self.entries.items()}}
        try:
            write_text_atomic(self.path, json.dumps(data))
        except OSError:  # a read-only or full disk: the next run parses again
            return
        self.dirty = False
