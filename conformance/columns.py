"""Backend columns: a check's column from a run under another dynamo backend (the one home of the concept).

A check whose verdict depends on the dynamo backend it compiled with
declares it: ``@check(..., backend_columns=True)`` (compile_prefill,
compile_dynamic, compile_decode). A run under another backend than the main
run's (``--backend inductor``), merged into the main run's envelope
(`conformance.report.envelope.merge_envelopes`), gives each such check one
column per backend, next to the check's own:

* `column_id(check, backend)` is its id, ``<check>@<backend>``
  (``compile_prefill@inductor``); `split(column)` is (check, backend), the
  backend "" for a check's own column; `suffix(backend)` is ``@<backend>``,
  what a report calls the columns of one backend.
* `number(check_column)` is its column number: the check's plus one, so it
  sorts just after the check's. A check that declares backend columns
  reserves that number: no registered check may take it (`collisions`; the
  registry is held to none by conformance/meta/test_columns.py).
* `has_backend_columns(info)` reads the declaration from the check's entry in
  a run file's ``check_info``: such a check compares within the run's backend
  tolerance, so its entry names ``compares`` and no fixed ``tolerance``
  (conformance/meta/test_columns.py holds every registered check's
  declaration equal to this reading).
* `backend_of(envelope, column)` is the backend a column ran under: its own
  (``check_info[column]["backend"]``, which merging sets), else the run's.
* `PREFERRED_BACKEND` is what users compile with: a declared flag whose
  observation depends on the backend (`BACKEND_FLAGS`) is decided by that
  backend's columns where a class has a cell of them that applies, else by
  the other columns (`deciding_cells`).

Dtype columns (issue 52): a run in another dtype than the main run's
(``--dtype bfloat16``), merged into the main run's envelope, gives every
column it ran one more column, ``<column>~<short dtype>``
(``static_cache~bf16``, ``compile_prefill@inductor~fp16``):

* `dtype_column(column, dtype)` is its id (`SHORT_DTYPES` names the
  suffix); `split_dtype(column)` is (the column it widens, its dtype), the
  dtype "" for a column of the run's own dtype; `split` strips the dtype
  first, so its check id is the check's whatever the column's dtype.
* `dtype_number(column_number, dtype)` sorts the dtype's columns after every
  column of the run's own dtype, in the order of `DTYPES`, each dtype's in its
  checks' order.
* `dtype_of(envelope, column)` is the dtype a column ran in: its own
  (``check_info[column]["dtype"]``, which merging sets), else the run's.

Torch-free: the run, the report and the gate all use it.
"""

from __future__ import annotations

from typing import Iterable, Mapping

SEPARATOR = "@"
DTYPE_SEPARATOR = "~"
DTYPES = ("float32", "bfloat16", "float16")  # the published dtypes, in column order
SHORT_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
DTYPE_COLUMN_STRIDE = 1000  # more than any column number of one dtype
PREFERRED_BACKEND = "inductor"
BACKEND_FLAGS = ("_can_compile_fullgraph",)  # what a compile observes depends on the backend it compiled with


def suffix(backend: str) -> str:
    """``@inductor``: what the columns of `backend` end with."""
    return f"{SEPARATOR}{backend}"


def column_id(check_id: str, backend: str) -> str:
    """``compile_prefill@inductor``: the column of `check_id` from a run under `backend`."""
    return check_id + suffix(backend)


def split(column: str) -> tuple[str, str]:
    """(check id, backend) of a column: ``compile_prefill@inductor`` -> (compile_prefill, inductor); a check's own
    column has backend ''. A dtype column's is that of the column it widens (``static_cache~bf16`` ->
    (static_cache, ''))."""
    check_id, _, backend = split_dtype(column)[0].partition(SEPARATOR)
    return check_id, backend


def dtype_column(column: str, dtype: str) -> str:
    """``static_cache~bf16``: `column` from a run in `dtype`."""
    return f"{column}{DTYPE_SEPARATOR}{SHORT_DTYPES.get(dtype, dtype)}"


def split_dtype(column: str) -> tuple[str, str]:
    """(the column of the run's own dtype, the dtype's full name) of a column: ``static_cache~bf16`` ->
    (static_cache, bfloat16); a column of the run's own dtype has dtype ''."""
    base, _, short = column.partition(DTYPE_SEPARATOR)
    full = {v: k for k, v in SHORT_DTYPES.items()}
    return base, full.get(short, short)


def dtype_number(column_number: int, dtype: str) -> int:
    """The column number of `dtype`'s column of the column numbered `column_number`: after every column of the run's
    own dtype (see the module)."""
    rank = DTYPES.index(dtype) if dtype in DTYPES else len(DTYPES)
    return column_number + DTYPE_COLUMN_STRIDE * max(rank, 1)


def dtype_of(envelope: dict, column: str) -> str:
    """The dtype a column ran in: its own (`static_cache~bf16`), else the run's."""
    return ((envelope.get("check_info") or {}).get(column) or {}).get("dtype") or \
        envelope["environment"].get("dtype", "float32")


def number(check_column: int) -> int:
    """The column number of a backend column of the check whose column number is `check_column`: the next one."""
    return check_column + 1


def collisions(columns: Mapping[str, int], declared: Iterable[str]) -> list[str]:
    """One line for every check of `columns` (check id -> column number) that takes the number of the backend
    columns of a check of `declared` (those that declare backend columns); [] when none does."""
    reserved = {number(columns[c]): c for c in declared if c in columns}
    return [f"{c} (column {n}) takes the number of {reserved[n]}'s backend columns"
            for c, n in columns.items() if n in reserved]


def has_backend_columns(info: Mapping) -> bool:
    """Whether the check of a run file's ``check_info`` entry `info` declares backend columns: it compares within
    the run's backend tolerance (names ``compares`` and no fixed ``tolerance``)."""
    return bool(info.get("compares")) and not info.get("tolerance")


def backend_of(envelope: dict, column: str) -> str:
    """The dynamo backend a column ran under: its own (`compile_prefill@inductor`), else the run's."""
    return ((envelope.get("check_info") or {}).get(column) or {}).get("backend") or \
        envelope["environment"].get("backend", "")


def deciding_cells(envelope: dict, flag: str, cells: dict[str, dict]) -> dict[str, dict]:
    """Of one class's observing `cells` (column -> cell), those that decide `flag`: all of them, but for a flag of
    `BACKEND_FLAGS` the `PREFERRED_BACKEND` columns' where one applies (not skip), else the other columns' (the
    eager trace: a failure under the preferred backend stays unseen)."""
    if flag not in BACKEND_FLAGS:
        return cells
    preferred = {c: cell for c, cell in cells.items() if backend_of(envelope, c) == PREFERRED_BACKEND}
    if any(cell["verdict"] != "skip" for cell in preferred.values()):
        return preferred
    return {c: cell for c, cell in cells.items() if c not in preferred}
