"""Stage 4, report: per-cell records -> the JSON envelope of design.md, and reading it back.

Contracts:

* `environment(device, dtype, backend)` describes this machine and run,
  with where its transformers came from (`provenance.transformers_source`);
  `suite_version()` this suite (its version, `git describe --always
  --dirty` of a checkout, and the `cell_code` that decides its cells:
  `conformance.report.cell_code`). An envelope records where it came from in
  names anyone can resolve, never a path of the machine that made it
  (`conformance.report.provenance`).
* `build_envelope(records, env, checks, models)` makes the envelope (schema
  `vlm-conformance/1`) from cell records (later records of a cell replace
  earlier ones), its `summary` counting verdicts per check; `not_run` maps
  a column the run did not run (its required packages were missing, or an
  opt-in column the run did not name) to why: such a column is in `checks` with no cells (a report says "not run").
* A cell stores its observation: ``observed`` (what the check or the
  harness said: pass, fail, skip, error or timeout), its reason, metrics,
  seconds and, where it failed, its ``fingerprint``; the conditions it ran
  under are the envelope's environment and, for a merged column, the
  column's backend and dtype (`conformance.columns`). Its judgement against
  the expectations (``verdict``; ``expected``, the listed verdict, and
  ``gate``, why a listed cell is not xfail) is `gate.judging`'s, written
  when the run or its publication made the file: a cache of that judgement
  (what a pytest-json-report reader or an older suite reads), never a second
  source of the observation.
* `load_envelope(path)` returns a validated envelope or raises
  `EnvelopeError` with one line naming the file, the problem and the fix:
  the one reader of run files (an envelope, or a pytest-json-report file
  holding one under ``conformance``). It upgrades what it reads, once
  (`upgraded`): a cell of a file older than ``observed`` on every cell gets
  it (`observation`), so no reader reconstructs it.
* `merge_envelopes` joins envelopes of one environment: shards (other
  classes) and runs of other checks (an extra's environment, e.g. the ONNX
  columns) alike; a cell in two of them is an error; a run under another
  dynamo backend than the first file's (`--backend inductor`) joins as its
  backend columns, ``compile_prefill@inductor`` next to ``compile_prefill``
  (`as_backend_columns`, `conformance.columns`), and a run in another
  dtype than the first file's (`--dtype bfloat16`) as its dtype columns,
  ``static_cache~bf16`` after the main run's (`as_dtype_columns`); the merged environment
  lists the merged runs under ``runs`` (each one's command, created, suite
  commit and cell code: `runs_of`); `envelope_from_parts` rebuilds an envelope from an
  interrupted run's part files.
"""

from __future__ import annotations

import datetime
import json
import platform
from pathlib import Path
from typing import Any, Iterable

from conformance import columns, locations
from conformance.report import cell_code, provenance
from conformance.report.io import read_records, restore_floats
from conformance.verdicts import FAILING, VERDICTS

SCHEMA = "vlm-conformance/1"

TOP_FIELDS = ("schema", "created", "suite", "environment", "checks", "models", "summary")
OPTIONAL_FIELDS = ("check_info", "not_run")  # written by every run; older run files lack them
ENV_FIELDS = ("python", "torch", "transformers", "device", "device_name", "dtype", "backend")
# What must agree for shards to be one run. device_name and any extra fields
# (e.g. a worker's peak memory) may differ between shard machines.
ENV_IDENTITY = ("python", "torch", "transformers", "device", "dtype", "backend")
# Cell fields a record carries where they apply: the listed verdict of a cell the expectations list, the raw
# verdict (every record of this suite has it; `observation` upgrades an older one), why a listed cell is not xfail,
# what failed and where.
CELL_EXTRAS = ("expected", "observed", "gate", "fingerprint")
# Name of an optional file in a parts directory holding the run's environment.
PARTS_ENVIRONMENT = "environment.json"


class EnvelopeError(ValueError):
    """A run file is unusable; the message is one line for a person."""


# --------------------------------------------------------------------------- environment


def suite_version() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("vlm-conformance")
    except PackageNotFoundError:
        ver = "0+unknown"
    # Only a checkout's own repository: an installed package's parent folder may lie inside another one.
    checkout = (locations.REPOSITORY / ".git").exists()
    commit = provenance.git(["describe", "--always", "--dirty"], locations.REPOSITORY) if checkout else ""
    return {"version": ver, "commit": commit, "cell_code": cell_code.of_package()}


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
        "transformers_source": provenance.transformers_source(),
    }


# --------------------------------------------------------------------------- envelope


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def summarize(rows: dict[str, dict], checks: Iterable[str]) -> dict[str, dict[str, int]]:
    """Verdict counts per check (every verdict key present, zeros included)."""
    summary = {c: {v: 0 for v in VERDICTS} for c in checks}
    for row in rows.values():
        for check_id, cell in row.get("cells", {}).items():
            counts = summary.setdefault(check_id, {v: 0 for v in VERDICTS})
            counts[cell["verdict"]] = counts.get(cell["verdict"], 0) + 1
    return summary


def build_envelope(records: list[dict], env: dict, checks: list[str], models: dict[str, dict],
                   check_info: dict | None = None, not_run: dict[str, str] | None = None) -> dict:
    """The envelope from cell records; later records of a cell replace earlier ones.

    `models` maps class name -> row metadata (model_type, modalities, declared,
    tiny); records may carry richer `tiny` data, which wins. `check_info` is
    what the registry says of each check (`registry.describe`): the report
    reads which declared flags a check observes and which metrics it lists
    from there. `not_run` is {check id: why} of the columns the run could not
    run (recorded as the envelope's ``not_run``).
    """
    rows: dict[str, Any] = {}
    for name, meta in sorted(models.items()):
        rows[name] = {**meta, "cells": {}}
    for record in records:
        row = rows.setdefault(record["model"], {"cells": {}})
        if record.get("tiny"):
            row["tiny"] = record["tiny"]
        cell = row["cells"][record["check"]] = {
            "verdict": record["verdict"],
            "reason": record.get("reason", ""),
            "seconds": record.get("seconds", 0.0),
            "metrics": record.get("metrics", {}),
            "nodeid": record.get("nodeid", ""),
        }
        for name in CELL_EXTRAS:  # present only where they apply
            if record.get(name):
                cell[name] = record[name]
        cell["observed"] = observation(cell)  # a part file of an older run may lack it
    rows = dict(sorted(rows.items()))
    return {
        "schema": SCHEMA,
        "created": _now(),
        "suite": suite_version(),
        "environment": env,
        "checks": list(checks),
        "check_info": dict(check_info or {}),
        "not_run": dict(not_run or {}),
        "models": rows,
        "summary": summarize(rows, checks),
    }


def validate_envelope(data: Any, source: str) -> dict:
    """`data` itself if it is a well-formed envelope, else EnvelopeError naming `source`."""
    fix = "use a run file written by `pytest conformance` (--matrix-out) or `conformance merge`"
    if not isinstance(data, dict):
        raise EnvelopeError(f"{source}: not a run envelope (a JSON object with \"schema\": {SCHEMA!r}); {fix}")
    if "schema" not in data and isinstance(data.get("conformance"), dict):
        data = data["conformance"]  # a pytest-json-report file holding the envelope
    schema = data.get("schema")
    if schema != SCHEMA:
        what = f"schema {schema!r}" if schema else "no \"schema\" field"
        raise EnvelopeError(f"{source}: {what}, expected {SCHEMA!r}; {fix}")
    for name in TOP_FIELDS:
        if name not in data:
            raise EnvelopeError(f"{source}: missing field {name!r}; {fix}")
    env = data["environment"]
    if not isinstance(env, dict):
        raise EnvelopeError(f"{source}: field 'environment' is not an object; {fix}")
    for name in ENV_FIELDS:
        if name not in env:
            raise EnvelopeError(f"{source}: missing field 'environment.{name}'; {fix}")
    if not isinstance(data["checks"], list) or not isinstance(data["models"], dict):
        raise EnvelopeError(f"{source}: 'checks' must be a list and 'models' an object; {fix}")
    not_run = data.get("not_run", {})  # optional: older run files have none
    if not isinstance(not_run, dict) or not all(isinstance(v, str) for v in not_run.values()):
        raise EnvelopeError(f"{source}: 'not_run' must map check ids to the reason they did not run; {fix}")
    for model, row in data["models"].items():
        cells = row.get("cells") if isinstance(row, dict) else None
        if not isinstance(cells, dict):
            raise EnvelopeError(f"{source}: model {model!r} has no 'cells' object; {fix}")
        for check_id, cell in cells.items():
            verdict = cell.get("verdict") if isinstance(cell, dict) else None
            if verdict not in VERDICTS:
                raise EnvelopeError(f"{source}: cell {model} / {check_id} has verdict {verdict!r}, "
                                    f"expected one of {', '.join(VERDICTS)}; {fix}")
    return data


def load_envelope(path: str | Path) -> dict:
    """The validated envelope in `path` (or under `conformance` of a pytest-json-report file)."""
    path = Path(path)
    if not path.exists():
        raise EnvelopeError(f"{path}: no such file; pass the matrix JSON a run wrote "
                            "(default reports/latest/matrix.json)")
    if path.is_dir():
        raise EnvelopeError(f"{path}: is a directory, expected a run's matrix JSON file "
                            "(for part files use `conformance merge --parts DIR -o OUT.json`)")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise EnvelopeError(f"{path}: cannot be read ({exc}); pass a readable run file") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        problem = ("is empty" if not text.strip()
                   else f"is not valid JSON at line {exc.lineno}, column {exc.colno} "
                        f"({exc.msg.removesuffix(' at')}; truncated?)")
        raise EnvelopeError(f"{path}: {problem}; {_remedy(path)}") from None
    return upgraded(_float_metrics(validate_envelope(data, str(path))))


def _float_metrics(envelope: dict) -> dict:
    """`envelope` with its cells' metrics' non-finite floats, written as names (`io.finite`), read back as floats."""
    for row in envelope["models"].values():
        for cell in row["cells"].values():
            if isinstance(cell.get("metrics"), dict):
                cell["metrics"] = restore_floats(cell["metrics"])
    return envelope


def observation(cell: dict) -> str:
    """What the check or the harness itself said of a recorded cell: its ``observed``; a cell of a file older than
    ``observed`` on every cell (was `verdicts.raw`, the one reconstruction left): its verdict where the gate did not
    change it, an xfail's recorded ``expected`` verdict (the one listed when it ran; else fail), an xpass's pass."""
    if cell.get("observed"):
        return cell["observed"]
    verdict = cell.get("verdict", "")
    if verdict == "xfail":
        return cell["expected"] if cell.get("expected") in FAILING else "fail"
    if verdict == "xpass":
        return "pass"
    return verdict


def upgraded(envelope: dict) -> dict:
    """`envelope` with ``observed`` on every cell (`observation`): the one-way upgrade of an older file, on read.
    An envelope every cell of which has it is returned as it is."""
    if all(cell.get("observed") for row in envelope["models"].values() for cell in row["cells"].values()):
        return envelope
    models = {name: {**row, "cells": {c: {**cell, "observed": observation(cell)} for c, cell in row["cells"].items()}}
              for name, row in envelope["models"].items()}
    return {**envelope, "models": models}


def _remedy(path: Path) -> str:
    """How to get a damaged run file back, naming only what exists here: the run's part files, its committed
    version, else the run that wrote it."""
    parts = path.with_name(path.name + ".parts")
    if any(parts.glob("*.jsonl")):
        return f"rebuild it from the run's part files with `conformance merge --parts {parts} -o {path}`"
    command = locations.restore_command(path)
    if command:
        return f"restore the committed file with `{command}`"
    return "write it again with the run that made it (no part files beside it to rebuild it from)"


def _ordered_checks(lists: Iterable[Iterable[str]], check_info: dict) -> list[str]:
    """Every check once: in column order when the run files give every column, else in the order first seen."""
    seen: dict[str, None] = {}
    for checks in lists:
        for check_id in checks:
            seen.setdefault(check_id, None)
    numbers = {c: (check_info.get(c) or {}).get("column") for c in seen}
    if all(isinstance(number, int) for number in numbers.values()):
        return sorted(seen, key=lambda c: numbers[c])
    return list(seen)


def merge_envelopes(envelopes: list[dict], sources: list[str]) -> dict:
    """One envelope from envelopes of the same environment: shards, and runs of other checks.

    Shards cover other classes; the run of an extra's environment (e.g. `tox
    -e onnx`: the ONNX columns only) covers other checks of the same classes.
    Raises EnvelopeError when environments differ (on ENV_IDENTITY) or a cell
    appears in two run files (a true duplicate: merge the rerun instead of
    the old one). A column one run file could not run (`not_run`) and another
    ran is a run column. The merged environment is the first file's, numeric
    extras (peak memory) taken as the maximum over the files, less the one
    run's `command`: the merged runs are `environment.runs` (`runs_of`; a run listed
    twice, once). A run under another backend joins as its own columns (`as_backend_columns`).
    """
    if not envelopes:
        raise EnvelopeError("merge: no run files given; pass two or more shard envelopes")
    runs = [run for envelope, source in zip(envelopes, sources) for run in runs_of(envelope, source)]
    runs = [run for index, run in enumerate(runs) if run not in runs[:index]]  # a group republished over its own runs
    envelopes = _as_main_columns(envelopes, sources)
    first_env = envelopes[0]["environment"]
    for envelope, source in zip(envelopes[1:], sources[1:]):
        env = envelope["environment"]
        for key in ENV_IDENTITY:
            if env.get(key) != first_env.get(key):
                raise EnvelopeError(f"{source}: environment differs from {sources[0]} in {key!r} "
                                    f"({env.get(key)!r} vs {first_env.get(key)!r}); merge only shards of one run")
    rows: dict[str, dict] = {}
    owner: dict[tuple[str, str], str] = {}
    merged_env = _merge_environments([e["environment"] for e in envelopes])
    merged_env.pop("command", None)  # one run's: the merged runs' are under `runs`
    merged_env["runs"] = runs
    for envelope, source in zip(envelopes, sources):
        for model, row in envelope["models"].items():
            merged = rows.setdefault(model, {**{k: v for k, v in row.items() if k != "cells"}, "cells": {}})
            for key, value in row.items():
                if key != "cells":
                    merged.setdefault(key, value)
            for check_id, cell in row["cells"].items():
                if (model, check_id) in owner:
                    raise EnvelopeError(f"{source}: cell {model} / {check_id} is also in {owner[model, check_id]}; "
                                        "run files must be disjoint (merge the rerun instead of the old one)")
                owner[model, check_id] = source
                merged["cells"][check_id] = cell
    check_info: dict = {}
    for envelope in envelopes:
        for check_id, info in (envelope.get("check_info") or {}).items():
            check_info.setdefault(check_id, info)
    checks = _ordered_checks((e["checks"] for e in envelopes), check_info)
    ran = {check_id for _, check_id in owner}
    not_run = {c: why for e in envelopes for c, why in (e.get("not_run") or {}).items() if c not in ran}
    rows = dict(sorted(rows.items()))
    return {
        "schema": SCHEMA,
        "created": _now(),
        "suite": envelopes[0]["suite"],
        "environment": merged_env,
        "checks": checks,
        "check_info": check_info,
        "not_run": not_run,
        "models": rows,
        "summary": summarize(rows, checks),
    }


def supersede(envelopes: list[dict], sources: list[str], whole_columns: bool = False) -> tuple[dict, int]:
    """One envelope where each file's cells replace the same cells of the files before it (a rerun of some
    cells or columns over a published matrix: `conformance merge --replace`), and how many were replaced.
    With `whole_columns`, a file's columns (its ``checks``) replace those columns of the files before it whole:
    a cell an earlier file has in such a column and the later file lacks is dropped too (a column group
    republished: no cell of a class it no longer runs survives).

    A class's row facts (sample strategy, sizes) and a column's description come from the last file that has
    them; otherwise it is `merge_envelopes` of what is left (the same environment checks, `runs` lists every file).
    """
    if envelopes:  # a run under another backend (dtype) replaces its `<check>@<backend>` (`~<dtype>`) columns only
        envelopes = _as_main_columns(envelopes, sources)
    kept: list[dict] = []
    replaced = 0
    for index, envelope in enumerate(envelopes):
        later = [e for e in envelopes[index + 1:]]
        newer_cells = {(m, c) for e in later for m, row in e["models"].items() for c in row["cells"]}
        newer_columns = {c for e in later for c in e["checks"]} if whole_columns else set()
        newer_rows = {m: row for e in later for m, row in e["models"].items()}
        models = {}
        for model, row in envelope["models"].items():
            cells = {c: cell for c, cell in row["cells"].items()
                     if (model, c) not in newer_cells and c not in newer_columns}
            replaced += len(row["cells"]) - len(cells)
            facts = {k: v for k, v in (newer_rows.get(model) or row).items() if k != "cells"}
            models[model] = {**{k: v for k, v in row.items() if k != "cells"}, **facts, "cells": cells}
        info = {c: i for e in reversed(envelopes[index:]) for c, i in (e.get("check_info") or {}).items()}
        kept.append({**envelope, "models": models, "check_info": {**(envelope.get("check_info") or {}), **info}})
    return merge_envelopes(kept, sources), replaced


def runs_of(envelope: dict, source: str) -> list[dict]:
    """The runs an envelope holds, each {command, created, suite, cell_code}: a merged one's `environment.runs`,
    else the run itself (its `environment.command`; a run file older than that field: the file's name; its cell
    code `cell_code.of_envelope`, "" where unknown)."""
    env = envelope["environment"]
    if isinstance(env.get("runs"), list):
        return list(env["runs"])
    return [{"command": env.get("command") or Path(source).name, "created": envelope.get("created", ""),
             "suite": (envelope.get("suite") or {}).get("commit", ""), "cell_code": cell_code.of_envelope(envelope)}]


def as_backend_columns(envelope: dict, main_backend: str, source: str) -> dict:
    """A run under another dynamo backend, as columns that sit next to the main run's: each check that has
    backend columns (`columns.has_backend_columns`) `c` becomes `columns.column_id(c, backend)` (check_info
    says `backend`; its column number `columns.number` of `c`'s), the others (build, export) are dropped (the
    main run has them), and its environment is the main run's backend with this run's under
    `environment.backends` (its command, or the run file's name: never a path). Raises EnvelopeError when the
    run has no check with backend columns."""
    env = envelope["environment"]
    backend = env.get("backend") or "?"
    info = envelope.get("check_info") or {}
    keep = [c for c in envelope["checks"] if columns.has_backend_columns(info.get(c) or {})]
    if not keep:
        raise EnvelopeError(f"{source}: a run under backend {backend!r} (the first run file's is {main_backend!r}) "
                            "with no check that depends on the backend; merge runs of one backend, or pass the "
                            "compile columns' run (--checks compile_prefill,compile_decode --backend "
                            f"{backend})")
    renamed = {c: columns.column_id(c, backend) for c in keep}
    check_info = {}
    for check_id, new in renamed.items():
        entry = dict(info[check_id], backend=backend)
        if isinstance(entry.get("column"), int):
            entry["column"] = columns.number(entry["column"])
        check_info[new] = entry
    models = {}
    for name, row in envelope["models"].items():
        cells = {renamed[c]: cell for c, cell in row["cells"].items() if c in renamed}
        models[name] = {**{k: v for k, v in row.items() if k != "cells"}, "cells": cells}
    backends = {backend: {"source": env.get("command") or Path(source).name, "created": envelope.get("created"),
                          "expectations": env.get("expectations", [])}}
    return {
        **envelope,
        "environment": {**env, "backend": main_backend, "backends": backends},
        "checks": list(renamed.values()),
        "check_info": check_info,
        "not_run": {renamed[c]: why for c, why in (envelope.get("not_run") or {}).items() if c in renamed},
        "models": models,
        "summary": summarize(models, renamed.values()),
    }


def _as_main_columns(envelopes: list[dict], sources: list[str]) -> list[dict]:
    """Each run under another backend than the first's as its backend columns, then each run in another dtype than
    the first's as its dtype columns (an inductor bfloat16 run: ``compile_prefill@inductor~bf16``)."""
    backend = envelopes[0]["environment"].get("backend")
    dtype = envelopes[0]["environment"].get("dtype", "float32")
    found = []
    for envelope, source in zip(envelopes, sources):
        if envelope["environment"].get("backend") != backend:
            envelope = as_backend_columns(envelope, backend, source)
        if envelope["environment"].get("dtype", "float32") != dtype:
            envelope = as_dtype_columns(envelope, dtype, source)
        found.append(envelope)
    return found


def as_dtype_columns(envelope: dict, main_dtype: str, source: str) -> dict:
    """A run in another dtype, as columns after the main run's: each column `c` it ran becomes
    `columns.dtype_column(c, dtype)` (check_info says `dtype`; its column number `columns.dtype_number`), and its
    environment is the main run's dtype with this run's under `environment.dtypes` (its command, or the run file's
    name: never a path; the backends it ran under)."""
    env = envelope["environment"]
    dtype = env.get("dtype") or "?"
    info = envelope.get("check_info") or {}
    renamed = {c: columns.dtype_column(c, dtype) for c in envelope["checks"]}
    check_info = {}
    for column, new in renamed.items():
        entry = dict(info.get(column) or {}, dtype=dtype)
        if isinstance(entry.get("column"), int):
            entry["column"] = columns.dtype_number(entry["column"], dtype)
        check_info[new] = entry
    models = {name: {**{k: v for k, v in row.items() if k != "cells"},
                     "cells": {renamed[c]: cell for c, cell in row["cells"].items() if c in renamed}}
              for name, row in envelope["models"].items()}
    backends = sorted({env.get("backend", "eager"), *(env.get("backends") or {})})
    dtypes = {dtype: {"source": env.get("command") or Path(source).name, "created": envelope.get("created"),
                      "backends": backends, "expectations": env.get("expectations", [])}}
    new_env = {**env, "dtype": main_dtype, "dtypes": dtypes}
    new_env.pop("backends", None)  # the main run's backends are the main run's to name
    return {
        **envelope,
        "environment": new_env,
        "checks": list(renamed.values()),
        "check_info": check_info,
        "not_run": {renamed[c]: why for c, why in (envelope.get("not_run") or {}).items() if c in renamed},
        "models": models,
        "summary": summarize(models, renamed.values()),
    }


def _merge_environments(envs: list[dict]) -> dict:
    """The first environment, with numeric extras (peaks, e.g. memory) the maximum over all.

    A dict of numbers (e.g. peak per process) is merged key by key the same way.
    """
    merged = dict(envs[0])
    for env in envs[1:]:
        for key, value in env.items():
            if key in ENV_IDENTITY or key not in merged:
                merged.setdefault(key, value)
                continue
            current = merged[key]
            if _is_number(value) and _is_number(current):
                merged[key] = max(current, value)
            elif isinstance(value, dict) and isinstance(current, dict):
                both = dict(current)
                for k, v in value.items():
                    both[k] = max(both[k], v) if _is_number(v) and _is_number(both.get(k)) else both.get(k, v)
                merged[key] = both
    return merged


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def envelope_from_parts(parts_dir: str | Path, env: dict | None = None, rows=None) -> dict:
    """Rebuild an envelope from the JSON-lines part files of an (interrupted) run.

    The environment comes from `parts_dir/environment.json` when the run wrote
    one, else from `env` (the caller describes this machine). Row metadata is
    re-discovered from the installed transformers (`rows(names)`, default
    `conformance.discover.row_metadata`); columns in the registry's order.
    """
    parts_dir = Path(parts_dir)
    if not parts_dir.is_dir():
        raise EnvelopeError(f"{parts_dir}: no such directory; pass the `<matrix-out>.parts` directory "
                            "an interrupted run left")
    parts = sorted(parts_dir.glob("*.jsonl"))
    records = [r for r in read_records(parts) if {"model", "check", "verdict"} <= set(r)]
    if not records:
        raise EnvelopeError(f"{parts_dir}: no finished cells in its *.jsonl part files; nothing to rebuild")
    env_file = parts_dir / PARTS_ENVIRONMENT
    if env_file.exists():
        try:
            env = json.loads(env_file.read_text())
        except json.JSONDecodeError:
            raise EnvelopeError(f"{env_file}: not valid JSON; delete it and pass --device/--dtype/--backend "
                                "as the run used them") from None
    if env is None:
        raise EnvelopeError(f"{parts_dir}: no {PARTS_ENVIRONMENT}; say how the run was made with "
                            "--device/--dtype/--backend")
    from conformance.checks.common.registry import check_ids, describe
    from conformance.discover import row_metadata

    order = check_ids()
    present = {r["check"] for r in records}
    checks = [c for c in order if c in present] + sorted(present - set(order))
    return build_envelope(records, env, checks, (rows or row_metadata)({r["model"] for r in records}),
                          describe(checks))
