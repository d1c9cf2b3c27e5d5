"""Cell records: what one finished cell writes to its process's part file.

Contract: `make_record(...)` is a cell's observation (model, check,
observed, reason, seconds, metrics, nodeid, and where they apply tiny and
fingerprint) plus `process`: which process ran it and that process's peak
memory so far (the envelope's environment reports the maximum); judged
(`gate.judging.judge_cell`: verdict, and where they apply expected and
gate), it is the JSON-lines record `report.build_envelope` reads.
`find_record(path, nodeid)` is the last record a part file holds for a
node id (None when the cell never finished there); records hold node ids
without loadgroup's ``@group`` suffix (`plain_nodeid`), so that
`pytest <nodeid>` reruns the cell. The files of one run's
parts directory are named by `PartsDir`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from conformance.report import envelope as report
from conformance.report import io
from conformance.run.isolation import peak_rss_mib

PROCESS_FILE_SUFFIXES = (".jsonl", ".running.json", ".crash.txt", ".tmp")  # .tmp: an atomic write cut short


@dataclass(frozen=True)
class PartsDir:
    """`<matrix-out>.parts`: one part file, one running note and one crash dump per process."""

    path: Path

    @classmethod
    def of(cls, matrix_out: Path) -> "PartsDir":
        return cls(matrix_out.with_name(matrix_out.name + ".parts"))

    def records(self, process: str) -> Path:
        return self.path / f"{process}.jsonl"

    def note(self, process: str) -> Path:
        return self.path / f"{process}.running.json"

    def crash_dump(self, process: str) -> Path:
        return self.path / f"{process}.crash.txt"

    @property
    def build_failures_file(self) -> Path:
        return self.path / "build_failures.ndjson"

    def add_build_failure(self, model: str, verdict: str, reason: str) -> None:
        """A build that ended its process: later cells of `model` (any process) fail at once with it."""
        io.append_record(self.build_failures_file, {"model": model, "verdict": verdict, "reason": reason})

    def build_failures(self) -> dict[str, dict]:
        path = self.build_failures_file
        return {r["model"]: r for r in io.read_records([path]) if "model" in r} if path.exists() else {}

    @property
    def environment(self) -> Path:
        return self.path / report.PARTS_ENVIRONMENT

    def part_files(self) -> list[Path]:
        return sorted(self.path.glob("*.jsonl")) if self.path.is_dir() else []

    def run_files(self) -> list[Path]:
        """Every file a run leaves here (to clear before a run and after the envelope is written)."""
        if not self.path.is_dir():
            return []
        files = [p for p in self.path.iterdir() if p.is_file() and p.name.endswith(PROCESS_FILE_SUFFIXES)]
        files += [p for p in (self.environment, self.build_failures_file) if p.exists()]
        return sorted(files)

    def clear(self) -> int:
        """Remove this run's files and the directory if it is then empty; the number of part files removed."""
        files = self.run_files()
        for path in files:
            path.unlink(missing_ok=True)
        try:
            self.path.rmdir()
        except OSError:
            pass
        return sum(p.suffix == ".jsonl" for p in files)


def make_record(*, model: str, check: str, observed: str, reason: str, seconds: float, metrics: dict,
                nodeid: str, process: str, tiny: dict | None = None, fingerprint: dict | None = None) -> dict:
    """One cell's observation, to be judged (`gate.judging.judge_cell` adds its verdict, and the listed verdict and
    the gate's note where they apply). `observed` is what the check or the harness said (pass, fail, skip, error,
    timeout); `fingerprint` what failed and where (`conformance.fingerprints`)."""
    record = {
        "model": model,
        "check": check,
        "observed": observed,
        "reason": reason,
        "seconds": seconds,
        "metrics": metrics,
        "nodeid": plain_nodeid(nodeid),
        "process": {"id": process, "peak_rss_mib": peak_rss_mib()},
    }
    for name, value in (("tiny", tiny), ("fingerprint", fingerprint)):
        if value:
            record[name] = value
    return record


def find_record(path: Path, nodeid: str) -> dict | None:
    if not Path(path).exists():
        return None
    found = None
    for record in io.read_records([path]):
        if record.get("nodeid") == plain_nodeid(nodeid):
            found = record
    return found


def peak_memory(records: list[dict], own: dict[str, float]) -> dict:
    """Environment fields: the run's peak RSS over all processes, and per process (MiB)."""
    by_process = dict(own)
    for record in records:
        process = record.get("process")
        if isinstance(process, dict) and isinstance(process.get("peak_rss_mib"), (int, float)):
            key = str(process.get("id", "?"))
            by_process[key] = max(by_process.get(key, 0.0), float(process["peak_rss_mib"]))
    return {"peak_rss_mib": max(by_process.values(), default=0.0),
            "peak_rss_mib_by_process": dict(sorted(by_process.items()))}


def plain_nodeid(nodeid: str) -> str:
    """`nodeid` without a loadgroup ``@group`` suffix."""
    at = nodeid.rfind("@")
    return nodeid[:at] if at > nodeid.rfind("]") and at > nodeid.rfind("::") else nodeid
