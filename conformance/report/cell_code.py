"""Which code decided a run's cells: a name for it that two runs made at different commits can compare.

A publication merges runs made over several sessions and machines, each at its own commit (every session
commits the envelopes it finished, so no two runs share a commit). What makes their cells one matrix is that
the same code ran them. The *cell code* is a hash of the files a cell's outcome depends on, the package's
modules that build a case and run a check (`cases/`, `checks/`, `run/`, `select/`, the top-level modules)
and the per-model data (`data/models/`, `data/cell_memory.toml`: the cells' memory limits, `data/versions.toml` but
its ``[ci]`` table, which chooses the classes CI gates: `decisive`); not the meta tests, the tools, the report,
the gate's judging (a publication judges again against today's expectations), the expectations or the bench
shapes. A commit that changes none of those files leaves the cell code as it was.

Contracts:

* `decides_cells(rel)` says whether the package file `rel` (a posix path below the package, the data
  through ``data/``) is one of those files.
* `of_package(package)` is the cell code of a package folder on disk (default: this one), 12 hex digits.
* `at_commit(commit, repository)` is the cell code of a commit of the suite's repository, read from git
  (the package's files under ``conformance/``, the data under ``fixtures/``); "" when git, the repository
  or the commit is not there.
* `of_envelope(envelope, repository)` is the cell code a run recorded (`suite.cell_code`), else that of
  the clean commit it names (runs made before the field existed), else "" (a dirty tree's: unknown).
* `filled(envelope, repository)` is the envelope with the cell codes a reader can know written in: its
  suite's (`of_envelope`) and each merged run's (``environment.runs``) from its clean commit where it
  recorded none; what stays unknown stays absent (what `conformance publish` writes).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tomllib
from pathlib import Path

from conformance import locations
from conformance.report.provenance import git

CODE_FOLDERS = ("cases", "checks", "run", "select")
DATA_FILES = ("data/versions.toml", "data/cell_memory.toml")
DATA_FOLDERS = ("data/models",)


def decides_cells(rel: str) -> bool:
    parts = rel.split("/")
    if "__pycache__" in parts or rel.endswith(".pyc"):
        return False
    if len(parts) == 1:
        return rel.endswith(".py")
    return parts[0] in CODE_FOLDERS or rel in DATA_FILES or any(rel.startswith(f + "/") for f in DATA_FOLDERS)


UNDECIDING_TABLES = {"data/versions.toml": ("ci",)}  # tables of a deciding file that choose what CI runs, not a cell


def decisive(rel: str, content: bytes) -> bytes:
    """What of a deciding file decides cells: the file, but for `UNDECIDING_TABLES` (the TOML's other tables, as
    canonical JSON: which classes CI gates, its comments and layout never change a cell; an unreadable file whole)."""
    dropped = UNDECIDING_TABLES.get(rel)
    if not dropped:
        return content
    try:
        data = tomllib.loads(content.decode())
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return content
    return json.dumps({k: v for k, v in data.items() if k not in dropped}, sort_keys=True).encode()


def _digest(files: dict[str, bytes]) -> str:
    sha = hashlib.sha256()
    for rel in sorted(files):
        sha.update(rel.encode() + b"\0" + hashlib.sha256(decisive(rel, files[rel])).digest())
    return sha.hexdigest()[:12]


def of_package(package: Path | None = None) -> str:
    package = Path(package or locations.PACKAGE)
    files = {}
    for folder, _, names in os.walk(package, followlinks=True):  # through a checkout's data link (to fixtures/)
        for name in names:
            path = Path(folder, name)
            rel = path.relative_to(package).as_posix()
            if decides_cells(rel):
                files[rel] = path.read_bytes()
    return _digest(files)


def _package_rel(repo_path: str) -> str | None:
    """A repository path as the package sees it: conformance/x -> x, fixtures/x -> data/x."""
    for prefix, mapped in (("conformance/", ""), ("fixtures/", "data/")):
        if repo_path.startswith(prefix):
            return mapped + repo_path[len(prefix):]
    return None


def at_commit(commit: str, repository: Path | None = None) -> str:
    repository = Path(repository or locations.REPOSITORY)
    listing = git(["ls-tree", "-r", "-z", commit, "--", "conformance", "fixtures"], repository)
    if not listing:
        return ""
    blobs = {}
    for entry in listing.split("\0"):
        meta, _, repo_path = entry.partition("\t")
        fields = meta.split()
        rel = _package_rel(repo_path)
        if len(fields) == 3 and fields[1] == "blob" and fields[0] != "120000" and rel and decides_cells(rel):
            blobs[rel] = fields[2]
    try:
        batch = subprocess.run(["git", "cat-file", "--batch"], cwd=repository, capture_output=True, timeout=60,
                               input="".join(f"{sha}\n" for sha in blobs.values()).encode()).stdout
    except Exception:
        return ""
    files, offset = {}, 0
    for rel in blobs:  # `--batch` answers in the order asked: "<sha> blob <size>\n<content>\n"
        header_end = batch.index(b"\n", offset)
        size = int(batch[offset:header_end].split()[2])
        files[rel] = batch[header_end + 1:header_end + 1 + size]
        offset = header_end + 1 + size + 1
    return _digest(files)


def of_envelope(envelope: dict, repository: Path | None = None) -> str:
    suite = envelope.get("suite") or {}
    return suite.get("cell_code") or of_clean_commit(str(suite.get("commit") or ""), repository)


def of_clean_commit(commit: str, repository: Path | None = None) -> str:
    """`at_commit` of a commit a run named, "" for none or a dirty tree's (``<commit>-dirty``: unknown)."""
    if not commit or commit.endswith("-dirty"):
        return ""
    return at_commit(commit, repository)


def filled(envelope: dict, repository: Path | None = None) -> dict:
    suite = dict(envelope.get("suite") or {})
    if not suite.get("cell_code"):
        code = of_envelope(envelope, repository)
        if code:
            suite["cell_code"] = code
    env = dict(envelope.get("environment") or {})
    if isinstance(env.get("runs"), list):
        runs = []
        for run in env["runs"]:
            code = run.get("cell_code") or of_clean_commit(str(run.get("suite") or ""), repository)
            runs.append({**run, "cell_code": code} if code else run)
        env["runs"] = runs
    return {**envelope, "suite": suite, "environment": env}
