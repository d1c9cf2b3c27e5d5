"""Python source for the values a standalone reproducer needs: configs as literal dicts, inputs as tensors.

Contracts:

* `literal(value)` is Python source that evaluates to `value` for plain data
  (dict, list, tuple, str, int, float, bool, None; non-finite floats as
  ``float("inf")``), wrapped at `WIDTH` columns (entries packed as many a line as fit: `packed`); `ValueError` naming the
  path of anything else (a config field holding an object).
* `Inputs(seed)` writes tensors and the values around them: `source(value)`
  is an expression for one input. Integer and bool tensors are exact
  literals (``torch.tensor(...)``; a constant one ``torch.full``; runs of
  four or more equal entries as ``[v] * n``, of six or more integers counting
  up by one as ``list(range(a, b))``); a floating tensor is exact
  when small (`EXACT_FLOATS` entries) or when it holds few distinct values
  (a mask, a grid), its leading last-dim columns exact where they hold
  whole numbers (the row and column ids of flattened patches), the rest
  a seeded recipe of its shape and dtype,
  ``torch.randn(shape, generator=g)`` (its mean and spread kept when they
  are not 0 and 1), drawn in the order the inputs are written: the same
  distribution as the suite's media, not the same values (`recipes` lists
  the inputs written so, for the script's header). Lists and tuples of
  tensors recurse; other plain values are `literal`s; anything else raises
  `ValueError`.
"""

from __future__ import annotations

import math
from typing import Any

import torch

WIDTH = 116
EXACT_FLOATS = 64  # floating tensors up to this many entries are written exactly
FEW_VALUES = 8  # ... and any with at most this many distinct values (masks, grids, sizes)
RUN = 4  # equal entries in a row written as [v] * n
COUNTING = 6  # integers counting up by one, in a row, written as list(range(a, b))


def _float(value: float) -> str:
    if math.isnan(value):
        return 'float("nan")'
    if math.isinf(value):
        return 'float("inf")' if value > 0 else '-float("inf")'
    return repr(value)


def _flat(value: Any, path: str) -> str:
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_flat(k, path)}: {_flat(v, f'{path}.{k}')}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flat(v, f"{path}[{i}]") for i, v in enumerate(value)) + "]"
    if isinstance(value, tuple):
        items = [_flat(v, f"{path}[{i}]") for i, v in enumerate(value)]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    raise ValueError(f"{path or 'value'} is a {type(value).__name__}, which a literal cannot hold")


def literal(value: Any, indent: int = 0, path: str = "") -> str:
    """Python source evaluating to `value` (plain data only), one entry a line where it does not fit."""
    flat = _flat(value, path)
    if len(flat) + indent <= WIDTH or not isinstance(value, (dict, list, tuple)) or not value:
        return flat
    if isinstance(value, dict):
        items = [f"{_flat(k, path)}: {literal(v, indent + 4, f'{path}.{k}')}" for k, v in value.items()]
        return "{\n" + packed(items, indent + 4) + "\n" + " " * indent + "}"
    items = [literal(v, indent + 4, f"{path}[{i}]") for i, v in enumerate(value)]
    open_, close = ("[", "]") if isinstance(value, list) else ("(", ")")
    return open_ + "\n" + packed(items, indent + 4) + "\n" + " " * indent + close


def packed(items: list[str], indent: int) -> str:
    """`items` one after the other, each followed by a comma, as many a line as fit in `WIDTH` columns at
    `indent`; an item spanning lines stands alone."""
    lines: list[str] = []
    for item in items:
        if lines and "\n" not in item and "\n" not in lines[-1] and len(lines[-1]) + len(item) + 2 <= WIDTH:
            lines[-1] += f" {item},"
        else:
            lines.append(" " * indent + f"{item},")
    return "\n".join(lines)


def _counting(row: list, i: int) -> int:
    """The end of the run of integers counting up by one from `row[i]`."""
    j = i + 1
    while (j < len(row) and type(row[j]) is int and type(row[i]) is int  # noqa: E721 (bools are not counted)
           and row[j] == row[j - 1] + 1):
        j += 1
    return j


def _runs(row: list) -> str:
    """A 1-D list as source, runs of `RUN` or more equal entries as ``[v] * n``, of `COUNTING` or more integers
    counting up by one as ``list(range(a, b))``."""
    parts: list[str] = []
    plain: list[str] = []
    i = 0
    while i < len(row):
        j = i
        while j < len(row) and row[j] == row[i]:
            j += 1
        counted = _counting(row, i)
        if j - i >= RUN or counted - i >= COUNTING:
            if plain:
                parts.append("[" + ", ".join(plain) + "]")
                plain = []
            if j - i >= RUN:
                parts.append(f"[{_flat(row[i], '')}] * {j - i}")
            else:
                parts.append(f"list(range({row[i]}, {row[counted - 1] + 1}))")
                j = counted
        else:
            plain += [_flat(v, "") for v in row[i:j]]
        i = j
    if plain or not parts:
        parts.append("[" + ", ".join(plain) + "]")
    return " + ".join(parts)


def _nested(data: Any) -> str:
    if not isinstance(data, list) or not data or not isinstance(data[0], list):
        return _runs(data) if isinstance(data, list) else _flat(data, "")
    rows = [_nested(row) for row in data]
    if len(set(rows)) == 1 and len(rows) >= RUN:
        return f"[{rows[0]}] * {len(rows)}"
    return "[" + ", ".join(rows) + "]"


def _dtype(dtype: torch.dtype) -> str:
    return f"torch.{str(dtype).removeprefix('torch.')}"


def _integral_columns(value: torch.Tensor) -> int:
    """How many leading entries of the last dim hold whole numbers in every row (0 when all or none do)."""
    if value.dim() < 2 or value.shape[-1] < 2:
        return 0
    whole = (value == value.round()).flatten(0, -2).all(dim=0).tolist()
    lead = next((i for i, w in enumerate(whole) if not w), len(whole))
    return lead if lead < len(whole) else 0


class Inputs:
    """Writes input values as source (see the module); the floats it could not write exactly are `recipes`."""

    def __init__(self, generator: str = "g"):
        self.generator = generator
        self.recipes: list[str] = []

    def tensor(self, value: torch.Tensor, path: str) -> str:
        value = value.detach().cpu()
        shape = tuple(value.shape)
        if value.is_floating_point() or value.is_complex():
            return self._floats(value, path)
        if value.numel() and bool((value == value.flatten()[0]).all()):
            return f"torch.full({shape}, {_flat(value.flatten()[0].item(), '')}, dtype={_dtype(value.dtype)})"
        return f"torch.tensor({_nested(value.tolist())}, dtype={_dtype(value.dtype)})" + (
            f".reshape({shape})" if not value.numel() else "")

    def _floats(self, value: torch.Tensor, path: str) -> str:
        shape = tuple(value.shape)
        dtype = _dtype(value.dtype)
        if value.is_complex():
            raise ValueError(f"{path} is a complex tensor, which the reproducer does not write")
        if value.numel() and bool((value == value.flatten()[0]).all()):
            return f"torch.full({shape}, {_float(value.flatten()[0].item())}, dtype={dtype})"
        if value.numel() <= EXACT_FLOATS or torch.unique(value).numel() <= FEW_VALUES:
            return f"torch.tensor({_nested(value.tolist())}, dtype={dtype})"
        lead = _integral_columns(value)
        if lead:  # leading columns that hold whole numbers (row and column ids of flattened patches): exact
            head = f"torch.tensor({_nested(value[..., :lead].tolist())}, dtype={dtype})"
            self.recipes.append(f"{path} (after its first {lead} column(s), which are exact)")
            return f"torch.cat([{head}, {self._random(value[..., lead:])}], dim=-1)"
        self.recipes.append(path)
        return self._random(value)

    def _random(self, value: torch.Tensor) -> str:
        mean, std = float(value.double().mean()), float(value.double().std())
        recipe = f"torch.randn({tuple(value.shape)}, generator={self.generator}, dtype={_dtype(value.dtype)})"
        if abs(mean) > 0.1 or abs(std - 1.0) > 0.1:
            recipe = f"({recipe} * {std:.3g} + {mean:.3g})"
        return recipe

    def source(self, value: Any, path: str) -> str:
        if isinstance(value, torch.Tensor):
            return self.tensor(value, path)
        if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
            items = [self.source(v, f"{path}[{i}]") for i, v in enumerate(value)]
            if isinstance(value, tuple):
                return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
            return "[" + ", ".join(items) + "]"
        return literal(value, path=path)

    def block(self, inputs: dict[str, Any], indent: int = 8) -> str:
        """The entries of a dict literal, one input a line (``"name": source,``)."""
        pad = " " * indent
        return "\n".join(f"{pad}{name!r}: {self.source(value, name)}," for name, value in inputs.items())
