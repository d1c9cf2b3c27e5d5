"""Dynamic shapes: which input dimensions vary, and why one could not stay dynamic.

Contracts:

* `varying_dims(base, others)` maps each input of `base` (a tensor, or a
  list/tuple of tensors) to the dims whose size differs in any of `others`
  ({"input_ids": {1}, "pixel_values": {0}}); an input whose structure
  changes (another rank, another list length, missing) raises ValueError
  naming it, since no single program takes both.
* `ShapeLog` (a context manager) records what torch's shape environment
  decides while tracing (export or dynamo): which symbol stands for which
  input dimension (``L['input_ids'].size()[1]``), which symbols were unified,
  and every specialisation of a symbol to a constant with the guard that
  caused it and where it was added: the innermost transformers frame of the
  user code being traced (else the innermost frame outside torch). It reads
  the ``torch.fx.experimental.symbolic_shapes`` logger at INFO while active
  and restores it on exit; nothing is printed.
* `ShapeLog.is_static(source)`: the dimension named by `source` got no symbol
  (a traced size of 0 or 1) or its symbol was specialised to a constant;
  `ShapeLog.why_static(source)` is one line saying why the dimension named by
  `source` (a shape-env source string) is not dynamic: ``specialised to 27 by
  Eq(s70, 27) (at transformers/models/x/modeling_x.py:123 in forward)``.
* `ShapeLog.bounding_guard(text)` finds, for a guard that failed later (a
  recompile, a program's input check) on an input dim, the guard that put the
  bound there and where: ``s53 <= 10 (at .../modeling_x.py:68 in forward)``
  (`bounding(text)`: the same as a `Guard`, None when none).
* A `Guard` is an expression, its `Place` (``file:line in fn`` for a
  person, ``module:qualname`` for a fingerprint) and its symbols; `Guard.site`
  is ``<guard with symbols and constants masked> @ <module:qualname>``.
  `specialisation_fingerprint(dim, guard)` is the fingerprint of a
  dimension that had to stay dynamic and that a guard of the model's code
  pinned: kind ``specialisation``, where the guard was added, the dimension
  (`what`) and the masked guard (`guard`); no symbol numbers or line
  numbers, so another trace of the same code gives the same fingerprint.
* `dim_name(source)` is how a reason names a dimension: ``input_ids dim 1``.
* `dynamic_inputs(program)` names the user inputs of an ExportedProgram that
  have a symbolic (dynamic) dimension; [] for a program exported static.
"""

from __future__ import annotations

import logging
import re
import traceback
from dataclasses import dataclass, field
from typing import Any

import torch

from conformance.fingerprints import Fingerprint, mask
from conformance.reasons import short_path, site

SHAPES_LOGGER = "torch.fx.experimental.symbolic_shapes"
SOURCE = re.compile(r"^L((?:\[[^\]]+\])+)\.size\(\)\[(\d+)\]$")
CREATE = re.compile(r"^create_symbol (s\d+) = (\S+) for (\S+)")
REPLACE = re.compile(r"^set_replacement (s\d+) = (\S+) \(([^)]*)\)")
GUARD = re.compile(r"^eval(?: \(forcing_spec\))? (.+?) \[guard added\]")
SYMBOL = re.compile(r"\bs\d+\b")
INPUT_DIM = re.compile(r"(?:L\[')?(\w+)(?:'\])?\.size\(\)\[(\d+)\]")
BOUND = re.compile(r"[<>]|Ne\(|Eq\(s\d+, -?\d+\)")  # a comparison with a constant, not symbol = symbol
DEFAULT_BOUND = re.compile(r"s\d+ >= 2|2 <= s\d+")  # what every dynamic size gets (0/1 are specialised)
TORCH_DIR = torch.__file__.rsplit("/", 1)[0] + "/"


def _shape_tree(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return tuple(value.shape)
    if isinstance(value, (list, tuple)):
        return [_shape_tree(v) for v in value]
    return None


def varying_dims(base: dict[str, Any], others: list[dict[str, Any]]) -> dict[str, set[int]]:
    """Per input of `base`, the dims whose size differs in any of `others` (see the module)."""
    varying: dict[str, set[int]] = {}
    for key, value in base.items():
        shape = _shape_tree(value)
        if shape is None:
            continue
        dims: set[int] = set()
        for other in others:
            theirs = _shape_tree(other.get(key))
            dims |= _differing(key, shape, theirs)
        if dims:
            varying[key] = dims
    return varying


def _differing(key: str, ours: Any, theirs: Any) -> set[int]:
    if isinstance(ours, tuple):
        if not isinstance(theirs, tuple) or len(theirs) != len(ours):
            raise ValueError(f"input {key!r} changes rank or kind ({ours} vs {theirs})")
        return {d for d, (a, b) in enumerate(zip(ours, theirs)) if a != b}
    if not isinstance(theirs, list) or len(theirs) != len(ours):
        raise ValueError(f"input {key!r} is a list of {len(ours)} tensors here and of "
                         f"{len(theirs) if isinstance(theirs, list) else 'no'} tensors in a variant")
    dims: set[int] = set()
    for a, b in zip(ours, theirs):
        dims |= _differing(key, a, b)
    return dims


def dynamic_inputs(program) -> list[str]:
    """User inputs of an ExportedProgram with at least one symbolic dimension."""
    users = set(program.graph_signature.user_inputs)
    names = []
    for node in program.graph.nodes:
        value = node.meta.get("val") if node.op == "placeholder" and node.name in users else None
        if isinstance(value, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in value.shape):
            names.append(node.name)
    return names


def dim_name(source: str) -> str:
    """`input_ids dim 1` for ``L['input_ids'].size()[1]`` (else the source as it is)."""
    match = SOURCE.match(source)
    if not match:
        return source
    path = match.group(1).replace("['kwargs']", "")  # a compiled forward(**kwargs)
    keys = re.findall(r"\['([^']+)'\]|\[(\d+)\]", path)
    name = "".join(k if k else f"[{i}]" for k, i in keys)
    return f"{name} dim {match.group(2)}"


def _frame(frames: list[traceback.FrameSummary]) -> traceback.FrameSummary | None:
    """The innermost transformers frame, else the innermost frame outside torch, logging and this module."""
    inside = [f for f in frames if "/transformers/" in f.filename]
    if inside:
        return inside[-1]
    outside = [f for f in frames if not f.filename.startswith(TORCH_DIR) and "/logging/" not in f.filename
               and not f.filename.endswith("/checks/common/shapes.py")]
    return outside[-1] if outside else None


@dataclass(frozen=True)
class Place:
    """Where a guard was added: ``file:line in fn`` for a person (`text`), ``module:qualname`` for a fingerprint."""

    text: str = ""
    site: str = ""

    @classmethod
    def of(cls, frames: list[traceback.FrameSummary]) -> "Place":
        frame = _frame(frames)
        if frame is None:
            return cls()
        path = short_path(frame.filename)
        return cls(f"{path}:{frame.lineno} in {frame.name}", site(frame.filename, frame.lineno, frame.name))


def _where_traced() -> Place:
    """Where the code being traced is now: dynamo's user stack, else the Python stack (non-strict export)."""
    try:
        from torch._guards import TracingContext

        user = list(TracingContext.extract_stack())
    except Exception:
        user = []
    if user:
        return Place.of(user)
    return Place.of(list(traceback.extract_stack(limit=None))[:-1])


def masked_guard(guard: str) -> str:
    """A guard with its symbols and constants masked (``Eq(s#, #)``): the same guard in another trace."""
    return mask(SYMBOL.sub("s#", guard))


@dataclass(frozen=True)
class Guard:
    """A guard the shape environment added: its expression, where, and the symbols it names."""

    expression: str
    place: Place = Place()
    symbols: frozenset[str] = frozenset()

    def __str__(self) -> str:
        return self.expression + (f" (at {self.place.text})" if self.place.text else "")

    @property
    def site(self) -> str:
        """``<masked guard> @ <module:qualname>``, as `dynamo.guard_site` names a failed guard."""
        return f"{masked_guard(self.expression)} @ {self.place.site or '?'}"


@dataclass(frozen=True)
class Specialisation:
    value: str
    guard: Guard

    @property
    def location(self) -> str:
        return self.guard.place.text


@dataclass
class ShapeLog(logging.Handler):
    """What the shape environment decided while active (see the module)."""

    symbols: dict[str, str] = field(default_factory=dict)  # source -> symbol
    aliases: dict[str, str] = field(default_factory=dict)  # symbol -> the symbol it was replaced by
    specialised: dict[str, Specialisation] = field(default_factory=dict)  # symbol -> why it became a constant
    guards: list[Guard] = field(default_factory=list)
    _last_guard: dict[str, Guard] = field(default_factory=dict)  # symbol -> the last guard naming it

    def __post_init__(self) -> None:
        logging.Handler.__init__(self, level=logging.INFO)
        self._latest: Guard | None = None

    def __hash__(self) -> int:
        return id(self)

    def __enter__(self) -> "ShapeLog":
        logger = logging.getLogger(SHAPES_LOGGER)
        self._saved = (logger.level, logger.propagate, list(logger.handlers))
        for handler in self._saved[2]:
            logger.removeHandler(handler)
        logger.addHandler(self)
        logger.setLevel(logging.INFO)
        logger.propagate = False
        return self

    def __exit__(self, *exc_info) -> None:
        logger = logging.getLogger(SHAPES_LOGGER)
        logger.removeHandler(self)
        level, propagate, handlers = self._saved
        for handler in handlers:
            logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._read(record.getMessage())
        except Exception:  # a message in another format: ignore it, never break the trace
            pass

    def _read(self, message: str) -> None:
        if match := CREATE.match(message):
            self.symbols.setdefault(match.group(3), match.group(1))
        elif match := GUARD.match(message):
            expression = match.group(1)
            symbols = frozenset(SYMBOL.findall(expression))
            if symbols:
                self._latest = Guard(expression, _where_traced(), symbols)
                self.guards.append(self._latest)
                for symbol in symbols:
                    self._last_guard[symbol] = self._latest
        elif match := REPLACE.match(message):
            symbol, target, _why = match.groups()
            if SYMBOL.fullmatch(target):
                self.aliases.setdefault(symbol, target)
            elif re.fullmatch(r"-?\d+", target) and symbol not in self.specialised:
                # The guard just added caused it, though it may name a symbol unified with this one.
                latest = self._latest
                if latest is not None and latest.symbols & self._unified(symbol):
                    guard = latest
                else:
                    guard = self._last_guard.get(symbol) or Guard(f"Eq({symbol}, {target})", _where_traced(),
                                                                  frozenset({symbol}))
                self.specialised[symbol] = Specialisation(target, guard)

    def _unified(self, symbol: str) -> set[str]:
        """`symbol` and every symbol unified with it (replacements between symbols, either way)."""
        group, grew = {symbol}, True
        while grew:
            grew = False
            for a, b in self.aliases.items():
                if (a in group) != (b in group):
                    group |= {a, b}
                    grew = True
        return group

    def _root_specialisation(self, symbol: str) -> Specialisation | None:
        seen = set()
        while symbol and symbol not in seen:
            if symbol in self.specialised:
                return self.specialised[symbol]
            seen.add(symbol)
            symbol = self.aliases.get(symbol, "")
        return None

    def specialisation(self, source: str) -> Specialisation | None:
        """What made the dimension named by `source` a constant (None: it has a symbol that stayed one)."""
        symbol = self.symbols.get(source)
        return self._root_specialisation(symbol) if symbol is not None else None

    def is_static(self, source: str) -> bool:
        symbol = self.symbols.get(source)
        return symbol is None or self._root_specialisation(symbol) is not None

    def why_static(self, source: str) -> str:
        symbol = self.symbols.get(source)
        if symbol is None:
            return "kept static (no symbol: a traced size of 0 or 1 is always specialised)"
        found = self._root_specialisation(symbol)
        if found is None:
            return "came out static (no specialising guard recorded)"
        at = f" (at {found.location})" if found.location else ""
        return f"specialised to {found.value} by {found.guard.expression}{at}"

    def specialised_sources(self) -> list[str]:
        """Sources of input dims whose symbol became a constant, in the order their symbols were made."""
        return [source for source, symbol in self.symbols.items() if self._root_specialisation(symbol)]

    def bounding(self, text: str) -> Guard | None:
        """The last guard that bounds the input dim named in `text` by a constant (see `bounding_guard`)."""
        match = INPUT_DIM.search(text)
        symbol = self.symbols.get(f"L['{match.group(1)}'].size()[{match.group(2)}]") if match else None
        if symbol is None:
            return None
        group = self._unified(symbol)
        for guard in reversed(self.guards):
            if guard.symbols & group and BOUND.search(guard.expression) and not DEFAULT_BOUND.fullmatch(guard.expression):
                return guard
        return None

    def bounding_guard(self, text: str) -> str:
        """`s53 <= 10 (at file:line in fn)`: the last guard that bounds the input dim named in `text` by a constant.

        `text` is a guard as dynamo or an exported program states it (``2 <= input_ids.size()[1] <= 10``);
        '' when it names no input dim or the log holds no such guard.
        """
        found = self.bounding(text)
        return str(found) if found is not None else ""


def specialisation_fingerprint(dim: str, guard: Guard) -> Fingerprint:
    """The fingerprint of a dimension that must stay dynamic and a guard of the model's code pinned (kind
    `specialisation`): where the guard was added, which dimension (``input_ids dim 1``), the guard masked."""
    return Fingerprint("specialisation", where=guard.place.site, what=dim, guard=guard.site)
