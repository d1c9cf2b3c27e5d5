"""Sample-input strategies, one module each, registered by name.

A strategy is `fn(ctx: SampleContext) -> Sample`. It names a shape of the
problem (plain pixels, flattened patches with a grid, tiled images with
sizes, cross-attention images, query tokens, audio features, seq2seq text),
never a model. `auto_select` picks one from the forward signature and the
config; a fixture's ``[samples] strategy`` overrides it. Every module in this
package is imported on first use, so adding a strategy is adding a file.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Callable

STRATEGIES: dict[str, Callable] = {}
# (priority, predicate, name): the first predicate that holds wins.
SELECTORS: list[tuple[int, Callable, str]] = []
_loaded = False


def register(name: str, when: Callable | None = None, priority: int = 50):
    """Register a strategy; `when(ctx)` makes it eligible for auto-selection."""

    def decorate(fn):
        STRATEGIES[name] = fn
        if when is not None:
            SELECTORS.append((priority, when, name))
        return fn

    return decorate


def _load() -> None:
    global _loaded
    if not _loaded:
        for module in pkgutil.iter_modules(__path__):
            importlib.import_module(f"{__name__}.{module.name}")
        _loaded = True


def get_strategy(name: str) -> Callable:
    _load()
    if name not in STRATEGIES:
        raise KeyError(f"unknown sample strategy {name!r}; known: {sorted(STRATEGIES)}")
    return STRATEGIES[name]


def auto_select(ctx) -> str:
    _load()
    for _, when, name in sorted(SELECTORS, key=lambda s: s[0]):
        if when(ctx):
            return name
    return "text"
