"""Stage 5, gate: the conditions of a run and of an expectation, and the few set operations on them.

A *run* is one point: `{"device": "cpu", "dtype": "float32", "backend":
"eager", "torch": "2.13"}` (`run_conditions`). A *condition table* maps
some of those keys to a value or a list of values (any of them); a key it
does not name holds for every value.

Contracts (pure functions of plain dicts; torch-free):

* `run_conditions(device, dtype, backend, torch_version)`: a run's point;
  `conditions_of(environment, backend=None)` that of the run an envelope's
  ``environment`` describes (`backend`: a backend column's instead of the run's).
* `matches(conditions, run)`: every named key holds for `run`.
* `within(inner, outer)`: every run `inner` matches, `outer` matches too.
* `intersection(a, b)`: the table of the runs both match, or None;
  `overlap(a, b)`: some run matches both.
"""

from __future__ import annotations

KEYS = ("device", "dtype", "backend", "torch")
DEFAULT = {"device": "cpu", "dtype": "float32", "backend": "eager"}  # a file that names none was measured on it


def run_conditions(device: str, dtype: str, backend: str, torch_version: str) -> dict:
    """The conditions of a run: device type, dtype, backend, torch major.minor."""
    return {"device": device.split(":")[0], "dtype": dtype, "backend": backend,
            "torch": ".".join(torch_version.split("+")[0].split(".")[:2])}


def conditions_of(environment: dict, backend: str | None = None) -> dict:
    """The conditions of the run an envelope's environment describes (under `backend` where given)."""
    return run_conditions(environment.get("device", "cpu"), environment.get("dtype", "float32"),
                          environment.get("backend", "eager") if backend is None else backend,
                          environment.get("torch", ""))


def values(wanted) -> list:
    """A condition's values as a list (a string is one value)."""
    return list(wanted) if isinstance(wanted, list) else [wanted]


def matches(conditions: dict, run: dict) -> bool:
    """Whether every condition holds for `run` (a list: any of its values)."""
    return all(run.get(key) in values(wanted) for key, wanted in conditions.items())


def within(inner: dict, outer: dict) -> bool:
    """Whether every run that `inner` matches also matches `outer`."""
    return all(key in inner and set(values(inner[key])) <= set(values(wanted)) for key, wanted in outer.items())


def intersection(a: dict, b: dict) -> dict | None:
    """The conditions that hold where both `a` and `b` do, or None where none does."""
    both = {**a, **b}
    for key in set(a) & set(b):
        found = [v for v in values(a[key]) if v in values(b[key])]
        if not found:
            return None
        both[key] = found[0] if len(found) == 1 else found
    return both


def overlap(a: dict, b: dict) -> bool:
    """Whether some run matches both `a` and `b`."""
    return intersection(a, b) is not None
